//! The [`MemoryStore`] trait every provider implements.

use crate::error::Result;
use crate::page::{
    ApplicationPage, KeyInfoPage, MemoryCleanupPage, MemoryPage, NamespacePage, PageRequest,
    UserPage,
};
use crate::record::{MemoryRecord, Revision};
use crate::scope::MemoryScope;
use crate::write::MemoryWrite;

/// Explicit, scoped, long-term memory: the storage contract every provider keeps.
///
/// The trait is object safe; applications usually hold an `Arc<dyn MemoryStore>` from
/// [`open`](crate::open). Every method applies the whole [`MemoryScope`] inside the datastore,
/// validates its input with [`validation`](crate::validation) before any I/O, and returns
/// detached copies. No method calls a model or extracts memories on its own.
///
/// Expired records (those whose `expires_at` has passed by the datastore's clock) are invisible
/// to `get`, `list`, `search` and revision checks, but stay physically present until
/// `purge_expired`, `delete`, `delete_all` or `delete_user` removes them.
///
/// # Optimistic updates
///
/// Read, compute, and write back with the revision you read; on a conflict, read again:
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use agent_memory::{InMemoryStore, MemoryError, MemoryScope, MemoryStore, MemoryWrite};
///
/// let store = InMemoryStore::new();
/// store.start().await?;
/// let scope = MemoryScope::new("app", "user-1")?;
/// store.put(&scope, "visits", MemoryWrite::new("0")).await?;
/// loop {
///     let current = store.get(&scope, "visits").await?.expect("written above");
///     let next = current.content.parse::<u64>().unwrap() + 1;
///     let write = MemoryWrite::new(next.to_string()).expected_revision(current.revision);
///     match store.put(&scope, "visits", write).await {
///         Ok(_) => break,
///         Err(MemoryError::Conflict { .. }) => continue, // someone else won; read again
///         Err(other) => return Err(other),
///     }
/// }
/// assert_eq!(store.get(&scope, "visits").await?.unwrap().content, "1");
/// # Ok::<(), MemoryError>(())
/// # }).unwrap();
/// ```
///
/// # Errors common to every method
///
/// - [`Invalid`](crate::MemoryError::Invalid) for input that breaks a rule; nothing changes.
/// - [`Storage`](crate::MemoryError::Storage) before `start()`, after `close()` (for providers
///   that own connections or files), and whenever the datastore fails. A failed write may have
///   committed: read again, and use revisions rather than blind retries.
#[async_trait::async_trait]
pub trait MemoryStore: Send + Sync + std::fmt::Debug {
    /// Opens the resources this store owns and creates or validates its schema.
    ///
    /// # Behavior
    /// - Idempotent: a second call does nothing.
    /// - Must succeed before any other operation; operations before it return `Storage`.
    ///
    /// # Errors
    /// `Storage` when the datastore cannot be reached or holds an incompatible schema.
    async fn start(&self) -> Result<()>;

    /// Releases what this store owns (its pool, its file), and nothing it was given.
    ///
    /// # Behavior
    /// - Idempotent.
    /// - Afterwards, providers that own connections or files return `Storage` for operations;
    ///   [`InMemoryStore`](crate::InMemoryStore) keeps its records readable.
    ///
    /// # Errors
    /// `Storage` if releasing failed.
    async fn close(&self) -> Result<()>;

    /// Inserts or replaces the record at `key`, atomically.
    ///
    /// # Behavior
    /// - Validates everything first ([`MemoryWrite::validate`]).
    /// - A new key (or one whose record expired) gets `created_at = updated_at = now`.
    /// - Replacing a live record keeps `created_at`, sets `updated_at = now`, and replaces
    ///   content, metadata, expiry and source. No history is kept.
    /// - Every write gets a revision the key has never had.
    /// - [`expected_revision`](MemoryWrite::expected_revision): writes only if a live record
    ///   with exactly that revision exists now.
    /// - [`create_only`](MemoryWrite::create_only): writes only if no live record has the key.
    /// - The check and the write are one atomic step in the datastore.
    ///
    /// # Errors
    /// `Conflict` when a condition does not hold (including after deletion or expiry);
    /// `Invalid`; `Storage`.
    async fn put(&self, scope: &MemoryScope, key: &str, write: MemoryWrite)
        -> Result<MemoryRecord>;

    /// Reads the live record at `key`.
    ///
    /// # Behavior
    /// - Returns `None` when there is no record or it has expired.
    ///
    /// # Errors
    /// `Invalid` for a bad key; `Storage`.
    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>>;

