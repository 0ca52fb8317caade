//! Match modes, letter case and metadata filters: `all_words` and `any_word` searches, simple
//! case folding, and equality conditions on metadata for `list` and `search`.

use serde_json::{json, Value};

use super::support::{
    expect_found, expect_invalid, keys, list_request_all, put, put_write, search_all,
    search_corpus, search_request_all, SearchCases,
};
use crate::conformance::Harness;
use crate::matching::{Case, MatchMode, MetadataFilter};
use crate::page::PageRequest;
use crate::write::MemoryWrite;

/// Writes `content` with `metadata` at `key`, panicking on an error.
async fn put_meta(h: &Harness, scope: &crate::MemoryScope, key: &str, content: &str, meta: Value) {
    put_write(h.store(), scope, key, MemoryWrite::new(content).metadata(meta)).await;
}

/// The keys `search` finds for `query` with `request`'s options.
async fn found(
    h: &Harness,
    scope: &crate::MemoryScope,
    query: &str,
    request: PageRequest,
) -> Vec<String> {
    let records = search_request_all(h.store(), scope, query, request).await;
    keys(&records).into_iter().map(str::to_owned).collect()
}

/// `all_words`: every word occurs, in any order, anywhere (inside other words too).
pub async fn search_all_words_needs_every_word_in_any_order(h: Harness) {
    let scope = search_corpus(&h).await;
    let cases: SearchCases<'_> = &[
        ("berlin warehouse", &["a-both", "b-reversed", "d-joined"]),
        ("warehouse berlin", &["a-both", "b-reversed", "d-joined"]),
        ("  berlin\t\nwarehouse  ", &["a-both", "b-reversed", "d-joined"]),
        ("berlin\u{3000}warehouse", &["a-both", "b-reversed", "d-joined"]),
        ("berlin berlin", &["a-both", "b-reversed", "c-one", "d-joined"]),
        ("berlin depot", &[]),
        ("Berlin warehouse", &[]),
    ];
    let rule = "every word, in any order, case-sensitive";
    expect_found(h.store(), &scope, &PageRequest::new(100).all_words(), cases, rule).await;
    // The phrase stays the default: the whole query is one substring.
    assert_eq!(keys(&search_all(h.store(), &scope, "berlin warehouse", 100).await), ["a-both"]);
}

/// `any_word`: at least one word occurs.
pub async fn search_any_word_needs_one_word(h: Harness) {
    let scope = search_corpus(&h).await;
    // The sixteenth word counts.
    let sixteen = ["w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8", "w9", "x1", "x2", "x3"]
        .into_iter()
        .chain(["x4", "x5", "x6", "water"])
        .collect::<Vec<_>>()
        .join(" ");
    let cases: SearchCases<'_> = &[
        ("tea coffee", &["coffee", "tea"]),
        ("juice milk", &[]),
        ("Tea water", &["water"]),
        (&sixteen, &["water"]),
    ];
    let rule = "at least one of up to 16 words, case-sensitive";
    expect_found(h.store(), &scope, &PageRequest::new(1).any_word(), cases, rule).await;
}

/// Words are literal substrings, pattern characters included; no stemming, no stop words.
pub async fn search_words_are_literal_substrings(h: Harness) {
    let scope = search_corpus(&h).await;
    let rule = "literal substrings: no patterns, no stemming, no stop words";
    let all: SearchCases<'_> = &[
        ("% off_", &["percent"]),
        ("metric unit report", &["stems"]),
        // Both words stand in these, inside other words too ("in" in "berlin").
        ("the in", &["a-both", "ascii", "tea"]),
        ("reported", &[]),
    ];
    expect_found(h.store(), &scope, &PageRequest::new(100).all_words(), all, rule).await;
    let any: SearchCases<'_> = &[(".* [a-z]", &[])];
    expect_found(h.store(), &scope, &PageRequest::new(100).any_word(), any, rule).await;
}

