//! [`Facts`], the simple fact port: remember, forget, recall, erase.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::page::PageRequest;
use crate::record::Source;
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::time::Timestamp;
use crate::validation::MAX_PAGE_LIMIT;
use crate::write::MemoryWrite;

/// One remembered fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// Identifies the fact for [`Facts::forget`].
    pub id: String,
    /// The fact's text.
    pub text: String,
    /// When it was remembered.
    pub created_at: Timestamp,
}

/// Most facts one [`Facts::recall`] returns, whatever its `limit`.
pub const MAX_RECALL_FACTS: usize = 1_000;

/// What [`Facts::recall`] returns: the oldest facts, oldest first, and whether more exist.
///
/// It dereferences to the slice of facts, so `recalled.len()`, `recalled[0]` and
/// `for fact in &recalled` work as on a `Vec<Fact>`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recalled {
    /// The facts, oldest first.
    pub facts: Vec<Fact>,
    /// True when the scope holds more facts than were returned (past `limit`, or past
    /// [`MAX_RECALL_FACTS`]).
    pub truncated: bool,
}

impl std::ops::Deref for Recalled {
    type Target = [Fact];

    fn deref(&self) -> &[Fact] {
        &self.facts
    }
}

impl PartialEq<Vec<Fact>> for Recalled {
    fn eq(&self, other: &Vec<Fact>) -> bool {
        &self.facts == other
    }
}

impl<'a> IntoIterator for &'a Recalled {
    type Item = &'a Fact;
    type IntoIter = std::slice::Iter<'a, Fact>;

    fn into_iter(self) -> Self::IntoIter {
        self.facts.iter()
    }
}

impl IntoIterator for Recalled {
    type Item = Fact;
    type IntoIter = std::vec::IntoIter<Fact>;

    fn into_iter(self) -> Self::IntoIter {
        self.facts.into_iter()
    }
}

/// The simplest memory model: a user's facts as an unordered pile of text, oldest first.
///
/// Built on any [`MemoryStore`]. Each fact is one record in the scope you pass, under a fresh
/// time-ordered id, so give facts a namespace of their own (for example `facts`) if the same
/// user also has keyed memories.
///
/// - [`remember`](Self::remember) always adds; it never merges or deduplicates (deciding that
///   two facts are "the same" is the application's judgement, not ours).
/// - [`forget`](Self::forget) returns `false` when the fact is gone or was never this user's.
/// - [`recall`](Self::recall) returns the facts oldest first; `limit` truncates that order,
///   it never selects, and one call returns at most [`MAX_RECALL_FACTS`], saying when it cut.
/// - [`erase`](Self::erase) physically deletes everything stored for the end user, every
///   namespace included: the answer to an erasure request.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use agent_memory::{Facts, InMemoryStore, MemoryScope, MemoryStore};
///
/// let store = Arc::new(InMemoryStore::new());
/// store.start().await?;
/// let facts = Facts::new(store);
/// let scope = MemoryScope::new("tenant-a", "user-42")?.with_namespace("facts")?;
///
/// let berlin = facts.remember(&scope, "prefers the Berlin warehouse").await?;
/// facts.remember(&scope, "prefers metric units").await?;
/// assert_eq!(facts.recall(&scope, Some(1)).await?[0].text, "prefers the Berlin warehouse");
/// assert!(facts.forget(&scope, &berlin.id).await?);
/// assert!(!facts.forget(&scope, &berlin.id).await?);
/// assert_eq!(facts.erase(&scope).await?, 1);
/// # Ok::<(), agent_memory::MemoryError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Facts {
    store: Arc<dyn MemoryStore>,
    source: Source,
}

