//! The server's routes: `/mcp` behind authentication and the limits, and two public ones,
//! `GET /healthz` and the OAuth protected-resource metadata.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::{MemoryScope, MemoryStore};
use axum::extract::State;
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{json, Value};
use tokio::sync::Mutex;

use super::auth::{self, Authenticator};
use super::limits::{self, Limits};
use super::peers::{self, PeerLimit};
use crate::mcp::handler::MemoryServer;

/// Where RFC 9728 clients look for the protected-resource metadata: at the root, and with
/// the resource's path appended (what MCP clients try first).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// How long `/healthz` waits for the store.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one answer of the store serves `/healthz`: the store is read at most once per
/// this, however often `/healthz` is asked, since it needs no credential.
const HEALTH_CACHE: Duration = Duration::from_secs(1);

/// Everything the routes need.
#[derive(Debug)]
pub struct Routes {
    pub handler: MemoryServer,
    pub mcp_config: StreamableHttpServerConfig,
    pub auth: Arc<Authenticator>,
    pub limits: Arc<Limits>,
    pub peers: Arc<PeerLimit>,
    pub store: Arc<dyn MemoryStore>,
    pub app: String,
    /// The protected-resource metadata document, when OAuth tokens are accepted.
    pub metadata: Option<Value>,
}

/// The router: `/mcp` runs the per-peer limit on failed authentication, then authentication
/// (which logs), then the per-user rate limit, then the concurrency limit and deadline, then
/// rmcp's Streamable HTTP service (which checks `Host`, `Origin`, the protocol version and the
/// body size).
pub fn router(routes: Routes) -> Router {
    let Routes { handler, mcp_config, auth, limits, peers, store, app, metadata } = routes;
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        mcp_config,
    );
    let mcp = Router::new()
        .route_service("/mcp", service)
        .layer(from_fn_with_state(Arc::clone(&limits), limits::bound))
        .layer(from_fn_with_state(limits, limits::rate_limit))
        .layer(from_fn_with_state(auth, auth::authenticate))
        .layer(from_fn_with_state(peers, peers::gate));
    let health = Health { store, app, last: std::sync::Mutex::default(), probe: Mutex::default() };
    let mut public = Router::new().route("/healthz", get(healthz)).with_state(Arc::new(health));
    if let Some(metadata) = metadata {
        let metadata = Arc::new(metadata);
        let serve = get(move || {
            let metadata = Arc::clone(&metadata);
            async move { Json(metadata.as_ref().clone()) }
        });
        public = public
            .route(METADATA_PATH, serve.clone())
            .route(&format!("{METADATA_PATH}/mcp"), serve);
    }
    mcp.merge(public)
}

/// The RFC 9728 metadata of the resource at `resource` (the `/mcp` URL), whose tokens
/// `issuer` signs.
pub fn metadata(resource: &str, issuer: &str) -> Value {
    json!({
        "resource": resource,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "agent-memory",
    })
}

#[derive(Debug)]
struct Health {
    store: Arc<dyn MemoryStore>,
    app: String,
    /// When the store last answered or failed, and whether it answered.
    last: std::sync::Mutex<Option<(Instant, bool)>>,
    /// Held by the one request that is reading the store.
    probe: Mutex<()>,
}

impl Health {
    fn last(&self) -> Option<(Instant, bool)> {
        *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the store is up: the last answer while it is fresh; else one request reads the
    /// store, and those arriving meanwhile get the last answer (down when there is none).
    async fn store_up(&self) -> bool {
        let fresh = |last: Option<(Instant, bool)>| {
            last.filter(|(at, _)| at.elapsed() < HEALTH_CACHE).map(|(_, up)| up)
        };
        if let Some(up) = fresh(self.last()) {
            return up;
        }
        let Ok(_probing) = self.probe.try_lock() else {
            return self.last().is_some_and(|(_, up)| up);
        };
        // Another request may have probed between the two looks.
        if let Some(up) = fresh(self.last()) {
            return up;
        }
        let up = self.read().await;
        *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((Instant::now(), up));
        up
    }

    /// One read of one key of a reserved user id, within [`HEALTH_TIMEOUT`].
    async fn read(&self) -> bool {
        let probe = async {
            let scope = MemoryScope::new(self.app.clone(), "\u{2063}agent-memory-healthz")?;
            self.store.get(&scope, "healthz").await
        };
        match tokio::time::timeout(HEALTH_TIMEOUT, probe).await {
            Ok(Ok(_)) => true,
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "health check: the store failed");
                false
            }
            Err(_) => {
                tracing::warn!("health check: the store did not answer in time");
                false
            }
        }
    }
}

/// `200` when the store answered a read within [`HEALTH_TIMEOUT`], else `503`: the read is of
/// one key of a reserved user id, at most once per [`HEALTH_CACHE`] (see [`Health::store_up`]);
/// only whether the store answered is shown, never what it read.
async fn healthz(State(health): State<Arc<Health>>) -> Response {
    if health.store_up().await {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable\n").into_response()
    }
}
