//! The one place driver and pool errors become [`MemoryError`]s.

use super::schema::{BYTES_EXCEEDED, RECORDS_EXCEEDED};
use crate::error::{BoxError, MemoryError};
use crate::quota::{Quotas, MAX_BYTES_PER_USER, MAX_RECORDS_PER_USER};

/// The provider name in [`MemoryError::Storage`].
pub(crate) const PROVIDER: &str = "postgres";

/// Maps a driver, pool or row-decoding error to [`MemoryError::Storage`] with a fixed `what`
/// and the driver's error as its source.
///
/// The driver's message (which may quote SQL, values or server detail) is reachable only
/// through [`std::error::Error::source`]; `Display` shows `what` alone. Connection URLs and
/// passwords are never part of either: the driver does not echo them and we never format them.
pub(crate) fn storage<E: Into<BoxError>>(what: &'static str) -> impl FnOnce(E) -> MemoryError {
    move |err| MemoryError::storage_from(PROVIDER, what, err)
}

/// Like [`storage`], for errors opening a connection: when TLS caused the failure, the
/// description says so and names the cause (see [`crate::tls::describe_failure`]), so an
/// operator reading only `Display` knows to look at the TLS settings.
pub(crate) fn connect_failed(
    what: &'static str,
) -> impl FnOnce(deadpool_postgres::PoolError) -> MemoryError {
    move |err| MemoryError::storage_from(PROVIDER, tls_failure(&err).unwrap_or(what), err)
}

/// The TLS sentence for a connection error, if TLS caused it.
fn tls_failure(err: &deadpool_postgres::PoolError) -> Option<&'static str> {
    if let Some(described) = crate::tls::describe_failure(err) {
        return Some(described);
    }
    let deadpool_postgres::PoolError::Backend(driver) = err else { return None };
    // tokio-postgres reports its own TLS-stage failures (the server refusing TLS, no host name
    // to check) with a fixed text and an untyped cause; tests/postgres_tls.rs pins both.
    if driver.to_string() != "error performing TLS handshake" {
        return None;
    }
    let cause = std::error::Error::source(driver).map(ToString::to_string);
    Some(if cause.as_deref() == Some("server does not support TLS") {
        "TLS: the server does not accept TLS connections, and sslmode requires them"
    } else {
        "TLS: the handshake with the server failed"
    })
}

/// Turns the usage trigger's quota errors ([`RECORDS_EXCEEDED`], [`BYTES_EXCEEDED`]) into
/// [`MemoryError::QuotaExceeded`] with the store's limit; every other error passes unchanged.
/// The trigger raised them inside the write's statement, so the write did not happen.
pub(crate) fn quota_exceeded(err: MemoryError, quotas: &Quotas) -> MemoryError {
    let code = match &err {
        MemoryError::Storage { source: Some(source), .. } => source
            .downcast_ref::<tokio_postgres::Error>()
            .and_then(tokio_postgres::Error::as_db_error)
            .map(|db| db.code().code().to_owned()),
        _ => None,
    };
    match (code.as_deref(), quotas.records(), quotas.bytes()) {
        (Some(RECORDS_EXCEEDED), Some(limit), _) => {
            MemoryError::quota_exceeded(MAX_RECORDS_PER_USER, limit)
        }
        (Some(BYTES_EXCEEDED), _, Some(limit)) => {
            MemoryError::quota_exceeded(MAX_BYTES_PER_USER, limit)
        }
        _ => err,
    }
}
