//! Reading a tool call's arguments: checking them against the tool's schema, then by name and
//! type.

use serde_json::{Map, Value};

use super::definitions::ToolDefinition;
use super::error::{bad_cursor, printable, ToolError, ToolErrorKind};
use crate::page::{Cursor, PageRequest, DEFAULT_PAGE_LIMIT};
use crate::record::Revision;
use crate::validation::MAX_PAGE_LIMIT;

/// A tool call's arguments, already checked against the tool's schema for undeclared and
/// missing arguments.
pub(super) struct Args<'a> {
    map: Option<&'a Map<String, Value>>,
}

/// How many undeclared argument names an error lists before summarising the rest.
const MAX_LISTED_UNKNOWN: usize = 5;

/// Argument names that suggest a caller is trying to pick a scope.
const SCOPE_WORDS: [&str; 7] = ["user", "app", "namespace", "tenant", "scope", "owner", "account"];

pub(super) fn check_args<'a>(
    definition: &ToolDefinition,
    arguments: &'a Value,
) -> Result<Args<'a>, ToolError> {
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
    Ok(Args { map })
}

impl<'a> Args<'a> {
    pub(super) fn get(&self, field: &str) -> Option<&'a Value> {
        self.map.and_then(|map| map.get(field)).filter(|v| !v.is_null())
    }

    pub(super) fn string(&self, field: &str) -> Result<Option<&'a str>, ToolError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ToolError::invalid(field, format!("`{field}` must be a string"))),
        }
    }

    /// A declared-required string; `check_args` made sure it is present.
    pub(super) fn required_string(&self, field: &str) -> Result<&'a str, ToolError> {
        self.string(field)?
            .ok_or_else(|| ToolError::invalid(field, format!("the argument `{field}` is required")))
    }

    pub(super) fn integer(&self, field: &str, max: u64) -> Result<Option<u64>, ToolError> {
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

    pub(super) fn limit(&self, default: usize) -> Result<usize, ToolError> {
        let max = u64::try_from(MAX_PAGE_LIMIT).unwrap_or(u64::MAX);
        Ok(match self.integer("limit", max)? {
            Some(n) => usize::try_from(n).unwrap_or(MAX_PAGE_LIMIT),
            None => default,
        })
    }

    pub(super) fn revision(&self, field: &str) -> Result<Option<Revision>, ToolError> {
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

    pub(super) fn page(&self, tool: &str) -> Result<PageRequest, ToolError> {
        let limit = self.limit(DEFAULT_PAGE_LIMIT)?;
        let cursor = match self.string("cursor")? {
            None => None,
            Some(token) => {
                Some(Cursor::parse(token).map_err(|_| bad_cursor(tool, "is malformed"))?)
            }
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
