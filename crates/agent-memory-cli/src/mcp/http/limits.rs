//! How much work the server takes on: a per-user rate limit on work, a global concurrency limit
//! and a deadline for every request to `/mcp`. (Request bodies are capped by the MCP service
//! itself, at [`super::MAX_BODY_BYTES`].)
//!
//! The rate limit runs after authentication, keyed by the authenticated user, so one user's
//! burst cannot use up another's allowance. It charges work, not requests: each user has an
//! allowance of `N` units per second, with bursts of up to `N`, and a request costs the units
//! of [`Work`](crate::mcp::work::Work): one for an ordinary call, one per store operation for a
//! call that runs many (a directory rename). A request is admitted when the user has at least
//! one unit left; what it did beyond that one unit is charged when it is answered, and may put
//! the user into debt, which later requests wait out (`429` with `Retry-After` until the
//! allowance is back to one unit). Only an admitted request waits for one of the global
//! concurrency permits, within its deadline, so a user who is being refused takes no permit. A
//! request that is not answered by its deadline (waiting for a permit included) gets `503` with
//! `Retry-After`; its handler is dropped, and a write it had started may or may not have been
//! stored, which is what any unanswered request means to the client.
//!
//! The allowance is a token bucket of our own rather than `governor`'s GCRA: the cost of a
//! request is known only after it ran, and GCRA cannot charge a cell it has no room for.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::mcp::work::Work;
use crate::mcp::Principal;

/// How often the rate limiter forgets users whose allowance is full again, so its memory stays
/// bounded by the users active recently.
const FORGET_EVERY: Duration = Duration::from_secs(60);

/// The limits of one server.
#[derive(Debug)]
pub struct Limits {
    per_user: Allowances,
    permits: Semaphore,
    deadline: Duration,
}

impl Limits {
    /// `per_second` units of work per user and second, at most `concurrent` requests at once,
    /// each answered within `deadline`. Forgets idle users until `stop` is cancelled.
    pub fn start(
        per_second: NonZeroU32,
        concurrent: usize,
        deadline: Duration,
        stop: CancellationToken,
    ) -> Arc<Self> {
        let limits = Arc::new(Self {
            per_user: Allowances::new(per_second),
            permits: Semaphore::new(concurrent),
            deadline,
        });
        super::tidy_every(FORGET_EVERY, stop, Arc::downgrade(&limits), |limits| {
            limits.per_user.forget_full(Instant::now());
        });
        limits
    }
}

/// Every recently active user's allowance of work.
#[derive(Debug)]
struct Allowances {
    /// Units regained per second, and the most a user can hold (the burst).
    rate: f64,
    users: Mutex<HashMap<String, Allowance>>,
}

/// One user's units at one instant; below zero while the user is in debt.
#[derive(Debug, Clone, Copy)]
struct Allowance {
    units: f64,
    at: Instant,
}

impl Allowances {
    fn new(per_second: NonZeroU32) -> Self {
        Self { rate: f64::from(per_second.get()), users: Mutex::new(HashMap::new()) }
    }

    /// Runs `change` on `user`'s allowance brought up to `now` (a new user's is full).
    fn with<T>(&self, user: &str, now: Instant, change: impl FnOnce(&mut f64) -> T) -> T {
        let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        let allowance =
            users.entry(user.to_owned()).or_insert(Allowance { units: self.rate, at: now });
        let elapsed = now.saturating_duration_since(allowance.at).as_secs_f64();
        allowance.units = (allowance.units + elapsed * self.rate).min(self.rate);
        allowance.at = now;
        change(&mut allowance.units)
    }

    /// Admits a request of `user`, taking one unit, when at least one is left; otherwise how
    /// long until one is.
    fn admit(&self, user: &str, now: Instant) -> Result<(), Duration> {
        let rate = self.rate;
        self.with(user, now, |units| {
            if *units >= 1.0 {
                *units -= 1.0;
                Ok(())
            } else {
                Err(Duration::from_secs_f64((1.0 - *units) / rate))
            }
        })
    }

    /// Charges `units` more to `user`, into debt when the allowance does not cover them.
    fn charge(&self, user: &str, units: u64, now: Instant) {
        if units > 0 {
            // Precision is no concern below 2^53 units.
            #[allow(clippy::cast_precision_loss)]
            let units = units as f64;
            self.with(user, now, |left| *left -= units);
        }
    }

    /// Forgets the users whose allowance is full again: a new user's starts full, so nothing
    /// is lost.
    fn forget_full(&self, now: Instant) {
        let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        let rate = self.rate;
        users.retain(|_, a| {
            a.units + now.saturating_duration_since(a.at).as_secs_f64() * rate < rate
        });
        users.shrink_to_fit();
    }
}

/// Middleware: refuses a request of a user whose allowance is used up with `429`; otherwise
/// runs it with a [`Work`] meter in its extensions and charges what it did.
pub async fn rate_limit(
    State(limits): State<Arc<Limits>>,
    mut request: Request,
    next: Next,
) -> Response {
    // Authentication ran first and put the principal in; without one, refuse rather than
    // share one allowance among unknown callers.
    let Some(user) =
        request.extensions().get::<Principal>().map(|p| p.scope().user_id().to_owned())
    else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if let Err(wait) = limits.per_user.admit(&user, Instant::now()) {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        return busy(StatusCode::TOO_MANY_REQUESTS, seconds.max(1), "too many requests; slow down");
    }
    let work = Work::default();
    request.extensions_mut().insert(work.clone());
    let response = next.run(request).await;
    // The response is whole (JSON, not a stream), so the call has run; its first unit was
    // taken at admission.
    limits.per_user.charge(&user, work.units() - 1, Instant::now());
    response
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

#[cfg(test)]
mod tests {
    use super::*;

    fn allowances(per_second: u32) -> Allowances {
        Allowances::new(NonZeroU32::new(per_second).unwrap())
    }

    #[test]
    fn a_burst_of_ordinary_requests_is_admitted_then_refused_until_a_unit_is_back() {
        let limits = allowances(10);
        let start = Instant::now();
        for _ in 0..10 {
            assert!(limits.admit("alice", start).is_ok());
        }
        let wait = limits.admit("alice", start).unwrap_err();
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        assert!(limits.admit("bob", start).is_ok(), "users have their own allowance");
        assert!(limits.admit("alice", start + Duration::from_millis(100)).is_ok());
    }

    #[test]
    fn work_is_charged_so_one_large_request_costs_like_as_many_small_ones() {
        let limits = allowances(10);
        let start = Instant::now();
        // A request that did 1,000 units of work: admitted with one, charged the rest.
        assert!(limits.admit("alice", start).is_ok());
        limits.charge("alice", 999, start);
        let wait = limits.admit("alice", start).unwrap_err();
        assert!(wait >= Duration::from_secs(99), "in debt for about 99 s: {wait:?}");
        assert!(limits.admit("alice", start + Duration::from_secs(98)).is_err());
        assert!(limits.admit("alice", start + Duration::from_secs(100)).is_ok());
        assert!(limits.admit("bob", start).is_ok(), "another user is not slowed down");
    }

    #[test]
    fn users_whose_allowance_is_full_again_are_forgotten() {
        let limits = allowances(10);
        let start = Instant::now();
        limits.admit("alice", start).unwrap();
        limits.admit("bob", start).unwrap();
        limits.charge("bob", 100, start);
        limits.forget_full(start + Duration::from_secs(1));
        let users = limits.users.lock().unwrap();
        assert_eq!(users.keys().collect::<Vec<_>>(), ["bob"], "bob is still in debt");
    }
}
