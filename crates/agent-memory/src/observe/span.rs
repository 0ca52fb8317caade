//! One span and one set of measurements per store operation.

use std::future::Future;

use tracing::field::Empty;
use tracing::{Instrument, Span};

use super::backend::Telemetry;
use super::{ids, metrics};
use crate::error::{MemoryError, Result};
use crate::page::{
    ApplicationPage, KeyInfoPage, MemoryCleanupPage, MemoryPage, NamespacePage, UserPage,
};
use crate::record::MemoryRecord;
use crate::scope::MemoryScope;

/// The store operations, by their `db.operation.name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Start,
    Close,
    Put,
    Get,
    List,
    ListKeys,
    Search,
    Delete,
    DeleteAll,
    DeleteUser,
    ListNamespaces,
    ListUsers,
    ListApplications,
    PurgeExpired,
}

impl Operation {
    /// `db.operation.name`: the trait method's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Close => "close",
            Self::Put => "put",
            Self::Get => "get",
            Self::List => "list",
            Self::ListKeys => "list_keys",
            Self::Search => "search",
            Self::Delete => "delete",
            Self::DeleteAll => "delete_all",
            Self::DeleteUser => "delete_user",
            Self::ListNamespaces => "list_namespaces",
            Self::ListUsers => "list_users",
            Self::ListApplications => "list_applications",
            Self::PurgeExpired => "purge_expired",
        }
    }
}

/// The ids an operation names, recorded (hashed) only when that was asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ids<'a> {
    application_id: &'a str,
    /// `None` for an operation over a whole application (`list_users`).
    user_id: Option<&'a str>,
}

impl<'a> Ids<'a> {
    /// The ids of an operation over every user of one application.
    pub(crate) fn application(application_id: &'a str) -> Self {
        Self { application_id, user_id: None }
    }
}

impl<'a> From<&'a MemoryScope> for Ids<'a> {
    fn from(scope: &'a MemoryScope) -> Self {
        Self { application_id: scope.application_id(), user_id: Some(scope.user_id()) }
    }
}

impl<'a> From<(&'a str, &'a str)> for Ids<'a> {
    fn from((application_id, user_id): (&'a str, &'a str)) -> Self {
        Self { application_id, user_id: Some(user_id) }
    }
}

/// One span per operation, each with its own call site so the span's name is the operation's.
/// Every field is declared here; values are computed only when the span is enabled.
macro_rules! store_span {
    ($name:literal, $system:expr) => {
        tracing::info_span!(
            target: "agent_memory::store",
            $name,
            "otel.kind" = "client",
            "db.system.name" = $system,
            "db.operation.name" = $name,
            "db.namespace" = Empty,
            "db.response.returned_rows" = Empty,
            "agent_memory.records.deleted" = Empty,
            "agent_memory.page.has_more" = Empty,
            "error.type" = Empty,
            "otel.status_code" = Empty,
            "agent_memory.application_id.hash" = Empty,
            "agent_memory.user_id.hash" = Empty,
        )
    };
}

fn span_for(operation: Operation, system: &'static str) -> Span {
    match operation {
        Operation::Start => store_span!("start", system),
        Operation::Close => store_span!("close", system),
        Operation::Put => store_span!("put", system),
        Operation::Get => store_span!("get", system),
        Operation::List => store_span!("list", system),
        Operation::ListKeys => store_span!("list_keys", system),
        Operation::Search => store_span!("search", system),
        Operation::Delete => store_span!("delete", system),
        Operation::DeleteAll => store_span!("delete_all", system),
        Operation::DeleteUser => store_span!("delete_user", system),
        Operation::ListNamespaces => store_span!("list_namespaces", system),
        Operation::ListUsers => store_span!("list_users", system),
        Operation::ListApplications => store_span!("list_applications", system),
        Operation::PurgeExpired => store_span!("purge_expired", system),
    }
}

/// Whether nothing would see an operation: no subscriber takes `INFO` spans and no metrics
/// recorder is installed. Two relaxed loads, so the blanket impl can run the backend's future
/// directly, without the span, the clock or the wrapper future around it.
#[inline]
pub(crate) fn unobserved() -> bool {
    !tracing::level_enabled!(tracing::Level::INFO) && !metrics::recording()
}

