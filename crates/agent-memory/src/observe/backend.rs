//! The one place store operations are instrumented: each built-in provider implements
//! [`Backend`] (the operations, uninstrumented) and gets [`MemoryStore`] from the blanket impl
//! below, which wraps every operation in its span and its metrics.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use super::span::{self, Operation};
use crate::error::Result;
use crate::page::{
    ApplicationPage, KeyInfoPage, MemoryCleanupPage, MemoryPage, NamespacePage, PageRequest,
    UserPage,
};
use crate::record::{MemoryRecord, Revision};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::write::MemoryWrite;

/// What the instrumentation says about a provider, besides its operations.
pub(crate) trait Telemetry {
    /// `db.system.name`: `memory`, `sqlite`, `postgresql` or `redis` for the built-in
    /// providers; what [`Observed::new`](super::Observed::new) was given for any other store.
    fn system(&self) -> &'static str;

    /// `db.namespace`, where the datastore has one (the PostgreSQL database, the Redis
    /// database number). Only asked for when a span records it.
    fn db_namespace(&self) -> Option<Cow<'_, str>> {
        None
    }

    /// Sets the provider's gauges (connections in use and idle, say); called after each
    /// operation, and only while a metrics recorder is installed.
    fn record_gauges(&self) {}
}

/// Declares [`Backend`] with every operation [`store_operations!`](crate::store_operations)
/// lists, each returning a `Send` future of its result.
macro_rules! backend_trait {
    ($(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty;)*) => {
        /// The operations of [`MemoryStore`], as a provider implements them: the same
        /// contract, the same signatures, without instrumentation. See [`MemoryStore`] for each
        /// one's behaviour.
        pub(crate) trait Backend: Telemetry + Send + Sync + std::fmt::Debug {
            fn start(&self) -> impl Future<Output = Result<()>> + Send;
            fn close(&self) -> impl Future<Output = Result<()>> + Send;
            $(fn $name(&self $(, $arg: $ty)*) -> impl Future<Output = Result<$out>> + Send;)*
        }
    };
}

crate::store_operations!(backend_trait);

/// One `MemoryStore` method as `async_trait` declares it: when nothing observes the operation
/// ([`span::unobserved`]) the backend's own future is boxed and returned as it is, so an
/// uninstrumented program pays two relaxed loads and nothing else (no wrapper future, no extra
/// move of the result); otherwise the future runs inside its span and measurements
/// ([`span::observe`]).
macro_rules! observed {
    (
        fn $name:ident<$($life:lifetime),*>(&$self_life:lifetime self $(, $arg:ident: $ty:ty)*)
            -> $out:ty;
        $operation:expr, $ids:expr
    ) => {
        fn $name<$self_life, $($life,)* 'async_trait>(
            &$self_life self
            $(, $arg: $ty)*
        ) -> Pin<Box<dyn Future<Output = Result<$out>> + Send + 'async_trait>>
        where
            $self_life: 'async_trait,
            $($life: 'async_trait,)*
            Self: 'async_trait,
        {
            if span::unobserved() {
                Box::pin(Backend::$name(self $(, $arg)*))
            } else {
                Box::pin(span::observe(self, $operation, $ids, Backend::$name(self $(, $arg)*)))
            }
        }
    };
}

/// Every built-in provider's `MemoryStore`: each operation of its backend inside its span and
/// measurements.
impl<T: Backend> MemoryStore for T {
    observed! {
        fn start<>(&'s self) -> ();
        Operation::Start, None
    }

    observed! {
        fn close<>(&'s self) -> ();
        Operation::Close, None
    }

    observed! {
        fn put<'c, 'k>(&'s self, scope: &'c MemoryScope, key: &'k str, write: MemoryWrite)
            -> MemoryRecord;
        Operation::Put, Some(scope.into())
    }

    observed! {
        fn get<'c, 'k>(&'s self, scope: &'c MemoryScope, key: &'k str) -> Option<MemoryRecord>;
        Operation::Get, Some(scope.into())
    }

    observed! {
        fn list<'c>(&'s self, scope: &'c MemoryScope, page: PageRequest) -> MemoryPage;
        Operation::List, Some(scope.into())
    }

    observed! {
        fn list_keys<'c>(&'s self, scope: &'c MemoryScope, page: PageRequest) -> KeyInfoPage;
        Operation::ListKeys, Some(scope.into())
    }

    observed! {
        fn search<'c, 'q>(&'s self, scope: &'c MemoryScope, query: &'q str, page: PageRequest)
            -> MemoryPage;
        Operation::Search, Some(scope.into())
    }

    observed! {
        fn delete<'c, 'k, 'r>(
            &'s self,
            scope: &'c MemoryScope,
            key: &'k str,
            expected_revision: Option<&'r Revision>
        ) -> bool;
        Operation::Delete, Some(scope.into())
    }

    observed! {
        fn delete_all<'c>(&'s self, scope: &'c MemoryScope) -> u64;
        Operation::DeleteAll, Some(scope.into())
    }

    observed! {
        fn delete_user<'a, 'u>(&'s self, application_id: &'a str, user_id: &'u str) -> u64;
        Operation::DeleteUser, Some((application_id, user_id).into())
    }

    observed! {
        fn list_namespaces<'a, 'u>(
            &'s self,
            application_id: &'a str,
            user_id: &'u str,
            page: PageRequest
        ) -> NamespacePage;
        Operation::ListNamespaces, Some((application_id, user_id).into())
    }

    observed! {
        fn list_users<'a>(&'s self, application_id: &'a str, page: PageRequest) -> UserPage;
        Operation::ListUsers, Some(span::Ids::application(application_id))
    }

    observed! {
        fn list_applications<>(&'s self, page: PageRequest) -> ApplicationPage;
        Operation::ListApplications, None
    }

    observed! {
        fn purge_expired<'c>(&'s self, scope: &'c MemoryScope, page: PageRequest)
            -> MemoryCleanupPage;
        Operation::PurgeExpired, Some(scope.into())
    }
}
