//! Parsing a model's tool call into a typed call: the arguments are checked against the
//! tool's published schema (nothing undeclared, nothing required missing), then read by name
//! and type into a [`KeyToolCall`] or a [`FactToolCall`], which the dispatcher runs.
//!
//! Optional arguments sent as `null` count as not given. Every check happens here, before
//! anything is read or written, except the rules the store itself enforces (key syntax,
//! sizes), which come back as [`MemoryError`](crate::MemoryError)s when the call runs.

use std::time::Duration;

use serde_json::{Map, Value};

use super::definitions::{Tool, ToolDefinition, MAX_EXPIRES_IN_SECONDS};
use super::error::{printable, ToolError, ToolErrorKind};
use crate::error::MemoryError;
use crate::matching::{Case, MatchMode, MetadataFilter, MAX_METADATA_FILTER_FIELDS};
use crate::page::{Cursor, PageRequest, DEFAULT_PAGE_LIMIT};
use crate::record::Revision;
use crate::validation::MAX_PAGE_LIMIT;

/// A call of one of the key-based tools, its arguments read and typed.
#[derive(Debug, PartialEq)]
pub(super) enum KeyToolCall {
    /// `memory_save`.
    Save {
        key: String,
        content: String,
        /// Labels; `None` keeps the empty object.
        metadata: Option<Map<String, Value>>,
        /// Forget the memory this long after the call; `None` keeps it until deleted.
        expires_in: Option<Duration>,
        /// Write only over this revision.
        expected_revision: Option<Revision>,
    },
    /// `memory_get`.
    Get { key: String },
    /// `memory_list`.
    List {
        /// Limit, cursor and metadata filter.
        page: PageRequest,
    },
    /// `memory_search`.
    Search {
        /// Literal text (a phrase, or words) the content must contain.
        query: String,
        /// Limit, cursor, match mode, case and metadata filter.
        page: PageRequest,
    },
    /// `memory_delete`.
    Delete {
        key: String,
        /// Delete only this revision.
        expected_revision: Option<Revision>,
    },
}

/// A call of one of the fact tools, its arguments read and typed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FactToolCall {
    /// `remember`.
    Remember {
        /// The fact, not empty.
        text: String,
    },
    /// `forget`.
    Forget { fact_id: String },
    /// `recall`.
    Recall {
        /// Return at most this many facts, the oldest.
        limit: usize,
    },
}

/// Reads a tool's checked arguments into its typed call.
pub(super) type Parser<C> = fn(&Args<'_>) -> Result<C, ToolError>;

/// Finds the tool called `name` in `tools`, checks `arguments` against its definition and
/// parses them into its typed call, returned with the definition it was checked against.
///
/// # Errors
/// A [`ToolError`] for an unknown tool, arguments that are not an object, undeclared or missing
/// arguments, and any argument of the wrong type or out of range.
pub(super) fn parse<'t, C>(
    tools: &'t [Tool<C>],
    name: &str,
    arguments: &Value,
) -> Result<(&'t ToolDefinition, C), ToolError> {
    let Some(tool) = tools.iter().find(|tool| tool.definition.name == name) else {
        return Err(ToolError::unknown_tool(name, tools.iter().map(|tool| tool.definition.name)));
    };
    let args = Args::check(&tool.definition, arguments)?;
    Ok((&tool.definition, (tool.parse)(&args)?))
}

// One parser per tool. Fields are read in the order written, which decides the argument an
// error names when several are wrong.

/// Parses a `memory_save` call.
pub(super) fn memory_save(args: &Args<'_>) -> Result<KeyToolCall, ToolError> {
    Ok(KeyToolCall::Save {
        key: args.required_string("key")?,
        content: args.required_string("content")?,
        metadata: args.object("metadata")?,
        expires_in: args
            .integer("expires_in_seconds", MAX_EXPIRES_IN_SECONDS)?
            .map(Duration::from_secs),
        expected_revision: args.revision("expected_revision")?,
    })
}

/// Parses a `memory_get` call.
pub(super) fn memory_get(args: &Args<'_>) -> Result<KeyToolCall, ToolError> {
    Ok(KeyToolCall::Get { key: args.required_string("key")? })
}

/// Parses a `memory_list` call.
pub(super) fn memory_list(args: &Args<'_>) -> Result<KeyToolCall, ToolError> {
    let page = args.page()?.metadata(args.metadata_filter()?);
    Ok(KeyToolCall::List { page })
}