/// Runs `run`, one `operation` of `store`, inside its span, then records its outcome on the
/// span and in the metrics.
///
/// With no subscriber interested and no metrics recorder installed this costs two cheap
/// checks: no field is computed, no clock is read and no metric key is built.
pub(crate) async fn observe<S, T, F>(
    store: &S,
    operation: Operation,
    ids: Option<Ids<'_>>,
    run: F,
) -> Result<T>
where
    S: Telemetry,
    T: Summary,
    F: Future<Output = Result<T>>,
{
    let span = span_for(operation, store.system());
    let timer = metrics::Timer::start();
    let result = if span.is_disabled() {
        run.await
    } else {
        if let Some(namespace) = store.db_namespace() {
            span.record("db.namespace", &*namespace);
        }
        if let Some(ids) = ids {
            ids::record(&span, ids.application_id, ids.user_id);
        }
        run.instrument(span.clone()).await
    };
    let counts = result.as_ref().map(Summary::counts).unwrap_or_default();
    if !span.is_disabled() {
        record(&span, &result, &counts);
    }
    if let Some(timer) = timer {
        let outcome = result.as_ref().err().map(MemoryError::kind_name);
        metrics::operation(store.system(), operation, outcome, timer, &counts);
        store.record_gauges();
    }
    result
}

fn record<T>(span: &Span, result: &Result<T>, counts: &Counts) {
    match result {
        Ok(_) => {
            if let Some(rows) = counts.returned {
                span.record("db.response.returned_rows", rows);
            }
            if let Some(deleted) = counts.deleted {
                span.record("agent_memory.records.deleted", deleted);
            }
            if let Some(more) = counts.more {
                span.record("agent_memory.page.has_more", more);
            }
        }
        Err(err) => {
            span.record("error.type", err.kind_name());
            span.record("otel.status_code", "ERROR");
        }
    }
}

/// What an operation's result says in numbers: never its content.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Records (or namespaces, user ids or application ids) returned.
    pub(crate) returned: Option<u64>,
    /// Records removed.
    pub(crate) deleted: Option<u64>,
    /// Whether a page has a next cursor.
    pub(crate) more: Option<bool>,
}

/// The counts of each operation's result.
pub(crate) trait Summary {
    fn counts(&self) -> Counts;
}

fn count(n: usize) -> Option<u64> {
    Some(u64::try_from(n).unwrap_or(u64::MAX))
}

impl Summary for () {
    fn counts(&self) -> Counts {
        Counts::default()
    }
}

impl Summary for MemoryRecord {
    fn counts(&self) -> Counts {
        Counts { returned: Some(1), ..Counts::default() }
    }
}

impl Summary for Option<MemoryRecord> {
    fn counts(&self) -> Counts {
        Counts { returned: Some(u64::from(self.is_some())), ..Counts::default() }
    }
}

/// Every page type: the items it returns, and whether a cursor follows.
macro_rules! page_summary {
    ($($page:ty),*) => {$(
        impl Summary for $page {
            fn counts(&self) -> Counts {
                Counts {
                    returned: count(self.items.len()),
                    more: Some(self.next_cursor.is_some()),
                    ..Counts::default()
                }
            }
        }
    )*};
}

page_summary!(MemoryPage, KeyInfoPage, NamespacePage, UserPage, ApplicationPage);

impl Summary for MemoryCleanupPage {
    fn counts(&self) -> Counts {
        Counts {
            deleted: Some(self.deleted),
            more: Some(self.next_cursor.is_some()),
            ..Counts::default()
        }
    }
}

/// `delete`: whether a live record was removed.
impl Summary for bool {
    fn counts(&self) -> Counts {
        Counts { deleted: Some(u64::from(*self)), ..Counts::default() }
    }
}

/// `delete_all`, `delete_user`: how many records were removed.
impl Summary for u64 {
    fn counts(&self) -> Counts {
        Counts { deleted: Some(*self), ..Counts::default() }
    }
}
