//! [`Facts`](crate::Facts) over the store under test: remember always adds, recall is oldest
//! first, forget reports, erase removes everything of the user.

use std::time::Duration;

use super::support::{get, namespaces_all, put};
use crate::conformance::Harness;
use crate::facts::Facts;

fn facts(h: &Harness) -> Facts {
    Facts::new(h.shared_store())
}

/// `remember` always adds: the same text twice is two facts with different ids.
pub async fn facts_remember_always_adds(h: Harness) {
    let facts = facts(&h);
    let scope = h.scope_in("user-1", "facts");
    let first = facts.remember(&scope, "likes tea").await.expect("remember");
    let second = facts.remember(&scope, "likes tea").await.expect("remember again");
    assert_ne!(first.id, second.id, "remembering the same text twice must add a second fact");
    let all = facts.recall(&scope, None).await.expect("recall");
    assert_eq!(all.len(), 2, "both copies must be recalled, never merged");
    assert!(all.iter().all(|f| f.text == "likes tea"));
}

/// `recall` returns every fact oldest first; `limit` truncates that order.
pub async fn facts_recall_oldest_first_with_truncating_limit(h: Harness) {
    let facts = facts(&h);
    let scope = h.scope_in("user-1", "facts");
    let mut texts = Vec::new();
    for i in 0..5 {
        let text = format!("fact {i}");
        facts.remember(&scope, &text).await.expect("remember");
        texts.push(text);
        h.advance(Duration::from_millis(5)).await;
    }
    let all = facts.recall(&scope, None).await.expect("recall");
    assert_eq!(
        all.iter().map(|f| f.text.clone()).collect::<Vec<_>>(),
        texts,
        "recall is oldest first"
    );
    assert!(
        all.windows(2).all(|w| w[0].created_at <= w[1].created_at),
        "created_at never decreases"
    );
    assert!(!all.truncated, "nothing is left out of a full recall");
    let two = facts.recall(&scope, Some(2)).await.expect("recall with limit");
    assert_eq!(two, all[..2].to_vec(), "limit must keep the oldest facts, not select others");
    assert!(two.truncated, "a recall that leaves facts out says so");
    assert!(!facts.recall(&scope, Some(5)).await.expect("recall").truncated, "a limit of all");
    assert_eq!(
        facts.recall(&scope, Some(50)).await.expect("recall").len(),
        5,
        "a large limit keeps all"
    );
    assert!(facts.recall(&h.scope_in("user-2", "facts"), None).await.expect("recall").is_empty());
}

/// `forget` returns true for a fact it removed, then false.
pub async fn facts_forget_reports_whether_it_removed(h: Harness) {
    let facts = facts(&h);
    let scope = h.scope_in("user-1", "facts");
    let fact = facts.remember(&scope, "temporary").await.expect("remember");
    let kept = facts.remember(&scope, "kept").await.expect("remember");
    assert!(
        !facts.forget(&h.scope_in("user-2", "facts"), &fact.id).await.expect("forget"),
        "another user cannot forget this user's fact"
    );
    assert!(
        facts.forget(&scope, &fact.id).await.expect("forget"),
        "forget of a present fact is true"
    );
    assert!(!facts.forget(&scope, &fact.id).await.expect("forget"), "a second forget is false");
    assert_eq!(
        facts.recall(&scope, None).await.expect("recall"),
        vec![kept],
        "only the kept fact is left"
    );
}

/// `erase` removes everything of the user, in every namespace, and nothing of other users.
pub async fn facts_erase_removes_everything_of_the_user(h: Harness) {
    let facts = facts(&h);
    let scope = h.scope_in("user-1", "facts");
    facts.remember(&scope, "one").await.expect("remember");
    facts.remember(&scope, "two").await.expect("remember");
    put(h.store(), &h.scope("user-1"), "keyed", "also the user's").await;
    let other = h.scope_in("user-2", "facts");
    facts.remember(&other, "someone else's").await.expect("remember");
    assert_eq!(
        facts.erase(&scope).await.expect("erase"),
        3,
        "erase counts every record of the user"
    );
    assert!(facts.recall(&scope, None).await.expect("recall").is_empty(), "no facts remain");
    assert!(
        get(h.store(), &h.scope("user-1"), "keyed").await.is_none(),
        "keyed memories are erased too"
    );
    assert!(
        namespaces_all(h.store(), h.app(), "user-1", 10).await.is_empty(),
        "nothing of the user remains"
    );
    assert_eq!(
        facts.recall(&other, None).await.expect("recall").len(),
        1,
        "other users keep their facts"
    );
}
