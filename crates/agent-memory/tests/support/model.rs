//! A model-based property test: random operation sequences run against a provider and against
//! a plain reference model, comparing every result. proptest shrinks a failure to a minimal
//! sequence.
//!
//! The scopes are chosen so that a careless encoding (joining ids with `:`, `/` or braces, or
//! forgetting the namespace) makes two of them share storage. Providers with an injected clock
//! also get expiry modelled exactly (an `Advance` step moves the clock); providers that keep
//! time in the datastore write only far-future expiries here, and the conformance suite checks
//! their expiry against the real clock.
//!
//! `AGENT_MEMORY_MODEL_CASES` raises the case count (default 24 per provider).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agent_memory::{
    ManualClock, MemoryError, MemoryRecord, MemoryScope, MemoryStore, MemoryWrite, PageRequest,
    Revision, Timestamp,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// A store under test, and its clock when the test can move it.
pub struct Subject {
    pub store: Arc<dyn MemoryStore>,
    pub clock: Option<ManualClock>,
}

/// (user, namespace) pairs, under one random application per case. Several collide when ids
/// are joined with a bare delimiter.
const SCOPES: &[(&str, Option<&str>)] = &[
    ("u", None),
    ("u", Some("n")),
    ("u:n", None),
    ("u", Some("n:x")),
    ("u:n", Some("x")),
    ("u{x}", Some("}")),
    ("u{x", Some("}n")),
    ("%", Some("_")),
    ("u/n", None),
    ("\\", Some("\"'")),
];
const KEYS: &[&str] = &["k", "K", "k2", "é", "a:b", "a%", "a_", "中", "~"];
const CONTENTS: &[&str] = &[
    "executive summary",
    "Executive Summary",
    "100% off_sale",
    "back\\slash *star*",
    "plain",
    "多语言 ✓",
    "",
];
const QUERIES: &[&str] = &["summary", "Summary", "%", "_", "\\", "*", "a", "多", "e"];

#[derive(Debug, Clone, Copy)]
pub enum Cond {
    Always,
    CreateOnly,
    /// The revision last returned for this key (current if still live).
    Latest,
    /// A revision this key had before (stale when the key was written again since).
    Oldest,
}

#[derive(Debug, Clone)]
pub enum Op {
    Put { scope: usize, key: usize, content: usize, cond: Cond, expiry: Option<u8> },
    Get { scope: usize, key: usize },
    List { scope: usize, limit: usize },
    Search { scope: usize, query: usize, limit: usize },
    Delete { scope: usize, key: usize, cond: Option<Cond> },
    DeleteAll { scope: usize },
    DeleteUser { scope: usize },
    Namespaces { scope: usize, limit: usize },
    Purge { scope: usize, limit: usize },
    Advance { seconds: u8 },
}

fn cond() -> impl Strategy<Value = Cond> {
    prop_oneof![
        3 => Just(Cond::Always),
        1 => Just(Cond::CreateOnly),
        2 => Just(Cond::Latest),
        1 => Just(Cond::Oldest),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    // Most steps hit a few scopes and keys, so sequences build up state worth checking; the
    // rest reach every colliding scope and awkward key.
    let scope = prop_oneof![3 => 0..3usize, 1 => 0..SCOPES.len()];
    let key = prop_oneof![3 => 0..4usize, 1 => 0..KEYS.len()];
    prop_oneof![
        6 => (scope.clone(), key.clone(), 0..CONTENTS.len(), cond(), proptest::option::weighted(0.3, 1u8..4))
            .prop_map(|(scope, key, content, cond, expiry)| Op::Put { scope, key, content, cond, expiry }),
        3 => (scope.clone(), key.clone()).prop_map(|(scope, key)| Op::Get { scope, key }),
        2 => (scope.clone(), 1usize..4).prop_map(|(scope, limit)| Op::List { scope, limit }),
        2 => (scope.clone(), 0..QUERIES.len(), 1usize..4)
            .prop_map(|(scope, query, limit)| Op::Search { scope, query, limit }),
        2 => (scope.clone(), key, proptest::option::of(cond()))
            .prop_map(|(scope, key, cond)| Op::Delete { scope, key, cond }),
        1 => scope.clone().prop_map(|scope| Op::DeleteAll { scope }),
        1 => scope.clone().prop_map(|scope| Op::DeleteUser { scope }),
        1 => (scope.clone(), 1usize..3).prop_map(|(scope, limit)| Op::Namespaces { scope, limit }),
        1 => (scope, 1usize..4).prop_map(|(scope, limit)| Op::Purge { scope, limit }),
        1 => (1u8..4).prop_map(|seconds| Op::Advance { seconds }),
    ]
}

/// One record as the model holds it.
#[derive(Debug, Clone)]
struct Held {
    content: String,
    revision: Revision,
    created_at: Timestamp,
    expires_at: Option<Timestamp>,
}

impl Held {
    fn live(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }
}

/// The reference model: per scope index, key → record; plus every revision each
/// (scope, key) ever had, to check that none repeats.
#[derive(Default)]
struct Model {
    records: BTreeMap<usize, BTreeMap<String, Held>>,
    history: HashMap<(usize, String), Vec<Revision>>,
}

fn user_scopes(scope: usize) -> Vec<usize> {
    (0..SCOPES.len()).filter(|&s| SCOPES[s].0 == SCOPES[scope].0).collect()
}

fn check(condition: bool, message: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if condition {
        Ok(())
    } else {
        Err(TestCaseError::fail(message()))
    }
}

fn is_conflict(result: &Result<impl std::fmt::Debug, MemoryError>) -> bool {
    matches!(result, Err(MemoryError::Conflict { .. }))
}

struct Runner<'a> {
    subject: &'a Subject,
    app: String,
    model: Model,
    /// "Now" for providers whose clock we cannot move: only far-future expiries are written.
    manual: bool,
}