/// Parses a `memory_search` call.
pub(super) fn memory_search(args: &Args<'_>) -> Result<KeyToolCall, ToolError> {
    let query = args.required_string("query")?;
    let page = args
        .page()?
        .match_mode(args.match_mode()?)
        .case(args.case()?)
        .metadata(args.metadata_filter()?);
    Ok(KeyToolCall::Search { query, page })
}

/// Parses a `memory_delete` call.
pub(super) fn memory_delete(args: &Args<'_>) -> Result<KeyToolCall, ToolError> {
    Ok(KeyToolCall::Delete {
        key: args.required_string("key")?,
        expected_revision: args.revision("expected_revision")?,
    })
}

/// Parses a `remember` call.
pub(super) fn remember(args: &Args<'_>) -> Result<FactToolCall, ToolError> {
    let text = args.required_string("text")?;
    if text.is_empty() {
        return Err(ToolError::invalid("text", "`text` must not be empty"));
    }
    Ok(FactToolCall::Remember { text })
}

/// Parses a `forget` call.
pub(super) fn forget(args: &Args<'_>) -> Result<FactToolCall, ToolError> {
    Ok(FactToolCall::Forget { fact_id: args.required_string("fact_id")? })
}

/// Parses a `recall` call.
pub(super) fn recall(args: &Args<'_>) -> Result<FactToolCall, ToolError> {
    Ok(FactToolCall::Recall { limit: args.limit(MAX_PAGE_LIMIT)? })
}

/// A call's arguments, checked against its tool's definition: nothing undeclared, nothing
/// required missing.
#[derive(Debug)]
pub(super) struct Args<'a> {
    definition: &'a ToolDefinition,
    map: Option<&'a Map<String, Value>>,
}

/// How many undeclared argument names an error lists before summarising the rest.
const MAX_LISTED_UNKNOWN: usize = 5;

/// Argument names that suggest a caller is trying to pick a scope.
const SCOPE_WORDS: [&str; 7] = ["user", "app", "namespace", "tenant", "scope", "owner", "account"];

impl<'a> Args<'a> {
    /// Checks `arguments` against `definition`: an object (or `null` for none), no argument
    /// the schema does not declare, and every required one present and not `null`.
    fn check(definition: &'a ToolDefinition, arguments: &'a Value) -> Result<Self, ToolError> {
        let map = match arguments {
            Value::Null => None,
            Value::Object(map) => Some(map),
            _ => {
                return Err(ToolError::new(
                    ToolErrorKind::InvalidArguments,
                    None,
                    format!("the arguments of {} must be a JSON object", definition.name),
                ))
            }
        };
        let declared: Vec<&str> = definition.arguments().collect();
        if let Some(map) = map {
            let mut unknown: Vec<&str> =
                map.keys().map(String::as_str).filter(|name| !declared.contains(name)).collect();
            if !unknown.is_empty() {
                unknown.sort_unstable();
                // Name a few; a call with thousands of junk fields must not get a huge error back.
                let mut listed: Vec<String> = unknown
                    .iter()
                    .take(MAX_LISTED_UNKNOWN)
                    .map(|name| format!("`{}`", printable(name)))
                    .collect();
                if unknown.len() > MAX_LISTED_UNKNOWN {
                    listed.push(format!("and {} more", unknown.len() - MAX_LISTED_UNKNOWN));
                }
                let accepted =
                    if declared.is_empty() { "none".to_owned() } else { declared.join(", ") };
                let mut message = format!(
                    "{} does not accept the argument{} {}; accepted arguments: {accepted}.",
                    definition.name,
                    if unknown.len() == 1 { "" } else { "s" },
                    listed.join(", "),
                );
                let scope_like = unknown.iter().any(|name| {
                    let lower = name.to_lowercase();
                    SCOPE_WORDS.iter().any(|word| lower.contains(word))
                });
                if scope_like {
                    message.push_str(
                        " The user, application and namespace are fixed by the application and \
                         cannot be chosen in a tool call.",
                    );
                }
                return Err(ToolError::invalid(&printable(unknown[0]), message));
            }
        }
        for required in definition.required_arguments() {
            let present = map.and_then(|map| map.get(required)).is_some_and(|v| !v.is_null());
            if !present {
                return Err(ToolError::invalid(
                    required,
                    format!("{} needs the argument `{required}`", definition.name),
                ));
            }
        }
        Ok(Self { definition, map })
    }

