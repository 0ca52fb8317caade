//! End-to-end tests of the whole-application commands (`users`, `apps`, `purge-expired
//! --all-users`, `export --all-users`, `migrate`, `migrate --all-apps`) on real SQLite files
//! and the test PostgreSQL.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

mod support;

use support::{
    assert_one_line_error, comparable, exited, json_lines, stdout_json, Fixture, FAILURE, OK,
    QUOTA_EXCEEDED,
};

/// A fresh PostgreSQL table on the test server, as a store URL.
fn postgres_store(name: &str) -> String {
    let url = agent_memory_testkit::postgres::shared_url();
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}table=cli_{name}_{nanos}")
}

/// The two stores every command is tried on: the fixture's SQLite file and a PostgreSQL table.
fn stores(fx: &Fixture, name: &str) -> Vec<String> {
    vec![fx.store.clone(), postgres_store(name)]
}

/// JSON Lines of `count` records for each user, in two namespaces, for `import --any-user`.
fn bulk(users: &[&str], count: usize, extra: &str) -> String {
    bulk_in("app", users, count, extra)
}

/// As [`bulk`], for the users of `app`.
fn bulk_in(app: &str, users: &[&str], count: usize, extra: &str) -> String {
    let mut lines = String::new();
    for user in users {
        for i in 0..count {
            let namespace = if i % 2 == 0 { "even" } else { "odd" };
            lines.push_str(&format!(
                "{{\"scope\":{{\"application_id\":\"{app}\",\"user_id\":\"{user}\",\
                 \"namespace\":\"{namespace}\"}},\"key\":\"k{i:04}\",\"content\":\"{user} {i}\",\
                 \"metadata\":{{\"n\":{i}}}{extra}}}\n"
            ));
        }
    }
    lines
}

fn seed(fx: &Fixture, store: &str, users: &[&str], count: usize) {
    fx.bare()
        .args(["--store", store, "import", "--any-user"])
        .write_stdin(bulk(users, count, ""))
        .assert()
        .code(OK);
}

fn users_of(fx: &Fixture, store: &str, args: &[&str]) -> (Vec<String>, String) {
    let output = fx
        .bare()
        .args(["--store", store, "--app", "app", "users"])
        .args(args)
        .output()
        .expect("runs");
    exited(&output, OK);
    let ids = String::from_utf8(output.stdout).unwrap().lines().map(str::to_owned).collect();
    (ids, String::from_utf8(output.stderr).unwrap())
}

#[test]
fn users_lists_pages_and_continues_after_a_user() {
    let fx = Fixture::new();
    for store in stores(&fx, "users") {
        for user in ["u3", "u1", "u2"] {
            fx.on(&store, user).args(["put", "k", "v"]).assert().code(OK);
        }
        // Another application's user is never listed.
        fx.bare()
            .args(["--store", &store, "--app", "other", "--user", "x", "put", "k", "v"])
            .assert()
            .code(OK);

        let (ids, stderr) = users_of(&fx, &store, &["--limit", "2"]);
        assert_eq!(ids, ["u1", "u2"]);
        assert_eq!(stderr, "more users: continue with --after u2\n");
        let (ids, stderr) = users_of(&fx, &store, &["--after", "u2"]);
        assert_eq!(ids, ["u3"]);
        assert_eq!(stderr, "");
        let (ids, _) = users_of(&fx, &store, &["--limit", "1", "--all"]);
        assert_eq!(ids, ["u1", "u2", "u3"]);
        let listed =
            stdout_json(fx.bare().args(["--store", &store, "--app", "app", "users", "--json"]));
        assert_eq!(
            listed,
            vec![json!({"user_id": "u1"}), json!({"user_id": "u2"}), json!({"user_id": "u3"})]
        );
        let (ids, _) = users_of(&fx, &store, &["--after", "u3"]);
        assert_eq!(ids, ["no users"]);
    }
}

#[test]
fn purge_expired_all_users_sweeps_every_user_and_continues_after_one() {
    let fx = Fixture::new();
    for store in stores(&fx, "purge") {
        for user in ["u1", "u2", "u3"] {
            for namespace in ["a", "b"] {
                fx.on(&store, user)
                    .args(["--namespace", namespace, "put", "gone", "x", "--expires-in", "1s"])
                    .assert()
                    .code(OK);
            }
            fx.on(&store, user).args(["put", "kept", "y"]).assert().code(OK);
        }
        std::thread::sleep(Duration::from_millis(1_500));
        let purge = |after: &[&str]| {
            stdout_json(
                fx.bare()
                    .args(["--store", &store, "--app", "app", "purge-expired", "--all-users"])
                    .args(after)
                    .arg("--json"),
            )
        };
        assert_eq!(purge(&["--after", "u1"]), vec![json!({"purged": 4, "users": 2})]);
        assert_eq!(purge(&[]), vec![json!({"purged": 2, "users": 3})]);
        assert_eq!(purge(&[]), vec![json!({"purged": 0, "users": 3})]);
        for user in ["u1", "u2", "u3"] {
            fx.on(&store, user).args(["get", "kept"]).assert().code(OK);
        }
    }
}

