//! The behaviour suite every provider runs, as public code (feature `conformance`).
//!
//! Each case is a `pub async fn(Harness)` in [`cases`] that checks one rule of the contract
//! (the "Semantics" of the design, and the `# Behavior` lists on [`MemoryStore`]). The cases
//! are grouped by concern: basics, isolation, conditional writes (cas), expiry, paging, search,
//! erasure, namespaces, users, applications, key prefix, limits, hostile input, concurrency,
//! replicas, and the [`Facts`](crate::Facts) and [`ScopedMemory`](crate::ScopedMemory) layers
//! over a store.
//!
//! # Running it against a provider
//!
//! Write a factory that returns an unstarted store, then stamp one `#[test]` per case with
//! [`conformance_tests!`](crate::conformance_tests):
//!
//! ```
//! use std::sync::Arc;
//! use agent_memory::conformance::Fixture;
//! # use agent_memory::InMemoryStore as MyStore;
//!
//! async fn store() -> Fixture {
//!     Fixture::new(Arc::new(MyStore::new()))
//! }
//!
//! agent_memory::conformance_tests!(store);
//! # fn main() {}
//! ```
//!
//! The repository's `crates/agent-memory/examples/custom_provider.rs` is a whole provider
//! written outside the crate, and `crates/agent-memory/tests/custom_provider.rs` runs this
//! suite on it with a clock and quotas: the model for a provider of your own.
//!
//! The harness starts the store, runs the case on a fresh multi-threaded runtime, and closes
//! the store. The macro and [`CASE_NAMES`] expand from one list, so every provider runs the
//! same cases; the in-memory provider's test also checks that every `pub async fn` in a case
//! file is on that list.
//!
//! # Sharing one database
//!
//! Each case runs under a fresh random application id ([`Harness::app`]) and touches nothing
//! outside it, so cases run in parallel and many runs can share one database, one Redis or one
//! cluster without cleaning up. Cases never wipe the whole store.
//!
//! # Replicas
//!
//! A provider meant for several application replicas on one datastore passes a second,
//! independent instance with [`Fixture::with_replica`]:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use agent_memory::conformance::Fixture;
//! # #[derive(Debug)] struct MyStore;
//! # impl MyStore { fn connect(_: &str) -> agent_memory::InMemoryStore { Default::default() } }
//! async fn store() -> Fixture {
//!     let url = std::env::var("MY_URL").unwrap();
//!     Fixture::new(Arc::new(MyStore::connect(&url))).with_replica(Arc::new(MyStore::connect(&url)))
//! }
//! ```
//!
//! The replica cases then race compare-and-set, `create_only` and `delete_user` across the two
//! instances. Without a replica ([`Harness::replica`] is then the store itself) they race tasks
//! of one instance, which is all the in-memory provider can have.
//!
//! # Cursors of a provider's own
//!
//! The cases use only the cursors the store returns, with two exceptions: cursors made with
//! the core's helpers ([`provider::key_cursor`](crate::provider::key_cursor) and its
//! siblings) for another operation, scope or prefix, or garbage, which every store must
//! refuse as `Invalid` naming `cursor`; and, for a store whose real cursors are in the core's
//! format, cursors forged or garbled in that format, which must name at most a position in
//! their own scope. A store with cursors of its own refuses all of the core's as foreign, and
//! `list_applications` cases read its listing from the start instead of from a cursor
//! positioned at their own application.
//!
//! # Time
//!
//! Providers whose clock can be injected pass a [`ManualClock`] with [`Fixture::with_clock`];
//! expiry cases then move time instead of sleeping. Providers whose datastore keeps time
//! (PostgreSQL, Redis) leave it out: [`Harness::soon`] is then about 2.5 s ahead,
//! [`Harness::wait_for_expiry`] sleeps about 2.8 s, and the datastore's own clock decides. Cases
//! compare timestamps exactly only when [`Harness::has_manual_clock`] is true, and by order
//! otherwise.
//!
//! # Quotas
//!
//! The quota cases open stores with [`Quotas`] through [`Fixture::with_quotas`]: a function
//! that builds another unstarted instance on the same datastore (and clock) with the given
//! limits. A fixture without one fails those cases, naming what is missing. A provider that
//! keeps its records inside the instance, with an injectable clock, gets its store, clock and
//! quota stores from one function with [`Fixture::in_process`].
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use agent_memory::conformance::Fixture;
//! # use agent_memory::{InMemoryStore, Quotas};
//! # #[derive(Debug)] struct MyStore;
//! # impl MyStore {
//! #     fn connect(_: &str) -> InMemoryStore { Default::default() }
//! #     fn connect_with_quotas(_: &str, quotas: Quotas) -> InMemoryStore {
//! #         InMemoryStore::builder().quotas(quotas).build().unwrap()
//! #     }
//! # }
//! async fn store() -> Fixture {
//!     let url = std::env::var("MY_URL").unwrap();
//!     let quota_url = url.clone();
//!     Fixture::new(Arc::new(MyStore::connect(&url)))
//!         .with_quotas(move |quotas| Arc::new(MyStore::connect_with_quotas(&quota_url, quotas)))
//! }
//! ```
//!
//! # Scan and batch bounds
//!
//! A provider whose scan and erasure budgets are options (`search_scan_limit`,
//! `search_scan_bytes`, `erase_batch_size`) passes [`Fixture::with_bounds`]: a function that
//! builds another unstarted instance on the same datastore with the given [`Bounds`]. The
//! bounds cases then open stores with tiny budgets and check that every call stays within them
//! and that resuming from the cursors (or erasing batch by batch) still covers everything. A
//! fixture without one has nothing to check there, and those cases end at once.
//!
//! # Racing a provider's own instances
//!
//! [`increment_counter`] is the compare-and-set increment the concurrency and replica cases
//! race; a provider's own tests can race it across processes or connections the same way.
//!
//! # Reading a failure
//!
//! Each case's documentation is one sentence naming the rule it checks, and every assertion
//! message says which rule broke and what was seen. Cases are independent: run one alone with
//! `cargo test <case_name>`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::quota::Quotas;
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::time::{Clock, ManualClock, Timestamp};

