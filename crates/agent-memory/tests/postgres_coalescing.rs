//! PostgreSQL write coalescing against a real server: many concurrent writers on a pool too
//! small for them, so their writes share statements, each still getting exactly its own
//! outcome; and the commits counted, to show that they did share.
//!
//! The server is `AGENT_MEMORY_TEST_POSTGRES_URL` when set, otherwise one the testkit starts
//! for this process.

mod support {
    pub mod pg;
}

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::{MemoryError, MemoryScope, MemoryStore, MemoryWrite, PostgresMemoryStore};
use agent_memory_testkit::postgres::shared_url;
use support::pg::{connect, unique};

fn scope(app: &str, user: &str) -> MemoryScope {
    MemoryScope::new(app, user).expect("valid ids")
}

/// `url` with its database replaced by `database`.
fn on_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let (server, _) = base.rsplit_once('/').expect("a database in the URL");
    match query {
        Some(query) => format!("{server}/{database}?{query}"),
        None => format!("{server}/{database}"),
    }
}

/// A store on `url` whose one connection forces concurrent writes to queue, and so to share
/// statements, with statements `prepared` by name or sent unnamed (pooler mode).
fn narrow(url: &str, batch_max: usize, prepared: bool) -> Arc<PostgresMemoryStore> {
    let store = PostgresMemoryStore::builder(url)
        .expect("a valid URL")
        .prepared_statements(prepared)
        .min_connections(1)
        .max_connections(1)
        .write_batch_max(batch_max)
        .max_records_per_user(1_000)
        .build()
        .expect("a valid configuration");
    Arc::new(store)
}