    /// Pages the scope's live records in ascending key order (by UTF-8 bytes).
    ///
    /// # Behavior
    /// - At most `page.limit` records (1 to 100), starting after `page.after`.
    /// - With a [`prefix`](PageRequest::prefix), only keys that start with it, byte for byte;
    ///   the datastore reads them as one range of its ordered key index (see
    ///   [Key prefix](PageRequest#key-prefix)). The empty prefix means every key.
    /// - With a [`metadata`](PageRequest::metadata) filter, only the records whose metadata
    ///   holds every condition, found by a bounded scan as `search` does: a page may then
    ///   hold fewer records than `limit`, even none, with a cursor.
    /// - `next_cursor` is `None` only when no record is left after this page (no record with
    ///   the prefix, for a prefixed page).
    /// - Cursors are positions, not snapshots: records written behind the cursor are not seen,
    ///   records written ahead of it are.
    ///
    /// # Errors
    /// `Invalid` for a bad limit, prefix or metadata filter, a match mode or case (those are
    /// for `search`), or a cursor from another operation, scope, prefix or filter; `Storage`.
    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage>;

    /// Pages the scope's live keys in ascending key order, each with the size of its record's
    /// content in bytes, without reading the contents.
    ///
    /// # Behavior
    /// - The keys `list` would return for the same request, in the same order: at most
    ///   `page.limit` (1 to 100), after `page.after`, only those starting with
    ///   [`prefix`](PageRequest::prefix) when one is given; expired records are left out.
    /// - [`content_len`](crate::KeyInfo::content_len) is the content's length in UTF-8 bytes,
    ///   taken from what the datastore keeps about the value (a stored length, a header), so a
    ///   page costs about the same whatever the contents weigh. It is what a listing that shows
    ///   sizes (the memory tool's `view` of a directory) uses instead of `list`.
    /// - Like `list`, a provider may inspect a bounded number of entries per call and return
    ///   fewer keys than `limit`, with a cursor; `next_cursor` is `None` only when no key is
    ///   left.
    /// - Its cursors are its own: a `list` cursor is refused here and the other way round.
    ///
    /// # Errors
    /// `Invalid` for a bad limit or prefix, or a cursor from another operation, scope or
    /// prefix; `Storage`.
    async fn list_keys(&self, scope: &MemoryScope, page: PageRequest) -> Result<KeyInfoPage>;

    /// Pages the scope's live records whose content contains `query`, in ascending key order.
    ///
    /// # Behavior
    /// - Literal matching: by default the whole query is one case-sensitive substring of the
    ///   content (`%`, `_`, `*` and `\` match themselves). The request may ask for every
    ///   word ([`all_words`](PageRequest::all_words)) or any word
    ///   ([`any_word`](PageRequest::any_word)) of the query instead, and for Unicode simple
    ///   case folding ([`ignore_case`](PageRequest::ignore_case)); see
    ///   [Matching and filters](PageRequest#matching-and-filters).
    /// - With a [`metadata`](PageRequest::metadata) filter, only records whose metadata holds
    ///   every condition.
    /// - A provider may inspect a bounded number of keys per call and return fewer matches
    ///   than `limit`, even none, with a cursor: continue until `next_cursor` is `None`.
    ///
    /// # Errors
    /// `Invalid` for an empty query (or, in a word mode, one of white space only or of more
    /// than 16 words), a bad limit or metadata filter, a foreign cursor or a cursor of another
    /// mode, case or filter, or a non-empty [`prefix`](PageRequest::prefix) (prefixes are for
    /// `list`); `Storage`.
    async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage>;

    /// Removes the record at `key` with every index entry for it.
    ///
    /// # Behavior
    /// - Returns whether a live record existed. An expired record is removed too, but counts as
    ///   absent.
    /// - With `expected_revision`, deletes only the live record with exactly that revision.
    ///
    /// # Errors
    /// `Conflict` when `expected_revision` is not the live revision (or nothing is live);
    /// `Invalid`; `Storage`.
    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool>;

    /// Physically erases one namespace of one user, expired records included.
    ///
    /// # Behavior
    /// - Returns how many records were removed.
    /// - Other namespaces and other users are untouched.
    /// - Trusted maintenance only: never expose it as a model tool. Revoke the user's writes
    ///   first when erasing, since a write racing with the erase may survive it.
    ///
    /// # Errors
    /// `Storage`.
    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64>;

