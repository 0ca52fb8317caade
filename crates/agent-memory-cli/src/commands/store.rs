//! The store's lifecycle, owned in one place for every command, `mcp` included.

use std::future::Future;
use std::sync::Arc;

use agent_memory::{MemoryError, MemoryStore};

use crate::exit::{CliError, CliResult};

/// Opens the store of `--store` (without one, the default SQLite file in the user's data
/// directory), starts it, which creates or checks its schema, lends it to `work`, and closes it
/// once `work` is done, whether `work` succeeded or not.
///
/// `work`'s own error wins over a failed close; a failed close after a successful `work` is
/// reported, because for a file store it can mean the last writes did not reach disk. A store
/// that failed to start is not closed: it never held anything to flush.
///
/// The URL is never logged or quoted here: it may carry a password (the store's `Debug`, which
/// the log line uses, hides it).
///
/// With `lifetime` [`Lifetime::OneRun`], a SQLite store reads its file without a memory map
/// unless the URL sets `mmap_size`: a command that runs once reads each page once or twice,
/// where a map saves nothing, and pages mapped by each of the store's reader connections would
/// count in the process's resident memory once per connection, so a whole-application export or
/// migration would appear to grow with the file. Only the long-lived MCP server maps the file.
pub async fn with_store<F, Fut>(
    url: Option<&str>,
    lifetime: Lifetime,
    access: Access,
    work: F,
) -> CliResult
where
    F: FnOnce(Arc<dyn MemoryStore>) -> Fut,
    Fut: Future<Output = CliResult>,
{
    let url = match url {
        Some(url) => url.to_owned(),
        None => agent_memory::default_store_url()?,
    };
    let store = open_started(&url, lifetime, access).await?;
    let result = work(Arc::clone(&store)).await;
    let closed = store.close().await.map_err(CliError::from);
    result.and(closed)
}

/// Opens and starts the store of `url` as [`with_store`] does: `~` expanded in a `sqlite:`
/// path, a value without a scheme refused with the schemes that exist, the file map off for
/// [`Lifetime::OneRun`], and with [`Access::Existing`] a SQLite file opened only if it exists
/// (`no store at PATH`, exit 2, creating nothing).
///
/// # Errors
/// `Invalid` for a bad URL or a missing SQLite file with [`Access::Existing`]; the store's
/// error when it fails to start.
pub async fn open_started(
    url: &str,
    lifetime: Lifetime,
    access: Access,
) -> CliResult<Arc<dyn MemoryStore>> {
    let (url, store) = opened(url, lifetime, access)?;
    tracing::debug!(store = ?store, "starting the store");
    match store.start().await {
        Ok(()) => Ok(store),
        Err(MemoryError::Invalid { field: "path", .. }) => Err(no_store_at(&url)),
        Err(err) => Err(err.into()),
    }
}

/// Checks that the store of `url` can be reached and started (its schema created or checked,
/// as `setup` does), then closes it: `migrate --dry-run --to`. A SQLite file that does not
/// exist yet is not created; false then (a migration would create it).
///
/// # Errors
/// As [`open_started`], but for a missing SQLite file.
pub async fn check_reachable(url: &str) -> CliResult<bool> {
    let (_, store) = opened(url, Lifetime::OneRun, Access::Existing)?;
    match store.start().await {
        Ok(()) => store.close().await.map(|()| true).map_err(CliError::from),
        Err(MemoryError::Invalid { field: "path", .. }) => Ok(false),
        Err(err) => Err(err.into()),
    }
}

/// The URL as [`open_started`] rewrites it, and the unstarted store it names.
fn opened(
    url: &str,
    lifetime: Lifetime,
    access: Access,
) -> CliResult<(String, Arc<dyn MemoryStore>)> {
    let mut url = home_expanded(url)?;
    if lifetime == Lifetime::OneRun {
        url = without_file_map(url);
    }
    if access == Access::Existing {
        url = with_sqlite_param(url, "mode", "rw");
    }
    let store = agent_memory::open(&url).map_err(|err| with_scheme_hint(&url, err))?;
    Ok((url, store))
}

/// Whether a command may create the store it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads and erasures: a SQLite file must exist already, so a mistyped path fails
    /// instead of leaving an empty database and its folders behind.
    Existing,
    /// Writes, `setup` and the servers: a missing SQLite file (and its folders) is created.
    Create,
}

/// The one line for a missing SQLite file opened with [`Access::Existing`].
fn no_store_at(url: &str) -> CliError {
    let path = agent_memory::sqlite::SqliteMemoryStore::from_url(url)
        .map(|store| store.path().display().to_string())
        .unwrap_or_else(|_| "the sqlite: path".to_owned());
    CliError::invalid(format!("no store at {path} (writes and setup create it)"))
}

