//! What the providers that narrow a search in the datastore (PostgreSQL's statement, Redis's
//! script) must still answer exactly: the same records, read with a scan budget of a few keys
//! so every page crosses several calls; and how the words of a query share the byte budget.

use agent_memory::{
    Cursor, MemoryPage, MemoryScope, MemoryStore, MemoryWrite, MetadataFilter, PageRequest,
};
use serde_json::json;

/// Every key a paged read returns, following its cursors, and the number of calls it took.
pub async fn drain<F, Fut>(mut read: F) -> (Vec<String>, usize)
where
    F: FnMut(Option<Cursor>) -> Fut,
    Fut: std::future::Future<Output = agent_memory::Result<MemoryPage>>,
{
    let (mut keys, mut calls, mut after) = (Vec::new(), 0, None);
    loop {
        let page = read(after.take()).await.expect("a page");
        calls += 1;
        keys.extend(page.items.into_iter().map(|r| r.key));
        match page.next_cursor {
            Some(cursor) => after = Some(cursor),
            None => return (keys, calls),
        }
    }
}

/// Word modes, case folding and metadata filters on six records, at page sizes 1, 2 and 100,
/// and a cursor bound to its request's options. `store` should inspect only a few keys a call.
pub async fn search_options_narrow_to_exact_answers(store: &dyn MemoryStore, s: &MemoryScope) {
    let records = [
        ("a", "Prefers the Berlin WAREHOUSE", json!({"category": "preferences", "weight": 1.0})),
        ("b", "berlin only", json!({"category": "notes", "weight": 1, "pinned": true})),
        ("c", "\u{212A}ELVIN scale, 50%_off", json!({"category": "preferences", "n": null})),
        ("d", "Straße ΣΑΣ", json!({"category": "preferences", "weight": 2})),
        ("e", "a warehouse in Hamburg", json!({})),
        ("f", "ΣΑΣ", json!({"category": "preferences", "weight": "1"})),
    ];
    for (key, content, metadata) in records {
        store.put(s, key, MemoryWrite::new(content).metadata(metadata)).await.expect("put");
    }
    let search = |query: &'static str, request: PageRequest| {
        drain(move |after| {
            let request = request.clone().after_opt(after);
            async move { store.search(s, query, request).await }
        })
    };
    for limit in [1, 2, 100] {
        let page = || PageRequest::new(limit);
        let (words, _) = search("berlin warehouse", page().all_words().ignore_case()).await;
        assert_eq!(words, ["a"], "limit {limit}");
        let (any, _) = search("berlin warehouse", page().any_word().ignore_case()).await;
        assert_eq!(any, ["a", "b", "e"], "limit {limit}");
        assert_eq!(search("berlin", page()).await.0, ["b"], "phrases stay case-sensitive");
        // The Kelvin sign folds to k (Lua looks for "elvin" only); simple folding keeps ß
        // apart from ss; every sigma matches every other (PostgreSQL's classes hold them,
        // Redis cannot narrow by Greek and leaves it to the matcher); % and _ are literal
        // under a regular expression too.
        assert_eq!(search("kelvin", page().ignore_case()).await.0, ["c"]);
        assert_eq!(search("STRASSE", page().ignore_case()).await.0, Vec::<String>::new());
        assert_eq!(search("STRA\u{1E9E}E σας", page().ignore_case()).await.0, ["d"]);
        assert_eq!(search("σας", page().ignore_case()).await.0, ["d", "f"]);
        assert_eq!(search("0%_O", page().ignore_case()).await.0, ["c"]);
        assert_eq!(search("0%.O", page().ignore_case()).await.0, Vec::<String>::new());
        let preferences = MetadataFilter::new().field("category", "preferences");
        let found = search("σας hamburg", page().any_word().ignore_case().metadata(preferences));
        assert_eq!(found.await.0, ["d", "f"], "the filter applies to search");
        // Numbers compare as numbers, never as strings; null is a value of its own.
        let weight = MetadataFilter::new().field("weight", 1);
        let (listed, _) = drain(|after| {
            store.list(s, PageRequest::new(limit).metadata(weight.clone()).after_opt(after))
        })
        .await;
        assert_eq!(listed, ["a", "b"], "limit {limit}");
        let null = MetadataFilter::new().field("n", serde_json::Value::Null);
        let (listed, _) = drain(|after| {
            store.list(s, PageRequest::new(limit).metadata(null.clone()).after_opt(after))
        })
        .await;
        assert_eq!(listed, ["c"], "limit {limit}");
    }
    // A cursor is bound to its request's options.
    let first = store.search(s, "berlin", PageRequest::new(1).ignore_case()).await.expect("search");
    let cursor = first.next_cursor.expect("more to read");
    let err = store.search(s, "berlin", PageRequest::new(1).after(cursor)).await.unwrap_err();
    assert!(err.is_invalid(), "{err}");
}

/// With a `search_scan_bytes` budget of 400, the words of a query share it: a two-word query
/// reads half as many records a call as a phrase.
pub async fn the_words_of_a_query_share_the_byte_budget(store: &dyn MemoryStore, s: &MemoryScope) {
    for i in 0..8 {
        let content = format!("{}{}", if i == 6 { "alpha beta " } else { "" }, "x".repeat(100));
        store.put(s, &format!("k{i}"), MemoryWrite::new(content)).await.expect("put");
    }
    let (keys, phrase_calls) = drain(|after| {
        store.search(s, "alpha", PageRequest::new(10).ignore_case().after_opt(after))
    })
    .await;
    assert_eq!(keys, ["k6"]);
    let (keys, word_calls) = drain(|after| {
        let request = PageRequest::new(10).all_words().ignore_case().after_opt(after);
        store.search(s, "alpha beta", request)
    })
    .await;
    assert_eq!(keys, ["k6"]);
    // 100 bytes a record: four per call for one needle, two for two.
    assert_eq!((phrase_calls, word_calls), (2, 4));
}
