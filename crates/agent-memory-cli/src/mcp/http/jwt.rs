//! OAuth 2.1 access tokens as JWTs: the server is a resource server that checks tokens an
//! authorization server signed, with [`jsonwebtoken`].
//!
//! A token is accepted when its signature verifies with one of the server's public keys
//! (RS256, ES256 or EdDSA only; `none`, HMAC and every other algorithm are refused), its `iss`
//! is the configured issuer, its `aud` contains the configured audience, and `exp` (required)
//! and `nbf` (when present) hold with 60 seconds of leeway for clock skew. The user is the
//! configured claim (`sub` by default), a string that must be a valid user id; the namespace
//! is the configured namespace claim when the token has it, else the default namespace.
//!
//! The keys come from a file, re-read when it changes (see [`super::reload`]): a JWKS document
//! (`{"keys": [...]}`, as authorization servers publish at their `jwks_uri`) or PEM public
//! keys. A JWKS key with a `kid` is used only for tokens naming that `kid`; PEM keys have no
//! id and are tried for every token of their algorithm. Keys of other types or algorithms, and
//! keys marked for encryption, are skipped.

use std::path::PathBuf;

use agent_memory::MemoryScope;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::reload::{LoadError, Parse};
use crate::mcp::{CredentialId, Principal};

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
        Ok(KeyRing { keys })
    })
}

fn jwks(text: &str) -> Result<Vec<VerifyKey>, LoadError> {
    let set: JwkSet = serde_json::from_str(text)
        .map_err(|err| LoadError::Invalid(format!("it is not a JWKS document: {err}")))?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        if matches!(jwk.common.public_key_use, Some(ref usage) if *usage != PublicKeyUse::Signature)
        {
            continue;
        }
        let algorithm = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
                Algorithm::ES256
            }
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
                Algorithm::EdDSA
            }
            _ => continue,
        };
        let declared = jwk.common.key_algorithm;
        let fits = match declared {
            None => true,
            Some(KeyAlgorithm::RS256) => algorithm == Algorithm::RS256,
            Some(KeyAlgorithm::ES256) => algorithm == Algorithm::ES256,
            Some(KeyAlgorithm::EdDSA) => algorithm == Algorithm::EdDSA,
            Some(_) => false,
        };
        if !fits {
            continue;
        }
        let key = DecodingKey::from_jwk(jwk)
            .map_err(|err| LoadError::Invalid(format!("a key cannot be used: {err}")))?;
        keys.push(VerifyKey { kid: jwk.common.key_id.clone(), algorithm, key });
    }
    Ok(keys)
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
        let mut scope =
            MemoryScope::new(self.app.clone(), user.to_owned()).map_err(|_| Refusal::BadUser)?;
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

/// A short, stable stand-in for a token's user in logs: 12 hex digits of the SHA-256 of the
/// issuer and the user, so an operator can follow one user's requests without the log holding
/// the user id.
fn subject_hash(issuer: &str, user: &str) -> String {
    let digest = Sha256::new()
        .chain_update(issuer.as_bytes())
        .chain_update([0])
        .chain_update(user.as_bytes())
        .finalize();
    digest.iter().take(6).map(|byte| format!("{byte:02x}")).collect()
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