/// What a case gets: the started store (and its replica), a fresh application id, and a way to
/// move time.
#[derive(Debug, Clone)]
pub struct Harness {
    store: Arc<dyn MemoryStore>,
    replica: Arc<dyn MemoryStore>,
    clock: Option<ManualClock>,
    quotas: Option<Factory<Quotas>>,
    bounds: Option<Factory<Bounds>>,
    application_id: String,
    guards: Guards,
}

impl Harness {
    /// Starts the fixture's store (and its replica, when it has one) under a fresh random
    /// application id. The harness, and every clone of it, keeps the fixture's
    /// [guards](Fixture::with_guard) alive.
    ///
    /// # Panics
    /// If the store or its replica does not start.
    pub async fn start(fixture: Fixture) -> Self {
        fixture.store.start().await.expect("the store under test starts");
        let replica = match fixture.replica {
            Some(replica) => {
                replica.start().await.expect("the replica of the store under test starts");
                replica
            }
            None => Arc::clone(&fixture.store),
        };
        Self {
            store: fixture.store,
            replica,
            clock: fixture.clock,
            quotas: fixture.quotas,
            bounds: fixture.bounds,
            application_id: format!("conformance-{}", uuid::Uuid::new_v4().simple()),
            guards: fixture.guards,
        }
    }

    /// The store under test.
    pub fn store(&self) -> &dyn MemoryStore {
        self.store.as_ref()
    }

    /// The store under test, shared (for spawned tasks).
    pub fn shared_store(&self) -> Arc<dyn MemoryStore> {
        Arc::clone(&self.store)
    }

