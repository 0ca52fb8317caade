//! Erasure: `delete`, `delete_all` and `delete_user` really remove what they name, count it,
//! and nothing else.

use super::support::{
    expect_invalid, get, invalid_user_ids, keys, list_all, namespaces_all, put, search_all,
};
use crate::conformance::Harness;
use crate::scope::MemoryScope;

/// `delete` returns true for a live record and removes it from get, list and search; false when
/// nothing is there.
pub async fn delete_reports_whether_a_live_record_existed(h: Harness) {
    let scope = h.scope("user-1");
    put(h.store(), &scope, "a", "needle one").await;
    put(h.store(), &scope, "b", "needle two").await;
    assert!(
        h.store().delete(&scope, "a", None).await.expect("delete"),
        "deleting a live record returns true"
    );
    assert!(get(h.store(), &scope, "a").await.is_none(), "get must not see a deleted record");
    assert_eq!(
        keys(&list_all(h.store(), &scope, 10).await),
        ["b"],
        "list must not show a deleted record"
    );
    assert_eq!(
        keys(&search_all(h.store(), &scope, "needle", 10).await),
        ["b"],
        "search must not find a deleted record (remove every index entry)"
    );
    assert!(
        !h.store().delete(&scope, "a", None).await.expect("delete"),
        "a second delete returns false"
    );
    assert!(
        !h.store().delete(&scope, "never", None).await.expect("delete"),
        "deleting a key that never existed returns false"
    );
    assert!(
        !h.store().delete(&h.scope("nobody"), "a", None).await.expect("delete"),
        "deleting in a user with no records returns false"
    );
    assert!(h.store().delete(&scope, "b", None).await.expect("delete"));
    assert!(
        namespaces_all(h.store(), h.app(), "user-1", 10).await.is_empty(),
        "once the last record is deleted, the namespace must no longer be listed"
    );
}

/// `delete_all` erases one namespace of one user and returns the count; every other namespace,
/// user and application is untouched.
pub async fn delete_all_erases_one_namespace(h: Harness) {
    let target = h.scope_in("user-1", "ns");
    for i in 0..5 {
        put(h.store(), &target, &format!("k{i}"), "x").await;
    }
    let other_app = MemoryScope::new(format!("{}-other", h.app()), "user-1")
        .and_then(|s| s.with_namespace("ns"))
        .expect("valid ids");
    let survivors = [
        h.scope("user-1"),
        h.scope_in("user-1", "ns2"),
        h.scope_in("user-1", "n"),
        h.scope_in("user-1", "ns:"),
        h.scope_in("user-2", "ns"),
        h.scope_in("user-10", "ns"),
        other_app,
    ];
    for scope in &survivors {
        put(h.store(), scope, "k0", "survivor").await;
    }
    assert_eq!(
        h.store().delete_all(&target).await.expect("delete_all"),
        5,
        "delete_all returns the count"
    );
    assert!(list_all(h.store(), &target, 10).await.is_empty(), "the namespace is empty afterwards");
    for scope in &survivors {
        assert!(
            get(h.store(), scope, "k0").await.is_some(),
            "delete_all of {target:?} must not touch {scope:?}"
        );
    }
    assert_eq!(
        h.store().delete_all(&target).await.expect("delete_all"),
        0,
        "a second call returns 0"
    );
    assert_eq!(
        namespaces_all(h.store(), h.app(), "user-1", 10).await,
        vec![None, Some("n".to_owned()), Some("ns2".to_owned()), Some("ns:".to_owned())],
        "the erased namespace must no longer be listed; the others must be"
    );
}

/// `delete_all` on the default namespace leaves the user's named namespaces alone.
pub async fn delete_all_of_default_namespace_keeps_named_ones(h: Harness) {
    let default = h.scope("user-1");
    let named = h.scope_in("user-1", "named");
    put(h.store(), &default, "a", "x").await;
    put(h.store(), &default, "b", "x").await;
    put(h.store(), &named, "a", "x").await;
    assert_eq!(h.store().delete_all(&default).await.expect("delete_all"), 2);
    assert!(
        get(h.store(), &named, "a").await.is_some(),
        "delete_all of the default namespace must not erase named namespaces"
    );
    assert_eq!(
        namespaces_all(h.store(), h.app(), "user-1", 10).await,
        vec![Some("named".to_owned())]
    );
}

