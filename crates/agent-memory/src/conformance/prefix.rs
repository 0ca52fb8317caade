//! Key prefix: `list` restricted to the keys that start with a prefix, byte for byte, at and
//! across page boundaries, with cursors bound to their prefix.

use super::support::{
    byte_sorted, expect_invalid, keys, list_all, list_request_all, put, put_expiring,
};
use crate::conformance::Harness;
use crate::page::PageRequest;
use crate::scope::MemoryScope;
use crate::validation::MAX_KEY_BYTES;

/// Page sizes that put page boundaries before, at and after the last key of a prefix.
const LIMITS: [usize; 6] = [1, 2, 3, 4, 5, 100];

/// Writes `keys` (in reverse, so insertion order cannot pass for key order), then checks that
/// `list` with each prefix returns exactly the keys that start with it, in byte order, at
/// every page size in [`LIMITS`].
async fn check_prefixes(
    h: &Harness,
    scope: &MemoryScope,
    keys_written: &[&str],
    prefixes: &[&str],
) {
    for key in keys_written.iter().rev() {
        put(h.store(), scope, key, &format!("content of {key}")).await;
    }
    for prefix in prefixes {
        let expected =
            byte_sorted(keys_written.iter().copied().filter(|key| key.starts_with(prefix)));
        for limit in LIMITS {
            let listed =
                list_request_all(h.store(), scope, PageRequest::new(limit).prefix(*prefix)).await;
            assert_eq!(
                keys(&listed),
                expected,
                "list with prefix {prefix:?} (bytes {:02X?}) and limit {limit} must return \
                 exactly the keys that start with it, once each, in byte order",
                prefix.as_bytes()
            );
            for record in &listed {
                assert_eq!(record.content, format!("content of {}", record.key), "wrong record");
            }
        }
    }
}

/// `list` with a prefix returns exactly the keys that start with it, in byte order, whether
/// the prefix's keys end at, before or after a page boundary.
pub async fn list_prefix_returns_exactly_the_matching_keys(h: Harness) {
    let scope = h.scope("user-1");
    let written = [
        "a",
        "a/",
        "a/1",
        "a/2",
        "a/3",
        "a/4",
        "a/sub/x",
        "a/sub/y",
        "a0",
        "a-b",
        "a.md",
        "ab",
        "b",
        "b/1",
        "notes",
        "notes/",
        "notes/2024/01.md",
        "notes/2024/02.md",
        "notes/todo.md",
        "notes0",
        "notes-old/x",
        "Notes/x",
        "z",
    ];
    let prefixes = ["a", "a/", "a/s", "a/sub/", "a/4", "b/", "notes/", "notes/2024/", "n", "N"];
    check_prefixes(&h, &scope, &written, &prefixes).await;
    // A prefix no key starts with, before, between and after the keys.
    for prefix in ["0", "a/5", "c", "zz", "notes/2025/"] {
        let page = h.store().list(&scope, PageRequest::new(3).prefix(prefix)).await;
        let page = page.expect("list with a prefix nothing starts with");
        assert!(
            page.items.is_empty() && page.next_cursor.is_none(),
            "list with prefix {prefix:?} must be empty with no cursor, got {:?}",
            keys(&page.items)
        );
    }
}

/// A full page that holds the last key of the prefix has no cursor, even when other keys
/// follow outside the prefix: `next_cursor` is `None` only when no matching key is left.
pub async fn list_prefix_cursor_ends_with_the_prefix(h: Harness) {
    let scope = h.scope("user-1");
    for key in ["p/1", "p/2", "p/3", "p/4", "q/1", "q/2"] {
        put(h.store(), &scope, key, "x").await;
    }
    for limit in [2, 4] {
        let mut page = PageRequest::new(limit).prefix("p/");
        let mut seen = Vec::new();
        loop {
            let result = h.store().list(&scope, page.clone()).await.expect("list with prefix");
            seen.extend(result.items.iter().map(|r| r.key.clone()));
            match result.next_cursor {
                Some(cursor) => {
                    assert!(seen.len() < 4, "limit {limit}: a cursor after the prefix's last key");
                    page = page.after(cursor);
                }
                None => break,
            }
        }
        assert_eq!(seen, ["p/1", "p/2", "p/3", "p/4"], "limit {limit}");
    }
}

