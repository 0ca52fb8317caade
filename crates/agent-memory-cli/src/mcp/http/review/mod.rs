//! The review page (`mcp --listen … --review-key-file FILE`): under `/review/`, an end user
//! signed in by a link their application minted sees, searches, edits, deletes, downloads and
//! erases their own memories. The guide is `docs/review-page.md`; the link format and its
//! signature are [`agent_memory::review`], shared with the CLI and Python.
//!
//! | module | job |
//! | --- | --- |
//! | [`session`] | link → session (once per link), the session table, rotation |
//! | [`guard`] | Host allow-list, security headers, same-origin and CSRF checks |
//! | [`handlers`] | one function per route |
//! | [`pages`] | the HTML, from `maud` templates (every value escaped) |
//! | [`download`] | "Download my data": the export format, streamed |
//!
//! Everything is server-rendered and works without JavaScript; the page ships none. The user
//! comes from the session, which comes from the link: no parameter a browser sends names a
//! user or an application. Actions are logged and counted by kind only
//! (`agent_memory_review_actions_total{action}`), never with ids, keys or content.

mod download;
mod guard;
mod handlers;
mod pages;
mod session;

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_memory::review::ReviewSecret;
use agent_memory::MemoryStore;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Router;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio_util::sync::CancellationToken;

use super::limits::{self, Limits};
use super::reload::{LoadError, Watched};
use crate::exit::{CliError, CliResult};

/// The name of the session cookie (path `/review/`).
const COOKIE: &str = "agent_memory_review";

/// Requests per second one session may make, with bursts of [`BURST`].
const PER_SECOND: u32 = 10;
const BURST: u32 = 100;

/// How often ended sessions and spent nonces are forgotten.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// What `--review-key-file` asks for.
#[derive(Debug, Clone)]
pub struct ReviewSettings {
    /// The secret's file: at least 32 bytes, mode 0600, re-read when it changes.
    pub key_file: PathBuf,
    /// The provider the store runs on (`sqlite`, `postgres`, `redis`, `memory`), for what the
    /// erasure page says erasure reaches.
    pub provider: &'static str,
}

/// Checks the secret's file now, so a bad one stops the command before the store is opened.
///
/// # Errors
/// `Invalid`, naming what is wrong with the file (never its contents).
pub fn check(settings: &ReviewSettings) -> CliResult {
    ReviewSecret::from_file(&settings.key_file)
        .map(drop)
        .map_err(|err| CliError::invalid(format!("--review-key-file: {err}")))
}

/// The provider an `agent_memory::open` URL names, for [`ReviewSettings::provider`].
pub fn provider_of(store_url: Option<&str>) -> &'static str {
    store_url.and_then(agent_memory::provider::registration).map_or("sqlite", |p| p.name)
}

/// Everything the review routes share.
pub struct Review {
    store: Arc<dyn MemoryStore>,
    app: String,
    secret: Arc<Watched<ReviewSecret>>,
    sessions: session::Sessions,
    per_session: DefaultKeyedRateLimiter<[u8; 32]>,
    /// Hosts allowed in `Host` (names, or `name:port`).
    hosts: Vec<String>,
    /// Whether the cookie is marked `Secure` (the server speaks TLS, or its public URL is
    /// https).
    secure: bool,
    provider: &'static str,
}

impl std::fmt::Debug for Review {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Review").field("provider", &self.provider).finish_non_exhaustive()
    }
}

impl Review {
    /// Reads the secret (and keeps re-reading it until `stop`), ready to serve.
    ///
    /// # Errors
    /// `Invalid` when the secret's file cannot be used.
    pub async fn start(
        settings: &ReviewSettings,
        store: Arc<dyn MemoryStore>,
        app: String,
        hosts: Vec<String>,
        secure: bool,
        stop: CancellationToken,
    ) -> CliResult<Arc<Self>> {
        let path = settings.key_file.clone();
        // The bytes are read again with the permission check, so a file made readable to
        // others fails closed like a garbled one.
        let parse: super::reload::Parse<ReviewSecret> = Box::new(move |_bytes| {
            ReviewSecret::from_file(&path).map(super::reload::Parsed::from).map_err(invalid)
        });
        let secret = Watched::start("review key file", &settings.key_file, parse, stop.clone())
            .await
            .map_err(CliError::invalid)?;
        let burst = NonZeroU32::new(BURST).unwrap_or(NonZeroU32::MIN);
        let rate = NonZeroU32::new(PER_SECOND).unwrap_or(NonZeroU32::MIN);
        let review = Arc::new(Self {
            store,
            app,
            secret,
            sessions: session::Sessions::default(),
            per_session: RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst)),
            hosts,
            secure,
            provider: settings.provider,
        });
        super::tidy_every(SWEEP_EVERY, stop, Arc::downgrade(&review), |review| {
            review.sessions.sweep();
            review.per_session.retain_recent();
        });
        Ok(review)
    }

    /// Whether `host` (a `Host` header) is allowed: an entry equal to it, or to its name
    /// without the port.
    fn host_allowed(&self, host: &str) -> bool {
        let name = match host.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or(rest),
            None => host.rsplit_once(':').map_or(host, |(name, _)| name),
        };
        self.hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(host) || allowed.eq_ignore_ascii_case(name))
    }
}

fn invalid(err: agent_memory::MemoryError) -> LoadError {
    // The path is known to the watcher's log line; the reason is a fixed sentence.
    LoadError::Invalid(err.to_string())
}

/// The review routes under `/review/`, behind the Host check and the security headers, and
/// within the server's concurrency limit and request deadline.
pub fn router(review: Arc<Review>, limits: Arc<Limits>) -> Router {
    Router::new()
        .route("/review", get(handlers::to_index))
        .route("/review/", get(handlers::index))
        .route("/review/open", get(handlers::open))
        .route("/review/style.css", get(handlers::style))
        .route("/review/edit", get(handlers::edit_form).post(handlers::edit))
        .route("/review/delete", post(handlers::delete))
        .route("/review/download", get(handlers::download))
        .route("/review/erase", get(handlers::erase_form).post(handlers::erase))
        .route("/review/signout", post(handlers::sign_out))
        .with_state(Arc::clone(&review))
        .layer(from_fn_with_state(limits, limits::bound))
        .layer(from_fn_with_state(review, guard::protect))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_follow_the_url_scheme() {
        assert_eq!(provider_of(None), "sqlite");
        assert_eq!(provider_of(Some("postgresql://u@h/db")), "postgres");
        assert_eq!(provider_of(Some("postgres://u@h/db")), "postgres");
        assert_eq!(provider_of(Some("rediss://h")), "redis");
        assert_eq!(provider_of(Some("sqlite:m.db")), "sqlite");
        assert_eq!(provider_of(Some("memory:")), "memory");
    }
}
