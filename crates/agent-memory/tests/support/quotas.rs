//! Quotas as URL parameters, for fixtures that open their stores from a URL.

use agent_memory::Quotas;

/// `url` with `max_records_per_user` and `max_bytes_per_user` appended as set in `quotas`.
pub fn url_with(url: &str, quotas: Quotas) -> String {
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
