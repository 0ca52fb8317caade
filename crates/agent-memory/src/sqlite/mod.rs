//! Placeholder: the sqlite provider is being written.
#![allow(missing_docs)]

use crate::error::{MemoryError, Result};

#[derive(Debug)]
pub struct SqliteMemoryStore;

impl SqliteMemoryStore {
    pub fn from_url(_url: &str) -> Result<crate::InMemoryStore> {
        Err(MemoryError::invalid("url", "provider not written yet"))
    }
}