/// Insensitive search compares after Unicode simple case folding, one character to one, on
/// every provider alike.
pub async fn search_ignore_case_uses_simple_case_folding(h: Harness) {
    let scope = search_corpus(&h).await;
    let cases: SearchCases<'_> = &[
        ("berlin warehouse", &["a-both", "ascii"]),
        ("kelvin", &["kelvin"]),
        ("\u{212A}", &["coffee", "kelvin"]),
        ("straße", &["capital-sharp-s", "sharp-s", "title-sharp-s"]),
        ("STRASSE", &[]),
        ("ss", &[]),
        ("σοφοσ", &["final-sigma", "sigma"]),
        ("ΣΟΦΟς", &["final-sigma", "sigma"]),
        ("istanbul", &[]),
        ("i̇stanbul", &[]),
        ("İSTANBUL", &["dotted-i"]),
        ("привет МИР", &["cyrillic"]),
        ("CAFE\u{301}", &["decomposed"]),
        ("CAFÉ", &["composed"]),
        ("STAR", &["long-s"]),
    ];
    let rule = "Unicode simple case folding (statuses C and S), not lower(), ILIKE, a collation \
                or full folding";
    expect_found(h.store(), &scope, &PageRequest::new(100).ignore_case(), cases, rule).await;
    // Without ignore_case nothing folds.
    assert_eq!(found(&h, &scope, "kelvin", PageRequest::new(100)).await, Vec::<String>::new());
}

/// A datastore's own narrowing of an insensitive or word search may only widen what the
/// provider then confirms: matches whose only occurrence is non-ASCII, past the first 16
/// bytes of the query, or in the last of several words are all found.
pub async fn search_ignore_case_prefilters_never_miss_a_match(h: Harness) {
    let scope = h.scope("user-1");
    put(h.store(), &scope, "kelvin-late", &format!("{} 273 \u{212A}ELVIN SCALE", "x".repeat(300)))
        .await;
    put(h.store(), &scope, "greek", "Η ΘΕΡΜΟΚΡΑΣΙΑ ΣΕ ΒΑΘΜΟΥΣ").await;
    put(h.store(), &scope, "long-s", "mi\u{17F}\u{17F}i\u{17F}\u{17F}ippi river").await;
    put(h.store(), &scope, "decoy", "kelvin? no: celsius").await;
    let insensitive = PageRequest::new(2).ignore_case();
    assert_eq!(found(&h, &scope, "273 kelvin scale", insensitive.clone()).await, ["kelvin-late"]);
    assert_eq!(found(&h, &scope, "θερμοκρασια σε βαθμους", insensitive.clone()).await, ["greek"]);
    assert_eq!(found(&h, &scope, "MISSISSIPPI RIVER", insensitive.clone()).await, ["long-s"]);
    let all = insensitive.clone().all_words();
    assert_eq!(found(&h, &scope, "scale KELVIN 273", all.clone()).await, ["kelvin-late"]);
    assert_eq!(found(&h, &scope, "βαθμους θερμοκρασια", all).await, ["greek"]);
    let any = insensitive.any_word();
    assert_eq!(
        found(&h, &scope, "fahrenheit rankine MISSISSIPPI", any.clone()).await,
        ["long-s"],
        "the last word of any_word counts as much as the first"
    );
    assert_eq!(found(&h, &scope, "celsius \u{212A}ELVIN", any).await, ["decoy", "kelvin-late"]);
}

