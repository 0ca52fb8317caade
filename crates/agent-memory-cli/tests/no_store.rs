//! A typo never creates a store: reads and erasures on a SQLite path that does not exist fail
//! with `no store at PATH`, exit 2, and create nothing; `sqlite:~/…` is the home folder; a
//! path without a scheme is refused with the schemes that exist.

mod support;

use support::{assert_one_line_error, Fixture, INVALID, OK};

#[test]
fn reads_and_erasures_on_a_missing_sqlite_path_create_nothing() {
    let fx = Fixture::new();
    let missing = fx.path("typo").join("nested").join("m.db");
    let store = format!("sqlite:{}", missing.display());
    let other = fx.other_store("target.db");
    let commands: [&[&str]; 15] = [
        &["get", "k"],
        &["list"],
        &["search", "q"],
        &["namespaces"],
        &["users"],
        &["apps"],
        &["export"],
        &["delete", "k"],
        &["purge-expired"],
        &["purge-expired", "--all-users"],
        &["delete-all", "--yes"],
        &["delete-user", "--yes"],
        &["migrate", "--dry-run"],
        &["migrate", "--to", &other],
        &["export", "--all-users"],
    ];
    for args in commands {
        // The scope from the environment, as the docs recommend (no notes about it).
        let mut cmd = fx.bare();
        cmd.env("AGENT_MEMORY_APP", "app").env("AGENT_MEMORY_USER", "u1");
        cmd.args(["--store", &store]).args(args);
        let expected = format!("no store at {} (writes and setup create it)", missing.display());
        assert_one_line_error(&mut cmd, INVALID, &expected, &args.join(" "));
        assert!(!fx.path("typo").exists(), "{args:?} created a folder");
    }
    assert!(!fx.path("target.db").exists(), "migrate created its target before its source");
    // Writes and setup create it.
    fx.on(&store, "u1").args(["put", "k", "v"]).assert().code(OK);
    fx.on(&store, "u1").args(["get", "k"]).assert().code(OK);
}

#[test]
fn the_default_store_is_created_by_the_first_write_only() {
    let fx = Fixture::new();
    let data = fx.path("home").join("data");
    let mut get = fx.bare();
    get.args(["--app", "app", "--user", "u1", "get", "k"]);
    assert_one_line_error(&mut get, INVALID, "no store at", "get on a fresh home");
    assert!(!data.exists());
    fx.bare().args(["--app", "app", "--user", "u1", "put", "k", "v"]).assert().code(OK);
    fx.bare().args(["--app", "app", "--user", "u1", "get", "k"]).assert().code(OK);
}

#[test]
fn a_tilde_in_a_sqlite_path_is_the_home_folder() {
    let fx = Fixture::new();
    let home = fx.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let work = fx.path("work");
    std::fs::create_dir_all(&work).unwrap();
    for url in ["sqlite:~/x.db", "sqlite://~/x.db"] {
        let mut cmd = fx.on(url, "u1");
        cmd.current_dir(&work).args(["put", "k", "v"]).assert().code(OK);
        assert!(home.join("x.db").is_file(), "{url} did not name $HOME/x.db");
        assert!(!work.join("~").exists(), "{url} created a folder named ~");
    }
    let mut other_home = fx.on("sqlite:~root/x.db", "u1");
    other_home.current_dir(&work).args(["get", "k"]);
    assert_one_line_error(&mut other_home, INVALID, "~NAME is not expanded", "~root");
}

#[test]
fn a_path_without_a_scheme_names_the_schemes_and_suggests_sqlite() {
    let fx = Fixture::new();
    let path = fx.path("x.db");
    let mut cmd = fx.on(path.to_str().unwrap(), "u1");
    cmd.args(["put", "k", "v"]);
    let suggestion = format!("sqlite:{}", path.display());
    assert_one_line_error(&mut cmd, INVALID, &suggestion, "no scheme");
    let out = fx.on(path.to_str().unwrap(), "u1").args(["get", "k"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("postgres://") && stderr.contains("redis://"), "{stderr}");
    assert!(!path.exists());
    let mut unknown = fx.on("ftp://host/x.db", "u1");
    unknown.args(["get", "k"]);
    assert_one_line_error(&mut unknown, INVALID, "unknown scheme; use sqlite:PATH", "ftp");
}
