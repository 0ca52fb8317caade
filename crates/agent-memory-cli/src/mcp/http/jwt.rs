//! OAuth 2.1 access tokens as JWTs: the server is a resource server that checks tokens an
//! authorization server signed, with [`jsonwebtoken`].
//!
//! A token is accepted when its signature verifies with one of the server's public keys
//! (RS256, ES256 or EdDSA only; `none`, HMAC and every other algorithm are refused), its `iss`
//! is the configured issuer, its `aud` contains the configured audience, and `exp` (required)
//! and `nbf` (when present) hold with 60 seconds of leeway for clock skew. The user is
//! [`TOKEN_USER_PREFIX`] followed by the configured claim (`sub` by default, a string): token
//! users have an id space of their own, which API keys cannot enter (their users may not start
//! with the prefix), so a token whose `sub` is `alice` never reads what alice's API key saved.
//! With `--jwt-user-claim email` the token must also carry `email_verified: true`. The
//! namespace is the configured namespace claim when the token has it, else the default
//! namespace.
//!
//! The keys come from a file, re-read when it changes (see [`super::reload`]): a JWKS document
//! (`{"keys": [...]}`, as authorization servers publish at their `jwks_uri`) or PEM public
//! keys. A JWKS key with a `kid` is used only for tokens naming that `kid`; PEM keys have no
//! id and are tried for every token of their algorithm. Each key of a JWKS is read on its own:
//! one the library cannot parse, one marked for encryption, or one of another type or algorithm
//! is skipped (logged at `warn` with its `kid`, which is public, on each load), and the file is
//! refused only when no usable key is left.

use std::path::PathBuf;

use agent_memory::MemoryScope;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::reload::{LoadError, Parse};
use crate::mcp::{CredentialId, Principal};

/// What every token user's id starts with, before the value of the user claim.
pub const TOKEN_USER_PREFIX: &str = "oidc:";

/// Clock skew allowed on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECONDS: u64 = 60;
/// Longest token looked at, in bytes; anything longer is refused unread.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Most keys one key file may hold: each token is checked against at most this many.
const MAX_KEYS: usize = 32;

/// What `--jwt-*` configure.
#[derive(Debug, Clone)]
pub struct JwtSettings {
    /// The `iss` every token must carry.
    pub issuer: String,
    /// The audience every token's `aud` must contain.
    pub audience: String,
    /// The JWKS or PEM file of public keys.
    pub keys: PathBuf,
    /// The claim naming the user.
    pub user_claim: String,
    /// The claim naming the namespace, if any.
    pub namespace_claim: Option<String>,
}

/// Why a token was refused, said in `WWW-Authenticate`'s `error_description`: fixed sentences
/// that quote nothing from the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Malformed,
    Algorithm,
    UnknownKey,
    Signature,
    Expired,
    NotYetValid,
    Audience,
    Issuer,
    MissingClaim,
    BadUser,
    UnverifiedEmail,
}

impl Refusal {
    /// The sentence for the client.
    pub fn description(self) -> &'static str {
        match self {
            Refusal::Malformed => "the token is malformed",
            Refusal::Algorithm => "the token's algorithm is not accepted (RS256, ES256 or EdDSA)",
            Refusal::UnknownKey => "the token's key id is not one of this server's keys",
            Refusal::Signature => "the token's signature is invalid",
            Refusal::Expired => "the token has expired",
            Refusal::NotYetValid => "the token is not valid yet",
            Refusal::Audience => "the token is not meant for this server (aud)",
            Refusal::Issuer => "the token comes from another issuer (iss)",
            Refusal::MissingClaim => "the token lacks a required claim",
            Refusal::BadUser => "the token's user or namespace claim is not a valid id",
            Refusal::UnverifiedEmail => "the token's email is not verified (email_verified)",
        }
    }

    /// The log word.
    pub fn word(self) -> &'static str {
        match self {
            Refusal::Malformed => "malformed",
            Refusal::Algorithm => "algorithm",
            Refusal::UnknownKey => "unknown_key",
            Refusal::Signature => "signature",
            Refusal::Expired => "expired",
            Refusal::NotYetValid => "not_yet_valid",
            Refusal::Audience => "audience",
            Refusal::Issuer => "issuer",
            Refusal::MissingClaim => "missing_claim",
            Refusal::BadUser => "bad_user",
            Refusal::UnverifiedEmail => "unverified_email",
        }
    }
}