/// Word modes need a word; `match` and `case` are for `search` only; a phrase keeps its
/// spaces.
pub async fn search_options_are_validated_and_search_only(h: Harness) {
    let scope = h.scope("user-1");
    put(h.store(), &scope, "k", "a b").await;
    for mode in [MatchMode::AllWords, MatchMode::AnyWord] {
        for blank in [" ", "\t\n", "\u{3000}\u{2003}"] {
            expect_invalid(
                h.store().search(&scope, blank, PageRequest::new(10).match_mode(mode)).await,
                "query",
                &format!("{mode} search of white space only"),
            );
        }
        let seventeen = vec!["w"; 17].join(" ");
        expect_invalid(
            h.store().search(&scope, &seventeen, PageRequest::new(10).match_mode(mode)).await,
            "query",
            &format!("{mode} search of 17 words"),
        );
        expect_invalid(
            h.store().search(&scope, "", PageRequest::new(10).match_mode(mode)).await,
            "query",
            &format!("{mode} search of nothing"),
        );
    }
    let spaces = h.store().search(&scope, " ", PageRequest::new(10)).await.expect("a phrase");
    assert_eq!(keys(&spaces.items), ["k"], "a phrase of one space is a literal space");
    let seventeen = vec!["w"; 17].join(" ");
    h.store().search(&scope, &seventeen, PageRequest::new(10)).await.expect("a long phrase");
    expect_invalid(
        h.store().list(&scope, PageRequest::new(10).all_words()).await,
        "match",
        "list with a match mode",
    );
    expect_invalid(
        h.store().list(&scope, PageRequest::new(10).ignore_case()).await,
        "case",
        "list with ignore_case",
    );
    expect_invalid(
        h.store().list_keys(&scope, PageRequest::new(10).case(Case::Insensitive)).await,
        "case",
        "list_keys with ignore_case",
    );
    let filter = MetadataFilter::new().field("a", 1);
    expect_invalid(
        h.store().list_keys(&scope, PageRequest::new(10).metadata(filter.clone())).await,
        "metadata",
        "list_keys with a metadata filter",
    );
    expect_invalid(
        h.store().purge_expired(&scope, PageRequest::new(10).metadata(filter)).await,
        "metadata",
        "purge_expired with a metadata filter",
    );
}

/// `list` and `search` keep only records whose metadata holds every condition, in key order,
/// within the scope and among live records, with or without a prefix.
pub async fn metadata_filter_selects_on_list_and_search(h: Harness) {
    let scope = h.scope("user-1");
    let prefs = json!({"category": "preferences", "pinned": true});
    put_meta(&h, &scope, "p-1", "likes tea", prefs.clone()).await;
    put_meta(
        &h,
        &scope,
        "p-2",
        "likes coffee",
        json!({"category": "preferences", "pinned": false}),
    )
    .await;
    put_meta(&h, &scope, "p-3", "likes water", json!({"category": "preferences"})).await;
    put_meta(&h, &scope, "n-1", "likes tea too", json!({"category": "notes", "pinned": true}))
        .await;
    put(h.store(), &scope, "plain", "likes tea, no metadata").await;
    let other = h.scope("user-2");
    put_meta(&h, &other, "p-1", "likes tea", prefs).await;
    let named = h.scope_in("user-1", "work");
    put_meta(&h, &named, "p-9", "likes tea", json!({"category": "preferences"})).await;

    let category = MetadataFilter::new().field("category", "preferences");
    let listed =
        list_request_all(h.store(), &scope, PageRequest::new(1).metadata(category.clone())).await;
    assert_eq!(keys(&listed), ["p-1", "p-2", "p-3"], "list by one field, in key order, one scope");
    let pinned = category.clone().field("pinned", true);
    let listed =
        list_request_all(h.store(), &scope, PageRequest::new(10).metadata(pinned.clone())).await;
    assert_eq!(keys(&listed), ["p-1"], "every condition must hold");
    let prefixed =
        PageRequest::new(10).prefix("n-").metadata(MetadataFilter::new().field("pinned", true));
    assert_eq!(
        keys(&list_request_all(h.store(), &scope, prefixed).await),
        ["n-1"],
        "prefix and filter"
    );
    let searched = found(
        &h,
        &scope,
        "tea",
        PageRequest::new(10).metadata(MetadataFilter::new().field("pinned", true)),
    )
    .await;
    assert_eq!(searched, ["n-1", "p-1"], "search and filter");
    let searched =
        found(&h, &scope, "LIKES", PageRequest::new(10).ignore_case().any_word().metadata(pinned))
            .await;
    assert_eq!(searched, ["p-1"], "every option at once");
    let none = MetadataFilter::new().field("category", "missing");
    assert!(list_request_all(h.store(), &scope, PageRequest::new(10).metadata(none))
        .await
        .is_empty());
    // Records that expire leave filtered pages as they leave plain ones.
    h.store()
        .put(
            &scope,
            "p-0",
            MemoryWrite::new("short-lived")
                .metadata(json!({"category": "preferences"}))
                .expires_at(h.soon()),
        )
        .await
        .expect("put an expiring record");
    h.wait_for_expiry().await;
    let listed = list_request_all(h.store(), &scope, PageRequest::new(10).metadata(category)).await;
    assert_eq!(keys(&listed), ["p-1", "p-2", "p-3"], "expired records are never listed");
}