    /// A second, started instance on the same datastore (see [`Fixture::with_replica`]); the
    /// store itself when the fixture has no replica.
    pub fn replica(&self) -> Arc<dyn MemoryStore> {
        Arc::clone(&self.replica)
    }

    /// True when [`replica`](Self::replica) is a separate instance, not the store itself.
    pub fn has_replica(&self) -> bool {
        !Arc::ptr_eq(&self.store, &self.replica)
    }

    /// A started instance on the store's datastore with `quotas` (see
    /// [`Fixture::with_quotas`]); the caller closes it.
    ///
    /// # Panics
    /// If the fixture gives no way to build one, or it does not start.
    pub async fn with_quotas(&self, quotas: Quotas) -> Arc<dyn MemoryStore> {
        let factory = self.quotas.as_ref().expect(
            "the fixture gives no way to open a store with quotas: add Fixture::with_quotas",
        );
        factory.started(quotas, "quotas").await
    }

    /// A started instance on the store's datastore with `bounds` (see
    /// [`Fixture::with_bounds`]), or `None` when the fixture gives no way to build one; the
    /// caller closes it.
    ///
    /// # Panics
    /// If it does not start.
    pub async fn with_bounds(&self, bounds: Bounds) -> Option<Arc<dyn MemoryStore>> {
        Some(self.bounds.as_ref()?.started(bounds, "bounds").await)
    }

    /// This case's application id.
    pub fn app(&self) -> &str {
        &self.application_id
    }

    /// Another application id of this case's own: [`app`](Self::app), then `/`, then
    /// `suffix`. No other case uses it, and the ids of one case sit together in byte order
    /// right after its `app`, so `list_applications` cases page from there instead of reading
    /// a listing other cases share.
    ///
    /// # Panics
    /// If the result is not a valid id (a `suffix` over 83 bytes, or with a control character).
    pub fn extra_app(&self, suffix: &str) -> String {
        let app = format!("{}/{suffix}", self.application_id);
        crate::validation::id("application_id", &app).expect("a valid application id suffix");
        app
    }

    /// The default namespace of `user` in this case's application.
    ///
    /// # Panics
    /// If `user` is not a valid id.
    pub fn scope(&self, user: &str) -> MemoryScope {
        MemoryScope::new(self.application_id.clone(), user).expect("a valid user id")
    }

    /// The namespace `namespace` of `user` in this case's application.
    ///
    /// # Panics
    /// If `user` or `namespace` is not a valid id.
    pub fn scope_in(&self, user: &str, namespace: &str) -> MemoryScope {
        self.scope(user).with_namespace(namespace).expect("a valid namespace")
    }

    /// True when the store's clock is injected (so [`advance`](Self::advance) does not sleep).
    pub fn has_manual_clock(&self) -> bool {
        self.clock.is_some()
    }

    /// "Now" as the store sees it (its injected clock, or the system clock).
    pub fn now(&self) -> Timestamp {
        match &self.clock {
            Some(clock) => clock.now(),
            None => Timestamp::now(),
        }
    }

    /// Lets `by` pass for the store: moves an injected clock, or sleeps.
    pub async fn advance(&self, by: Duration) {
        match &self.clock {
            Some(clock) => clock.advance(by),
            None => tokio::time::sleep(by).await,
        }
    }

    /// An expiry far enough ahead to write with, and short enough to wait out with
    /// [`wait_for_expiry`](Self::wait_for_expiry).
    pub fn soon(&self) -> Timestamp {
        self.now().saturating_add(EXPIRY_WINDOW)
    }

    /// Lets every expiry from [`soon`](Self::soon) pass.
    pub async fn wait_for_expiry(&self) {
        self.advance(EXPIRY_WINDOW + Duration::from_millis(300)).await;
    }
}

