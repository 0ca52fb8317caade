//! `agent-memory mcp --listen ADDR`: the memory tools over MCP Streamable HTTP at `/mcp`, for
//! many users at once, each request's user bound from its own credential.
//!
//! rmcp's [`StreamableHttpService`](rmcp::transport::StreamableHttpService) runs in stateless
//! mode with JSON responses: every POST is answered on its own, and no session state exists
//! that a later request could inherit. The module's pieces, in the order a request meets them:
//!
//! | module | job |
//! | --- | --- |
//! | [`router`] | the routes: `/mcp`, `GET /healthz`, `/.well-known/oauth-protected-resource` |
//! | [`auth`] | the bearer credential → a [`Principal`](crate::mcp::Principal), 401 otherwise; the request log |
//! | [`api_keys`], [`jwt`] | the two kinds of credential |
//! | [`reload`] | re-reading the key files when they change, failing closed |
//! | [`limits`] | per-user rate limit, global concurrency limit, request deadline |
//! | [`peers`] | the limit on failed authentication per peer address, checked before [`auth`] |
//! | [`connections`] | the connection cap, idle timeouts, HTTP/1 and HTTP/2, graceful shutdown |
//! | [`tls`] | optional rustls |
//!
//! Then rmcp checks `Host` and `Origin` against the allow-lists (DNS rebinding), the protocol
//! version and the body size, and hands the call to the shared
//! [`handler`](crate::mcp::handler), which reads the request's principal on every call.
//!
//! The server stops on SIGTERM or SIGINT: it stops accepting connections, lets requests in
//! flight finish (for at most the request deadline and a second), then returns, and the caller
//! closes the store.

mod api_keys;
mod auth;
mod connections;
mod jwt;
mod limits;
mod metrics;
mod peers;
mod reload;
mod review;
mod router;
mod tls;

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_memory::MemoryStore;
use rmcp::transport::StreamableHttpServerConfig;
use tokio_util::sync::CancellationToken;

pub use self::jwt::{JwtSettings, TOKEN_USER_PREFIX};
pub use self::metrics::MetricsAt;
use self::reload::Watched;
pub use self::review::{provider_of, ReviewSettings};
use super::handler::MemoryServer;
use super::ToolSet;
use crate::exit::{CliError, CliResult};

/// Runs `tidy` on the value behind `weak` every `period`, until `stop` is cancelled or the
/// value is gone: how the limiters and the review sessions forget what went idle, so their
/// memory stays bounded by recent use.
fn tidy_every<T: Send + Sync + 'static>(
    period: Duration,
    stop: CancellationToken,
    weak: std::sync::Weak<T>,
    tidy: impl Fn(&T) + Send + 'static,
) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(period);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let Some(value) = weak.upgrade() else { return };
            tidy(&value);
        }
    });
}

/// Largest request body, in bytes (1 MiB): a tool call's content is at most 64 KiB.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Connections the separate `/metrics` listener keeps open at once.
const METRICS_CONNECTIONS: usize = 16;

/// The hosts and origins allowed when no `--allowed-host` or `--allowed-origin` adds more:
/// loopback names only, as rmcp's own default.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// Everything `mcp --listen` was asked for, checked.
#[derive(Debug)]
pub struct HttpOptions {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The one application every request runs in.
    pub app: String,
    /// Which tools to serve.
    pub tools: ToolSet,
    /// The API key file, when API keys are accepted.
    pub api_keys: Option<PathBuf>,
    /// The OAuth token settings, when tokens are accepted.
    pub jwt: Option<JwtSettings>,
    /// Hosts allowed in `Host`, beyond the loopback names.
    pub allowed_hosts: Vec<String>,
    /// Origins allowed in `Origin`, beyond loopback ones.
    pub allowed_origins: Vec<String>,
    /// Requests per user and second.
    pub rate_per_second: NonZeroU32,
    /// Requests served at once, over all users.
    pub max_concurrent: usize,
    /// How long one request may take.
    pub request_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a connection may stay without an authenticated request.
    pub idle_timeout: Duration,
    /// Whether a plain listener also speaks cleartext HTTP/2 (h2c).
    pub h2c: bool,
    /// Failed authentications per peer address and second, before `429`.
    pub peer_failure_limit: NonZeroU32,
    /// The PEM certificate chain and private key, for TLS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The URL clients reach the server at (scheme, host, port), for the metadata.
    pub public_url: Option<String>,
    /// Where to serve `/metrics`, when it is served at all.
    pub metrics: Option<MetricsAt>,
    /// The review page under `/review/`, when it is served at all.
    pub review: Option<ReviewSettings>,
}