    /// The argument `field`; `None` when left out or `null`.
    fn get(&self, field: &str) -> Option<&'a Value> {
        // A parser must not read what the schema does not offer: the schema is the one list of
        // accepted arguments. A wrong field name is a bug in this module, never model input.
        debug_assert!(
            self.definition.arguments().any(|declared| declared == field),
            "{} reads the undeclared argument `{field}`",
            self.definition.name
        );
        self.map.and_then(|map| map.get(field)).filter(|v| !v.is_null())
    }

    fn string(&self, field: &str) -> Result<Option<&'a str>, ToolError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ToolError::invalid(field, format!("`{field}` must be a string"))),
        }
    }

    /// A declared-required string; [`check`](Self::check) made sure it is present.
    fn required_string(&self, field: &str) -> Result<String, ToolError> {
        self.string(field)?
            .map(str::to_owned)
            .ok_or_else(|| ToolError::invalid(field, format!("the argument `{field}` is required")))
    }

    fn object(&self, field: &str) -> Result<Option<Map<String, Value>>, ToolError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map.clone())),
            Some(_) => Err(ToolError::invalid(field, format!("`{field}` must be a JSON object"))),
        }
    }

    /// `ignore_case`: [`Case::Insensitive`] for `true`; sensitive when false or left out.
    fn case(&self) -> Result<Case, ToolError> {
        match self.get("ignore_case") {
            None | Some(Value::Bool(false)) => Ok(Case::Sensitive),
            Some(Value::Bool(true)) => Ok(Case::Insensitive),
            Some(_) => {
                Err(ToolError::invalid("ignore_case", "`ignore_case` must be true or false"))
            }
        }
    }

    /// `match`: the search's match mode, `phrase` when left out.
    fn match_mode(&self) -> Result<MatchMode, ToolError> {
        let refused = || {
            ToolError::invalid("match", "`match` must be \"phrase\", \"all_words\" or \"any_word\"")
        };
        match self.get("match") {
            None => Ok(MatchMode::Phrase),
            Some(Value::String(name)) => name.parse().map_err(|_| refused()),
            Some(_) => Err(refused()),
        }
    }

    /// `metadata` of `memory_list` and `memory_search`: equality conditions on top-level
    /// metadata fields; empty when left out.
    fn metadata_filter(&self) -> Result<MetadataFilter, ToolError> {
        let Some(value) = self.get("metadata") else { return Ok(MetadataFilter::new()) };
        // The reasons name the rule, never a field's name or value (metadata is private).
        MetadataFilter::from_json(value).map_err(|err| {
            let reason = match err {
                MemoryError::Invalid { reason, .. } => reason,
                _ => "is not a filter".to_owned(),
            };
            ToolError::invalid(
                "metadata",
                format!(
                    "invalid `metadata`: {reason}; pass an object of at most {MAX_METADATA_FILTER_FIELDS} \
                     top-level fields and the values they must equal (strings, numbers, \
                     booleans or null), for example {{\"category\": \"preferences\"}}"
                ),
            )
        })
    }

    fn integer(&self, field: &str, max: u64) -> Result<Option<u64>, ToolError> {
        let Some(value) = self.get(field) else { return Ok(None) };
        // Some clients send whole numbers as floats (5.0).
        let number = value.as_u64().or_else(|| value.as_f64().and_then(|f| whole(f, max)));
        match number {
            Some(n) if (1..=max).contains(&n) => Ok(Some(n)),
            _ => Err(ToolError::invalid(
                field,
                format!("`{field}` must be a whole number from 1 to {max}"),
            )),
        }
    }

    fn limit(&self, default: usize) -> Result<usize, ToolError> {
        let max = u64::try_from(MAX_PAGE_LIMIT).unwrap_or(u64::MAX);
        Ok(match self.integer("limit", max)? {
            Some(n) => usize::try_from(n).unwrap_or(MAX_PAGE_LIMIT),
            None => default,
        })
    }

    fn revision(&self, field: &str) -> Result<Option<Revision>, ToolError> {
        match self.string(field)? {
            None => Ok(None),
            Some(token) => Revision::new(token).map(Some).map_err(|_| {
                ToolError::invalid(
                    field,
                    format!(
                        "`{field}` is not a revision; pass the revision field of a memory \
                         exactly as a previous result returned it"
                    ),
                )
            }),
        }
    }

    /// `limit` and `cursor`, for the paging tools.
    fn page(&self) -> Result<PageRequest, ToolError> {
        let limit = self.limit(DEFAULT_PAGE_LIMIT)?;
        let cursor = match self.string("cursor")? {
            None => None,
            Some(token) => Some(
                Cursor::parse(token)
                    .map_err(|_| ToolError::bad_cursor(self.definition.name, "is malformed"))?,
            ),
        };
        Ok(PageRequest::new(limit).after_opt(cursor))
    }
}