/// One public key and the one algorithm it verifies.
struct VerifyKey {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

/// The public keys of one key file.
pub struct KeyRing {
    keys: Vec<VerifyKey>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRing").field("keys", &self.keys.len()).finish()
    }
}

/// Parses a JWKS document or PEM public keys.
pub fn parser() -> Parse<KeyRing> {
    Box::new(|bytes| {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| LoadError::Invalid("it is not UTF-8 text".into()))?;
        let keys = if text.trim_start().starts_with('{') { jwks(text)? } else { pem(text)? };
        if keys.is_empty() {
            return Err(LoadError::Invalid(
                "it holds no RS256, ES256 (P-256) or EdDSA (Ed25519) public key".into(),
            ));
        }
        if keys.len() > MAX_KEYS {
            return Err(LoadError::Invalid(format!("it holds more than {MAX_KEYS} keys")));
        }
        Ok(KeyRing { keys }.into())
    })
}

/// The usable keys of a JWKS document. Each key is read on its own: a key this library cannot
/// parse, one not meant for signatures, or one of another type or algorithm is skipped with a
/// `warn` line naming only its `kid` (public), so one odd key of an issuer's set cannot refuse
/// every token. Only a document that is not a JWKS at all is refused here; a set with no usable
/// key left is refused by [`parser`].
fn jwks(text: &str) -> Result<Vec<VerifyKey>, LoadError> {
    #[derive(serde::Deserialize)]
    struct RawSet {
        keys: Vec<Value>,
    }
    let set: RawSet = serde_json::from_str(text)
        .map_err(|err| LoadError::Invalid(format!("it is not a JWKS document: {err}")))?;
    let mut keys = Vec::new();
    for raw in set.keys {
        let kid = raw.get("kid").and_then(Value::as_str).map(str::to_owned);
        match usable(raw) {
            Ok(key) => keys.push(VerifyKey { kid, algorithm: key.0, key: key.1 }),
            Err(why) => tracing::warn!(kid = ?kid, why, "skipping a key of the JWT key set"),
        }
    }
    Ok(keys)
}

/// The algorithm and decoding key of one JWKS entry, or why it is skipped (a fixed phrase).
fn usable(raw: Value) -> Result<(Algorithm, DecodingKey), &'static str> {
    let jwk: Jwk = serde_json::from_value(raw).map_err(|_| "it cannot be parsed")?;
    if matches!(jwk.common.public_key_use, Some(ref usage) if *usage != PublicKeyUse::Signature) {
        return Err("it is not for signatures");
    }
    let algorithm = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return Err("its type or curve is not RSA, P-256 or Ed25519"),
    };
    let fits = match jwk.common.key_algorithm {
        None => true,
        Some(KeyAlgorithm::RS256) => algorithm == Algorithm::RS256,
        Some(KeyAlgorithm::ES256) => algorithm == Algorithm::ES256,
        Some(KeyAlgorithm::EdDSA) => algorithm == Algorithm::EdDSA,
        Some(_) => false,
    };
    if !fits {
        return Err("its algorithm is not RS256, ES256 or EdDSA");
    }
    let key = DecodingKey::from_jwk(&jwk).map_err(|_| "its key material cannot be used")?;
    Ok((algorithm, key))
}

fn pem(text: &str) -> Result<Vec<VerifyKey>, LoadError> {
    let mut keys = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let block = &rest[start..];
        let end = block
            .find("-----END ")
            .and_then(|end| block[end + 9..].find("-----").map(|close| end + 9 + close + 5))
            .ok_or_else(|| LoadError::Invalid("a PEM block has no END line".into()))?;
        let pem = &block.as_bytes()[..end];
        rest = &block[end..];
        let (algorithm, key) = if let Ok(key) = DecodingKey::from_rsa_pem(pem) {
            (Algorithm::RS256, key)
        } else if let Ok(key) = DecodingKey::from_ec_pem(pem) {
            (Algorithm::ES256, key)
        } else if let Ok(key) = DecodingKey::from_ed_pem(pem) {
            (Algorithm::EdDSA, key)
        } else {
            return Err(LoadError::Invalid(
                "a PEM block is not an RSA, EC or Ed25519 public key".into(),
            ));
        };
        keys.push(VerifyKey { kid: None, algorithm, key });
    }
    Ok(keys)
}

