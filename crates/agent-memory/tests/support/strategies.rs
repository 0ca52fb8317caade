//! What the property tests share: case counts from the environment, and the building blocks
//! of hostile input (the awkward ASCII alphabet, any JSON number, JSON trees over a file's own
//! text strategy). Each fuzz file keeps its own text mix, because each aims at different
//! limits; only the pieces that were the same in every file live here.
// Each test binary uses a different part of this module.
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::strategy::Union;
use serde_json::Value;

/// The variable that sets the case count of every fuzz property (see `docs/testing.md`).
pub const FUZZ_CASES_ENV: &str = "AGENT_MEMORY_FUZZ_CASES";

/// The case count in the environment variable `name`, or `default` when it is unset or not a
/// number.
pub fn cases_from_env(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The case count of a fuzz property: [`FUZZ_CASES_ENV`], or `default`.
pub fn fuzz_cases(default: u32) -> u32 {
    cases_from_env(FUZZ_CASES_ENV, default)
}

/// Up to `max_len` characters from the ASCII that breaks careless code: controls, SQL and glob
/// wildcards, backslashes, delimiters, braces, quotes, plus letters and digits.
pub fn awkward_ascii(max_len: usize) -> BoxedStrategy<String> {
    proptest::string::string_regex(&format!(
        "[\\x00-\\x1f%_*\\\\:/{{}}'\"`;<>a-zA-Z0-9 -]{{0,{max_len}}}"
    ))
    .expect("a valid regex")
    .boxed()
}

/// Any `f64` as JSON: a number, or `null` for the NaNs and infinities JSON cannot hold.
pub fn json_float() -> BoxedStrategy<Value> {
    any::<f64>()
        .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number))
        .boxed()
}

/// How [`json_tree`] grows: proptest's `prop_recursive` bounds, and whether leaves include
/// floats.
#[derive(Debug, Clone, Copy)]
pub struct JsonShape {
    /// The deepest nesting.
    pub depth: u32,
    /// The number of nodes proptest aims for.
    pub size: u32,
    /// The most items in one array or object.
    pub branch: u32,
    /// Whether leaves may be floats (from [`json_float`]) besides null, booleans, integers and
    /// strings.
    pub floats: bool,
}

/// JSON trees whose strings and object keys come from `text`.
pub fn json_tree(text: BoxedStrategy<String>, shape: JsonShape) -> BoxedStrategy<Value> {
    let mut leaves = vec![
        Just(Value::Null).boxed(),
        any::<bool>().prop_map(Value::Bool).boxed(),
        any::<i64>().prop_map(Value::from).boxed(),
    ];
    if shape.floats {
        leaves.push(json_float());
    }
    leaves.push(text.clone().prop_map(Value::String).boxed());
    let branch = usize::try_from(shape.branch).expect("a small branch size");
    Union::new(leaves)
        .prop_recursive(shape.depth, shape.size, shape.branch, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..branch).prop_map(Value::Array),
                prop::collection::btree_map(text.clone(), inner, 0..branch)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
        .boxed()
}
