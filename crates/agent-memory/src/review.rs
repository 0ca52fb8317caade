//! Sign-in links for the review page, where an end user sees, corrects, downloads and erases
//! what the agent remembers about them (`agent-memory mcp --listen … --review-key-file FILE`;
//! guide: `docs/review-page.md`).
//!
//! The application already knows who its user is, so it mints the link: one URL under
//! `BASE/review/` that names the application, the user, an expiry and a random nonce, under an
//! HMAC-SHA256 tag keyed with the secret the server reads from its review key file. The server
//! checks the link with [`verify_token`], the same code that made it, and exchanges it once for
//! a session.
//!
//! ```
//! use std::time::Duration;
//! use agent_memory::review::{review_link, verify_token, ReviewSecret};
//! use agent_memory::Timestamp;
//!
//! let secret = ReviewSecret::new(b"0123456789abcdef0123456789abcdef".to_vec())?;
//! let link = review_link(&secret, "https://memory.example.com", "app", "user-1",
//!     Duration::from_secs(15 * 60))?;
//! assert!(link.starts_with("https://memory.example.com/review/open?token="));
//! let token = link.split_once("token=").unwrap().1;
//! let claims = verify_token(&secret, token, Timestamp::now()).unwrap();
//! assert_eq!(claims.user_id, "user-1");
//! # Ok::<(), agent_memory::MemoryError>(())
//! ```
//!
//! # The token
//!
//! `PAYLOAD.TAG`, both base64url without padding. `PAYLOAD` is a JSON object
//! `{"v":1,"app":…,"user":…,"exp":…,"nonce":…}` (expiry in Unix seconds, nonce 16 random
//! bytes in hex); `TAG` is HMAC-SHA256 over [`TAG_CONTEXT`] followed by the encoded payload.
//! The tag is checked in constant time before the payload is parsed. Anyone holding the secret
//! can mint a link for any user of any application the server serves: keep it as private as a
//! database password.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::error::{MemoryError, Result};
use crate::scope::MemoryScope;
use crate::time::Timestamp;

/// The shortest secret accepted, in bytes (256 bits).
pub const MIN_SECRET_BYTES: usize = 32;

/// The longest lifetime of a link: 24 hours.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The lifetime of a link when none is given: 15 minutes.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15 * 60);

/// The path of the link, under the server's origin.
pub const OPEN_PATH: &str = "/review/open";

/// What the tag covers before the payload, so a tag made for something else with the same
/// secret never passes as a link's.
pub const TAG_CONTEXT: &[u8] = b"agent-memory review link v1\n";

/// The format version in every payload.
const VERSION: u8 = 1;

/// Random bytes in a nonce.
const NONCE_BYTES: usize = 16;

/// The longest token [`verify_token`] reads: ids are at most 128 bytes each, so a real token
/// is far shorter.
const MAX_TOKEN_BYTES: usize = 2048;

type HmacSha256 = Hmac<Sha256>;

/// The secret that signs and checks links; never shown by `Debug`.
#[derive(Clone)]
pub struct ReviewSecret(Vec<u8>);

impl fmt::Debug for ReviewSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReviewSecret(..)")
    }
}

impl ReviewSecret {
    /// A secret of these bytes, after trimming surrounding whitespace (so the line
    /// `openssl rand -hex 32 > FILE` writes works as it is).
    ///
    /// # Errors
    /// `Invalid` (field `review_secret`) when fewer than [`MIN_SECRET_BYTES`] remain.
    pub fn new(bytes: Vec<u8>) -> Result<Self> {
        let trimmed = bytes.trim_ascii();
        if trimmed.len() < MIN_SECRET_BYTES {
            return Err(MemoryError::invalid(
                "review_secret",
                format!("must be at least {MIN_SECRET_BYTES} bytes"),
            ));
        }
        Ok(Self(trimmed.to_vec()))
    }

