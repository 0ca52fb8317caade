//! Search: a literal, case-sensitive substring of the content, paged in key order.

use serde_json::json;

use super::support::{byte_sorted, expect_invalid, keys, put, search_all};
use crate::conformance::Harness;
use crate::page::PageRequest;
use crate::write::MemoryWrite;

/// Wildcard and pattern characters (`%`, `_`, `*`, `\`, `.`, `[`, `'`, `?`, `^`, `$`) match
/// only themselves.
pub async fn search_treats_pattern_characters_literally(h: Harness) {
    let scope = h.scope("user-1");
    let specials =
        ['%', '_', '*', '\\', '.', '[', ']', '\'', '"', '?', '^', '$', '(', '|', '+', '{'];
    // "plain" holds none of the specials, so any pattern interpretation would match it.
    put(h.store(), &scope, "plain", "xay xby abc ab").await;
    for (i, c) in specials.iter().enumerate() {
        put(h.store(), &scope, &format!("special-{i:02}"), &format!("x{c}y")).await;
    }
    for (i, c) in specials.iter().enumerate() {
        for query in [c.to_string(), format!("x{c}y"), format!("{c}y")] {
            let found = search_all(h.store(), &scope, &query, 100).await;
            assert_eq!(
                keys(&found),
                [format!("special-{i:02}").as_str()],
                "search({query:?}) must match only the content that literally contains it: \
                 escape LIKE/GLOB/pattern characters or use a plain substring function"
            );
        }
    }
    for pattern in ["x%y", "x_y", "x*y", "x?y", "x.y", "[ab]", "a.c", "a%", "%", "_b", ".*"] {
        let found = search_all(h.store(), &scope, pattern, 100).await;
        assert!(
            found.iter().all(|r| r.content.contains(pattern)),
            "search({pattern:?}) matched {:?}, which does not literally contain it",
            keys(&found)
        );
    }
}

/// Search is case-sensitive and matches any substring (start, middle, end, whole).
pub async fn search_is_case_sensitive_substring(h: Harness) {
    let scope = h.scope("user-1");
    put(h.store(), &scope, "lower", "hello world").await;
    put(h.store(), &scope, "title", "Hello World").await;
    put(h.store(), &scope, "upper", "HELLO WORLD").await;
    put(h.store(), &scope, "sharp-s", "straße").await;
    put(h.store(), &scope, "turkish", "İstanbul").await;
    let cases: &[(&str, &[&str])] = &[
        ("hello", &["lower"]),
        ("Hello", &["title"]),
        ("HELLO", &["upper"]),
        ("o w", &["lower"]),
        ("world", &["lower"]),
        ("hello world", &["lower"]),
        ("lo Wo", &["title"]),
        ("o", &["lower", "title"]),
        ("STRASSE", &[]),
        ("straße", &["sharp-s"]),
        ("istanbul", &[]),
        ("İst", &["turkish"]),
        ("hello world!", &[]),
    ];
    for (query, expected) in cases {
        let found = search_all(h.store(), &scope, query, 100).await;
        assert_eq!(
            keys(&found),
            *expected,
            "search({query:?}) must be a case-sensitive substring match (no ILIKE, no case \
             folding, no collation)"
        );
    }
}

/// Search matches content only: not keys, metadata or source.
pub async fn search_matches_content_only(h: Harness) {
    let scope = h.scope("user-1");
    h.store()
        .put(
            &scope,
            "needle-key",
            MemoryWrite::new("plain content")
                .metadata(json!({"needle": "needle"}))
                .source(crate::record::Source::default().agent("needle")),
        )
        .await
        .expect("put");
    put(h.store(), &scope, "other", "a needle in the content").await;
    assert_eq!(
        keys(&search_all(h.store(), &scope, "needle", 100).await),
        ["other"],
        "search must match the content only, never the key, metadata or source"
    );
}

/// Multi-byte queries match byte-exact substrings; precomposed and decomposed forms differ.
pub async fn search_matches_unicode_literally(h: Harness) {
    let scope = h.scope("user-1");
    put(h.store(), &scope, "composed", "caf\u{e9} au lait").await;
    put(h.store(), &scope, "decomposed", "cafe\u{301} noir").await;
    put(h.store(), &scope, "cjk", "中文😀文字").await;
    put(h.store(), &scope, "newline", "line one\r\nline two\ttab").await;
    let cases: &[(&str, &[&str])] = &[
        ("caf\u{e9}", &["composed"]),
        ("cafe\u{301}", &["decomposed"]),
        ("cafe", &["decomposed"]),
        ("文😀文", &["cjk"]),
        ("😀", &["cjk"]),
        ("\r\nline", &["newline"]),
        ("\t", &["newline"]),
    ];
    for (query, expected) in cases {
        assert_eq!(
            keys(&search_all(h.store(), &scope, query, 100).await),
            *expected,
            "search({query:?}) must match the exact code points, without Unicode normalization"
        );
    }
}

/// Paging a search returns every match exactly once in byte order, following cursors through
/// any empty pages until `next_cursor` is `None`.
pub async fn search_pages_every_match_once(h: Harness) {
    let scope = h.scope("user-1");
    let mut matching = Vec::new();
    for i in 0..40 {
        let key =
            format!("k{:02}-{}", (i * 7) % 40, ["B", "a", "é", "z", "~", "中", "😀", "a/b"][i % 8]);
        let hit = i % 3 != 0;
        put(h.store(), &scope, &key, if hit { "has the needle" } else { "has nothing" }).await;
        if hit {
            matching.push(key);
        }
    }
    let expected = byte_sorted(matching.iter().map(String::as_str));
    for limit in [1, 2, 5, 100] {
        let found = search_all(h.store(), &scope, "needle", limit).await;
        assert_eq!(
            keys(&found),
            expected,
            "search with limit {limit} must return every match exactly once in byte order"
        );
    }
    // A query that matches nothing still terminates with an empty result.
    assert!(search_all(h.store(), &scope, "absent", 3).await.is_empty(), "no match, no records");
}

/// An empty query, a query with NUL and an over-long query are `Invalid`.
pub async fn search_query_is_validated(h: Harness) {
    let scope = h.scope("user-1");
    put(h.store(), &scope, "k", "content").await;
    let store = h.store();
    expect_invalid(
        store.search(&scope, "", PageRequest::default()).await,
        "query",
        "an empty query",
    );
    expect_invalid(
        store.search(&scope, "con\0tent", PageRequest::default()).await,
        "query",
        "a query holding NUL",
    );
    let long = "a".repeat(crate::validation::MAX_CONTENT_BYTES + 1);
    expect_invalid(
        store.search(&scope, &long, PageRequest::default()).await,
        "query",
        "a 65,537-byte query",
    );
    let longest = "a".repeat(crate::validation::MAX_CONTENT_BYTES);
    let page = store
        .search(&scope, &longest, PageRequest::default())
        .await
        .expect("a 65,536-byte query is accepted");
    assert!(page.items.is_empty(), "nothing contains the long query");
}
