//! `agent_memory.review_link`: a sign-in link to the review page, minted by the core's
//! [`agent_memory::review`] (the same code the server checks links with).

use std::path::PathBuf;
use std::time::Duration;

use agent_memory::review::{self, ReviewSecret};
use agent_memory::MemoryError;
use pyo3::prelude::*;

use crate::errors::to_py;

/// A sign-in link to the review page of `mcp --listen --review-key-file` for `user_id` of
/// `application_id`, working once within `ttl_seconds` (at most a day). The secret comes from
/// `key_file` (mode 0600, as the server wants it) or from `secret` (bytes, at least 32).
#[pyfunction]
#[pyo3(signature = (application_id, user_id, *, base_url, key_file=None, secret=None, ttl_seconds=900.0))]
pub(crate) fn review_link(
    py: Python<'_>,
    application_id: &str,
    user_id: &str,
    base_url: &str,
    key_file: Option<PathBuf>,
    secret: Option<Vec<u8>>,
    ttl_seconds: f64,
) -> PyResult<String> {
    let minted = (|| {
        let secret = match (key_file, secret) {
            (Some(path), None) => ReviewSecret::from_file(&path)?,
            (None, Some(bytes)) => ReviewSecret::new(bytes)?,
            _ => {
                return Err(MemoryError::invalid(
                    "secret",
                    "give exactly one of key_file and secret",
                ))
            }
        };
        let ttl = Duration::try_from_secs_f64(ttl_seconds)
            .map_err(|_| MemoryError::invalid("ttl", "must be a number of seconds"))?;
        review::review_link(&secret, base_url, application_id, user_id, ttl)
    })();
    minted.map_err(|err| to_py(py, err))
}