/// The URL forms `--store` and `--to` accept, for the errors that list them: every provider
/// this build has, as the library registers them.
fn schemes() -> String {
    let forms: Vec<&str> = agent_memory::provider::registrations()
        .iter()
        .filter(|provider| provider.is_built())
        .flat_map(|provider| provider.forms.iter().copied())
        .collect();
    match forms.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A value with no scheme at all (`/tmp/x.db`) gets the schemes listed and, since it is
/// surely a path, the `sqlite:` URL it probably meant; an unknown scheme gets the list. The
/// URL itself is never repeated (it may hold a password); a value without a `:` has none.
fn with_scheme_hint(url: &str, err: MemoryError) -> CliError {
    if !url.contains(':') {
        return CliError::invalid(format!(
            "invalid store URL: it has no scheme; use {} (for a SQLite file: sqlite:{url})",
            schemes()
        ));
    }
    let unknown = err.to_string().contains("unknown scheme");
    let err = CliError::from(err);
    if unknown {
        return CliError::new(err.kind(), format!("{}; use {}", err.message(), schemes()));
    }
    err
}

/// `url` with a leading `~` of a `sqlite:` path replaced by `$HOME`, as a shell would have
/// done had the path stood alone: `sqlite:~/m.db` names `$HOME/m.db`, never a folder named
/// `~`. `~NAME` (another user's home) is refused rather than guessed. Other URLs unchanged.
fn home_expanded(url: &str) -> CliResult<String> {
    let Some(scheme) = url.get(..7).filter(|s| s.eq_ignore_ascii_case("sqlite:")) else {
        return Ok(url.to_owned());
    };
    let rest = &url[7..];
    let (slashes, path) = match rest.strip_prefix("//") {
        Some(path) => ("//", path),
        None => ("", rest),
    };
    let Some(after) = path.strip_prefix('~') else { return Ok(url.to_owned()) };
    if !(after.is_empty() || after.starts_with(['/', '?'])) {
        return Err(CliError::invalid(
            "invalid store URL: ~NAME is not expanded in a sqlite: path; write the full path",
        ));
    }
    let home = std::env::var_os("HOME").filter(|home| !home.is_empty()).ok_or_else(|| {
        CliError::invalid("invalid store URL: sqlite:~ needs HOME set; write the full path")
    })?;
    let home = home.to_string_lossy();
    // The characters a URL gives a meaning to, so the URL names exactly the home folder.
    let home = home.replace('%', "%25").replace('?', "%3F").replace('#', "%23");
    let slashes = if home.starts_with('/') { "" } else { slashes };
    Ok(format!("{scheme}{slashes}{home}{after}"))
}

/// How long the process keeps the store open, which decides whether a SQLite file is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// One command, then exit.
    OneRun,
    /// A server that answers many requests.
    Serving,
}

/// `url` with `mmap_size=0` added when it is a `sqlite:` URL that does not set `mmap_size`;
/// any other URL unchanged.
pub(super) fn without_file_map(url: String) -> String {
    with_sqlite_param(url, "mmap_size", "0")
}

/// `url` with `name=value` added when it is a `sqlite:` URL that does not set `name`; any
/// other URL unchanged.
fn with_sqlite_param(url: String, name: &str, value: &str) -> String {
    let is_sqlite = url.get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("sqlite:"));
    // A fragment is refused by the URL parser anyway; leave such a URL for it to refuse.
    if !is_sqlite || url.contains('#') {
        return url;
    }
    let (separator, params) = match url.split_once('?') {
        Some((_, params)) => ("&", params),
        None => ("?", ""),
    };
    let sets_it = params.split('&').any(|param| param.split('=').next() == Some(name));
    if sets_it {
        return url;
    }
    let separator = if params.is_empty() && url.ends_with('?') { "" } else { separator };
    format!("{url}{separator}{name}={value}")
}

#[cfg(test)]
mod tests {
    use super::{home_expanded, with_sqlite_param, without_file_map};

    #[test]
    fn a_leading_tilde_of_a_sqlite_path_is_home() {
        let home = std::env::var("HOME").expect("HOME");
        for (url, expected) in [
            ("sqlite:~/m.db", format!("sqlite:{home}/m.db")),
            ("sqlite://~/m.db", format!("sqlite:{home}/m.db")),
            ("sqlite:~/m.db?readers=1", format!("sqlite:{home}/m.db?readers=1")),
            ("sqlite:m~.db", "sqlite:m~.db".to_owned()),
            ("postgres://~u@h/db", "postgres://~u@h/db".to_owned()),
        ] {
            assert_eq!(home_expanded(url).expect(url), expected, "{url}");
        }
        assert!(home_expanded("sqlite:~root/m.db").is_err());
        assert_eq!(
            with_sqlite_param("sqlite:m.db?mode=ro".to_owned(), "mode", "rw"),
            "sqlite:m.db?mode=ro"
        );
        assert_eq!(
            with_sqlite_param("sqlite:m.db".to_owned(), "mode", "rw"),
            "sqlite:m.db?mode=rw"
        );
    }

    #[test]
    fn one_run_sqlite_urls_turn_the_map_off_unless_they_set_it() {
        for (url, expected) in [
            ("sqlite:m.db", "sqlite:m.db?mmap_size=0"),
            ("SQLite:///srv/m.db", "SQLite:///srv/m.db?mmap_size=0"),
            ("sqlite:m.db?readers=2", "sqlite:m.db?readers=2&mmap_size=0"),
            ("sqlite:m.db?", "sqlite:m.db?mmap_size=0"),
            ("sqlite:m.db?mmap_size=4096", "sqlite:m.db?mmap_size=4096"),
            ("sqlite:m.db?readers=1&mmap_size=0", "sqlite:m.db?readers=1&mmap_size=0"),
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("memory:", "memory:"),
            ("redis://h:6379", "redis://h:6379"),
        ] {
            assert_eq!(without_file_map(url.to_owned()), expected, "{url}");
        }
        let url = "sqlite:m.db?mmap_size=0";
        agent_memory::open(&without_file_map("sqlite:m.db".to_owned())).expect(url);
    }
}
