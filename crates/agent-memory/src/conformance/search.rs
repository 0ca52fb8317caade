//! Search: a literal, case-sensitive substring of the content, paged in key order.

use serde_json::json;

use super::support::{
    byte_sorted, expect_found, expect_invalid, keys, put, search_all, search_corpus, SearchCases,
};
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
    let scope = search_corpus(&h).await;
    let cases: SearchCases<'_> = &[
        ("hello", &["lower"]),
        ("Hello", &["title"]),
        ("HELLO", &["upper"]),
        ("o w", &["lower"]),
        ("world", &["lower"]),
        ("hello world", &["lower"]),
        ("lo Wo", &["title"]),
        (
            "o",
            &[
                "a-both",
                "b-reversed",
                "c-one",
                "coffee",
                "d-joined",
                "decomposed",
                "e-none",
                "lower",
                "newline",
                "percent",
                "plain",
                "stems",
                "tea",
                "title",
                "water",
            ],
        ),
        ("STRASSE", &[]),
        ("straße", &["sharp-s"]),
        ("istanbul", &[]),
        ("İst", &["dotted-i"]),
        ("hello world!", &[]),
    ];
    let rule = "a case-sensitive substring match (no ILIKE, no case folding, no collation)";
    expect_found(h.store(), &scope, &PageRequest::new(100), cases, rule).await;
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
    let scope = search_corpus(&h).await;
    let cases: SearchCases<'_> = &[
        ("caf\u{e9}", &["composed"]),
        ("cafe\u{301}", &["decomposed"]),
        ("cafe", &["decomposed"]),
        ("文😀文", &["cjk"]),
        ("😀", &["cjk"]),
        ("\r\nline", &["newline"]),
        ("\t", &["newline"]),
    ];
    let rule = "the exact code points, without Unicode normalization";
    expect_found(h.store(), &scope, &PageRequest::new(100), cases, rule).await;
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

/// An empty query, a query with NUL and a query over 1,024 bytes are `Invalid`.
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
    let long = "a".repeat(crate::validation::MAX_QUERY_BYTES + 1);
    expect_invalid(
        store.search(&scope, &long, PageRequest::default()).await,
        "query",
        "a 1,025-byte query",
    );
    // The limit counts bytes: 257 four-byte characters are 1,028 bytes.
    expect_invalid(
        store.search(&scope, &"🦀".repeat(257), PageRequest::default()).await,
        "query",
        "a 1,028-byte query of 257 characters",
    );
    let longest = "a".repeat(crate::validation::MAX_QUERY_BYTES);
    let page = store
        .search(&scope, &longest, PageRequest::default())
        .await
        .expect("a 1,024-byte query is accepted");
    assert!(page.items.is_empty(), "nothing contains the long query");
}

