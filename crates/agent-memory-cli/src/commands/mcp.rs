//! `mcp`: on stdio for the scope of the global options, or with `--listen` over HTTP for the
//! users of the credentials it accepts; the servers themselves are in [`crate::mcp`].

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_memory::{MemoryScope, MemoryStore};
use clap::{Args, Subcommand};

use super::globals::Globals;
use crate::duration;
use crate::exit::{CliError, CliResult};
use crate::mcp::http::{provider_of, HttpOptions, JwtSettings, MetricsAt, ReviewSettings};
use crate::mcp::ToolSet;

/// The `mcp` command, as clap parses it.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the memory tools over MCP: on stdio for the scope given by the global options, or
    /// with --listen over HTTP for many users, each request's user taken from its credential.
    Mcp {
        /// Which tools to expose.
        #[arg(long, value_enum, default_value = "keys")]
        tools: ToolSet,
        #[command(flatten)]
        http: Box<HttpArgs>,
    },
}

/// The options of the HTTP server; each one needs `--listen`.
#[derive(Debug, Args)]
pub struct HttpArgs {
    /// Serve MCP over Streamable HTTP at /mcp on this address (IP:PORT, e.g. 127.0.0.1:8080)
    /// instead of stdio. Needs --app and a credential source (--api-keys or --jwt-*); the user
    /// comes from each request's credential, never from a flag.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// Accept the API keys of this file (made with `agent-memory api-key add`); re-read when
    /// it changes.
    #[arg(long, value_name = "FILE", requires = "listen")]
    api_keys: Option<PathBuf>,

    /// Accept OAuth access tokens (JWTs) from this issuer (`iss`).
    #[arg(long, value_name = "ISS", requires_all = ["listen", "jwt_audience", "jwt_keys"])]
    jwt_issuer: Option<String>,

    /// The audience (`aud`) tokens must be meant for: usually this server's /mcp URL.
    #[arg(long, value_name = "AUD", requires = "jwt_issuer")]
    jwt_audience: Option<String>,

    /// The issuer's public keys: a JWKS document or PEM public keys (RS256, ES256, EdDSA);
    /// re-read when it changes.
    #[arg(long, value_name = "FILE", requires = "jwt_issuer")]
    jwt_keys: Option<PathBuf>,

    /// The token claim that names the user.
    #[arg(long, value_name = "NAME", default_value = "sub", requires = "jwt_issuer")]
    jwt_user_claim: String,

    /// The token claim that names the namespace; the default namespace when absent.
    #[arg(long, value_name = "NAME", requires = "jwt_issuer")]
    jwt_namespace_claim: Option<String>,

    /// Also allow this Host (a name, or name:port); loopback names are always allowed.
    #[arg(long, value_name = "HOST", requires = "listen")]
    allowed_host: Vec<String>,

    /// Also allow browser requests from this Origin (`scheme://host:port`, `:*` for any port);
    /// loopback origins are always allowed, requests without Origin are not affected.
    #[arg(long, value_name = "ORIGIN", requires = "listen")]
    allowed_origin: Vec<String>,

    /// Requests per second each user may send (bursts up to the same number); 429 beyond.
    #[arg(long, value_name = "N/s", default_value = "20/s", value_parser = parse_rate, requires = "listen")]
    rate_limit: NonZeroU32,

    /// Requests served at once, over all users; more wait for their turn within the timeout.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096), requires = "listen")]
    max_concurrent: u32,

    /// How long one request may take before it is answered with 503: 30s, 2m.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration::parse, requires = "listen")]
    request_timeout: Duration,

    /// Connections open at once; more wait in the listen queue until one closes. Keep it below
    /// the process's descriptor limit (`ulimit -n`), minus the store's connections.
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=1_000_000), requires = "listen")]
    max_connections: u32,

    /// Close a connection (HTTP/1 or HTTP/2) that has had no authenticated request for this
    /// long: 30s, 2m.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration::parse, requires = "listen")]
    idle_timeout: Duration,

    /// Also speak cleartext HTTP/2 (h2c, prior knowledge) on a plain listener. Off by default:
    /// without TLS the server speaks HTTP/1.1 only (HTTP/2 over TLS is negotiated with ALPN).
    #[arg(long, requires = "listen")]
    h2c: bool,

    /// Failed authentications per second each peer address may cause (bursts up to the same
    /// number); beyond that, every request from it gets 429 until the allowance refills.
    #[arg(long, value_name = "N/s", default_value = "20/s", value_parser = parse_rate, requires = "listen")]
    peer_failure_limit: NonZeroU32,

    /// Serve HTTPS with this PEM certificate chain (needs --tls-key).
    #[arg(long, value_name = "FILE", requires_all = ["listen", "tls_key"])]
    tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// The URL clients reach this server at (e.g. `https://memory.example.com`), named in the
    /// OAuth metadata; by default the scheme and address it listens on.
    #[arg(long, value_name = "URL", requires = "listen")]
    public_url: Option<String>,

    /// Serve the store's metrics in Prometheus's text format at /metrics (no credential
    /// needed; they hold no ids, keys or content), beside /mcp unless --metrics-listen is given.
    #[arg(long, requires = "listen")]
    metrics: bool,

    /// Serve /metrics on this address (IP:PORT, plain HTTP) instead of beside /mcp, so it need
    /// not be reachable where /mcp is. Implies --metrics.
    #[arg(long, value_name = "ADDR", requires = "listen")]
    metrics_listen: Option<SocketAddr>,

    /// Serve the review page under /review/, where end users signed in by a link from
    /// `review-link` see, edit, download and erase their memories. FILE holds the links'
    /// secret (at least 32 bytes, mode 0600); re-read when it changes.
    #[arg(long, value_name = "FILE", requires = "listen")]
    review_key_file: Option<PathBuf>,
}