impl Runner<'_> {
    fn scope(&self, index: usize) -> MemoryScope {
        let (user, namespace) = SCOPES[index];
        let scope = MemoryScope::new(self.app.clone(), user).expect("valid user");
        match namespace {
            Some(ns) => scope.with_namespace(ns).expect("valid namespace"),
            None => scope,
        }
    }

    fn now(&self) -> Timestamp {
        match &self.subject.clock {
            Some(clock) => {
                use agent_memory::Clock;
                clock.now()
            }
            None => Timestamp::now(),
        }
    }

    /// The model's record of `key` in `scope`, when it is live at `now`.
    fn live_record(&self, scope: usize, key: &str, now: Timestamp) -> Option<Held> {
        self.model
            .records
            .get(&scope)
            .and_then(|keys| keys.get(key))
            .filter(|held| held.live(now))
            .cloned()
    }

    fn live_keys(&self, scope: usize, now: Timestamp) -> Vec<(&String, &Held)> {
        self.model
            .records
            .get(&scope)
            .map(|keys| keys.iter().filter(|(_, held)| held.live(now)).collect())
            .unwrap_or_default()
    }

    fn pick_revision(&self, scope: usize, key: &str, cond: Cond) -> Option<Revision> {
        let history = self.model.history.get(&(scope, key.to_owned()))?;
        match cond {
            Cond::Latest => history.last().cloned(),
            Cond::Oldest => history.first().cloned(),
            Cond::Always | Cond::CreateOnly => None,
        }
    }

    fn record_revision(
        &mut self,
        scope: usize,
        key: &str,
        revision: &Revision,
    ) -> Result<(), TestCaseError> {
        let history = self.model.history.entry((scope, key.to_owned())).or_default();
        check(!history.contains(revision), || {
            format!("revision {revision} was reused for key {key:?} in scope {scope}")
        })?;
        history.push(revision.clone());
        Ok(())
    }

    fn same_record(&self, got: &MemoryRecord, key: &str, held: &Held) -> Result<(), TestCaseError> {
        check(got.key == key, || format!("key {:?} != {key:?}", got.key))?;
        check(got.content == held.content, || {
            format!("content of {key:?} differs: {:?} vs model {:?}", got.content, held.content)
        })?;
        check(got.revision == held.revision, || format!("revision of {key:?} differs"))?;
        check(got.created_at == held.created_at, || format!("created_at of {key:?} differs"))?;
        check(got.expires_at == held.expires_at, || format!("expires_at of {key:?} differs"))
    }

    async fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let store = Arc::clone(&self.subject.store);
        match *op {
            Op::Put { scope, key, content, cond, expiry } => {
                let key = KEYS[key];
                let now = self.now();
                let expires_at = expiry.map(|s| {
                    let ahead = if self.manual { u64::from(s) } else { 3600 * u64::from(s) };
                    now.saturating_add(Duration::from_secs(ahead))
                });
                let mut write = MemoryWrite::new(CONTENTS[content]).expires_at_opt(expires_at);
                let expected = self.pick_revision(scope, key, cond);
                match cond {
                    Cond::CreateOnly => write = write.create_only(),
                    Cond::Latest | Cond::Oldest => match &expected {
                        Some(rev) => write = write.expected_revision(rev.clone()),
                        // Never written: any revision is stale.
                        None => {
                            write = write.expected_revision(Revision::new("never-issued").unwrap())
                        }
                    },
                    Cond::Always => {}
                }
                let result = store.put(&self.scope(scope), key, write).await;
                let live = self.live_record(scope, key, now);
                let allowed = match cond {
                    Cond::Always => true,
                    Cond::CreateOnly => live.is_none(),
                    Cond::Latest | Cond::Oldest => {
                        live.as_ref().is_some_and(|held| Some(&held.revision) == expected.as_ref())
                    }
                };
                if !allowed {
                    return check(is_conflict(&result), || {
                        format!("put {key:?} with {cond:?} should conflict, got {result:?}")
                    });
                }
                let record =
                    result.map_err(|e| TestCaseError::fail(format!("put {key:?} failed: {e}")))?;
                self.record_revision(scope, key, &record.revision)?;
                let created_at = live.map_or(record.updated_at, |held| held.created_at);
                check(record.created_at == created_at, || {
                    format!("put {key:?}: created_at not kept/set right")
                })?;
                self.model.records.entry(scope).or_default().insert(
                    key.to_owned(),
                    Held {
                        content: CONTENTS[content].to_owned(),
                        revision: record.revision.clone(),
                        created_at,
                        expires_at,
                    },
                );
                let held = self.model.records[&scope][key].clone();
                self.same_record(&record, key, &held)
            }
            Op::Get { scope, key } => {
                let key = KEYS[key];
                let got = store
                    .get(&self.scope(scope), key)
                    .await
                    .map_err(|e| TestCaseError::fail(format!("get: {e}")))?;
                let now = self.now();
                let want = self.live_record(scope, key, now);
                match (got, want) {
                    (None, None) => Ok(()),
                    (Some(got), Some(held)) => self.same_record(&got, key, &held),
                    (got, want) => Err(TestCaseError::fail(format!(
                        "get {key:?} in scope {scope}: store {got:?}, model {want:?}"
                    ))),
                }
            }
            Op::List { scope, limit } | Op::Search { scope, limit, .. } => {
                let query = match *op {
                    Op::Search { query, .. } => Some(QUERIES[query]),
                    _ => None,
                };
                let target = self.scope(scope);
                let mut page = PageRequest::new(limit);
                let mut got = Vec::new();
                for _ in 0..100 {
                    let result = match query {
                        Some(q) => store.search(&target, q, page.clone()).await,
                        None => store.list(&target, page.clone()).await,
                    }
                    .map_err(|e| TestCaseError::fail(format!("list/search: {e}")))?;
                    check(result.items.len() <= limit, || "page larger than limit".to_owned())?;
                    got.extend(result.items);
                    match result.next_cursor {
                        Some(cursor) => page = page.after(cursor),
                        None => break,
                    }
                }
                let now = self.now();
                let want: Vec<(String, Held)> = self
                    .live_keys(scope, now)
                    .into_iter()
                    .filter(|(_, held)| query.is_none_or(|q| held.content.contains(q)))
                    .map(|(k, h)| (k.clone(), h.clone()))
                    .collect();
                check(got.len() == want.len(), || {
                    format!(
                        "{op:?}: store returned {:?}, model has {:?}",
                        got.iter().map(|r| &r.key).collect::<Vec<_>>(),
                        want.iter().map(|(k, _)| k).collect::<Vec<_>>()
                    )
                })?;
                for (record, (key, held)) in got.iter().zip(&want) {
                    self.same_record(record, key, held)?;
                }
                Ok(())
            }
            Op::Delete { scope, key, cond } => {
                let key = KEYS[key];
                let now = self.now();
                let expected = cond.and_then(|c| match c {
                    Cond::Always | Cond::CreateOnly => None,
                    c => Some(
                        self.pick_revision(scope, key, c)
                            .unwrap_or_else(|| Revision::new("never-issued").unwrap()),
                    ),
                });
                let live = self.live_record(scope, key, now);
                let result = store.delete(&self.scope(scope), key, expected.as_ref()).await;
                if let Some(expected) = &expected {
                    if live.as_ref().map(|h| &h.revision) != Some(expected) {
                        return check(is_conflict(&result), || {
                            format!("delete {key:?} with a stale revision should conflict, got {result:?}")
                        });
                    }
                }
                let existed = result.map_err(|e| TestCaseError::fail(format!("delete: {e}")))?;
                check(existed == live.is_some(), || format!("delete {key:?} returned {existed}"))?;
                if let Some(keys) = self.model.records.get_mut(&scope) {
                    keys.remove(key);
                }
                Ok(())
            }
            Op::DeleteAll { scope } => {
                let removed = store
                    .delete_all(&self.scope(scope))
                    .await
                    .map_err(|e| TestCaseError::fail(format!("delete_all: {e}")))?;
                let want = self.model.records.remove(&scope).map_or(0, |k| k.len() as u64);
                check(removed == want, || format!("delete_all removed {removed}, model {want}"))
            }
            Op::DeleteUser { scope } => {
                let user = SCOPES[scope].0;
                let removed = store
                    .delete_user(&self.app, user)
                    .await
                    .map_err(|e| TestCaseError::fail(format!("delete_user: {e}")))?;
                let want: u64 = user_scopes(scope)
                    .iter()
                    .filter_map(|s| self.model.records.remove(s))
                    .map(|k| k.len() as u64)
                    .sum();
                check(removed == want, || format!("delete_user removed {removed}, model {want}"))
            }
            Op::Namespaces { scope, limit } => {
                let user = SCOPES[scope].0;
                let mut page = PageRequest::new(limit);
                let mut got = Vec::new();
                for _ in 0..100 {
                    let result = store
                        .list_namespaces(&self.app, user, page.clone())
                        .await
                        .map_err(|e| TestCaseError::fail(format!("list_namespaces: {e}")))?;
                    got.extend(result.items.into_iter().map(|s| s.namespace().map(str::to_owned)));
                    match result.next_cursor {
                        Some(cursor) => page = page.after(cursor),
                        None => break,
                    }
                }
                let mut want: Vec<Option<String>> = user_scopes(scope)
                    .into_iter()
                    .filter(|s| self.model.records.get(s).is_some_and(|k| !k.is_empty()))
                    .map(|s| SCOPES[s].1.map(str::to_owned))
                    .collect();
                // Default namespace first, then byte order.
                want.sort_by(|a, b| {
                    a.as_deref().unwrap_or("").as_bytes().cmp(b.as_deref().unwrap_or("").as_bytes())
                });
                check(got == want, || format!("list_namespaces: store {got:?}, model {want:?}"))
            }
            Op::Purge { scope, limit } => {
                let target = self.scope(scope);
                let mut page = PageRequest::new(limit);
                let mut removed = 0;
                for _ in 0..100 {
                    let result = store
                        .purge_expired(&target, page.clone())
                        .await
                        .map_err(|e| TestCaseError::fail(format!("purge_expired: {e}")))?;
                    removed += result.deleted;
                    match result.next_cursor {
                        Some(cursor) => page = page.after(cursor),
                        None => break,
                    }
                }
                let now = self.now();
                let keys = self.model.records.entry(scope).or_default();
                let before = keys.len();
                keys.retain(|_, held| held.live(now));
                let want = (before - keys.len()) as u64;
                check(removed == want, || format!("purge_expired removed {removed}, model {want}"))
            }
            Op::Advance { seconds } => {
                if let Some(clock) = &self.subject.clock {
                    clock.advance(Duration::from_secs(u64::from(seconds)));
                }
                Ok(())
            }
        }
    }
}

