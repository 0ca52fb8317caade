//! The parameters of a `postgres://` URL: the store's own options, TLS, and the driver's
//! connection settings, each taken by name so that any other is refused.

use std::net::IpAddr;
use std::path::PathBuf;

use tokio_postgres::config::{ChannelBinding, LoadBalanceHosts, TargetSessionAttrs};

use super::config::{PostgresMemoryStoreBuilder, DEFAULT_PORT};
use super::tls::{RootCert, SslMode, TlsSettings};
use crate::connection_url::Params;
use crate::error::{MemoryError, Result};

/// Takes the store's own parameters, each named after the builder method it calls; the
/// builder's `build` checks their ranges.
pub(super) fn store_params(
    mut builder: PostgresMemoryStoreBuilder,
    params: &mut Params,
) -> Result<PostgresMemoryStoreBuilder> {
    if let Some(schema) = params.take("schema") {
        builder = builder.schema(schema);
    }
    if let Some(table) = params.take("table") {
        builder = builder.table(table);
    }
    if let Some(min) = params.take_parsed("min_connections")? {
        builder = builder.min_connections(min);
    }
    if let Some(max) = params.take_parsed("max_connections")? {
        builder = builder.max_connections(max);
    }
    if let Some(setup) = params.take_bool("setup_schema")? {
        builder = builder.setup_schema(setup);
    }
    if let Some(timeout) = params.take_seconds("connect_timeout")? {
        builder = builder.connect_timeout(timeout);
    }
    if let Some(timeout) = params.take_seconds("acquire_timeout")? {
        builder = builder.acquire_timeout(timeout);
    }
    if let Some(writes) = params.take_parsed("write_batch_max")? {
        builder = builder.write_batch_max(writes);
    }
    if let Some(connections) = params.take_parsed("write_connections")? {
        builder = builder.write_connections(connections);
    }
    if let Some(prepared) = params.take_bool("prepared_statements")? {
        builder = builder.prepared_statements(prepared);
    }
    builder.options.common.take_params(params)?;
    Ok(builder)
}

/// Takes libpq's TLS parameters; [`tls::resolve`] checks them and reads the files at `build`.
pub(super) fn tls_params(params: &mut Params) -> Result<TlsSettings> {
    let mode =
        match params.take("sslmode") {
            None => None,
            // libpq's `allow` (plain first, TLS only if the server insists) has no driver support.
            Some(word) if word == "allow" => return Err(MemoryError::invalid(
                "url",
                "has a value for `sslmode`, allow, that is not supported: use prefer, require, \
                 verify-ca or verify-full",
            )),
            Some(word) => Some(SslMode::parse(&word).ok_or_else(|| {
                MemoryError::invalid(
                    "url",
                    "has a value for `sslmode` that is not one of disable, prefer, require, \
                 verify-ca, verify-full",
                )
            })?),
        };
    let root_cert = params.take("sslrootcert").map(|value| match value.as_str() {
        "system" => RootCert::System,
        _ => RootCert::File(PathBuf::from(value)),
    });
    let cert = params.take("sslcert").map(PathBuf::from);
    let key = params.take("sslkey").map(PathBuf::from);
    Ok(TlsSettings { mode, root_cert, cert, key })
}

/// The servers a URL names: hosts (names, addresses or Unix socket directories) and ports, in
/// the order written.
pub(super) struct Servers {
    pub(super) hosts: Vec<String>,
    pub(super) ports: Vec<u16>,
}

