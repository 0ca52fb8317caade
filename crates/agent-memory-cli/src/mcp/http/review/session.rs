//! Sign-in: a link is exchanged once for a session, and the session cookie names it later.
//!
//! Sessions live in the server's memory only (a restart signs everyone out, which a page
//! reached by a short-lived link can afford). The cookie holds 32 random bytes; the table is
//! keyed by their SHA-256, so a lookup never compares a secret byte by byte. Each session is
//! bound to a value derived from the secret it was made under: after a rotation no old session
//! matches the new secret and every request with one is refused.
//!
//! A session ends one hour after its last request, and at the latest one hour after its link
//! would have expired (so at most the link's lifetime plus one hour). Used link nonces are kept
//! until their link expires, so a link works once per server process.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agent_memory::review::{LinkClaims, ReviewSecret};
use agent_memory::Timestamp;
use sha2::{Digest, Sha256};

/// How long a session lasts without a request, and how long past its link's expiry it may
/// last at all.
pub const IDLE: Duration = Duration::from_secs(60 * 60);

/// The purpose [`ReviewSecret::derive`] binds sessions to.
const SESSION_PURPOSE: &str = "session";

/// Random bytes in a session id and in a CSRF token.
const TOKEN_BYTES: usize = 32;

/// Sessions beyond this many are refused (a link is needed for each, so only a holder of the
/// secret could get near it).
const MAX_SESSIONS: usize = 100_000;

/// One signed-in person.
#[derive(Clone)]
pub struct Session {
    /// The key of the session in the table (the SHA-256 of the cookie's value), which the rate
    /// limiter counts by.
    pub key: [u8; 32],
    /// The user, from the link only.
    pub user_id: String,
    /// The token every form of this session carries.
    pub csrf: String,
    /// The secret-derived value the session was made under.
    bound_to: [u8; 32],
    /// When the session ends whatever happens.
    hard_end: Instant,
    /// When the session was last used.
    last_seen: Instant,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Session(..)")
    }
}

/// The sessions and used nonces of one server.
#[derive(Default)]
pub struct Sessions {
    table: Mutex<HashMap<[u8; 32], Session>>,
    used_nonces: Mutex<HashMap<String, Timestamp>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sessions(..)")
    }
}

/// Why [`Sessions::sign_in`] refused a valid link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInRefused {
    /// The link's nonce was used before.
    Reused,
    /// The table is full, or the random source failed.
    Unavailable,
}

impl Sessions {
    /// Spends the link's nonce and makes a session for its user under `secret`. Returns the
    /// cookie value and how long the cookie may live.
    pub fn sign_in(
        &self,
        claims: &LinkClaims,
        secret: &ReviewSecret,
    ) -> Result<(String, Duration), SignInRefused> {
        let now = Timestamp::now();
        {
            let mut used = lock(&self.used_nonces);
            used.retain(|_, expires| *expires > now);
            if used.contains_key(&claims.nonce) {
                return Err(SignInRefused::Reused);
            }
            used.insert(claims.nonce.clone(), claims.expires_at);
        }
        let left_micros = claims.expires_at.as_micros().saturating_sub(now.as_micros());
        let link_left = Duration::from_micros(u64::try_from(left_micros).unwrap_or(0));
        let lifetime = link_left + IDLE;
        let cookie = random_hex().ok_or(SignInRefused::Unavailable)?;
        let csrf = random_hex().ok_or(SignInRefused::Unavailable)?;
        let key = session_key(&cookie);
        let started = Instant::now();
        let session = Session {
            key,
            user_id: claims.user_id.clone(),
            csrf,
            bound_to: secret.derive(SESSION_PURPOSE),
            hard_end: started + lifetime,
            last_seen: started,
        };
        let mut table = lock(&self.table);
        if table.len() >= MAX_SESSIONS {
            table.retain(|_, s| s.alive(started));
            if table.len() >= MAX_SESSIONS {
                return Err(SignInRefused::Unavailable);
            }
        }
        table.insert(key, session);
        Ok((cookie, lifetime))
    }

    /// The live session a cookie names under `secret`, marked as used now.
    pub fn find(&self, cookie: &str, secret: &ReviewSecret) -> Option<Session> {
        let key = session_key(cookie);
        let now = Instant::now();
        let bound_to = secret.derive(SESSION_PURPOSE);
        let mut table = lock(&self.table);
        let session = table.get_mut(&key)?;
        if !session.alive(now) || session.bound_to != bound_to {
            table.remove(&key);
            return None;
        }
        session.last_seen = now;
        Some(session.clone())
    }

    /// Ends the session with this key.
    pub fn end(&self, key: &[u8; 32]) {
        lock(&self.table).remove(key);
    }

    /// Forgets ended sessions (run now and then, so the table holds only live ones).
    pub fn sweep(&self) {
        let now = Instant::now();
        lock(&self.table).retain(|_, s| s.alive(now));
        let now = Timestamp::now();
        lock(&self.used_nonces).retain(|_, expires| *expires > now);
    }
}

impl Session {
    fn alive(&self, now: Instant) -> bool {
        now < self.hard_end && now.duration_since(self.last_seen) < IDLE
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn session_key(cookie: &str) -> [u8; 32] {
    Sha256::digest(cookie.as_bytes()).into()
}

/// [`TOKEN_BYTES`] from the operating system's random source, as hex.
fn random_hex() -> Option<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