/// `%`, `_`, `*`, `\`, `[` and quotes in a prefix match themselves: no pattern language.
pub async fn list_prefix_treats_pattern_characters_literally(h: Harness) {
    let scope = h.scope("user-1");
    let written = [
        "%", "%x", "a%b", "a%", "aXb", "a_b", "a_", "ab", "a\\b", "a\\", "a\\\\b", "_x", "x_",
        "\\x", "*", "*x", "a*b", "[a]", "[a]x", "a", "'q", "\"q", "a'b", "a%_\\",
    ];
    let prefixes =
        ["%", "a%", "_", "a_", "\\", "a\\", "a\\\\", "*", "a*", "[a]", "[", "'", "\"", "a%_"];
    check_prefixes(&h, &scope, &written, &prefixes).await;
}

/// Multi-byte prefixes select whole characters by bytes, including around the highest code
/// point (U+10FFFF, which no successor follows), U+00FF and U+FFFF (whose UTF-8 ends in the
/// byte 0xBF, so a byte successor would not be UTF-8) and the surrogate gap after U+D7FF.
pub async fn list_prefix_handles_multibyte_and_0xff_boundaries(h: Harness) {
    let scope = h.scope("user-1");
    let max = '\u{10FFFF}';
    let written: Vec<String> = vec![
        "é".into(),
        "éa".into(),
        "ê".into(),
        "e\u{301}".into(),
        "ÿ".into(),
        "ÿa".into(),
        "ÿÿ".into(),
        "Ā".into(),
        "\u{7FF}".into(),
        "\u{7FF}x".into(),
        "\u{800}".into(),
        "\u{D7FF}".into(),
        "\u{D7FF}a".into(),
        "\u{E000}".into(),
        "\u{FFFF}".into(),
        "\u{FFFF}z".into(),
        "\u{10000}".into(),
        "中文".into(),
        "中".into(),
        "😀".into(),
        "😀x".into(),
        "\u{10FFFE}".into(),
        format!("{max}"),
        format!("{max}a"),
        format!("{max}{max}"),
        format!("{max}{max}{max}"),
        format!("a{max}"),
        format!("a{max}z"),
        format!("a{max}{max}"),
        "a".into(),
        "b".into(),
        "~".into(),
    ];
    let max1 = format!("{max}");
    let max2 = format!("{max}{max}");
    let amax = format!("a{max}");
    let prefixes: Vec<&str> = vec![
        "é",
        "ÿ",
        "\u{7FF}",
        "\u{D7FF}",
        "\u{FFFF}",
        "中",
        "😀",
        "\u{10FFFE}",
        &max1,
        &max2,
        &amax,
        "a",
        "e",
    ];
    let written_refs: Vec<&str> = written.iter().map(String::as_str).collect();
    check_prefixes(&h, &scope, &written_refs, &prefixes).await;
}

/// The empty prefix restricts nothing: it lists exactly what `list` without a prefix lists.
pub async fn empty_prefix_lists_every_key(h: Harness) {
    let scope = h.scope("user-1");
    for key in ["a", "a/b", "b", "é", "\u{10FFFF}", "~"] {
        put(h.store(), &scope, key, "x").await;
    }
    for limit in [1, 2, 100] {
        let all = list_all(h.store(), &scope, limit).await;
        let empty = list_request_all(h.store(), &scope, PageRequest::new(limit).prefix("")).await;
        assert_eq!(keys(&empty), keys(&all), "prefix \"\" with limit {limit} lists every key");
        assert_eq!(all.len(), 6, "limit {limit}");
    }
}

