//! The conformance fixture of a provider opened from a URL.

use std::sync::Arc;

use agent_memory::conformance::Fixture;
use agent_memory::{MemoryStore, Quotas};

/// The fixture of the store `open` makes from `url`: a second instance from the same URL as its
/// replica (its own connections: another replica of the service), and instances with quotas
/// from the URL with those options appended.
pub fn from_url<S, F>(url: String, open: F) -> Fixture
where
    S: MemoryStore + 'static,
    F: Fn(&str) -> agent_memory::Result<S> + Send + Sync + 'static,
{
    let open = Arc::new(open);
    let instance = {
        let open = Arc::clone(&open);
        move |url: &str| -> Arc<dyn MemoryStore> {
            Arc::new(open(url).unwrap_or_else(|err| panic!("a valid test URL: {err}")))
        }
    };
    Fixture::new(instance(&url))
        .with_replica(instance(&url))
        .with_quotas(move |quotas| instance(&url_with(&url, quotas)))
}

/// `url` with `max_records_per_user` and `max_bytes_per_user` appended as set in `quotas`.
fn url_with(url: &str, quotas: Quotas) -> String {
    let mut url = url.to_owned();
    let limits =
        [("max_records_per_user", quotas.records()), ("max_bytes_per_user", quotas.bytes())];
    for (name, limit) in limits {
        if let Some(limit) = limit {
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(&format!("{name}={limit}"));
        }
    }
    url
}