/// How far ahead [`Harness::soon`] lies: long enough that a write and a read before the
/// expiry finish in time on a loaded machine.
const EXPIRY_WINDOW: Duration = Duration::from_millis(2500);

/// Runs one case on a fresh multi-threaded runtime: builds the fixture, starts the store (and
/// its replica), runs the case, closes them, then drops the fixture's
/// [guards](Fixture::with_guard). Used by [`conformance_tests!`](crate::conformance_tests).
///
/// # Panics
/// When the case fails.
pub fn run<F, FFut, C, CFut>(factory: F, case: C)
where
    F: FnOnce() -> FFut,
    FFut: Future<Output = Fixture>,
    C: FnOnce(Harness) -> CFut,
    CFut: Future<Output = ()>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let harness = Harness::start(factory().await).await;
        let store = harness.shared_store();
        let replica = harness.has_replica().then(|| harness.replica());
        // The case takes the harness; the guards must outlive the closes below.
        let guards = harness.guards.clone();
        case(harness).await;
        if let Some(replica) = replica {
            replica.close().await.expect("the replica of the store under test closes");
        }
        store.close().await.expect("the store under test closes");
        drop(guards);
    });
}

mod fixture;
mod support;

pub use fixture::{Bounds, Fixture};
use fixture::{Factory, Guards};
pub use support::{increment_counter, Increment};

mod applications;
mod basics;
mod bounds;
mod cas;
mod concurrency;
mod erasure;
mod expiry;
mod facts;
mod hostile;
mod isolation;
mod keys;
mod limits;
mod namespaces;
mod paging;
mod prefix;
mod quotas;
mod replicas;
mod scoped;
mod search;
mod search_options;
mod users;

/// Every case, by concern. Each is a `pub async fn(Harness)`; [`CASE_NAMES`] lists them all.
pub mod cases {
    pub use super::applications::*;
    pub use super::basics::*;
    pub use super::bounds::*;
    pub use super::cas::*;
    pub use super::concurrency::*;
    pub use super::erasure::*;
    pub use super::expiry::*;
    pub use super::facts::*;
    pub use super::hostile::*;
    pub use super::isolation::*;
    pub use super::keys::*;
    pub use super::limits::*;
    pub use super::namespaces::*;
    pub use super::paging::*;
    pub use super::prefix::*;
    pub use super::quotas::*;
    pub use super::replicas::*;
    pub use super::scoped::*;
    pub use super::search::*;
    pub use super::search_options::*;
    pub use super::users::*;
}

/// The name of every case in [`cases`], in the order
/// [`conformance_tests!`](crate::conformance_tests) stamps them. Built from the same list as the
/// macro, so the two cannot drift apart.
pub const CASE_NAMES: &[&str] = crate::__conformance_case_list!(__conformance_names!());

/// A conformance case as a future, for runners that choose cases by name at run time (the
/// Python package's conformance mixin runs each case of [`CASE_NAMES`] as one Python test).
/// `None` when `name` is not on the list.
///
/// The caller starts the [`Harness`] and closes the store afterwards, as [`run`] does.
pub fn case_by_name(
    name: &str,
    harness: Harness,
) -> Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>> {
    crate::__conformance_case_list!(__conformance_case_by_name!(name, harness))
}

/// Stamps one `#[test]` per conformance case for a store factory: a path to an
/// `async fn() -> Fixture`.
///
/// ```
/// # use agent_memory::conformance::Fixture;
/// # async fn my_store() -> Fixture {
/// #     Fixture::new(std::sync::Arc::new(agent_memory::InMemoryStore::new()))
/// # }
/// agent_memory::conformance_tests!(my_store);
/// # fn main() {}
/// ```
///
/// Each test builds a fresh fixture, so cases are independent and run in parallel.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:path) => {
        $crate::__conformance_case_list!(__conformance_cases!($factory));
    };
}