/// Checks tokens against the settings and a key ring.
#[derive(Debug)]
pub struct Verifier {
    settings: JwtSettings,
    app: String,
}

impl Verifier {
    /// A verifier of tokens for application `app`.
    pub fn new(settings: JwtSettings, app: String) -> Self {
        Self { settings, app }
    }

    /// The settings it checks.
    pub fn settings(&self) -> &JwtSettings {
        &self.settings
    }

    /// The principal `token` grants, checked with the keys in `ring`.
    ///
    /// # Errors
    /// Why the token was refused.
    pub fn verify(&self, token: &str, ring: &KeyRing) -> Result<Principal, Refusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::Malformed);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::Malformed)?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256 | Algorithm::EdDSA) {
            return Err(Refusal::Algorithm);
        }
        let candidates: Vec<&VerifyKey> = ring
            .keys
            .iter()
            .filter(|key| key.algorithm == header.alg)
            .filter(|key| match (&key.kid, &header.kid) {
                (Some(ours), Some(theirs)) => ours == theirs,
                _ => true,
            })
            .collect();
        if candidates.is_empty() {
            return Err(if header.kid.is_some() {
                Refusal::UnknownKey
            } else {
                Refusal::Signature
            });
        }
        let validation = self.validation(header.alg);
        let mut refusal = Refusal::Signature;
        for key in candidates {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => return self.principal(&data.claims),
                // Another key may have signed it.
                Err(err) if *err.kind() == ErrorKind::InvalidSignature => {}
                Err(err) => {
                    refusal = refusal_of(err.kind());
                    break;
                }
            }
        }
        Err(refusal)
    }

    fn validation(&self, algorithm: Algorithm) -> Validation {
        let mut validation = Validation::new(algorithm);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation
    }

    /// The principal of verified `claims`.
    fn principal(&self, claims: &Map<String, Value>) -> Result<Principal, Refusal> {
        let user = claims
            .get(&self.settings.user_claim)
            .and_then(Value::as_str)
            .ok_or(Refusal::MissingClaim)?;
        // An email names a user only once the issuer has checked that it is theirs.
        if self.settings.user_claim == "email"
            && claims.get("email_verified") != Some(&Value::Bool(true))
        {
            return Err(Refusal::UnverifiedEmail);
        }
        let mut scope = MemoryScope::new(self.app.clone(), format!("{TOKEN_USER_PREFIX}{user}"))
            .map_err(|_| Refusal::BadUser)?;
        if let Some(claim) = &self.settings.namespace_claim {
            match claims.get(claim) {
                None | Some(Value::Null) => {}
                Some(Value::String(namespace)) => {
                    scope =
                        scope.with_namespace(namespace.clone()).map_err(|_| Refusal::BadUser)?;
                }
                Some(_) => return Err(Refusal::BadUser),
            }
        }
        let credential = CredentialId::Token(subject_hash(&self.settings.issuer, user));
        Ok(Principal::new(scope, false, credential))
    }
}

/// A short stand-in for a token's user in logs and in the `agent` of its writes: a keyed hash
/// of the issuer and the user ([`agent_memory::observe::hash_id`]), so an operator can follow
/// one user's requests without the log holding the user id, and nobody without the key can
/// test guessed emails or numbers against it. Stable across restarts and replicas only when
/// `AGENT_MEMORY_ID_HASH_KEY` is set.
fn subject_hash(issuer: &str, user: &str) -> String {
    agent_memory::observe::hash_id(&format!("{issuer}\0{user}"))
}