/// How many sequences to run per provider.
pub fn cases() -> u32 {
    super::strategies::cases_from_env("AGENT_MEMORY_MODEL_CASES", 24)
}

/// Runs random sequences against the subject built by `make`, one fresh application per case.
pub fn check_against_model<F, Fut>(name: &str, make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Subject>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let subject = runtime.block_on(async {
        let subject = make().await;
        subject.store.start().await.expect("store starts");
        subject
    });
    let config = Config { cases: cases(), failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new(config);
    let strategy = proptest::collection::vec(op(), 1..60);
    let result = runner.run(&strategy, |ops| {
        runtime.block_on(async {
            let mut run = Runner {
                subject: &subject,
                app: format!("model-{}", uuid::Uuid::new_v4().simple()),
                model: Model::default(),
                manual: subject.clock.is_some(),
            };
            for op in &ops {
                run.step(op).await?;
            }
            // Leave nothing behind in shared databases.
            let users: BTreeSet<&str> = SCOPES.iter().map(|(u, _)| *u).collect();
            for user in users {
                subject
                    .store
                    .delete_user(&run.app, user)
                    .await
                    .map_err(|e| TestCaseError::fail(format!("cleanup: {e}")))?;
            }
            Ok(())
        })
    });
    runtime.block_on(async { subject.store.close().await.expect("store closes") });
    if let Err(err) = result {
        panic!("{name}: model check failed: {err}");
    }
}