/// Reads and checks every file the server will need (the API key file, the JWT keys, the TLS
/// certificate and key), so that a bad file stops the command before any store is opened or
/// created. [`serve`] reads them again when it starts.
///
/// # Errors
/// `Invalid`, naming the file and what is wrong with it.
pub fn check(options: &HttpOptions) -> CliResult {
    let read = |what: &str, path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|err| CliError::invalid(format!("cannot read the {what}: {err}")))
    };
    let parsed = |what: &str, result: Result<bool, reload::LoadError>| match result {
        Ok(false) => Ok(()),
        Ok(true) => Err(CliError::invalid(format!("the {what} ends in an incomplete line"))),
        Err(reload::LoadError::Invalid(reason)) => {
            Err(CliError::invalid(format!("the {what}: {reason}")))
        }
    };
    if let Some(path) = &options.api_keys {
        let bytes = read("API key file", path)?;
        parsed(
            "API key file",
            api_keys::parser(options.app.clone())(&bytes).map(|p| p.tail_pending),
        )?;
    }
    if let Some(settings) = &options.jwt {
        let bytes = read("JWT key file", &settings.keys)?;
        parsed("JWT key file", jwt::parser()(&bytes).map(|p| p.tail_pending))?;
    }
    if let Some((cert, key)) = &options.tls {
        tls::server_config(cert, key).map_err(CliError::invalid)?;
    }
    if let Some(settings) = &options.review {
        review::check(settings)?;
    }
    Ok(())
}

/// Serves MCP over HTTP until SIGTERM or SIGINT, then lets requests in flight finish.
///
/// `store` must be started; it stays open when this returns.
///
/// # Errors
/// `Invalid` when a key file, the JWT keys or the TLS files cannot be used (nothing is served);
/// `Failure` when the address cannot be bound or the server fails.
pub async fn serve(store: Arc<dyn MemoryStore>, options: HttpOptions) -> CliResult {
    let stop = CancellationToken::new();
    let result = run(store, options, stop.clone()).await;
    // Ends the file watchers and the rate limiter's sweeper.
    stop.cancel();
    result
}