    /// Physically erases every namespace of one application's user.
    ///
    /// # Behavior
    /// - Returns how many records were removed.
    /// - May work in batches; after a failure, calling it again removes what is left.
    /// - Afterwards no row, key, index entry or counter naming the user remains.
    ///
    /// # Errors
    /// `Invalid` for bad ids; `Storage` (some records may already be gone: retry).
    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64>;

    /// Pages every namespace of one application's user that physically holds a record,
    /// expired ones included, in ascending byte order with the default namespace first.
    ///
    /// # Behavior
    /// - This is what an export or a data-access request must cover.
    /// - Empty after `delete_user`.
    ///
    /// # Errors
    /// `Invalid` for bad ids, limit or cursor; `Storage`.
    async fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> Result<NamespacePage>;

    /// Pages the ids of one application's users that physically hold at least one record,
    /// expired ones included, in ascending byte order.
    ///
    /// # Behavior
    /// - Trusted maintenance only, like `delete_user`: never expose it as a model tool or an
    ///   MCP tool, since it names every user of the application.
    /// - A user whose records have all expired is listed until they are swept; a user is
    ///   gone from the listing after `delete_user`.
    /// - Users of other applications are never listed; `page.prefix` must be empty.
    /// - Each call costs a bounded amount of work whatever the store holds. A page may hold
    ///   fewer than `page.limit` ids (even none) and still come with a cursor: pass
    ///   `next_cursor` back until it is `None`.
    ///
    /// # Errors
    /// `Invalid` for a bad application id, limit, prefix or cursor; `Storage`.
    async fn list_users(&self, application_id: &str, page: PageRequest) -> Result<UserPage>;

    /// Pages the ids of the store's applications that physically hold at least one record,
    /// expired ones included, in ascending byte order.
    ///
    /// # Behavior
    /// - Trusted maintenance only, like `list_users`: never expose it as a model tool or an
    ///   MCP tool, since it names every application of the store. It is what a whole-store
    ///   operation (a migration, a backup) walks, calling `list_users` for each application.
    /// - An application whose records have all expired is listed until they are swept; an
    ///   application is gone from the listing once `delete_user` has erased its every user.
    /// - `page.prefix` must be empty; a cursor from another operation (`list_users` among
    ///   them) is refused, and so is a `list_applications` cursor passed to another operation.
    /// - Each call costs a bounded amount of work whatever the store holds. A page may hold
    ///   fewer than `page.limit` ids (even none) and still come with a cursor: pass
    ///   `next_cursor` back until it is `None`.
    ///
    /// # Errors
    /// `Invalid` for a bad limit, prefix or cursor; `Storage`.
    async fn list_applications(&self, page: PageRequest) -> Result<ApplicationPage>;

    /// Inspects at most `page.limit` keys of one namespace in ascending order and physically
    /// removes the expired ones.
    ///
    /// # Behavior
    /// - Returns the count removed and a cursor; continue while a cursor is present, even when
    ///   `deleted` is 0.
    /// - Records that expire after the sweep passed them wait for the next sweep.
    ///
    /// # Errors
    /// `Invalid` for a bad limit or cursor, or a non-empty prefix; `Storage`.
    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage>;
}

