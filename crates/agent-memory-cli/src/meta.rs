//! `--meta FIELD=VALUE` conditions of `list` and `search`: equality on one top-level metadata
//! field each, all of which must hold.
//!
//! `VALUE` is read as JSON when it is a JSON scalar (`1`, `2.5`, `true`, `false`, `null`,
//! `"quoted text"`), and as the plain string it is otherwise: `--meta pinned=true` matches the
//! boolean, `--meta category=preferences` the string, `--meta 'code="7"'` the string `"7"`.

use agent_memory::{MetadataFilter, MAX_METADATA_FILTER_FIELDS};
use serde_json::Value;

use crate::exit::{CliError, CliResult};

/// One `--meta FIELD=VALUE`, parsed, with the text it was given as (repeated in the paging
/// hint, since a cursor continues only the same filter).
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    field: String,
    value: Value,
    given: String,
}

impl Condition {
    /// The argument as given on the command line.
    pub fn given(&self) -> &str {
        &self.given
    }
}

/// Parses one `FIELD=VALUE` (split at the first `=`).
///
/// # Errors
/// A sentence for clap to show when there is no `=` or the field before it is empty.
pub fn parse(text: &str) -> Result<Condition, String> {
    const HINT: &str = "use FIELD=VALUE, for example category=preferences or pinned=true";
    let Some((field, value)) = text.split_once('=') else {
        return Err(format!("no '=' between the field and the value: {HINT}"));
    };
    if field.is_empty() {
        return Err(format!("the field name is empty: {HINT}"));
    }
    let value = match serde_json::from_str::<Value>(value) {
        Ok(scalar @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_))) => scalar,
        // Not JSON, or an array or object: the text itself.
        _ => Value::String(value.to_owned()),
    };
    Ok(Condition { field: field.to_owned(), value, given: text.to_owned() })
}

/// The filter the conditions spell, checked; empty for none.
///
/// # Errors
/// `Invalid` (exit 2) for more than [`MAX_METADATA_FILTER_FIELDS`] conditions, a field given
/// twice, or a field or value over the filter's limits.
pub fn filter(conditions: &[Condition]) -> CliResult<MetadataFilter> {
    if conditions.len() > MAX_METADATA_FILTER_FIELDS {
        return Err(CliError::invalid(format!(
            "--meta may be given at most {MAX_METADATA_FILTER_FIELDS} times, {} were",
            conditions.len()
        )));
    }
    let mut filter = MetadataFilter::new();
    for (i, condition) in conditions.iter().enumerate() {
        // Two values for one field would silently keep the last; neither can be meant.
        if conditions[..i].iter().any(|earlier| earlier.field == condition.field) {
            return Err(CliError::invalid("--meta names the same field twice"));
        }
        filter = filter.field(condition.field.clone(), condition.value.clone());
    }
    filter.check().map_err(|err| CliError::from(err).context("--meta: "))?;
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn value(text: &str) -> Value {
        parse(text).unwrap().value
    }

    #[test]
    fn json_scalars_are_read_as_json_and_anything_else_as_text() {
        assert_eq!(value("pinned=true"), json!(true));
        assert_eq!(value("rank=1"), json!(1));
        assert_eq!(value("rank=-2.5e1"), json!(-25.0));
        assert_eq!(value("gone=null"), json!(null));
        assert_eq!(value("code=\"7\""), json!("7"));
        assert_eq!(value("category=preferences"), json!("preferences"));
        assert_eq!(value("empty="), json!(""));
        assert_eq!(value("list=[1,2]"), json!("[1,2]"));
        assert_eq!(value("object={\"a\":1}"), json!("{\"a\":1}"));
        assert_eq!(value("big=1e999"), json!("1e999"));
        assert_eq!(value("True=True"), json!("True"));
        // Split at the first '=': the value may hold more.
        let condition = parse("expr=a=b").unwrap();
        assert_eq!(condition.given(), "expr=a=b");
        assert_eq!((condition.field.as_str(), condition.value), ("expr", json!("a=b")));
    }

    #[test]
    fn a_condition_needs_a_field_and_an_equals_sign() {
        assert!(parse("category").unwrap_err().contains("no '='"));
        assert!(parse("=preferences").unwrap_err().contains("field name is empty"));
    }

    #[test]
    fn the_filter_holds_at_most_eight_distinct_fields() {
        let conditions: Vec<Condition> =
            (0..8).map(|i| parse(&format!("f{i}={i}")).unwrap()).collect();
        assert_eq!(filter(&conditions).unwrap().len(), 8);
        let mut nine = conditions.clone();
        nine.push(parse("f8=8").unwrap());
        assert!(filter(&nine).unwrap_err().message().contains("at most 8"));
        let twice = [parse("a=1").unwrap(), parse("a=2").unwrap()];
        assert!(filter(&twice).unwrap_err().message().contains("twice"));
        let long = [parse(&format!("a={}", "x".repeat(2_000))).unwrap()];
        assert!(filter(&long).unwrap_err().message().starts_with("--meta: invalid metadata"));
        assert!(filter(&[]).unwrap().is_empty());
    }
}