/// The one list of cases. Calls `$crate::$then!(args; case, case, …)`, so the test stamper and
/// [`CASE_NAMES`](crate::conformance::CASE_NAMES) share it.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_case_list {
    ($then:ident ! ( $($args:tt)* )) => {
        $crate::$then! { $($args)*;
            // basics
            put_then_get_round_trips,
            get_missing_key_returns_none,
            new_record_is_stamped_now,
            replace_keeps_created_at_and_moves_updated_at,
            replace_overwrites_every_field,
            every_write_gets_a_new_revision,
            returned_records_are_detached,
            unicode_content_round_trips,
            metadata_round_trips,
            source_round_trips,
            keys_are_opaque_text,
            start_is_idempotent,
            // isolation
            users_are_isolated,
            namespaces_are_isolated,
            delimiter_joined_scopes_stay_apart,
            awkward_user_ids_are_isolated,
            awkward_namespaces_are_isolated,
            applications_are_isolated,
            // cas
            expected_revision_replaces_live_record,
            stale_revision_conflicts_and_changes_nothing,
            expected_revision_conflicts_after_delete,
            expected_revision_conflicts_after_expiry,
            expected_revision_conflicts_when_key_never_existed,
            create_only_writes_absent_key,
            create_only_conflicts_on_live_key,
            create_only_succeeds_over_expired_key,
            delete_with_revision_checks_it,
            delete_with_revision_of_missing_record_conflicts,
            revisions_are_never_reused,
            // expiry
            expired_record_is_invisible_to_reads,
            expiry_boundary_is_exact,
            delete_all_counts_expired_records,
            delete_user_counts_expired_records,
            list_namespaces_includes_expired_only_namespaces,
            delete_of_expired_record_returns_false,
            purge_removes_only_expired_records,
            purge_pages_with_small_limits,
            replacing_expired_record_counts_as_new,
            expiry_must_be_in_the_future,
            // paging
            list_returns_every_record_once_in_byte_order,
            next_cursor_is_none_only_when_nothing_is_left,
            page_limit_is_checked,
            foreign_cursors_are_invalid,
            malformed_cursors_are_invalid,
            cursors_are_positions_not_snapshots,
            pages_stay_inside_their_scope,
            // key prefix
            list_prefix_returns_exactly_the_matching_keys,
            list_prefix_cursor_ends_with_the_prefix,
            list_prefix_treats_pattern_characters_literally,
            list_prefix_handles_multibyte_and_0xff_boundaries,
            empty_prefix_lists_every_key,
            list_prefix_cursors_are_bound_to_their_prefix,
            list_prefix_is_validated_and_list_only,
            list_prefix_stays_inside_its_scope_and_skips_expired,
            // keys and sizes
            list_keys_returns_the_keys_of_list_with_content_sizes,
            list_keys_skips_expired_records,
            list_keys_validates_input_and_keeps_its_own_cursors,
            // search
            search_treats_pattern_characters_literally,
            search_is_case_sensitive_substring,
            search_matches_content_only,
            search_matches_unicode_literally,
            search_pages_every_match_once,
            search_query_is_validated,
            search_matches_overlapping_and_repetitive_patterns,
            search_long_queries_page_only_real_matches,
            search_budget_returns_a_cursor_and_resuming_finds_the_match,
            // match modes, case and metadata filters
            search_all_words_needs_every_word_in_any_order,
            search_any_word_needs_one_word,
            search_words_are_literal_substrings,
            search_ignore_case_uses_simple_case_folding,
            search_ignore_case_prefilters_never_miss_a_match,
            search_options_are_validated_and_search_only,
            metadata_filter_selects_on_list_and_search,
            metadata_filter_compares_values_by_type,
            metadata_filter_is_validated,
            cursors_are_bound_to_mode_case_and_filter,
            filtered_list_and_word_search_stay_bounded,
            // scan and batch bounds
            search_scan_limit_bounds_the_keys_of_each_call,
            search_scan_bytes_bounds_the_content_of_each_call,
            a_filtered_list_is_a_bounded_scan_within_its_prefix,
            erasure_in_small_batches_removes_everything,
            // erasure
            delete_reports_whether_a_live_record_existed,
            delete_all_erases_one_namespace,
            delete_all_of_default_namespace_keeps_named_ones,
            delete_user_erases_every_namespace,
            delete_user_leaves_other_users,
            delete_user_validates_and_tolerates_unknown_users,
            // namespaces
            list_namespaces_orders_default_first_then_bytes,
            list_namespaces_pages_with_limit_one,
            list_namespaces_is_empty_for_unknown_user,
            list_namespaces_validates_ids,
            // users
            list_users_orders_ids_by_bytes,
            list_users_pages_with_limit_one,
            list_users_includes_expired_only_users,
            list_users_omits_erased_users,
            list_users_includes_users_with_only_named_namespaces,
            list_users_never_lists_other_applications,
            list_users_is_empty_for_an_empty_application,
            list_users_validates_input,
            // applications
            list_applications_orders_ids_by_bytes,
            list_applications_pages_with_limit_one,
            list_applications_includes_expired_only_applications,
            list_applications_omits_erased_applications,
            list_applications_validates_input,
            // limits
            key_length_limit_counts_bytes,
            empty_key_is_invalid,
            control_characters_in_keys_are_invalid,
            id_limits_are_enforced,
            content_limit_is_64_kib,
            metadata_and_source_share_16_kib,
            metadata_must_be_an_object,
            metadata_depth_is_bounded,
            nul_is_invalid_everywhere,
            rejected_replace_leaves_record_unchanged,
            // hostile input
            injection_strings_round_trip_byte_for_byte,
            injection_strings_search_literally,
            injection_strings_as_ids_stay_isolated,
            huge_inputs_are_invalid_and_change_nothing,
            forged_and_garbled_cursors_are_invalid,
            // concurrency
            concurrent_compare_and_set_loses_no_update,
            concurrent_create_only_has_one_winner,
            concurrent_conditional_delete_has_one_winner,
            concurrent_writes_to_distinct_keys_all_land,
            // quotas
            quota_admits_up_to_the_limit_and_refuses_one_past,
            quota_counts_every_namespace_of_the_user_only,
            quota_replace_counts_only_the_difference,
            quota_deletes_and_erasure_free_space,
            quota_expired_records_count_until_purged,
            quota_bytes_count_key_content_metadata_and_source,
            quota_conditional_writes_obey_it,
            quota_concurrent_writers_never_overshoot,
            // replicas
            replicas_see_each_others_writes,
            replicas_compare_and_set_never_wins_a_revision_twice,
            replicas_create_only_has_one_winner_per_key,
            delete_user_racing_writes_leaves_whole_records,
            // facts
            facts_remember_always_adds,
            facts_recall_oldest_first_with_truncating_limit,
            facts_forget_reports_whether_it_removed,
            facts_erase_removes_everything_of_the_user,
            // scoped
            scoped_memory_namespaces_are_isolated,
            scoped_memory_applies_its_source,
        }
    };
}

/// Expands one test per listed case.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases {
    ($factory:path; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::conformance::run($factory, $crate::conformance::cases::$case);
            }
        )*
    };
}

/// Expands to the listed case names as a `&[&str]`.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_names {
    (; $($case:ident),* $(,)?) => {
        &[$(stringify!($case)),*]
    };
}

/// Expands to a `match` from a case name to that case's boxed future.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_case_by_name {
    ($name:expr, $harness:expr; $($case:ident),* $(,)?) => {
        match $name {
            $(
                stringify!($case) => Some(::std::boxed::Box::pin(
                    $crate::conformance::cases::$case($harness),
                ) as ::std::pin::Pin<::std::boxed::Box<dyn ::std::future::Future<Output = ()> + Send>>),
            )*
            _ => None,
        }
    };
}
