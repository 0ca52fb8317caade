//! Isolation: two different scopes never see or change each other's records, whatever their
//! ids contain.

use super::support::{get, keys, list_all, namespaces_all, put, search_all, AWKWARD_TEXT};
use crate::conformance::Harness;
use crate::page::PageRequest;
use crate::scope::MemoryScope;

/// Writes one record per scope (content names the scope) and checks each scope sees exactly its
/// own record through get, list and search.
async fn assert_each_sees_only_itself(h: &Harness, scopes: &[MemoryScope], what: &str) {
    for (i, scope) in scopes.iter().enumerate() {
        put(h.store(), scope, "shared-key", &format!("owner {i}")).await;
    }
    for (i, scope) in scopes.iter().enumerate() {
        let read = get(h.store(), scope, "shared-key").await.unwrap_or_else(|| {
            panic!("{what}: scope {i} {scope:?} lost its record: two scopes share a storage key")
        });
        assert_eq!(
            read.content,
            format!("owner {i}"),
            "{what}: scope {i} {scope:?} reads another scope's record: ids must be encoded \
             so that no two scopes share a storage key"
        );
        assert_eq!(&read.scope, scope, "{what}: the record must carry the scope it was read in");
        let listed = list_all(h.store(), scope, 100).await;
        assert_eq!(
            listed.len(),
            1,
            "{what}: list in scope {i} {scope:?} must return only that scope's record, got {:?}",
            listed.iter().map(|r| &r.content).collect::<Vec<_>>()
        );
        let found = search_all(h.store(), scope, "owner", 100).await;
        assert_eq!(
            found.iter().map(|r| r.content.as_str()).collect::<Vec<_>>(),
            vec![format!("owner {i}").as_str()],
            "{what}: search in scope {i} {scope:?} must see only that scope's record"
        );
    }
}

/// The same key in two users of one application is two independent records.
pub async fn users_are_isolated(h: Harness) {
    let alice = h.scope("alice");
    let bob = h.scope("bob");
    put(h.store(), &alice, "k", "alice's secret").await;
    put(h.store(), &bob, "k", "bob's note").await;
    put(h.store(), &bob, "only-bob", "bob only").await;

    assert_eq!(get(h.store(), &alice, "k").await.expect("live").content, "alice's secret");
    assert_eq!(get(h.store(), &bob, "k").await.expect("live").content, "bob's note");
    assert!(get(h.store(), &alice, "only-bob").await.is_none(), "alice must not read bob's key");
    assert_eq!(keys(&list_all(h.store(), &alice, 10).await), ["k"], "alice's list");
    assert!(
        search_all(h.store(), &alice, "bob", 10).await.is_empty(),
        "search must not return another user's records"
    );

    assert!(h.store().delete(&alice, "k", None).await.expect("delete"), "alice's delete");
    assert!(
        get(h.store(), &bob, "k").await.is_some(),
        "deleting alice's key must not delete bob's record with the same key"
    );
    assert!(
        !h.store().delete(&alice, "only-bob", None).await.expect("delete"),
        "alice's delete of a key only bob has must report false"
    );
    assert!(get(h.store(), &bob, "only-bob").await.is_some(), "bob's record must survive");

    put(h.store(), &alice, "k", "again").await;
    assert_eq!(h.store().delete_all(&alice).await.expect("delete_all"), 1, "alice's delete_all");
    assert_eq!(list_all(h.store(), &bob, 10).await.len(), 2, "bob's records survive delete_all");
    assert_eq!(
        namespaces_all(h.store(), h.app(), "bob", 10).await,
        vec![None],
        "bob still has his default namespace"
    );
}

/// The default namespace and named namespaces (even ones named like a default marker) are
/// separate, for get, list, search, delete and delete_all.
pub async fn namespaces_are_isolated(h: Harness) {
    let default = h.scope("user-1");
    let names = ["default", "_default", "null", "None", "_", "-", "~", "0", " ", "*"];
    let mut scopes = vec![default.clone()];
    scopes.extend(names.iter().map(|ns| h.scope_in("user-1", ns)));
    assert_each_sees_only_itself(&h, &scopes, "namespaces of one user").await;

    let mut expected: Vec<Option<String>> = names.iter().map(|n| Some((*n).to_owned())).collect();
    expected.sort();
    expected.insert(0, None);
    assert_eq!(
        namespaces_all(h.store(), h.app(), "user-1", 100).await,
        expected,
        "list_namespaces must report the default namespace and every named one separately"
    );

    assert!(h.store().delete(&default, "shared-key", None).await.expect("delete"));
    for scope in &scopes[1..] {
        assert!(
            get(h.store(), scope, "shared-key").await.is_some(),
            "deleting from the default namespace removed the record in {scope:?}"
        );
    }
    let named = h.scope_in("user-1", "default");
    assert_eq!(h.store().delete_all(&named).await.expect("delete_all"), 1);
    for scope in &scopes[2..] {
        assert!(
            get(h.store(), scope, "shared-key").await.is_some(),
            "delete_all of namespace \"default\" removed the record in {scope:?}"
        );
    }
}

