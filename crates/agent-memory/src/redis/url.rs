//! The parts of a `redis://` URL: the scheme's deployment and transport, each host's
//! address, and the credentials and database every node gets.

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use super::config::{Deployment, DEFAULT_PORT};
use crate::connection_url::{ConnectionUrl, HostPort};
use crate::error::{MemoryError, Result};

/// How a scheme reaches its nodes; [`address`] turns it into the driver's address, and nothing
/// else needs to know. Cluster nodes found by discovery get the seeds' transport from the
/// driver, so on a `rediss+cluster` URL every node connection uses TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Transport {
    Tcp,
    Tls,
}

/// The deployment and transport of a (lowercase) scheme.
pub(super) fn scheme(scheme: &str) -> Result<(Deployment, Transport)> {
    match scheme {
        "redis" => Ok((Deployment::Single, Transport::Tcp)),
        "redis+cluster" => Ok((Deployment::Cluster, Transport::Tcp)),
        "rediss" => Ok((Deployment::Single, Transport::Tls)),
        "rediss+cluster" => Ok((Deployment::Cluster, Transport::Tls)),
        _ => Err(MemoryError::invalid("url", "has an unknown scheme")),
    }
}

pub(super) fn no_host() -> MemoryError {
    MemoryError::invalid("url", "names no host")
}

/// The driver address of one URL host: the one place that decides the address kind.
pub(super) fn address(transport: Transport, node: &HostPort) -> Result<ConnectionAddr> {
    if node.host.is_empty() {
        return Err(no_host());
    }
    // The driver's own URL parser refuses these too: they name no server to connect to.
    if matches!(node.host.as_str(), "0.0.0.0" | "::") {
        return Err(MemoryError::invalid("url", "names a wildcard address, not a server"));
    }
    let port = node.port.unwrap_or(DEFAULT_PORT);
    Ok(match transport {
        Transport::Tcp => ConnectionAddr::Tcp(node.host.clone(), port),
        // Verified against the system's CAs until `build` adds the URL's files.
        Transport::Tls => ConnectionAddr::TcpTls {
            host: node.host.clone(),
            port,
            insecure: false,
            tls_params: None,
        },
    })
}

/// The connection info of one node: its address, then the URL's credentials and database.
pub(super) fn node_info(
    transport: Transport,
    node: &HostPort,
    settings: &RedisConnectionInfo,
) -> Result<ConnectionInfo> {
    let info = address(transport, node)?
        .into_connection_info()
        .map_err(|_| MemoryError::invalid("url", "is not a valid Redis URL"))?;
    Ok(info.set_redis_settings(settings.clone()).set_tcp_settings(tcp_settings()))
}

/// The socket settings of every connection: `TCP_NODELAY`, as hiredis and redis-py set it
/// (redis-rs does not by default). Calls are small writes of a request/response protocol; with
/// Nagle's algorithm one waits for the acknowledgement of the previous, which only adds
/// latency (TLS records make such writes more frequent).
pub(super) fn tcp_settings() -> redis::io::tcp::TcpSettings {
    redis::io::tcp::TcpSettings::default().set_nodelay(true)
}

/// The database number of a single-server URL's path: `/N`, or 0 when there is none.
pub(super) fn database(path: &str) -> Result<i64> {
    match path.strip_prefix('/').unwrap_or(path) {
        "" => Ok(0),
        number => number
            .parse::<u32>()
            .map(i64::from)
            .map_err(|_| MemoryError::invalid("url", "has a path that is not a database number")),
    }
}

/// The URL's credentials and database `db`, which every node of the URL gets.
pub(super) fn settings(url: &ConnectionUrl, db: i64) -> RedisConnectionInfo {
    let mut settings = RedisConnectionInfo::default().set_db(db);
    if !url.username.is_empty() {
        settings = settings.set_username(&url.username);
    }
    if let Some(password) = &url.password {
        settings = settings.set_password(password);
    }
    settings
}