/// `f` as an integer when it is a whole number from 1 to `max`.
fn whole(f: f64, max: u64) -> Option<u64> {
    #[allow(clippy::cast_precision_loss)] // `max` is far below 2^53
    let in_range = f.fract() == 0.0 && f >= 1.0 && f <= max as f64;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // range checked above
    in_range.then_some(f as u64)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::definitions::{FACT_TOOLS, KEY_TOOLS};

    fn key_call(name: &str, arguments: &Value) -> Result<KeyToolCall, ToolError> {
        parse(&*KEY_TOOLS, name, arguments).map(|(_, call)| call)
    }

    #[test]
    fn a_save_parses_into_one_typed_call() {
        let call = key_call(
            "memory_save",
            &json!({"key": "k", "content": "c", "metadata": {"a": 1}, "expires_in_seconds": 60.0,
                    "expected_revision": "7"}),
        );
        let expected = KeyToolCall::Save {
            key: "k".to_owned(),
            content: "c".to_owned(),
            metadata: json!({"a": 1}).as_object().cloned(),
            expires_in: Some(Duration::from_secs(60)),
            expected_revision: Revision::new("7").ok(),
        };
        assert_eq!(call, Ok(expected));
    }

    #[test]
    fn null_means_not_given() {
        let nulls = json!({"key": "k", "content": "c", "metadata": null,
                           "expires_in_seconds": null, "expected_revision": null});
        let bare = json!({"key": "k", "content": "c"});
        assert_eq!(key_call("memory_save", &nulls), key_call("memory_save", &bare));
        let first_page = KeyToolCall::List { page: PageRequest::new(DEFAULT_PAGE_LIMIT) };
        assert_eq!(key_call("memory_list", &Value::Null), Ok(first_page));
    }

    #[test]
    fn search_options_parse_into_the_page_request() {
        let call = key_call(
            "memory_search",
            &json!({"query": "berlin warehouse", "match": "all_words", "ignore_case": true,
                    "metadata": {"category": "preferences"}, "limit": 5}),
        );
        let page = PageRequest::new(5)
            .all_words()
            .ignore_case()
            .metadata(MetadataFilter::new().field("category", "preferences"));
        assert_eq!(call, Ok(KeyToolCall::Search { query: "berlin warehouse".to_owned(), page }));

        let defaults = key_call("memory_search", &json!({"query": "q", "ignore_case": false}));
        let page = PageRequest::new(DEFAULT_PAGE_LIMIT);
        assert_eq!(defaults, Ok(KeyToolCall::Search { query: "q".to_owned(), page }));

        let listed = key_call("memory_list", &json!({"metadata": {"pinned": true}}));
        let page = PageRequest::new(DEFAULT_PAGE_LIMIT)
            .metadata(MetadataFilter::new().field("pinned", true));
        assert_eq!(listed, Ok(KeyToolCall::List { page }));
    }

    /// Required string arguments only: every parser then reads every argument it knows, and
    /// [`Args::get`] checks in debug builds that each one is declared.
    fn required_only(definition: &ToolDefinition) -> Value {
        definition.required_arguments().map(|name| (name.to_owned(), json!("x"))).collect()
    }

    #[test]
    fn every_parser_reads_only_declared_arguments() {
        for tool in KEY_TOOLS.iter() {
            let arguments = required_only(&tool.definition);
            assert!(parse(&*KEY_TOOLS, tool.definition.name, &arguments).is_ok());
        }
        for tool in FACT_TOOLS.iter() {
            let arguments = required_only(&tool.definition);
            assert!(parse(&*FACT_TOOLS, tool.definition.name, &arguments).is_ok());
        }
    }
}