/// Takes the libpq parameters tokio-postgres has a setter for and sets them, and the URL's
/// `servers`, on `config`.
///
/// As in libpq, a parameter replaces what the URL itself says: `user`, `password` and
/// `dbname` the credentials and path, `host` and `port` the URL's host list and their ports.
/// `connect_timeout` is ours (see [`store_params`]); the pool sets it on the driver too.
pub(super) fn driver_params(
    config: &mut tokio_postgres::Config,
    mut servers: Servers,
    params: &mut Params,
) -> Result<()> {
    if let Some(user) = params.take("user") {
        config.user(user);
    }
    if let Some(password) = params.take("password") {
        config.password(password);
    }
    if let Some(dbname) = params.take("dbname") {
        config.dbname(dbname);
    }
    if let Some(hosts) = params.take("host") {
        servers.hosts = hosts.split(',').map(str::to_owned).collect();
        if servers.hosts.iter().any(String::is_empty) {
            return Err(MemoryError::invalid("url", "has an empty entry in `host`"));
        }
    }
    if let Some(ports) = params.take("port") {
        // An empty entry is the default port, as in libpq's port lists.
        servers.ports = ports
            .split(',')
            .map(|port| if port.is_empty() { Ok(DEFAULT_PORT) } else { port.parse() })
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| malformed("port"))?;
    }
    let hostaddrs = match params.take("hostaddr") {
        None => Vec::new(),
        Some(addrs) => addrs
            .split(',')
            .map(str::parse::<IpAddr>)
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| malformed("hostaddr"))?,
    };
    // The driver checks these counts only when it connects; libpq refuses them up front.
    let servers_named = servers.hosts.len().max(hostaddrs.len());
    if !servers.hosts.is_empty() && !hostaddrs.is_empty() && servers.hosts.len() != hostaddrs.len()
    {
        return Err(MemoryError::invalid(
            "url",
            "has a `hostaddr` list that does not match its hosts",
        ));
    }
    if servers.ports.len() > 1 && servers.ports.len() != servers_named {
        return Err(MemoryError::invalid("url", "has a `port` list that does not match its hosts"));
    }
    for host in servers.hosts {
        // On Unix a host starting with `/` becomes a socket directory.
        config.host(host);
    }
    for addr in hostaddrs {
        config.hostaddr(addr);
    }
    for port in servers.ports {
        config.port(port);
    }
    if let Some(name) = params.take("application_name") {
        config.application_name(name);
    }
    if let Some(options) = params.take("options") {
        config.options(options);
    }
    if let Some(on) = params.take_parsed::<u64>("keepalives")? {
        config.keepalives(on != 0);
    }
    // For the three durations below zero means the system default, as in libpq: the driver
    // then keeps its own default, which is the same.
    if let Some(idle) = params.take_seconds("keepalives_idle")?.filter(|d| !d.is_zero()) {
        config.keepalives_idle(idle);
    }
    if let Some(interval) = params.take_seconds("keepalives_interval")?.filter(|d| !d.is_zero()) {
        config.keepalives_interval(interval);
    }
    if let Some(retries) = params.take_parsed::<u32>("keepalives_retries")? {
        config.keepalives_retries(retries);
    }
    // Seconds, as tokio-postgres has always read it here (libpq reads milliseconds).
    if let Some(timeout) = params.take_seconds("tcp_user_timeout")?.filter(|d| !d.is_zero()) {
        config.tcp_user_timeout(timeout);
    }
    let session = [
        ("any", TargetSessionAttrs::Any),
        ("read-write", TargetSessionAttrs::ReadWrite),
        ("read-only", TargetSessionAttrs::ReadOnly),
    ];
    if let Some(attrs) = take_choice(params, "target_session_attrs", &session)? {
        config.target_session_attrs(attrs);
    }
    let binding = [
        ("disable", ChannelBinding::Disable),
        ("prefer", ChannelBinding::Prefer),
        ("require", ChannelBinding::Require),
    ];
    if let Some(binding) = take_choice(params, "channel_binding", &binding)? {
        config.channel_binding(binding);
    }
    let balance = [("disable", LoadBalanceHosts::Disable), ("random", LoadBalanceHosts::Random)];
    if let Some(balance) = take_choice(params, "load_balance_hosts", &balance)? {
        config.load_balance_hosts(balance);
    }
    Ok(())
}

/// Takes parameter `name`, which must be one of the words in `choices`.
fn take_choice<T: Copy>(
    params: &mut Params,
    name: &'static str,
    choices: &[(&str, T)],
) -> Result<Option<T>> {
    let Some(value) = params.take(name) else { return Ok(None) };
    match choices.iter().find(|(word, _)| *word == value) {
        Some((_, choice)) => Ok(Some(*choice)),
        None => {
            let words: Vec<&str> = choices.iter().map(|(word, _)| *word).collect();
            Err(MemoryError::invalid(
                "url",
                format!("has a value for `{name}` that is not one of {}", words.join(", ")),
            ))
        }
    }
}

/// The error for a parameter whose value does not parse; the value is never shown.
fn malformed(name: &str) -> MemoryError {
    MemoryError::invalid("url", format!("has a malformed value for `{name}`"))
}