/// Overlapping and repetitive patterns match exactly where they occur: partial matches that
/// restart inside themselves, periodic queries, a match at the very end, and long queries whose
/// first bytes occur in many places but whose whole text occurs only in some.
pub async fn search_matches_overlapping_and_repetitive_patterns(h: Harness) {
    let scope = h.scope("user-1");
    let long_run = "a".repeat(1_023);
    let contents: &[(&str, String)] = &[
        ("aab", "aaab".to_owned()),
        ("abab", "abababac".to_owned()),
        ("almost", "abababab".to_owned()),
        ("run", format!("{long_run}b")),
        ("run-short", format!("{}b", "a".repeat(1_022))),
        ("run-late", format!("{}{long_run}b", "a".repeat(30_000))),
        ("run-broken", format!("{}b{}", "a".repeat(700), "a".repeat(700))),
        ("crabs", format!("{}🦞", "🦀".repeat(300))),
        ("end", format!("{}xyz", "x".repeat(5_000))),
    ];
    for (key, content) in contents {
        put(h.store(), &scope, key, content).await;
    }
    let cases: Vec<(String, Vec<&str>)> = vec![
        ("aab".to_owned(), vec!["aab", "run", "run-broken", "run-late", "run-short"]),
        ("ababac".to_owned(), vec!["abab"]),
        ("abab".to_owned(), vec!["abab", "almost"]),
        ("bababa".to_owned(), vec!["abab", "almost"]),
        (format!("{long_run}b"), vec!["run", "run-late"]),
        (format!("{}b", "a".repeat(1_022)), vec!["run", "run-late", "run-short"]),
        (format!("{}b{}", "a".repeat(15), "a".repeat(600)), vec!["run-broken"]),
        (format!("{}b{}", "a".repeat(15), "a".repeat(701)), vec![]),
        (format!("{}🦞", "🦀".repeat(200)), vec!["crabs"]),
        ("🦀".repeat(250), vec!["crabs"]),
        (format!("{}xyz", "x".repeat(1_000)), vec!["end"]),
        (format!("{}xyy", "x".repeat(1_000)), vec![]),
    ];
    for (query, expected) in cases {
        let found = search_all(h.store(), &scope, &query, 100).await;
        assert_eq!(
            keys(&found),
            expected,
            "search for a {}-byte repetitive query must match exactly the contents holding it",
            query.len()
        );
        // Small pages see the same matches, each once.
        let paged = search_all(h.store(), &scope, &query, 1).await;
        assert_eq!(keys(&paged), expected, "the same matches one page of one at a time");
    }
}

/// A long query whose first bytes occur in many records but whose whole text occurs in only a
/// few: every page holds only real matches, each match comes back once, and the pages stop.
pub async fn search_long_queries_page_only_real_matches(h: Harness) {
    let scope = h.scope("user-1");
    let head = "the same opening words, then";
    let query = format!("{head} the real ending");
    for i in 0..30 {
        let content = if i % 10 == 7 { format!("x {query} y") } else { format!("{head} a decoy") };
        put(h.store(), &scope, &format!("k{i:02}"), &content).await;
    }
    for limit in [1, 2, 3, 100] {
        let found = search_all(h.store(), &scope, &query, limit).await;
        assert_eq!(keys(&found), ["k07", "k17", "k27"], "limit {limit}: only the real matches");
        let mut after = None;
        loop {
            let page = h
                .store()
                .search(&scope, &query, PageRequest::new(limit).after_opt(after.take()))
                .await
                .expect("search succeeds");
            assert!(page.items.len() <= limit, "a page holds at most its limit");
            assert!(page.items.iter().all(|r| r.content.contains(&query)), "only real matches");
            match page.next_cursor {
                Some(cursor) => after = Some(cursor),
                None => break,
            }
        }
    }
}

/// One call inspects a bounded number of content bytes (a few MiB at most, whatever the query):
/// over 2.5 MiB of non-matching, repetitive content before the only match, the first call
/// returns no match but a cursor, and following the cursors finds the match exactly once.
pub async fn search_budget_returns_a_cursor_and_resuming_finds_the_match(h: Harness) {
    let scope = h.scope("user-1");
    let filler = "a".repeat(crate::validation::MAX_CONTENT_BYTES);
    for i in 0..40 {
        put(h.store(), &scope, &format!("filler-{i:02}"), &filler).await;
    }
    let query = format!("{}b", "a".repeat(crate::validation::MAX_QUERY_BYTES - 1));
    put(h.store(), &scope, "zz-match", &format!("{}{query}", "a".repeat(5_000))).await;
    let first = h
        .store()
        .search(&scope, &query, PageRequest::new(20))
        .await
        .expect("a hostile search succeeds");
    assert!(
        first.items.is_empty() && first.next_cursor.is_some(),
        "one call must stop within its byte budget, before the record after 2.5 MiB of content, \
         and return a cursor"
    );
    let found = search_all(h.store(), &scope, &query, 20).await;
    assert_eq!(keys(&found), ["zz-match"], "resuming from the cursors finds the match once");
    let found = search_all(h.store(), &scope, "b", 1).await;
    assert_eq!(keys(&found), ["zz-match"], "a one-byte query too");
}
