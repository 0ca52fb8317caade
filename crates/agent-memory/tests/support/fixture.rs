//! The conformance fixture of a provider opened from a URL.

use std::sync::Arc;

use agent_memory::conformance::{Bounds, Fixture};
use agent_memory::MemoryStore;

/// The fixture of the store `open` makes from `url`: a second instance from the same URL as its
/// replica (its own connections: another replica of the service), and instances with quotas or
/// with scan and batch bounds from the URL with those options appended.
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
    let (quota_url, quota_instance) = (url.clone(), instance.clone());
    Fixture::new(instance(&url))
        .with_replica(instance(&url))
        .with_quotas(move |quotas| {
            let limits = [
                ("max_records_per_user", quotas.records().map(|n| n.to_string())),
                ("max_bytes_per_user", quotas.bytes().map(|n| n.to_string())),
            ];
            quota_instance(&with_params(&quota_url, limits))
        })
        .with_bounds(move |bounds: Bounds| {
            let count = |value: Option<usize>| value.map(|n| n.to_string());
            let limits = [
                ("search_scan_limit", count(bounds.search_scan_limit)),
                ("search_scan_bytes", count(bounds.search_scan_bytes)),
                ("erase_batch_size", count(bounds.erase_batch_size)),
            ];
            instance(&with_params(&url, limits))
        })
}

/// `url` with each parameter that has a value appended.
fn with_params<const N: usize>(url: &str, params: [(&str, Option<String>); N]) -> String {
    let mut url = url.to_owned();
    for (name, value) in params {
        if let Some(value) = value {
            url = with_param(&url, &format!("{name}={value}"));
        }
    }
    url
}

/// `url` with `param` (`name=value`, or several joined by `&`) appended to its query.
pub fn with_param(url: &str, param: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{param}")
}