/// A checked `mcp` command: stdio for one scope, or HTTP for many users.
#[derive(Debug)]
pub enum Job {
    Stdio { scope: MemoryScope, tools: ToolSet },
    Http(Box<HttpOptions>),
}

impl Command {
    /// Checks the scope: on stdio, without `--app` and `--user` the server refuses to start;
    /// with `--listen`, `--app` is required and `--user` and `--namespace` are refused (the
    /// user and namespace come from each request's credential).
    ///
    /// # Errors
    /// `Invalid` for a missing or bad scope, a user or namespace given with `--listen`,
    /// `--listen` without a credential source, or a key or TLS file that cannot be used.
    pub fn prepare(self, globals: &Globals) -> CliResult<Job> {
        let Command::Mcp { tools, http } = self;
        let http = *http;
        let Some(listen) = http.listen else {
            return Ok(Job::Stdio { scope: globals.scope()?, tools });
        };
        if globals.user.is_some() || globals.namespace.is_some() {
            return Err(CliError::invalid(
                "mcp --listen serves many users: each request's user and namespace come from its \
                 credential, so --user and --namespace (AGENT_MEMORY_USER, AGENT_MEMORY_NAMESPACE) \
                 cannot be given",
            ));
        }
        let app = globals.app.clone().ok_or_else(|| {
            CliError::invalid("no application id: pass --app or set AGENT_MEMORY_APP")
        })?;
        // The same rules as every scope's application id.
        MemoryScope::new(app.clone(), "u")?;
        let jwt = http.jwt_issuer.map(|issuer| JwtSettings {
            issuer,
            audience: http.jwt_audience.unwrap_or_default(),
            keys: http.jwt_keys.unwrap_or_default(),
            user_claim: http.jwt_user_claim,
            namespace_claim: http.jwt_namespace_claim,
        });
        if http.api_keys.is_none() && jwt.is_none() {
            return Err(CliError::invalid(
                "mcp --listen needs a way to authenticate requests: --api-keys FILE, or \
                 --jwt-issuer with --jwt-audience and --jwt-keys",
            ));
        }
        if let Some(url) = &http.public_url {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(CliError::invalid("--public-url must start with https:// or http://"));
            }
        }
        let max_concurrent = usize::try_from(http.max_concurrent).unwrap_or(usize::MAX);
        let options = HttpOptions {
            listen,
            app,
            tools,
            api_keys: http.api_keys,
            jwt,
            allowed_hosts: http.allowed_host,
            allowed_origins: http.allowed_origin,
            rate_per_second: http.rate_limit,
            max_concurrent,
            request_timeout: http.request_timeout,
            max_connections: usize::try_from(http.max_connections).unwrap_or(usize::MAX),
            idle_timeout: http.idle_timeout,
            h2c: http.h2c,
            peer_failure_limit: http.peer_failure_limit,
            tls: http.tls_cert.zip(http.tls_key),
            public_url: http.public_url,
            metrics: match (http.metrics_listen, http.metrics) {
                (Some(addr), _) => Some(MetricsAt::Separate(addr)),
                (None, true) => Some(MetricsAt::Beside),
                (None, false) => None,
            },
            review: http.review_key_file.map(|key_file| ReviewSettings {
                key_file,
                provider: provider_of(globals.store.as_deref()),
            }),
        };
        // A key file or certificate that cannot be used never opens (or creates) the store.
        crate::mcp::http::check(&options)?;
        Ok(Job::Http(Box::new(options)))
    }
}

/// `N/s` as a rate of at least one request per second.
fn parse_rate(text: &str) -> Result<NonZeroU32, String> {
    let count = text.strip_suffix("/s").ok_or_else(|| {
        format!("`{text}` is not a rate: write requests per second as N/s, e.g. 20/s")
    })?;
    count
        .parse::<NonZeroU32>()
        .ok()
        .filter(|n| n.get() <= 1_000_000)
        .ok_or_else(|| format!("`{text}`: the rate must be 1/s to 1000000/s"))
}

/// Serves MCP until the client closes stdin (stdio) or until SIGTERM or SIGINT (HTTP). The
/// scope, or the credentials that give each request its scope, come from trusted options; an
/// MCP client can never choose them. Takes no output: on stdio, stdout belongs to the
/// protocol.
pub async fn run(job: Job, store: Arc<dyn MemoryStore>) -> CliResult {
    match job {
        Job::Stdio { scope, tools } => {
            // The scope names the user: it stays out of the log.
            tracing::info!(?tools, "serving MCP on stdio");
            crate::mcp::serve_stdio(store, scope, tools)
                .await
                .map_err(|err| CliError::failure(format!("the MCP server stopped: {err}")))
        }
        Job::Http(options) => crate::mcp::http::serve(store, *options).await,
    }
}

#[cfg(test)]
mod tests {
    use super::parse_rate;

    #[test]
    fn rates_are_requests_per_second() {
        assert_eq!(parse_rate("20/s").unwrap().get(), 20);
        for bad in ["20", "0/s", "-1/s", "20/m", "x/s", "2000000/s"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }
}