async fn run(
    store: Arc<dyn MemoryStore>,
    options: HttpOptions,
    stop: CancellationToken,
) -> CliResult {
    let api_keys = match &options.api_keys {
        Some(path) => Some(
            Watched::start(
                "API key file",
                path,
                api_keys::parser(options.app.clone()),
                stop.clone(),
            )
            .await
            .map_err(CliError::invalid)?,
        ),
        None => None,
    };
    let jwt = match &options.jwt {
        Some(settings) => {
            let ring = Watched::start("JWT key file", &settings.keys, jwt::parser(), stop.clone())
                .await
                .map_err(CliError::invalid)?;
            Some((jwt::Verifier::new(settings.clone(), options.app.clone()), ring))
        }
        None => None,
    };
    let tls = match &options.tls {
        Some((cert, key)) => Some(tls::server_config(cert, key).map_err(CliError::invalid)?),
        None => None,
    };
    let metrics_listener = match options.metrics {
        Some(MetricsAt::Separate(addr)) => {
            Some(std::net::TcpListener::bind(addr).map_err(|err| {
                CliError::failure(format!("cannot listen for metrics on {addr}: {err}"))
            })?)
        }
        _ => None,
    };
    let prometheus = match options.metrics {
        Some(_) => Some(metrics::install(stop.clone())?),
        None => None,
    };

    let listener = std::net::TcpListener::bind(options.listen)
        .map_err(|err| CliError::failure(format!("cannot listen on {}: {err}", options.listen)))?;
    let local =
        listener.local_addr().map_err(|err| CliError::io("cannot read the address", &err))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let public_url = options
        .public_url
        .clone()
        .unwrap_or_else(|| format!("{scheme}://{local}"))
        .trim_end_matches('/')
        .to_owned();
    let resource = format!("{public_url}/mcp");
    let metadata_url = format!("{public_url}{}", router::METADATA_PATH);
    let metadata =
        jwt.as_ref().map(|(verifier, _)| router::metadata(&resource, &verifier.settings().issuer));
    let auth = Arc::new(auth::Authenticator::new(api_keys, jwt, Some(&metadata_url)));

    let limits = limits::Limits::start(
        options.rate_per_second,
        options.max_concurrent,
        options.request_timeout,
        stop.clone(),
    );
    let peers = peers::PeerLimit::start(options.peer_failure_limit, stop.clone());
    let mcp_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(
            LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).chain(options.allowed_hosts.clone()),
        )
        .with_allowed_origins(
            LOOPBACK_ORIGINS.iter().map(|o| (*o).to_owned()).chain(options.allowed_origins.clone()),
        )
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_cancellation_token(stop.child_token());
    // The review page: its own routes, within the same Host allow-list and limits.
    let review = match &options.review {
        Some(settings) => {
            let hosts = LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned());
            let hosts = hosts.chain(options.allowed_hosts.clone()).collect();
            let secure = tls.is_some() || public_url.starts_with("https://");
            let app = options.app.clone();
            let state = review::Review::start(
                settings,
                Arc::clone(&store),
                app,
                hosts,
                secure,
                stop.clone(),
            )
            .await?;
            Some(review::router(state, Arc::clone(&limits)))
        }
        None => None,
    };
    let mut app = router::router(router::Routes {
        handler: MemoryServer::per_request(Arc::clone(&store), options.tools),
        mcp_config,
        auth,
        limits,
        peers,
        store,
        app: options.app.clone(),
        metadata,
    });
    if let Some(review) = review {
        app = app.merge(review);
    }
    let grace = options.request_timeout + Duration::from_secs(1);
    let metrics_stop = CancellationToken::new();
    if let Some(prometheus) = prometheus {
        match metrics_listener {
            None => app = app.merge(metrics::router(prometheus)),
            Some(listener) => {
                let addr = listener
                    .local_addr()
                    .map_err(|err| CliError::io("cannot read the metrics address", &err))?;
                let settings = connections::Settings {
                    max_connections: METRICS_CONNECTIONS,
                    idle_timeout: options.idle_timeout,
                    h2c: false,
                    grace: Duration::from_secs(1),
                };
                let server = connections::serve(
                    listener,
                    None,
                    metrics::router(prometheus),
                    settings,
                    metrics_stop.clone(),
                );
                tokio::spawn(async move {
                    if let Err(err) = server.await {
                        tracing::error!(error = %err, "the metrics listener failed");
                    }
                });
                crate::progress::announce(&format!(
                    "agent-memory metrics at http://{addr}{}",
                    metrics::PATH
                ));
            }
        }
    }

    let shutdown = CancellationToken::new();
    tokio::spawn(shut_down_on_signal(shutdown.clone()));
    tracing::info!(tools = ?options.tools, tls = tls.is_some(), "agent-memory MCP server starting");
    crate::progress::announce(&format!(
        "agent-memory MCP server listening on {scheme}://{local}/mcp"
    ));
    let settings = connections::Settings {
        max_connections: options.max_connections,
        idle_timeout: options.idle_timeout,
        h2c: options.h2c,
        grace,
    };
    let served = connections::serve(listener, tls, app, settings, shutdown).await;
    metrics_stop.cancel();
    served.map_err(|err| CliError::io("the HTTP server failed", &err))?;
    tracing::info!("agent-memory MCP server stopped");
    Ok(())
}

/// Waits for SIGTERM or SIGINT, then starts the graceful shutdown: no new connections,
/// requests in flight get the grace period to finish.
async fn shut_down_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        tracing::error!("cannot listen for SIGTERM and SIGINT; stop the server with SIGKILL");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: finishing requests in flight, then stopping"),
        _ = int.recv() => tracing::info!("SIGINT: finishing requests in flight, then stopping"),
    }
    shutdown.cancel();
}