#[test]
fn export_all_users_round_trips_through_import() {
    let fx = Fixture::new();
    for store in stores(&fx, "export") {
        seed(&fx, &store, &["u1", "u2", "u3"], 130);
        fx.bare()
            .args(["--store", &store, "--app", "other", "--user", "x", "put", "k", "not app"])
            .assert()
            .code(OK);
        let file = fx.path("all.jsonl");
        let summary = stdout_json(
            fx.bare()
                .args(["--store", &store, "--app", "app", "export", "--all-users", "--json", "-o"])
                .arg(&file),
        );
        assert_eq!(summary, vec![json!({"exported": 390, "namespaces": 6, "users": 3})]);
        let exported = json_lines(&std::fs::read(&file).unwrap());
        assert_eq!(exported.len(), 390);
        assert!(exported.iter().all(|r| r["scope"]["application_id"] == "app"));
        // Users ascending, then namespaces, then keys: the same lines as per-user exports.
        let per_user: Vec<Value> = ["u1", "u2", "u3"]
            .iter()
            .flat_map(|user| stdout_json(fx.on(&store, user).arg("export")))
            .collect();
        assert_eq!(exported, per_user);

        let target = fx.other_store(&format!("imported-{}.db", exported.len() + store.len()));
        fx.bare().args(["--store", &target, "import", "--any-user"]).arg(&file).assert().code(OK);
        let again = stdout_json(fx.bare().args([
            "--store",
            &target,
            "--app",
            "app",
            "export",
            "--all-users",
        ]));
        assert_eq!(comparable(&again), comparable(&exported));
    }
}

fn migrate(fx: &Fixture, from: &str, to: &str, args: &[&str]) -> std::process::Output {
    fx.bare()
        .args(["--store", from, "--app", "app", "migrate", "--to", to])
        .args(args)
        .output()
        .expect("runs")
}

fn all_records(fx: &Fixture, store: &str) -> Vec<Value> {
    comparable(&stdout_json(fx.bare().args([
        "--store",
        store,
        "--app",
        "app",
        "export",
        "--all-users",
    ])))
}

#[test]
fn migrate_sqlite_to_postgres_copies_and_verifies_every_user() {
    let fx = Fixture::new();
    seed(&fx, &fx.store, &["u1", "u2", "u3", "u4"], 120);
    fx.on(&fx.store, "u2")
        .args(["put", "later", "expires", "--expires-in", "2h"])
        .assert()
        .code(OK);
    let target = postgres_store("migrate");

    let dry = migrate(&fx, &fx.store, &target, &["--dry-run", "--json"]);
    exited(&dry, OK);
    assert_eq!(json_lines(&dry.stdout), vec![json!({"dry_run": true, "users": 4, "records": 481})]);
    let (ids, _) = users_of(&fx, &target, &[]);
    assert_eq!(ids, ["no users"], "a dry run writes nothing");

    let run = migrate(&fx, &fx.store, &target, &[]);
    let (stdout, _) = exited(&run, OK);
    assert_eq!(
        stdout,
        "migrated 481 records of 4 users; verified: record counts and checksums equal\n"
    );
    assert_eq!(all_records(&fx, &target), all_records(&fx, &fx.store));

    // Again, and from a user on: every copy replaces the same key.
    let again = migrate(&fx, &fx.store, &target, &["--after", "u2", "--json"]);
    exited(&again, OK);
    assert_eq!(json_lines(&again.stdout)[0]["users"], 2);
    assert_eq!(all_records(&fx, &target), all_records(&fx, &fx.store));
}

