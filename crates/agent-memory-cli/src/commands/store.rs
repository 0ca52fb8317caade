//! The store's lifecycle, owned in one place for every command, `mcp` included.

use std::future::Future;
use std::sync::Arc;

use agent_memory::MemoryStore;

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
pub async fn with_store<F, Fut>(url: Option<&str>, work: F) -> CliResult
where
    F: FnOnce(Arc<dyn MemoryStore>) -> Fut,
    Fut: Future<Output = CliResult>,
{
    let url = match url {
        Some(url) => url.to_owned(),
        None => agent_memory::default_store_url()?,
    };
    let store = agent_memory::open(&url)?;
    tracing::debug!(store = ?store, "starting the store");
    store.start().await?;
    let result = work(Arc::clone(&store)).await;
    let closed = store.close().await.map_err(CliError::from);
    result.and(closed)
}