/// A cursor from a prefixed `list` continues only that listing: with another prefix, or none,
/// it is `Invalid`; and a cursor from an unprefixed `list` does not continue a prefixed one.
pub async fn list_prefix_cursors_are_bound_to_their_prefix(h: Harness) {
    let scope = h.scope("user-1");
    for key in ["a/1", "a/2", "a/3", "b/1", "b/2"] {
        put(h.store(), &scope, key, "x").await;
    }
    let store = h.store();
    let prefixed = store.list(&scope, PageRequest::new(1).prefix("a/")).await.expect("list");
    let prefixed = prefixed.next_cursor.expect("more keys of a/ follow");
    let plain = store.list(&scope, PageRequest::new(1)).await.expect("list");
    let plain = plain.next_cursor.expect("more keys follow");
    let cases = [
        ("a cursor of prefix a/ used with prefix b/", prefixed.clone(), "b/"),
        ("a cursor of prefix a/ used with prefix a", prefixed.clone(), "a"),
        ("a cursor of prefix a/ used without a prefix", prefixed.clone(), ""),
        ("an unprefixed cursor used with prefix a/", plain, "a/"),
    ];
    for (what, cursor, prefix) in cases {
        expect_invalid(
            store.list(&scope, PageRequest::new(5).after(cursor).prefix(prefix)).await,
            "cursor",
            what,
        );
    }
    let other = h.scope("user-2");
    expect_invalid(
        store.list(&other, PageRequest::new(5).after(prefixed.clone()).prefix("a/")).await,
        "cursor",
        "a prefixed cursor used in another scope",
    );
    let next = store.list(&scope, PageRequest::new(5).after(prefixed).prefix("a/")).await;
    assert_eq!(keys(&next.expect("the same prefix continues").items), ["a/2", "a/3"]);
}

/// The prefix follows the key rules (at most 256 bytes, no control characters, no NUL), and
/// only `list` takes one: `search`, `purge_expired` and `list_namespaces` refuse it.
pub async fn list_prefix_is_validated_and_list_only(h: Harness) {
    let scope = h.scope("user-1");
    let longest = "p".repeat(MAX_KEY_BYTES);
    put(h.store(), &scope, &longest, "needle").await;
    let store = h.store();
    let listed = store.list(&scope, PageRequest::new(5).prefix(longest.clone())).await;
    assert_eq!(keys(&listed.expect("a 256-byte prefix is valid").items), [longest.as_str()]);
    let too_long = "p".repeat(MAX_KEY_BYTES + 1);
    for (what, prefix) in [
        ("a 257-byte prefix", too_long.as_str()),
        ("a prefix with a newline", "a\nb"),
        ("a prefix with a tab", "\t"),
        ("a prefix with NUL", "a\0"),
    ] {
        expect_invalid(
            store.list(&scope, PageRequest::new(5).prefix(prefix)).await,
            "prefix",
            what,
        );
    }
    let page = || PageRequest::new(5).prefix("p");
    expect_invalid(store.search(&scope, "needle", page()).await, "prefix", "search with a prefix");
    expect_invalid(store.purge_expired(&scope, page()).await, "prefix", "purge with a prefix");
    expect_invalid(
        store.list_namespaces(h.app(), "user-1", page()).await,
        "prefix",
        "list_namespaces with a prefix",
    );
}

/// A prefixed `list` stays inside its scope and skips expired records, like every `list`.
pub async fn list_prefix_stays_inside_its_scope_and_skips_expired(h: Harness) {
    let scope = h.scope("user-1");
    for (s, key) in [
        (h.scope("user-2"), "n/other-user"),
        (h.scope_in("user-1", "ns"), "n/other-namespace"),
        (h.scope("user-1"), "n/live"),
    ] {
        put(h.store(), &s, key, "x").await;
    }
    let other_app = MemoryScope::new(format!("{}-other", h.app()), "user-1").expect("valid ids");
    put(h.store(), &other_app, "n/other-app", "x").await;
    put_expiring(&h, &scope, "n/expiring", "x").await;
    let before = list_request_all(h.store(), &scope, PageRequest::new(1).prefix("n/")).await;
    assert_eq!(keys(&before), ["n/expiring", "n/live"], "only this scope's keys");
    h.wait_for_expiry().await;
    let after = list_request_all(h.store(), &scope, PageRequest::new(1).prefix("n/")).await;
    assert_eq!(keys(&after), ["n/live"], "an expired record is invisible to a prefixed list");
    h.store().delete_user(other_app.application_id(), "user-1").await.expect("clean up");
}