/// Values compare by type: numbers by value (`1` equals `1.0`), strings, booleans and null
/// exactly; an absent field, an array or an object equals no scalar.
pub async fn metadata_filter_compares_values_by_type(h: Harness) {
    let scope = h.scope("user-1");
    put_meta(&h, &scope, "int", "x", json!({"v": 1})).await;
    put_meta(&h, &scope, "float", "x", json!({"v": 1.0})).await;
    put_meta(&h, &scope, "half", "x", json!({"v": 1.5})).await;
    put_meta(&h, &scope, "string", "x", json!({"v": "1"})).await;
    put_meta(&h, &scope, "true", "x", json!({"v": true})).await;
    put_meta(&h, &scope, "null", "x", json!({"v": null})).await;
    put_meta(&h, &scope, "array", "x", json!({"v": [1]})).await;
    put_meta(&h, &scope, "object", "x", json!({"v": {"v": 1}})).await;
    put_meta(&h, &scope, "nested", "x", json!({"w": {"v": 1}})).await;
    put_meta(&h, &scope, "big", "x", json!({"v": 9_007_199_254_740_993_i64})).await;
    put(h.store(), &scope, "absent", "x").await;
    let cases: &[(Value, &[&str])] = &[
        (json!(1), &["float", "int"]),
        (json!(1.0), &["float", "int"]),
        (json!(1.5), &["half"]),
        (json!("1"), &["string"]),
        (json!(true), &["true"]),
        (json!(null), &["null"]),
        (json!(9_007_199_254_740_993_i64), &["big"]),
        (json!(9_007_199_254_740_992_i64), &[]),
        (json!("x"), &[]),
    ];
    for (value, expected) in cases {
        let filter = MetadataFilter::new().field("v", value.clone());
        let listed =
            list_request_all(h.store(), &scope, PageRequest::new(3).metadata(filter.clone())).await;
        assert_eq!(keys(&listed), *expected, "list where v = {value}");
        let searched = found(&h, &scope, "x", PageRequest::new(3).metadata(filter)).await;
        assert_eq!(searched, *expected, "search where v = {value}");
    }
}

/// A filter names at most 8 fields of scalar values without NUL; a bad one is `Invalid`
/// naming `metadata` on `list` and `search` alike.
pub async fn metadata_filter_is_validated(h: Harness) {
    let scope = h.scope("user-1");
    let nine = (0..9).fold(MetadataFilter::new(), |f, i| f.field(format!("f{i}"), i));
    let eight = (0..8).fold(MetadataFilter::new(), |f, i| f.field(format!("f{i}"), i));
    let bad = [
        (nine, "nine fields"),
        (MetadataFilter::new().field("a", json!([1])), "an array value"),
        (MetadataFilter::new().field("a", json!({"b": 1})), "an object value"),
        (MetadataFilter::new().field("", 1), "an empty field name"),
        (MetadataFilter::new().field("a\u{0}b", 1), "a NUL in a name"),
        (MetadataFilter::new().field("a", "x\u{0}"), "a NUL in a value"),
        (MetadataFilter::new().field("a", "x".repeat(1_025)), "a long value"),
        (MetadataFilter::new().field("n".repeat(257), 1), "a long name"),
    ];
    for (filter, what) in bad {
        let page = PageRequest::new(10).metadata(filter);
        expect_invalid(
            h.store().list(&scope, page.clone()).await,
            "metadata",
            &format!("list with {what}"),
        );
        expect_invalid(
            h.store().search(&scope, "x", page).await,
            "metadata",
            &format!("search with {what}"),
        );
    }
    h.store().list(&scope, PageRequest::new(10).metadata(eight)).await.expect("eight fields");
}

