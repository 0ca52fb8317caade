//! The in-process provider runs the whole conformance suite, with an injected clock.

use std::sync::Arc;

use agent_memory::conformance::Fixture;
use agent_memory::InMemoryStore;

/// An `InMemoryStore` keeps its data inside the instance, on an injected clock: each quota
/// case's store is a datastore of its own, and the replica cases race tasks of one instance.
async fn store() -> Fixture {
    Fixture::in_process(|clock, quotas| {
        let builder = InMemoryStore::builder().clock(clock).quotas(quotas);
        Arc::new(builder.build().expect("valid quotas"))
    })
}

agent_memory::conformance_tests!(store);

/// Every `pub async fn` in a case file is a case: each must be in `CASE_NAMES` (and so stamped
/// by `conformance_tests!`), and the list must hold nothing else.
#[test]
fn every_case_function_is_stamped() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/conformance");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the conformance sources are readable") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if !name.ends_with(".rs") || name == "mod.rs" || name == "support.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a readable case file");
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("pub async fn ") {
                let case = rest.split('(').next().unwrap_or_default().trim().to_owned();
                found.push((case, name.clone()));
            }
        }
    }
    let listed = agent_memory::conformance::CASE_NAMES;
    for (case, file) in &found {
        assert!(
            listed.contains(&case.as_str()),
            "{file}: case `{case}` is missing from the list in conformance/mod.rs"
        );
    }
    assert_eq!(found.len(), listed.len(), "CASE_NAMES lists a case twice or one no file defines");
    assert!(listed.len() >= 50, "the suite should keep at least 50 cases, has {}", listed.len());
}