#[test]
fn migrate_reports_a_user_whose_records_differ() {
    let fx = Fixture::new();
    seed(&fx, &fx.store, &["u1", "u2"], 10);
    let target = fx.other_store("target.db");
    // The target already holds a record the source lacks.
    fx.on(&target, "u2").args(["put", "stray", "only in the target"]).assert().code(OK);

    let run = migrate(&fx, &fx.store, &target, &[]);
    let (stdout, stderr) = exited(&run, FAILURE);
    assert_eq!(stdout, "differs: user u2: 10 in the source, 11 in the target\n");
    assert!(stderr.contains("verification failed: 1 user differs between"), "{stderr}");

    let json = migrate(&fx, &fx.store, &target, &["--json"]);
    assert_eq!(json.status.code(), Some(FAILURE));
    let lines = json_lines(&json.stdout);
    assert_eq!(
        lines[0],
        json!({"user_id": "u2", "source_records": 10, "target_records": 11, "checksum_equal": false})
    );
    assert_eq!(lines[1]["differences"], 1);
    assert_eq!(lines[1]["verified"], false);
}

#[test]
fn migrate_into_a_full_target_exits_5_and_says_where_to_continue() {
    let fx = Fixture::new();
    seed(&fx, &fx.store, &["u1", "u2"], 4);
    let target = format!("{}?max_records_per_user=3", fx.other_store("small.db"));
    assert_one_line_error(
        fx.bare().args(["--store", &fx.store, "--app", "app", "migrate", "--to", &target]),
        QUOTA_EXCEEDED,
        "quota exceeded: max_records_per_user is 3",
        "quota",
    );
}

#[test]
fn a_killed_migration_resumes_and_verifies() {
    let fx = Fixture::new();
    let users: Vec<String> = (0..40).map(|i| format!("user{i:02}")).collect();
    let names: Vec<&str> = users.iter().map(String::as_str).collect();
    seed(&fx, &fx.store, &names, 150);
    let target = postgres_store("resume");

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agent-memory"))
        .env_remove("AGENT_MEMORY_STORE")
        .env("HOME", fx.path("home"))
        .args(["--store", &fx.store, "--app", "app", "migrate", "--to", &target])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawns");
    // Kill it once the first users have arrived, well before 6,000 records are copied.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (ids, _) = users_of(&fx, &target, &[]);
        if ids.len() >= 2 && ids[0] != "no users" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the migration never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill");
    let _ = child.wait();
    let partial = all_records(&fx, &target).len();
    assert!(partial < 6_000, "killed too late to prove anything: {partial}");

    let resumed = migrate(&fx, &fx.store, &target, &["--json"]);
    exited(&resumed, OK);
    let summary = &json_lines(&resumed.stdout)[0];
    assert_eq!(summary["users"], 40);
    assert_eq!(summary["verified"], true);
    assert_eq!(all_records(&fx, &target), all_records(&fx, &fx.store));
}

/// Seeds `store` with `apps`: each application, its users and records per user.
fn seed_apps(fx: &Fixture, store: &str, apps: &[(&str, &[&str], usize)]) {
    let lines: String =
        apps.iter().map(|(app, users, count)| bulk_in(app, users, *count, "")).collect();
    fx.bare().args(["--store", store, "import", "--any-user"]).write_stdin(lines).assert().code(OK);
}

fn migrate_all(fx: &Fixture, from: &str, to: &str, args: &[&str]) -> std::process::Output {
    fx.bare()
        .args(["--store", from, "migrate", "--to", to, "--all-apps"])
        .args(args)
        .output()
        .expect("runs")
}

/// The application ids of `store`, as `apps --all` prints them.
fn apps_of(fx: &Fixture, store: &str) -> Vec<String> {
    let output = fx.bare().args(["--store", store, "apps", "--all"]).output().expect("runs");
    exited(&output, OK);
    String::from_utf8(output.stdout).unwrap().lines().map(str::to_owned).collect()
}

/// Every live record of every application of `store`, application by application.
fn every_record(fx: &Fixture, store: &str) -> Vec<Value> {
    let mut all = Vec::new();
    for app in apps_of(fx, store) {
        all.extend(comparable(&stdout_json(fx.bare().args([
            "--store",
            store,
            "--app",
            &app,
            "export",
            "--all-users",
        ]))));
    }
    all
}

#[test]
fn apps_lists_pages_and_continues_after_an_application() {
    let fx = Fixture::new();
    for store in stores(&fx, "apps") {
        seed_apps(&fx, &store, &[("b", &["u1"], 1), ("a", &["u1", "u2"], 1), ("é", &["u"], 1)]);
        let output =
            fx.bare().args(["--store", &store, "apps", "--limit", "2"]).output().expect("runs");
        assert_eq!(String::from_utf8_lossy(&output.stdout), "a\nb\n");
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            "more applications: continue with --after b\n"
        );
        let rest = fx.bare().args(["--store", &store, "apps", "--after", "b"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&rest.stdout), "é\n");
        assert_eq!(apps_of(&fx, &store), ["a", "b", "é"]);
        let listed = stdout_json(fx.bare().args(["--store", &store, "apps", "--json", "--all"]));
        assert_eq!(listed[0], json!({"application_id": "a"}));
        let none = fx.bare().args(["--store", &store, "apps", "--after", "é"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&none.stdout), "no applications\n");
    }
}