/// `delete_user` erases every namespace of the user, returns the count, and a second call
/// returns 0.
pub async fn delete_user_erases_every_namespace(h: Harness) {
    let namespaces = [None, Some("a"), Some("b"), Some("中文")];
    let mut total = 0;
    for (i, ns) in namespaces.iter().enumerate() {
        let scope = match ns {
            Some(ns) => h.scope_in("user-1", ns),
            None => h.scope("user-1"),
        };
        for k in 0..=i {
            put(h.store(), &scope, &format!("k{k}"), "needle").await;
            total += 1;
        }
    }
    assert_eq!(
        h.store().delete_user(h.app(), "user-1").await.expect("delete_user"),
        total,
        "delete_user must return how many records it removed across all namespaces"
    );
    for ns in namespaces {
        let scope = match ns {
            Some(ns) => h.scope_in("user-1", ns),
            None => h.scope("user-1"),
        };
        assert!(list_all(h.store(), &scope, 10).await.is_empty(), "namespace {ns:?} must be empty");
        assert!(
            search_all(h.store(), &scope, "needle", 10).await.is_empty(),
            "search finds nothing"
        );
    }
    assert!(
        namespaces_all(h.store(), h.app(), "user-1", 10).await.is_empty(),
        "list_namespaces must be empty after delete_user"
    );
    assert_eq!(
        h.store().delete_user(h.app(), "user-1").await.expect("delete_user"),
        0,
        "a second call returns 0"
    );
}

/// `delete_user` leaves other users alone, including ones whose ids share a prefix or would
/// match the erased id as a pattern.
pub async fn delete_user_leaves_other_users(h: Harness) {
    let target = "u";
    let others =
        ["u1", "u:", "u:x", "u/x", "u\\", "uu", "U", "ü", "u%", "u_", "u*", "{u}", "xu", "u "];
    put(h.store(), &h.scope(target), "k", "target").await;
    put(h.store(), &h.scope_in(target, "ns"), "k", "target").await;
    for other in others {
        put(h.store(), &h.scope(other), "k", other).await;
        put(h.store(), &h.scope_in(other, "ns"), "k", other).await;
    }
    assert_eq!(h.store().delete_user(h.app(), target).await.expect("delete_user"), 2);
    for other in others {
        for scope in [h.scope(other), h.scope_in(other, "ns")] {
            assert_eq!(
                get(h.store(), &scope, "k").await.map(|r| r.content),
                Some(other.to_owned()),
                "delete_user({target:?}) must not erase {scope:?}: match ids exactly, never by \
                 prefix or pattern"
            );
        }
        assert_eq!(namespaces_all(h.store(), h.app(), other, 10).await.len(), 2);
    }

    // The same the other way round: erasing a user whose id is a pattern.
    for pattern in ["u%", "u*", "u_"] {
        assert_eq!(h.store().delete_user(h.app(), pattern).await.expect("delete_user"), 2);
    }
    for other in ["u1", "u:", "uu", "u\\"] {
        assert!(
            get(h.store(), &h.scope(other), "k").await.is_some(),
            "erasing users named like patterns must not erase {other:?}"
        );
    }
}

/// `delete_user` of a user with no records returns 0; invalid ids are `Invalid`.
pub async fn delete_user_validates_and_tolerates_unknown_users(h: Harness) {
    assert_eq!(h.store().delete_user(h.app(), "nobody").await.expect("delete_user"), 0);
    put(h.store(), &h.scope("user-1"), "k", "x").await;
    for (app, user, field, what) in invalid_user_ids(h.app()) {
        expect_invalid(
            h.store().delete_user(app, &user).await,
            field,
            &format!("delete_user with {what}"),
        );
    }
    assert!(get(h.store(), &h.scope("user-1"), "k").await.is_some(), "invalid calls erase nothing");
}
