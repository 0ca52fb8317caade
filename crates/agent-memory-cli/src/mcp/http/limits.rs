//! How much work the server takes on: a per-user rate limit, a global concurrency limit and a
//! deadline for every request to `/mcp`. (Request bodies are capped by the MCP service itself,
//! at [`super::MAX_BODY_BYTES`].)
//!
//! The rate limit runs after authentication, keyed by the authenticated user, so one user's
//! burst cannot use up another's allowance; it allows `N` requests per second with bursts of
//! up to `N` (GCRA, from `governor`), and answers `429` with `Retry-After` beyond that. Only
//! then does a request wait for one of the global concurrency permits, within its deadline, so
//! a user who is being refused takes no permit. A request that is not answered by its deadline
//! (waiting for a permit included) gets `503` with `Retry-After`; its handler is dropped, and a
//! write it had started may or may not have been stored, which is what any unanswered request
//! means to the client.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::mcp::Principal;

/// How often the rate limiter forgets users who have not been seen for a while, so its memory
/// stays bounded by the users active recently.
const FORGET_EVERY: Duration = Duration::from_secs(60);

/// The limits of one server.
#[derive(Debug)]
pub struct Limits {
    per_user: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
    permits: Semaphore,
    deadline: Duration,
}

impl Limits {
    /// `per_second` requests per user and second, at most `concurrent` requests at once, each
    /// answered within `deadline`. Forgets idle users until `stop` is cancelled.
    pub fn start(
        per_second: NonZeroU32,
        concurrent: usize,
        deadline: Duration,
        stop: CancellationToken,
    ) -> Arc<Self> {
        let limits = Arc::new(Self {
            per_user: RateLimiter::keyed(Quota::per_second(per_second)),
            clock: DefaultClock::default(),
            permits: Semaphore::new(concurrent),
            deadline,
        });
        let weak = Arc::downgrade(&limits);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(FORGET_EVERY);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                let Some(limits) = weak.upgrade() else { return };
                limits.per_user.retain_recent();
                limits.per_user.shrink_to_fit();
            }
        });
        limits
    }
}

/// Middleware: refuses a request of a user over their rate with `429`.
pub async fn rate_limit(
    State(limits): State<Arc<Limits>>,
    request: Request,
    next: Next,
) -> Response {
    // Authentication ran first and put the principal in; without one, refuse rather than
    // share one bucket among unknown callers.
    let Some(user) =
        request.extensions().get::<Principal>().map(|p| p.scope().user_id().to_owned())
    else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    match limits.per_user.check_key(&user) {
        Ok(()) => next.run(request).await,
        Err(not_until) => {
            let wait = not_until.wait_time_from(limits.clock.now());
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            busy(StatusCode::TOO_MANY_REQUESTS, seconds.max(1), "too many requests; slow down")
        }
    }
}

/// Middleware: runs the request with one of the global permits, within the deadline.
pub async fn bound(State(limits): State<Arc<Limits>>, request: Request, next: Next) -> Response {
    let run = async {
        let _permit = limits.permits.acquire().await;
        next.run(request).await
    };
    match tokio::time::timeout(limits.deadline, run).await {
        Ok(response) => response,
        Err(_) => busy(
            StatusCode::SERVICE_UNAVAILABLE,
            1,
            "the request was not answered in time; a write may or may not have been stored",
        ),
    }
}

fn busy(status: StatusCode, retry_after: u64, message: &str) -> Response {
    let mut response = (status, axum::Json(json!({"error": message}))).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    response
}