#[test]
fn migrate_all_apps_sqlite_to_postgres_copies_and_verifies_every_application() {
    let fx = Fixture::new();
    seed_apps(
        &fx,
        &fx.store,
        &[("app", &["u1", "u2"], 30), ("app-b", &["u1"], 10), ("été", &["u1", "u2"], 5)],
    );
    let target = postgres_store("migrate_all");

    let dry = migrate_all(&fx, &fx.store, &target, &["--dry-run", "--json"]);
    exited(&dry, OK);
    assert_eq!(
        json_lines(&dry.stdout),
        vec![
            json!({"application_id": "app", "dry_run": true, "users": 2, "records": 60}),
            json!({"application_id": "app-b", "dry_run": true, "users": 1, "records": 10}),
            json!({"application_id": "été", "dry_run": true, "users": 2, "records": 10}),
            json!({"dry_run": true, "applications": 3, "users": 5, "records": 80}),
        ]
    );
    assert_eq!(apps_of(&fx, &target), ["no applications"], "a dry run writes nothing");

    let run = migrate_all(&fx, &fx.store, &target, &[]);
    let (stdout, _) = exited(&run, OK);
    assert_eq!(
        stdout,
        "application app: migrated 60 records of 2 users\n\
         application app-b: migrated 10 records of 1 user\n\
         application été: migrated 10 records of 2 users\n\
         migrated 80 records of 5 users in 3 applications; verified: record counts and \
         checksums equal\n"
    );
    assert_eq!(apps_of(&fx, &target), ["app", "app-b", "été"]);
    assert_eq!(every_record(&fx, &target), every_record(&fx, &fx.store));

    // From an application on, and from a user in the first one migrated.
    let again =
        migrate_all(&fx, &fx.store, &target, &["--after-app", "app", "--after", "u1", "--json"]);
    exited(&again, OK);
    let lines = json_lines(&again.stdout);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!((&lines[0]["application_id"], &lines[0]["users"]), (&json!("app-b"), &json!(0)));
    assert_eq!((&lines[1]["application_id"], &lines[1]["users"]), (&json!("été"), &json!(2)));
    assert_eq!(lines[2]["applications"], 2);
    assert_eq!(lines[2]["verified"], true);
    assert_eq!(every_record(&fx, &target), every_record(&fx, &fx.store));

    // --all-apps replaces --app: typed, it is refused; exported for everyday use
    // (AGENT_MEMORY_APP), it is ignored.
    for (app, code) in [(vec!["--app", "app"], 2), (vec![], OK)] {
        let mut cmd = fx.bare();
        if app.is_empty() {
            cmd.env("AGENT_MEMORY_APP", "app");
        }
        let out = cmd
            .args(["--store", &fx.store])
            .args(&app)
            .args(["migrate", "--to", &target, "--all-apps", "--dry-run"])
            .output()
            .unwrap();
        exited(&out, code);
    }
}

#[test]
fn a_stopped_migration_of_every_application_says_where_to_continue_and_resumes() {
    let fx = Fixture::new();
    seed_apps(&fx, &fx.store, &[("a1", &["u1"], 3), ("a2", &["u1"], 3), ("a2", &["u2"], 5)]);
    let target = fx.other_store("target.db");
    let small = format!("{target}?max_records_per_user=4");

    let stopped = migrate_all(&fx, &fx.store, &small, &[]);
    let (stdout, stderr) = exited(&stopped, QUOTA_EXCEEDED);
    assert_eq!(stdout, "application a1: migrated 3 records of 1 user\n");
    assert!(
        stderr.contains(
            "migration of application a2 stopped after copying 6 records, 2 users copied and \
             verified (continue with --after-app a1): quota exceeded"
        ),
        "{stderr}"
    );

    let resumed = migrate_all(&fx, &fx.store, &target, &["--after-app", "a1", "--json"]);
    exited(&resumed, OK);
    let summary = json_lines(&resumed.stdout).pop().unwrap();
    assert_eq!(
        summary,
        json!({"applications": 1, "users": 2, "records": 8, "skipped_expired": 0,
               "differences": 0, "verified": true})
    );
    assert_eq!(every_record(&fx, &target), every_record(&fx, &fx.store));
}