/// A cursor continues only the request that made it: reused with another mode, case or
/// filter it is `Invalid` naming `cursor`; the same filter spelled with `1.0` for `1` is
/// the same request.
pub async fn cursors_are_bound_to_mode_case_and_filter(h: Harness) {
    let scope = h.scope("user-1");
    for i in 0..4 {
        put_meta(&h, &scope, &format!("k{i}"), "alpha beta", json!({"n": 1, "tag": "t"})).await;
    }
    let all = PageRequest::new(1).all_words();
    let page = h.store().search(&scope, "alpha beta", all.clone()).await.expect("a first page");
    let cursor = page.next_cursor.expect("more matches follow");
    let next = h.store().search(&scope, "alpha beta", all.clone().after(cursor.clone())).await;
    assert_eq!(keys(&next.expect("the same request continues").items), ["k1"]);
    let others = [
        (PageRequest::new(1).any_word(), "any_word"),
        (PageRequest::new(1), "phrase"),
        (PageRequest::new(1).all_words().ignore_case(), "ignore_case"),
        (PageRequest::new(1).all_words().metadata(MetadataFilter::new().field("n", 1)), "a filter"),
    ];
    for (other, what) in others {
        expect_invalid(
            h.store().search(&scope, "alpha beta", other.after(cursor.clone())).await,
            "cursor",
            &format!("an all_words cursor reused with {what}"),
        );
    }
    let filtered =
        PageRequest::new(1).metadata(MetadataFilter::new().field("n", 1).field("tag", "t"));
    let page = h.store().list(&scope, filtered).await.expect("a filtered list");
    let cursor = page.next_cursor.expect("more records follow");
    let same =
        PageRequest::new(1).metadata(MetadataFilter::new().field("tag", "t").field("n", 1.0));
    let next = h.store().list(&scope, same.after(cursor.clone())).await.expect("the same filter");
    assert_eq!(keys(&next.items), ["k1"]);
    expect_invalid(
        h.store().list(&scope, PageRequest::new(1).after(cursor.clone())).await,
        "cursor",
        "a filtered list's cursor reused without the filter",
    );
    let other = PageRequest::new(1).metadata(MetadataFilter::new().field("n", 2).field("tag", "t"));
    expect_invalid(
        h.store().list(&scope, other.after(cursor)).await,
        "cursor",
        "a filtered list's cursor reused with another filter",
    );
    let plain = h.store().list(&scope, PageRequest::new(1)).await.expect("a plain list");
    let plain_cursor = plain.next_cursor.expect("more records follow");
    let filter = MetadataFilter::new().field("n", 1);
    expect_invalid(
        h.store().list(&scope, PageRequest::new(1).metadata(filter).after(plain_cursor)).await,
        "cursor",
        "a plain list's cursor reused with a filter",
    );
}

/// A filtered `list` and an insensitive word search inspect a bounded number of content bytes
/// per call, as a phrase search does: over 2.5 MiB of records that fail before the only
/// match, the first call returns no record but a cursor, and following the cursors finds the
/// match exactly once.
pub async fn filtered_list_and_word_search_stay_bounded(h: Harness) {
    let scope = h.scope("user-1");
    let filler = "A".repeat(crate::validation::MAX_CONTENT_BYTES);
    for i in 0..40 {
        put_meta(&h, &scope, &format!("filler-{i:02}"), &filler, json!({"kind": "filler"})).await;
    }
    put_meta(
        &h,
        &scope,
        "zz-match",
        &format!("{} needle B", "a".repeat(5_000)),
        json!({"kind": "match"}),
    )
    .await;
    let filter = PageRequest::new(20).metadata(MetadataFilter::new().field("kind", "match"));
    let first = h.store().list(&scope, filter.clone()).await.expect("a filtered list");
    assert!(
        first.items.is_empty() && first.next_cursor.is_some(),
        "one filtered list call must stop within the byte budget and return a cursor"
    );
    assert_eq!(keys(&list_request_all(h.store(), &scope, filter).await), ["zz-match"]);
    let words = PageRequest::new(20).all_words().ignore_case();
    let first = h.store().search(&scope, "NEEDLE b", words.clone()).await.expect("a word search");
    assert!(
        first.items.is_empty() && first.next_cursor.is_some(),
        "one insensitive word search must stop within the byte budget and return a cursor"
    );
    assert_eq!(found(&h, &scope, "NEEDLE b", words).await, ["zz-match"]);
    let any = PageRequest::new(20).any_word().ignore_case();
    assert_eq!(found(&h, &scope, "\u{212A} NEEDLE", any).await, ["zz-match"]);
}