    /// Reads the secret from `path`, which must be private to its owner (no permission bits
    /// for group or others, as `chmod 600` leaves it).
    ///
    /// # Errors
    /// `Invalid` (field `review_key_file`) when the file cannot be read or others may read it;
    /// as [`new`](Self::new) for its contents.
    pub fn from_file(path: &Path) -> Result<Self> {
        let unreadable = |err: std::io::Error| {
            MemoryError::invalid("review_key_file", format!("cannot read it: {err}"))
        };
        let meta = std::fs::metadata(path).map_err(unreadable)?;
        // Elsewhere, the file system's own access control is all there is to check.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(MemoryError::invalid(
                    "review_key_file",
                    format!("must be private to its owner (mode {mode:03o}; run chmod 600 on it)"),
                ));
            }
        }
        #[cfg(not(unix))]
        let _ = meta;
        Self::new(std::fs::read(path).map_err(unreadable)?)
    }

    /// A 32-byte value derived from the secret for `purpose`; the server binds its sessions to
    /// one, so a new secret ends every session made under the old one.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        let mut mac = self.mac();
        mac.update(b"agent-memory review derive\n");
        mac.update(purpose.as_bytes());
        mac.finalize().into_bytes().into()
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes keys of any length.
        <HmacSha256 as KeyInit>::new_from_slice(&self.0).expect("HMAC accepts any key length")
    }

    fn tag(&self, payload: &str) -> HmacSha256 {
        let mut mac = self.mac();
        mac.update(TAG_CONTEXT);
        mac.update(payload.as_bytes());
        mac
    }
}

/// What a valid link says: whose page it opens, until when, under which nonce.
#[derive(Clone, PartialEq, Eq)]
pub struct LinkClaims {
    /// The application.
    pub application_id: String,
    /// The end user.
    pub user_id: String,
    /// When the link stops working.
    pub expires_at: Timestamp,
    /// The link's random nonce (hex); the server remembers used ones until they expire.
    pub nonce: String,
}

impl fmt::Debug for LinkClaims {
    /// The expiry only: ids are personal data and the nonce is part of a credential.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkClaims").field("expires_at", &self.expires_at).finish_non_exhaustive()
    }
}

/// Why a link was refused. The person sees one sentence for all of them; the kinds are for
/// counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkRefused {
    /// Not a token at all, or a payload that does not parse.
    Malformed,
    /// The tag does not match: tampered with, or signed with another secret.
    BadSignature,
    /// Its expiry has passed.
    Expired,
}