/// Scopes whose ids would collide if joined with `:` or `/` stay apart.
pub async fn delimiter_joined_scopes_stay_apart(h: Harness) {
    let app = h.app();
    let scope = |a: String, u: &str, ns: Option<&str>| {
        let s = MemoryScope::new(a, u).expect("valid ids");
        match ns {
            Some(ns) => s.with_namespace(ns).expect("valid namespace"),
            None => s,
        }
    };
    let scopes = vec![
        // user "a:b" ns "c" vs user "a" ns "b:c"
        scope(app.to_owned(), "a:b", Some("c")),
        scope(app.to_owned(), "a", Some("b:c")),
        // the same with slashes
        scope(app.to_owned(), "a/b", Some("c")),
        scope(app.to_owned(), "a", Some("b/c")),
        // application/user splits
        scope(format!("{app}:u"), "v", None),
        scope(app.to_owned(), "u:v", None),
        scope(format!("{app}/u"), "v", None),
        scope(app.to_owned(), "u/v", None),
        // user/namespace splits against the default namespace
        scope(app.to_owned(), "x", Some("y")),
        scope(app.to_owned(), "x:y", None),
        scope(app.to_owned(), "x/y", None),
        // doubled separators and escapes
        scope(app.to_owned(), "p:", Some(":q")),
        scope(app.to_owned(), "p::", Some("q")),
        scope(app.to_owned(), "p", Some("::q")),
        scope(app.to_owned(), "p\\:", Some("q")),
        scope(app.to_owned(), "p", Some("\\:q")),
        // length prefixes that could be forged
        scope(app.to_owned(), "1:a", Some("b")),
        scope(app.to_owned(), "1", Some("a:b")),
    ];
    assert_each_sees_only_itself(&h, &scopes, "delimiter-joined scopes").await;

    // A key can also be split differently from a namespace.
    let left = h.scope_in("k", "n");
    let right = h.scope_in("k", "n:c");
    put(h.store(), &left, "c:d", "left").await;
    put(h.store(), &right, "d", "right").await;
    assert!(get(h.store(), &left, "d").await.is_none(), "namespace/key split leaked");
    assert!(get(h.store(), &right, "c:d").await.is_none(), "namespace/key split leaked");
    assert_eq!(get(h.store(), &left, "c:d").await.expect("live").content, "left");
    assert_eq!(get(h.store(), &right, "d").await.expect("live").content, "right");

    assert_eq!(
        namespaces_all(h.store(), app, "a", 10).await,
        vec![Some("b/c".to_owned()), Some("b:c".to_owned())],
        "user \"a\" must list only its own namespaces, not those of \"a:b\" or \"a/b\""
    );
    assert_eq!(
        namespaces_all(h.store(), app, "a:b", 10).await,
        vec![Some("c".to_owned())],
        "user \"a:b\" must list only its own namespace"
    );
}

/// Users whose ids are full of `:`, `/`, braces, `%`, `_`, `\`, quotes and non-ASCII are
/// isolated from each other and from users whose ids they would match as patterns.
pub async fn awkward_user_ids_are_isolated(h: Harness) {
    let scopes: Vec<MemoryScope> = AWKWARD_TEXT.iter().map(|id| h.scope(id)).collect();
    assert_each_sees_only_itself(&h, &scopes, "users with awkward ids").await;
    for id in AWKWARD_TEXT {
        assert_eq!(
            namespaces_all(h.store(), h.app(), id, 10).await,
            vec![None],
            "list_namespaces for user {id:?} must see only that user's default namespace"
        );
    }
}

/// Namespaces whose names are full of separators, wildcards, escapes, quotes and non-ASCII are
/// isolated from each other.
pub async fn awkward_namespaces_are_isolated(h: Harness) {
    let scopes: Vec<MemoryScope> = AWKWARD_TEXT.iter().map(|ns| h.scope_in("user-1", ns)).collect();
    assert_each_sees_only_itself(&h, &scopes, "namespaces with awkward names").await;
    let mut expected: Vec<Option<String>> =
        AWKWARD_TEXT.iter().map(|ns| Some((*ns).to_owned())).collect();
    expected.sort();
    assert_eq!(
        namespaces_all(h.store(), h.app(), "user-1", 100).await,
        expected,
        "list_namespaces must return every awkward namespace exactly once, in byte order"
    );
}

/// The same user id in two applications is two users.
pub async fn applications_are_isolated(h: Harness) {
    let ours = h.scope("user-1");
    let other_app = format!("{}-other", h.app());
    let theirs = MemoryScope::new(other_app.clone(), "user-1").expect("valid ids");
    put(h.store(), &ours, "k", "ours").await;
    put(h.store(), &theirs, "k", "theirs").await;
    assert_eq!(get(h.store(), &ours, "k").await.expect("live").content, "ours");
    assert_eq!(get(h.store(), &theirs, "k").await.expect("live").content, "theirs");
    assert_eq!(list_all(h.store(), &ours, 10).await.len(), 1, "list must not cross applications");

    assert_eq!(h.store().delete_user(h.app(), "user-1").await.expect("delete_user"), 1);
    assert_eq!(
        get(h.store(), &theirs, "k").await.expect("must survive").content,
        "theirs",
        "delete_user must not erase the same user id in another application"
    );
    let page = h
        .store()
        .list_namespaces(&other_app, "user-1", PageRequest::default())
        .await
        .expect("list_namespaces");
    assert_eq!(page.items.len(), 1, "the other application's user keeps its namespace");
    assert_eq!(h.store().delete_user(&other_app, "user-1").await.expect("clean up"), 1);
}