fn refusal_of(kind: &ErrorKind) -> Refusal {
    match kind {
        ErrorKind::InvalidSignature => Refusal::Signature,
        ErrorKind::ExpiredSignature => Refusal::Expired,
        ErrorKind::ImmatureSignature => Refusal::NotYetValid,
        ErrorKind::InvalidAudience => Refusal::Audience,
        ErrorKind::InvalidIssuer => Refusal::Issuer,
        ErrorKind::MissingRequiredClaim(_) => Refusal::MissingClaim,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => Refusal::Algorithm,
        _ => Refusal::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ed25519 key pair made for these tests only.
    const PRIVATE_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIME2tEdGy/U+iWlMW2yiRR+udCIumDkiUU35ijke3RC/
-----END PRIVATE KEY-----
";
    const PUBLIC_X: &str = "UaIULw7BNBBWbSQ7pBEASzG2MlsPRNYY84EoC8e5PKY";

    pub(super) fn settings(user_claim: &str) -> JwtSettings {
        JwtSettings {
            issuer: "https://issuer.test/".into(),
            audience: "https://memory.test/mcp".into(),
            keys: PathBuf::new(),
            user_claim: user_claim.into(),
            namespace_claim: None,
        }
    }

    /// A token with `claims` (plus `iss`, `aud`, `exp`) signed by the test key, naming `kid`.
    pub(super) fn token(kid: &str, claims: Value) -> String {
        let mut claims = claims.as_object().cloned().unwrap_or_default();
        claims.insert("iss".into(), "https://issuer.test/".into());
        claims.insert("aud".into(), "https://memory.test/mcp".into());
        claims.insert("exp".into(), (jsonwebtoken::get_current_timestamp() + 600).into());
        let mut header = jsonwebtoken::Header::new(Algorithm::EdDSA);
        header.kid = Some(kid.into());
        let key = jsonwebtoken::EncodingKey::from_ed_pem(PRIVATE_PEM.as_bytes()).unwrap();
        jsonwebtoken::encode(&header, &claims, &key).unwrap()
    }

    pub(super) fn good_jwk(kid: &str) -> Value {
        serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": PUBLIC_X, "kid": kid, "use": "sig"})
    }

    #[test]
    fn one_unusable_key_does_not_refuse_the_tokens_of_the_good_one() {
        let set = serde_json::json!({"keys": [
            // An algorithm the library has never heard of: this key cannot be parsed at all.
            {"kty": "RSA", "alg": "RSA-OAEP-512-NEW", "kid": "odd", "n": "AQAB", "e": "AQAB"},
            // A key type it cannot parse.
            {"kty": "PQC", "kid": "future"},
            // An encryption key, and a signing key of a curve the server does not take.
            {"kty": "OKP", "crv": "Ed25519", "x": PUBLIC_X, "kid": "enc", "use": "enc"},
            {"kty": "EC", "crv": "P-384", "kid": "p384", "x": "AA", "y": "AA"},
            good_jwk("good"),
        ]});
        let ring = parser()(set.to_string().as_bytes()).expect("the good key is enough").value;
        assert_eq!(ring.keys.len(), 1);
        let verifier = Verifier::new(settings("sub"), "app".into());
        let principal = verifier
            .verify(&token("good", serde_json::json!({"sub": "alice"})), &ring)
            .expect("signed by the good key");
        assert_eq!(principal.scope().user_id(), "oidc:alice");
        assert_eq!(
            verifier.verify(&token("enc", serde_json::json!({"sub": "alice"})), &ring).err(),
            Some(Refusal::UnknownKey),
            "the encryption key verifies nothing"
        );

        let none_usable = serde_json::json!({"keys": [{"kty": "PQC", "kid": "future"}]});
        assert!(matches!(parser()(none_usable.to_string().as_bytes()), Err(LoadError::Invalid(_))));
        assert!(matches!(parser()(b"{\"keys\": 1}"), Err(LoadError::Invalid(_))));
    }

    #[test]
    fn token_users_have_their_own_ids_and_an_email_must_be_verified() {
        let set = serde_json::json!({"keys": [good_jwk("k")]});
        let ring = parser()(set.to_string().as_bytes()).unwrap().value;
        let by_sub = Verifier::new(settings("sub"), "app".into());
        let principal = by_sub.verify(&token("k", serde_json::json!({"sub": "alice"})), &ring);
        assert_eq!(principal.unwrap().scope().user_id(), "oidc:alice");

        let by_email = Verifier::new(settings("email"), "app".into());
        let email = |verified: Value| {
            let claims = serde_json::json!({"email": "a@example.com", "email_verified": verified});
            by_email.verify(&token("k", claims), &ring).map(|p| p.scope().user_id().to_owned())
        };
        assert_eq!(email(Value::Bool(true)).unwrap(), "oidc:a@example.com");
        for unverified in [Value::Bool(false), Value::Null, "true".into(), 1.into()] {
            assert_eq!(email(unverified).err(), Some(Refusal::UnverifiedEmail));
        }
    }
}