/// Runs `writes` concurrent tasks of `each`.
async fn concurrently<T, F>(writes: usize, each: impl Fn(usize) -> F) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let tasks: Vec<_> = (0..writes).map(|i| tokio::spawn(each(i))).collect();
    let mut results = Vec::with_capacity(writes);
    for task in tasks {
        results.push(task.await.expect("task"));
    }
    results
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_get_exactly_their_own_outcomes() {
    own_outcomes(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_get_exactly_their_own_outcomes_with_unnamed_statements() {
    own_outcomes(false).await;
}

async fn own_outcomes(prepared: bool) {
    let app = unique("coalesce");
    let store = narrow(&shared_url(), 16, prepared);
    store.start().await.expect("start");

    // Creations of many users and of one user, at once: each gets its own record.
    let created = concurrently(64, |i| {
        let (store, app) = (Arc::clone(&store), app.clone());
        async move {
            let user = if i % 2 == 0 { format!("user-{i}") } else { "shared".to_owned() };
            let s = scope(&app, &user);
            let key = format!("k{i}");
            let written = store
                .put(&s, &key, MemoryWrite::new(format!("content {i}")).create_only())
                .await
                .expect("a create-only put of a new key");
            assert_eq!(
                (written.key.as_str(), written.content.as_str()),
                (key.as_str(), &*format!("content {i}"))
            );
            assert_eq!(written.scope, s);
            written
        }
    })
    .await;
    let revisions: HashSet<_> = created.iter().map(|r| r.revision.clone()).collect();
    assert_eq!(revisions.len(), created.len(), "every write has its own revision");
    for record in &created {
        let read = store.get(&record.scope, &record.key).await.expect("get").expect("stored");
        assert_eq!(&read, record);
    }

    // A second create-only of every key conflicts, whatever batch it lands in.
    let again = concurrently(64, |i| {
        let (store, app) = (Arc::clone(&store), app.clone());
        async move {
            let user = if i % 2 == 0 { format!("user-{i}") } else { "shared".to_owned() };
            store
                .put(&scope(&app, &user), &format!("k{i}"), MemoryWrite::new("x").create_only())
                .await
        }
    })
    .await;
    assert!(again.iter().all(|r| matches!(r, Err(MemoryError::Conflict { .. }))), "{again:?}");

    // Compare-and-set races on one key: every round, exactly one writer wins, the others
    // (in the same batch or the next) get Conflict.
    let s = scope(&app, "shared");
    let mut current = store.put(&s, "cas", MemoryWrite::new("0")).await.expect("put");
    for round in 0..10 {
        let expected = current.revision.clone();
        let results = concurrently(8, |writer| {
            let (store, s, expected) = (Arc::clone(&store), s.clone(), expected.clone());
            async move {
                let write =
                    MemoryWrite::new(format!("{round}/{writer}")).expected_revision(expected);
                store.put(&s, "cas", write).await
            }
        })
        .await;
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for result in &results {
            if let Err(err) = result {
                assert!(err.is_conflict(), "round {round}: {err}");
            }
        }
        let read = store.get(&s, "cas").await.expect("get").expect("present");
        assert_eq!(&read, winners[0]);
        assert!(number(&read.revision) > number(&current.revision), "revisions grow");
        current = read;
    }

    // Compare-and-set replacements and deletes of many keys at once, half with a stale
    // revision: the current half succeed, the stale half conflict and change nothing.
    let outcomes = concurrently(created.len(), |i| {
        let (store, record) = (Arc::clone(&store), created[i].clone());
        // A revision this key never had: another key's.
        let other = created[(i + 1) % created.len()].revision.clone();
        async move {
            let stale = i % 4 < 2;
            let revision = if stale { other } else { record.revision.clone() };
            let result = if i % 2 == 0 {
                store
                    .put(
                        &record.scope,
                        &record.key,
                        MemoryWrite::new("replaced").expected_revision(revision),
                    )
                    .await
                    .map(|_| true)
            } else {
                store.delete(&record.scope, &record.key, Some(&revision)).await
            };
            (stale, result, record)
        }
    })
    .await;
    for (stale, result, record) in outcomes {
        let read = store.get(&record.scope, &record.key).await.expect("get");
        match (stale, result) {
            (true, Err(err)) => {
                assert!(err.is_conflict(), "{err}");
                assert_eq!(read.as_ref(), Some(&record), "a stale write changes nothing");
            }
            (false, Ok(true)) => {
                // A replacement is there with a newer revision; a delete left nothing.
                if let Some(read) = read {
                    assert_eq!(read.content, "replaced");
                    assert!(number(&read.revision) > number(&record.revision), "revisions grow");
                }
            }
            (stale, result) => panic!("stale {stale}: {result:?}"),
        }
    }

    // Unconditional deletes, of present and absent keys at once: each caller learns whether
    // its own key held a live record.
    let deleted = concurrently(64, |i| {
        let (store, app) = (Arc::clone(&store), app.clone());
        async move {
            let user = if i % 2 == 0 { format!("user-{i}") } else { "shared".to_owned() };
            let key = format!("k{i}");
            let existed = store.get(&scope(&app, &user), &key).await.expect("get").is_some();
            (existed, store.delete(&scope(&app, &user), &key, None).await.expect("delete"))
        }
    })
    .await;
    for (existed, deleted) in deleted {
        assert_eq!(existed, deleted);
    }
    store.delete_user(&app, "shared").await.expect("erase");
    store.close().await.expect("close");
}

/// The sequence number behind a PostgreSQL revision token (decimal).
fn number(revision: &agent_memory::Revision) -> u64 {
    revision.as_str().parse().expect("a decimal revision")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_rejects_exactly_the_writes_that_would_exceed_it_inside_a_batch() {
    let app = unique("coalesce_quota");
    let store = PostgresMemoryStore::builder(&shared_url())
        .expect("url")
        .max_connections(1)
        .max_records_per_user(5)
        .build()
        .expect("config");
    let store = Arc::new(store);
    store.start().await.expect("start");
    // Ten writes of one user and ten of others, at once: the user keeps exactly five, and the
    // others' writes, sharing batches with the rejected ones, all succeed.
    let results = concurrently(20, |i| {
        let (store, app) = (Arc::clone(&store), app.clone());
        async move {
            let user = if i < 10 { "full".to_owned() } else { format!("other-{i}") };
            store.put(&scope(&app, &user), &format!("k{i}"), MemoryWrite::new("v")).await
        }
    })
    .await;
    let (full, others) = results.split_at(10);
    assert_eq!(full.iter().filter(|r| r.is_ok()).count(), 5, "{full:?}");
    assert!(full.iter().filter_map(|r| r.as_ref().err()).all(MemoryError::is_quota_exceeded));
    assert!(others.iter().all(Result::is_ok), "{others:?}");
    for user in ["full".to_owned()].into_iter().chain((10..20).map(|i| format!("other-{i}"))) {
        store.delete_user(&app, &user).await.expect("erase");
    }
    store.close().await.expect("close");
}

/// Commits on the database `database` so far, counted once every session on it has ended
/// (a session reports its counts as it exits).
async fn commits(admin: &tokio_postgres::Client, database: &str) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let sessions: i64 = admin
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE datname = $1", &[&database])
            .await
            .expect("pg_stat_activity")
            .get(0);
        if sessions == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the store's sessions did not end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    admin
        .query_one("SELECT xact_commit FROM pg_stat_database WHERE datname = $1", &[&database])
        .await
        .expect("pg_stat_database")
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_writes_share_commits_and_a_batch_bound_of_one_does_not() {
    let url = shared_url();
    let admin = connect(&url).await;
    let database = unique("coalesce_db");
    admin.batch_execute(&format!("CREATE DATABASE \"{database}\"")).await.expect("create");
    let store_url = on_database(&url, &database);
    let writes = 200;
    let mut counted = Vec::new();
    // One connection and batches of up to 64; one connection and no coalescing; four
    // connections of which writes may hold one, and batches of up to 64.
    for (connections, write_connections, batch_max) in [(1, 1, 64), (1, 1, 1), (4, 1, 64)] {
        let before = commits(&admin, &database).await;
        let store = PostgresMemoryStore::builder(&store_url)
            .expect("a valid URL")
            .min_connections(1)
            .max_connections(connections)
            .write_connections(write_connections)
            .write_batch_max(batch_max)
            .build()
            .expect("a valid configuration");
        let store = Arc::new(store);
        store.start().await.expect("start");
        let app = unique("commits");
        concurrently(writes, |i| {
            let (store, app) = (Arc::clone(&store), app.clone());
            async move {
                store
                    .put(
                        &scope(&app, &format!("u{}", i % 7)),
                        &format!("k{i}"),
                        MemoryWrite::new("v"),
                    )
                    .await
                    .expect("put");
            }
        })
        .await;
        store.close().await.expect("close");
        drop(store);
        counted.push(commits(&admin, &database).await - before);
    }
    admin.batch_execute(&format!("DROP DATABASE \"{database}\" WITH (FORCE)")).await.expect("drop");
    let (coalesced, alone, limited) = (counted[0], counted[1], counted[2]);
    eprintln!(
        "commits for {writes} writes: {coalesced} queued, {alone} alone, \
         {limited} with one write connection of four"
    );
    let writes = i64::try_from(writes).expect("small");
    // Alone, every write commits on its own (start-up adds a few more); queued behind one
    // connection, they share: far fewer commits than writes.
    assert!(alone >= writes, "{alone} commits for {writes} writes run alone");
    assert!(coalesced * 4 <= writes, "{coalesced} commits for {writes} queued writes");
    assert!(limited * 4 <= writes, "{limited} commits for {writes} writes on one write connection");
}
