//! [`open`]: choose a provider at run time from a URL.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{MemoryError, Result};
use crate::store::MemoryStore;

/// Builds an unstarted store from a URL; call [`start`](MemoryStore::start) before use.
///
/// | URL | provider | feature |
/// | --- | --- | --- |
/// | `memory:`, `memory:?max_records_per_user=N` | [`InMemoryStore`](crate::InMemoryStore) | always |
/// | `sqlite:PATH` | `SqliteMemoryStore` (the file at `PATH`, created on first start unless `?mode=rw` or `?mode=ro` asks for an existing one) | `sqlite` |
/// | `postgres://…`, `postgresql://…` | `PostgresMemoryStore` | `postgres` |
/// | `redis://…`, `rediss://…` | `RedisMemoryStore` on one server | `redis` |
/// | `redis+cluster://host:port,host:port…`, `rediss+cluster://…` | `RedisMemoryStore` on a Redis Cluster | `redis` |
///
/// Every provider takes the [quota](crate#quotas) parameters `max_records_per_user` and
/// `max_bytes_per_user`. TLS settings are URL parameters (`sslmode`, `sslrootcert`, … for PostgreSQL; `cacert`,
/// `cert`, `key` for `rediss`); see each provider's guide and docs/managed-databases.md.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = agent_memory::open("memory:")?;
/// store.start().await?;
///
/// let err = agent_memory::open("ftp://example").unwrap_err();
/// assert_eq!(err.to_string(), "invalid url: has an unknown scheme");
/// # Ok::<(), agent_memory::MemoryError>(())
/// # }).unwrap();
/// ```
///
/// The providers and their schemes come from one table,
/// [`provider::registrations`](crate::provider::registrations).
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) for an unknown scheme, a scheme whose feature is not
/// enabled, or a URL the provider cannot parse. The message never repeats the URL, which may
/// hold a password.
pub fn open(url: &str) -> Result<Arc<dyn MemoryStore>> {
    match crate::provider::registration(url) {
        Some(provider) => provider.open(url),
        None => Err(MemoryError::invalid("url", "has an unknown scheme")),
    }
}

/// Where the CLI and the MCP server keep memories when no store is named: `memories.db` in an
/// `agent-memory` folder of the user's data directory (`$XDG_DATA_HOME`, else
/// `~/.local/share` on Linux; `~/Library/Application Support` on macOS; `%APPDATA%` on
/// Windows). The SQLite provider creates the folder and the file on first start.
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) when the platform reports no data directory (no home).
pub fn default_sqlite_path() -> Result<PathBuf> {
    let base = dirs::data_dir().ok_or_else(|| {
        MemoryError::invalid("store", "has no default: this system reports no data directory")
    })?;
    Ok(base.join("agent-memory").join("memories.db"))
}

/// The URL of [`default_sqlite_path`]: `sqlite:` followed by the path, with the characters a
/// URL gives a meaning to (`%`, `?`, `#`) percent-encoded, so the URL names exactly that file.
///
/// # Errors
/// As [`default_sqlite_path`].
pub fn default_store_url() -> Result<String> {
    Ok(sqlite_url(&default_sqlite_path()?))
}

/// `sqlite:` and `path`, percent-encoded where a URL parser would otherwise read it differently.
fn sqlite_url(path: &std::path::Path) -> String {
    use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
    const SPECIAL: &AsciiSet = &CONTROLS.add(b'%').add(b'?').add(b'#');
    format!("sqlite:{}", utf8_percent_encode(&path.to_string_lossy(), SPECIAL))
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    #[test]
    fn the_default_url_names_exactly_its_file() {
        let path = std::path::Path::new("/home/a%20b/#1/why?/memories.db");
        let store = crate::sqlite::SqliteMemoryStore::from_url(&super::sqlite_url(path)).unwrap();
        assert_eq!(store.path(), path);
    }
}