impl LinkRefused {
    /// A fixed label for metrics and logs.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::BadSignature => "bad_signature",
            Self::Expired => "expired",
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Payload {
    v: u8,
    app: String,
    user: String,
    exp: i64,
    nonce: String,
}

/// A signed token for `user_id` of `application_id`, valid for `ttl` from now.
///
/// # Errors
/// `Invalid` for bad ids (the rules of [`MemoryScope`]), a `ttl` of zero or longer than
/// [`MAX_TTL`] (field `ttl`), or when the operating system's random source fails (field
/// `nonce`).
pub fn mint_token(
    secret: &ReviewSecret,
    application_id: &str,
    user_id: &str,
    ttl: Duration,
) -> Result<String> {
    MemoryScope::new(application_id, user_id)?;
    if ttl.is_zero() || ttl > MAX_TTL {
        return Err(MemoryError::invalid("ttl", "must be more than zero and at most 24 hours"));
    }
    let mut nonce = [0u8; NONCE_BYTES];
    getrandom::fill(&mut nonce)
        .map_err(|_| MemoryError::invalid("nonce", "the random source failed"))?;
    let expires = Timestamp::now().saturating_add(ttl);
    let payload = Payload {
        v: VERSION,
        app: application_id.to_owned(),
        user: user_id.to_owned(),
        exp: expires.as_micros().div_euclid(1_000_000),
        nonce: nonce.iter().map(|b| format!("{b:02x}")).collect(),
    };
    let json = serde_json::to_vec(&payload).expect("a payload always serializes");
    let encoded = URL_SAFE_NO_PAD.encode(json);
    let tag = URL_SAFE_NO_PAD.encode(secret.tag(&encoded).finalize().into_bytes());
    Ok(format!("{encoded}.{tag}"))
}

/// The sign-in URL `BASE/review/open?token=…` for `user_id` of `application_id`, valid for
/// `ttl` from now. `base_url` is the server's origin as the browser reaches it, such as
/// `https://memory.example.com` (a trailing `/` is fine; no path, query or fragment).
///
/// # Errors
/// `Invalid` (field `base_url`) for a base URL that is not an `http` or `https` origin; as
/// [`mint_token`] otherwise.
pub fn review_link(
    secret: &ReviewSecret,
    base_url: &str,
    application_id: &str,
    user_id: &str,
    ttl: Duration,
) -> Result<String> {
    let origin = check_base_url(base_url)?;
    let token = mint_token(secret, application_id, user_id, ttl)?;
    Ok(format!("{origin}{OPEN_PATH}?token={token}"))
}

/// `base_url` without a trailing `/`, when it is an `http` or `https` origin.
fn check_base_url(base_url: &str) -> Result<&str> {
    let bad = |reason: &str| MemoryError::invalid("base_url", reason.to_owned());
    let parsed = url::Url::parse(base_url)
        .map_err(|_| bad("must be an http or https origin such as https://memory.example.com"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(bad("must start with https:// or http:// and name a host"));
    }
    if parsed.path() != "/" || parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("must be an origin only: no path, query or fragment"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("must not hold a user name or password"));
    }
    Ok(base_url.trim_end_matches('/'))
}

/// Checks a token's tag (in constant time), then its format and expiry against `now`.
///
/// It does not know whether the token was used before: the server remembers nonces for that.
///
/// # Errors
/// Why it was refused.
pub fn verify_token(
    secret: &ReviewSecret,
    token: &str,
    now: Timestamp,
) -> std::result::Result<LinkClaims, LinkRefused> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(LinkRefused::Malformed);
    }
    let (encoded, tag) = token.split_once('.').ok_or(LinkRefused::Malformed)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| LinkRefused::Malformed)?;
    secret.tag(encoded).verify_slice(&tag).map_err(|_| LinkRefused::BadSignature)?;
    let json = URL_SAFE_NO_PAD.decode(encoded).map_err(|_| LinkRefused::Malformed)?;
    let payload: Payload = serde_json::from_slice(&json).map_err(|_| LinkRefused::Malformed)?;
    if payload.v != VERSION || MemoryScope::new(&*payload.app, &*payload.user).is_err() {
        return Err(LinkRefused::Malformed);
    }
    let expires_at = Timestamp::from_micros(payload.exp.saturating_mul(1_000_000))
        .map_err(|_| LinkRefused::Malformed)?;
    if expires_at <= now {
        return Err(LinkRefused::Expired);
    }
    Ok(LinkClaims {
        application_id: payload.app,
        user_id: payload.user,
        expires_at,
        nonce: payload.nonce,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(byte: u8) -> ReviewSecret {
        ReviewSecret::new(vec![byte; 32]).unwrap()
    }

    #[test]
    fn a_minted_token_verifies_once_made_and_not_after_expiry() {
        let token = mint_token(&secret(7), "app", "u1", Duration::from_secs(60)).unwrap();
        let claims = verify_token(&secret(7), &token, Timestamp::now()).unwrap();
        assert_eq!((claims.application_id.as_str(), claims.user_id.as_str()), ("app", "u1"));
        assert_eq!(claims.nonce.len(), 32);
        let later = Timestamp::now().saturating_add(Duration::from_secs(61));
        assert_eq!(verify_token(&secret(7), &token, later), Err(LinkRefused::Expired));
    }

    #[test]
    fn another_secret_or_any_changed_byte_is_refused() {
        let token = mint_token(&secret(7), "app", "u1", Duration::from_secs(60)).unwrap();
        assert_eq!(
            verify_token(&secret(8), &token, Timestamp::now()),
            Err(LinkRefused::BadSignature)
        );
        let (payload, tag) = token.split_once('.').unwrap();
        let forged = URL_SAFE_NO_PAD.encode(
            String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap())
                .unwrap()
                .replace("u1", "u2"),
        );
        assert_eq!(
            verify_token(&secret(7), &format!("{forged}.{tag}"), Timestamp::now()),
            Err(LinkRefused::BadSignature)
        );
        for bad in ["", "x", "a.b", &token.replace('.', "")] {
            assert!(verify_token(&secret(7), bad, Timestamp::now()).is_err(), "{bad}");
        }
    }

    #[test]
    fn secrets_ttls_and_base_urls_are_checked() {
        assert!(ReviewSecret::new(vec![1; 31]).is_err());
        assert!(ReviewSecret::new(b"  0123456789abcdef0123456789abcdef\n".to_vec()).is_ok());
        assert!(format!("{:?}", secret(7)).contains(".."));
        let s = secret(7);
        assert!(mint_token(&s, "app", "u1", Duration::ZERO).is_err());
        assert!(mint_token(&s, "app", "u1", MAX_TTL + Duration::from_secs(1)).is_err());
        assert!(mint_token(&s, "", "u1", DEFAULT_TTL).is_err());
        for bad in
            ["memory.example.com", "ftp://x", "https://x/path", "https://x/?q", "https://a:b@x"]
        {
            assert!(review_link(&s, bad, "app", "u1", DEFAULT_TTL).is_err(), "{bad}");
        }
        let link = review_link(&s, "http://127.0.0.1:8080/", "app", "u1", DEFAULT_TTL).unwrap();
        assert!(link.starts_with("http://127.0.0.1:8080/review/open?token="), "{link}");
    }
}