/// Hands every [`MemoryStore`] operation but `start` and `close` to the macro `$callback`, as
/// one signature a line, `fn name(&self, arg: Type, …) -> Output;` (the `Output` inside the
/// `Result`), so a store that wraps another (to count its calls, log them, record them for a
/// test) writes its forwarding once, and stays complete when the trait gains an operation.
/// [`observe::Observed`](crate::observe::Observed) forwards through it.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// use agent_memory::{InMemoryStore, MemoryScope, MemoryStore, Result};
///
/// /// Counts the operations it forwards.
/// #[derive(Debug)]
/// struct Counted<S> {
///     inner: S,
///     calls: AtomicU64,
/// }
///
/// macro_rules! counted {
///     ($(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty;)*) => {
///         #[async_trait::async_trait]
///         impl<S: MemoryStore> MemoryStore for Counted<S> {
///             async fn start(&self) -> Result<()> {
///                 self.inner.start().await
///             }
///
///             async fn close(&self) -> Result<()> {
///                 self.inner.close().await
///             }
///
///             $(
///                 async fn $name(&self $(, $arg: $ty)*) -> Result<$out> {
///                     self.calls.fetch_add(1, Ordering::Relaxed);
///                     self.inner.$name($($arg),*).await
///                 }
///             )*
///         }
///     };
/// }
/// agent_memory::store_operations!(counted);
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = Counted { inner: InMemoryStore::new(), calls: AtomicU64::new(0) };
/// let scope = MemoryScope::new("app", "user")?;
/// store.start().await?;
/// store.get(&scope, "theme").await?;
/// assert_eq!(store.calls.load(Ordering::Relaxed), 1, "start is forwarded, not counted");
/// # Ok::<(), agent_memory::MemoryError>(())
/// # }).unwrap();
/// ```
#[macro_export]
macro_rules! store_operations {
    ($callback:ident) => {
        $crate::store_operations!([$callback]);
    };
    // The callback as a path in brackets, and tokens handed to it before the operations (the
    // form `forward_store!` uses).
    ([$($callback:tt)*] $($before:tt)*) => {
        $($callback)*! {
            $($before)*
            fn put(&self, scope: &$crate::MemoryScope, key: &str, write: $crate::MemoryWrite)
                -> $crate::MemoryRecord;
            fn get(&self, scope: &$crate::MemoryScope, key: &str)
                -> ::std::option::Option<$crate::MemoryRecord>;
            fn list(&self, scope: &$crate::MemoryScope, page: $crate::PageRequest)
                -> $crate::MemoryPage;
            fn list_keys(&self, scope: &$crate::MemoryScope, page: $crate::PageRequest)
                -> $crate::KeyInfoPage;
            fn search(
                &self,
                scope: &$crate::MemoryScope,
                query: &str,
                page: $crate::PageRequest
            ) -> $crate::MemoryPage;
            fn delete(
                &self,
                scope: &$crate::MemoryScope,
                key: &str,
                expected_revision: ::std::option::Option<&$crate::Revision>
            ) -> bool;
            fn delete_all(&self, scope: &$crate::MemoryScope) -> u64;
            fn delete_user(&self, application_id: &str, user_id: &str) -> u64;
            fn list_namespaces(
                &self,
                application_id: &str,
                user_id: &str,
                page: $crate::PageRequest
            ) -> $crate::NamespacePage;
            fn list_users(&self, application_id: &str, page: $crate::PageRequest)
                -> $crate::UserPage;
            fn list_applications(&self, page: $crate::PageRequest) -> $crate::ApplicationPage;
            fn purge_expired(&self, scope: &$crate::MemoryScope, page: $crate::PageRequest)
                -> $crate::MemoryCleanupPage;
        }
    };
}

/// Implements [`MemoryStore`] for a store that wraps another in one of its fields: `start` and
/// `close` are forwarded as they are, and every other operation first calls the store's
/// method `before` with the operation's name (`"put"`, `"get"`, …), then is forwarded with the
/// same arguments. For a store of a concrete type; a generic one writes its own callback for
/// [`store_operations!`].
///
/// ```
/// use std::sync::{Arc, Mutex};
///
/// use agent_memory::{InMemoryStore, MemoryScope, MemoryStore};
///
/// /// Notes the name of every operation it forwards.
/// #[derive(Debug)]
/// struct Noted {
///     inner: Arc<dyn MemoryStore>,
///     names: Mutex<Vec<&'static str>>,
/// }
///
/// impl Noted {
///     fn note(&self, operation: &'static str) {
///         self.names.lock().unwrap().push(operation);
///     }
/// }
///
/// agent_memory::forward_store!(Noted, inner, note);
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = Noted { inner: Arc::new(InMemoryStore::new()), names: Mutex::new(Vec::new()) };
/// let scope = MemoryScope::new("app", "user")?;
/// store.start().await?;
/// store.get(&scope, "theme").await?;
/// assert_eq!(*store.names.lock().unwrap(), ["get"], "start is forwarded, not noted");
/// # Ok::<(), agent_memory::MemoryError>(())
/// # }).unwrap();
/// ```
#[macro_export]
macro_rules! forward_store {
    ($store:ty, $inner:ident, $before:ident) => {
        $crate::store_operations!([$crate::__forward_store] $store, $inner, $before;);
    };
}

/// The implementation [`forward_store!`] writes, given the operations.
#[doc(hidden)]
#[macro_export]
macro_rules! __forward_store {
    (
        $store:ty, $inner:ident, $before:ident;
        $(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty;)*
    ) => {
        #[$crate::__private::async_trait]
        impl $crate::MemoryStore for $store {
            async fn start(&self) -> $crate::Result<()> {
                self.$inner.start().await
            }

            async fn close(&self) -> $crate::Result<()> {
                self.$inner.close().await
            }

            $(
                async fn $name(&self $(, $arg: $ty)*) -> $crate::Result<$out> {
                    self.$before(stringify!($name));
                    self.$inner.$name($($arg),*).await
                }
            )*
        }
    };
}
