//! The limit on failed authentication per peer address (`--peer-failure-limit N/s`), checked
//! before authentication.
//!
//! Every request to `/mcp` that is refused with `401` (no credential, a malformed header, an
//! unknown or revoked key, a bad token) is counted against the address it came from, `N` per
//! second with bursts of `N` (GCRA, from `governor`). A peer over that allowance gets `429`
//! with `Retry-After` for every request, before its credential is even looked at, until its
//! allowance has refilled: guessing keys and spending the server's CPU on token signatures
//! costs an attacker their address. Requests that pass authentication are never counted, so a
//! working client is never slowed by this limit, only by its user's rate limit.
//!
//! IPv6 peers are counted by their /64 network, since one host usually holds a whole /64.
//! Behind a reverse proxy every request comes from the proxy's address: raise the limit there,
//! or leave this limit to the proxy.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// How often peers not seen for a while are forgotten, so memory stays bounded by the peers
/// active recently.
const FORGET_EVERY: Duration = Duration::from_secs(60);

/// The failures of every peer, with what is left of their allowance after each.
type Failures =
    RateLimiter<IpAddr, DefaultKeyedStateStore<IpAddr>, DefaultClock, StateInformationMiddleware>;

/// The failed-authentication allowance of every peer.
#[derive(Debug)]
pub struct PeerLimit {
    failures: Failures,
    /// How long one failure takes to be forgiven.
    refill: Duration,
    clock: DefaultClock,
    /// Peers over their allowance, and when it will let one more failure through.
    refused: Mutex<HashMap<IpAddr, Instant>>,
}

impl PeerLimit {
    /// `per_second` failed authentications per peer and second; forgets idle peers until
    /// `stop` is cancelled.
    pub fn start(per_second: NonZeroU32, stop: CancellationToken) -> Arc<Self> {
        let quota = Quota::per_second(per_second);
        let limit = Arc::new(Self {
            failures: RateLimiter::keyed(quota).with_middleware::<StateInformationMiddleware>(),
            refill: quota.replenish_interval(),
            clock: DefaultClock::default(),
            refused: Mutex::new(HashMap::new()),
        });
        super::tidy_every(FORGET_EVERY, stop, Arc::downgrade(&limit), |limit| {
            limit.failures.retain_recent();
            limit.failures.shrink_to_fit();
            let now = Instant::now();
            limit.refused().retain(|_, until| *until > now);
        });
        limit
    }

    fn refused(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Instant>> {
        self.refused.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long `peer` is still refused, if it is.
    fn refused_for(&self, peer: IpAddr) -> Option<Duration> {
        let until = *self.refused().get(&peer)?;
        until.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())
    }

    /// Counts one failed authentication of `peer`; the one that uses up its allowance starts
    /// the refusal.
    fn failed(&self, peer: IpAddr) {
        let wait = match self.failures.check_key(&peer) {
            Ok(left) if left.remaining_burst_capacity() > 0 => return,
            Ok(_) => self.refill,
            Err(not_until) => not_until.wait_time_from(self.clock.now()),
        };
        self.refused().insert(peer, Instant::now() + wait);
    }
}

/// The address a peer is counted under: IPv4 as it is (also when mapped into IPv6), IPv6 by
/// its /64 network.
fn counted(addr: SocketAddr) -> IpAddr {
    match addr.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let network = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(network))
            }
        },
        v4 => v4,
    }
}

/// Middleware, before authentication: refuses a peer over its allowance with `429`, and counts
/// every `401` against the peer.
pub async fn gate(State(limit): State<Arc<PeerLimit>>, request: Request, next: Next) -> Response {
    let Some(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| counted(c.0))
    else {
        return next.run(request).await;
    };
    if let Some(left) = limit.refused_for(peer) {
        let seconds = left.as_secs() + u64::from(left.subsec_nanos() > 0);
        let body = json!({"error": "too many failed authentications from this address; slow down"});
        let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        tracing::info!(target: "agent_memory::http", outcome = "peer_limited", status = 429, "mcp request refused");
        return response;
    }
    let response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        limit.failed(peer);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn ipv6_peers_count_by_their_network() {
        let a = counted("[2001:db8:1:2:aaaa::1]:1".parse().unwrap());
        let b = counted("[2001:db8:1:2:bbbb::9]:2".parse().unwrap());
        let c = counted("[2001:db8:1:3::1]:3".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(counted("[::ffff:192.0.2.7]:4".parse().unwrap()).to_string(), "192.0.2.7");
        assert_eq!(counted("192.0.2.7:5".parse().unwrap()).to_string(), "192.0.2.7");
    }
}
