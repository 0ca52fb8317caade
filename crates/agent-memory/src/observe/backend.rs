//! The one place store operations are instrumented: each built-in provider implements
//! [`Backend`] (the operations, uninstrumented) and gets [`MemoryStore`] from the blanket impl
//! below, which wraps every operation in its span and its metrics.

use std::borrow::Cow;
use std::future::Future;

use super::span::{self, Operation};
use crate::error::Result;
use crate::page::{MemoryCleanupPage, MemoryPage, NamespacePage, PageRequest, UserPage};
use crate::record::{MemoryRecord, Revision};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::write::MemoryWrite;

/// What the instrumentation says about a provider, besides its operations.
pub(crate) trait Telemetry {
    /// `db.system.name`: `memory`, `sqlite`, `postgresql` or `redis`.
    const SYSTEM: &'static str;

    /// `db.namespace`, where the datastore has one (the PostgreSQL database, the Redis
    /// database number). Only asked for when a span records it.
    fn db_namespace(&self) -> Option<Cow<'_, str>> {
        None
    }

    /// Sets the provider's gauges (connections in use and idle, say); called after each
    /// operation, and only while a metrics recorder is installed.
    fn record_gauges(&self) {}
}

/// The operations of [`MemoryStore`], as a provider implements them: the same contract, the
/// same signatures, without instrumentation. See [`MemoryStore`] for each one's behaviour.
pub(crate) trait Backend: Telemetry + Send + Sync + std::fmt::Debug {
    fn start(&self) -> impl Future<Output = Result<()>> + Send;
    fn close(&self) -> impl Future<Output = Result<()>> + Send;
    fn put(
        &self,
        scope: &MemoryScope,
        key: &str,
        write: MemoryWrite,
    ) -> impl Future<Output = Result<MemoryRecord>> + Send;
    fn get(
        &self,
        scope: &MemoryScope,
        key: &str,
    ) -> impl Future<Output = Result<Option<MemoryRecord>>> + Send;
    fn list(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> impl Future<Output = Result<MemoryPage>> + Send;
    fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> impl Future<Output = Result<MemoryPage>> + Send;
    fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> impl Future<Output = Result<bool>> + Send;
    fn delete_all(&self, scope: &MemoryScope) -> impl Future<Output = Result<u64>> + Send;
    fn delete_user(
        &self,
        application_id: &str,
        user_id: &str,
    ) -> impl Future<Output = Result<u64>> + Send;
    fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> impl Future<Output = Result<NamespacePage>> + Send;
    fn list_users(
        &self,
        application_id: &str,
        page: PageRequest,
    ) -> impl Future<Output = Result<UserPage>> + Send;
    fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> impl Future<Output = Result<MemoryCleanupPage>> + Send;
}

/// Every built-in provider's `MemoryStore`: each operation of its backend inside its span and
/// measurements.
#[async_trait::async_trait]
impl<T: Backend> MemoryStore for T {
    async fn start(&self) -> Result<()> {
        span::observe(self, Operation::Start, None, Backend::start(self)).await
    }

    async fn close(&self) -> Result<()> {
        span::observe(self, Operation::Close, None, Backend::close(self)).await
    }

    async fn put(
        &self,
        scope: &MemoryScope,
        key: &str,
        write: MemoryWrite,
    ) -> Result<MemoryRecord> {
        let ids = Some(scope.into());
        span::observe(self, Operation::Put, ids, Backend::put(self, scope, key, write)).await
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        let ids = Some(scope.into());
        span::observe(self, Operation::Get, ids, Backend::get(self, scope, key)).await
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        let ids = Some(scope.into());
        span::observe(self, Operation::List, ids, Backend::list(self, scope, page)).await
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        let ids = Some(scope.into());
        span::observe(self, Operation::Search, ids, Backend::search(self, scope, query, page)).await
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool> {
        let ids = Some(scope.into());
        let run = Backend::delete(self, scope, key, expected_revision);
        span::observe(self, Operation::Delete, ids, run).await
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let ids = Some(scope.into());
        span::observe(self, Operation::DeleteAll, ids, Backend::delete_all(self, scope)).await
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        let ids = Some((application_id, user_id).into());
        let run = Backend::delete_user(self, application_id, user_id);
        span::observe(self, Operation::DeleteUser, ids, run).await
    }

    async fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> Result<NamespacePage> {
        let ids = Some((application_id, user_id).into());
        let run = Backend::list_namespaces(self, application_id, user_id, page);
        span::observe(self, Operation::ListNamespaces, ids, run).await
    }

    async fn list_users(&self, application_id: &str, page: PageRequest) -> Result<UserPage> {
        let ids = Some(span::Ids::application(application_id));
        let run = Backend::list_users(self, application_id, page);
        span::observe(self, Operation::ListUsers, ids, run).await
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        let ids = Some(scope.into());
        let run = Backend::purge_expired(self, scope, page);
        span::observe(self, Operation::PurgeExpired, ids, run).await
    }
}