impl Facts {
    /// Facts kept in `store`, written with an empty source.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self { store, source: Source::default() }
    }

    /// The same port recording `source` (provenance) on every fact it adds.
    pub fn with_source(mut self, source: Source) -> Self {
        self.source = source;
        self
    }

    /// Adds a fact and returns it.
    ///
    /// # Errors
    /// `Invalid` for text over the content limit or holding NUL; `Storage`.
    pub async fn remember(&self, scope: &MemoryScope, text: &str) -> Result<Fact> {
        // A v7 UUID sorts by creation time; `create_only` makes "always adds" hold even in the
        // impossible case of a repeated id.
        let id = uuid::Uuid::now_v7().simple().to_string();
        let write = MemoryWrite::new(text).create_only().source(self.source.clone());
        let record = self.store.put(scope, &id, write).await?;
        Ok(Fact { id: record.key, text: record.content, created_at: record.created_at })
    }

    /// Deletes a fact; `false` when it is already gone or was never in this scope.
    ///
    /// # Errors
    /// `Invalid` for an id that could not be a key; `Storage`.
    pub async fn forget(&self, scope: &MemoryScope, id: &str) -> Result<bool> {
        self.store.delete(scope, id, None).await
    }

    /// The oldest facts in the scope, oldest first: the first `limit` when given, and never
    /// more than [`MAX_RECALL_FACTS`]. [`Recalled::truncated`] says whether more facts exist.
    ///
    /// The work of one call is bounded: it reads the facts in id order (ids are time-ordered
    /// v7 UUIDs), one page of at most 100 at a time, and stops after the first `limit + 1`,
    /// never reading the whole scope. Within what it read it orders facts by their stored
    /// creation time, so clocks of replicas that differ by a little cannot put a newer fact
    /// first.
    ///
    /// # Errors
    /// `Storage`.
    pub async fn recall(&self, scope: &MemoryScope, limit: Option<usize>) -> Result<Recalled> {
        let keep = limit.unwrap_or(MAX_RECALL_FACTS).min(MAX_RECALL_FACTS);
        let mut facts = Vec::new();
        let mut page = PageRequest::new(MAX_PAGE_LIMIT.min(keep + 1));
        loop {
            let result = self.store.list(scope, page.clone()).await?;
            facts.extend(result.items.into_iter().map(|record| Fact {
                id: record.key,
                text: record.content,
                created_at: record.created_at,
            }));
            match result.next_cursor {
                // One fact past `keep` only says that more exist.
                Some(cursor) if facts.len() <= keep => page = page.after(cursor),
                _ => break,
            }
        }
        // Ids are time ordered, but replicas' clocks differ: order by the stored creation time.
        facts.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        let truncated = facts.len() > keep;
        facts.truncate(keep);
        Ok(Recalled { facts, truncated })
    }

    /// Physically deletes everything stored for the scope's end user, in every namespace, and
    /// returns how many records were removed.
    ///
    /// # Errors
    /// `Storage`; retry to remove what is left.
    pub async fn erase(&self, scope: &MemoryScope) -> Result<u64> {
        self.store.delete_user(scope.application_id(), scope.user_id()).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Facts;
    use crate::{InMemoryStore, MemoryScope, MemoryStore, Source};

    #[tokio::test]
    async fn added_facts_carry_the_ports_source() {
        let store = Arc::new(InMemoryStore::new());
        store.start().await.unwrap();
        let source = Source { agent: Some("planner".into()), ..Source::default() };
        let facts = Facts::new(store.clone()).with_source(source.clone());
        let scope = MemoryScope::new("app", "user").unwrap();
        let fact = facts.remember(&scope, "likes tea").await.unwrap();
        let record = store.get(&scope, &fact.id).await.unwrap().unwrap();
        assert_eq!(record.source, source);
    }

    #[tokio::test]
    async fn recall_reads_a_bounded_number_of_facts_and_says_when_it_cut() {
        let store = Arc::new(InMemoryStore::new());
        store.start().await.unwrap();
        let facts = Facts::new(store);
        let scope = MemoryScope::new("app", "user").unwrap();
        for n in 0..(super::MAX_RECALL_FACTS + 5) {
            facts.remember(&scope, &format!("fact {n}")).await.unwrap();
        }
        let all = facts.recall(&scope, None).await.unwrap();
        assert_eq!(all.len(), super::MAX_RECALL_FACTS);
        assert!(all.truncated);
        assert_eq!(all[0].text, "fact 0", "oldest first");
        let capped = facts.recall(&scope, Some(usize::MAX)).await.unwrap();
        assert_eq!((capped.len(), capped.truncated), (super::MAX_RECALL_FACTS, true));
        let none = facts.recall(&scope, Some(0)).await.unwrap();
        assert!(none.is_empty() && none.truncated);
    }
}
