//! The tool's input: a JSON object naming a `command` and its parameters, parsed into a
//! [`Command`] before anything runs.
//!
//! Each command takes exactly its own parameters, the ones of the Messages API's
//! `memory_20250818` tool; any other is refused with an error naming it, and `null` counts as
//! not given.

use serde_json::{Map, Value};

use super::error;
use crate::tools::ToolError;

/// One command of the memory tool, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Command {
    /// Show a file with line numbers (optionally a range of lines), or list a directory.
    View { path: String, view_range: Option<Vec<i64>> },
    /// Create a file that does not exist yet.
    Create { path: String, file_text: String },
    /// Replace the one occurrence of `old_str` in a file.
    StrReplace { path: String, old_str: String, new_str: String },
    /// Insert `insert_text` as a line after line `insert_line` (0: at the top).
    Insert { path: String, insert_line: i64, insert_text: String },
    /// Delete a file or a directory with everything in it.
    Delete { path: String },
    /// Move a file or a directory to a path that does not exist yet.
    Rename { old_path: String, new_path: String },
}

/// The commands and their parameters, in the order the Messages API documents them.
pub(super) const COMMANDS: [(&str, &[&str]); 6] = [
    ("view", &["path", "view_range"]),
    ("create", &["path", "file_text"]),
    ("str_replace", &["path", "old_str", "new_str"]),
    ("insert", &["path", "insert_line", "insert_text"]),
    ("delete", &["path"]),
    ("rename", &["old_path", "new_path"]),
];

impl Command {
    /// The command's name, for logs.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Self::View { .. } => "view",
            Self::Create { .. } => "create",
            Self::StrReplace { .. } => "str_replace",
            Self::Insert { .. } => "insert",
            Self::Delete { .. } => "delete",
            Self::Rename { .. } => "rename",
        }
    }
}

/// Parses the tool's input.
///
/// # Errors
/// A [`ToolError`] for input that is not an object, an unknown or missing command, a
/// parameter the command does not take, or a missing or mistyped one.
pub(super) fn parse(input: &Value) -> Result<Command, ToolError> {
    let Value::Object(fields) = input else {
        return Err(error::not_an_object());
    };
    let name = match fields.get("command") {
        Some(Value::String(name)) => name.as_str(),
        None | Some(Value::Null) => return Err(error::missing("command", "memory")),
        Some(_) => return Err(error::wrong_type("command", "a string")),
    };
    let Some(&(name, accepted)) = COMMANDS.iter().find(|(known, _)| *known == name) else {
        return Err(error::unknown_command(name));
    };
    for (field, value) in fields {
        if field != "command" && !value.is_null() && !accepted.contains(&field.as_str()) {
            return Err(error::unexpected(field, name, accepted));
        }
    }
    let args = Args { fields, command: name };
    Ok(match name {
        "view" => Command::View { path: args.text("path")?, view_range: args.view_range()? },
        "create" => {
            Command::Create { path: args.text("path")?, file_text: args.text("file_text")? }
        }
        "str_replace" => Command::StrReplace {
            path: args.text("path")?,
            old_str: args.text("old_str")?,
            new_str: args.text("new_str")?,
        },
        "insert" => Command::Insert {
            path: args.text("path")?,
            insert_line: args.integer("insert_line")?,
            insert_text: args.text("insert_text")?,
        },
        "delete" => Command::Delete { path: args.text("path")? },
        _ => Command::Rename { old_path: args.text("old_path")?, new_path: args.text("new_path")? },
    })
}

/// The parameters of one command.
struct Args<'a> {
    fields: &'a Map<String, Value>,
    command: &'static str,
}

impl Args<'_> {
    fn given(&self, field: &str) -> Option<&Value> {
        self.fields.get(field).filter(|value| !value.is_null())
    }

    fn text(&self, field: &str) -> Result<String, ToolError> {
        match self.given(field) {
            Some(Value::String(text)) => Ok(text.clone()),
            Some(_) => Err(error::wrong_type(field, "a string")),
            None => Err(error::missing(field, self.command)),
        }
    }

    fn integer(&self, field: &str) -> Result<i64, ToolError> {
        match self.given(field) {
            Some(value) => value.as_i64().ok_or_else(|| error::wrong_type(field, "an integer")),
            None => Err(error::missing(field, self.command)),
        }
    }

    /// `view_range`: optional, a list of integers (only a list of two is a range).
    fn view_range(&self) -> Result<Option<Vec<i64>>, ToolError> {
        let Some(value) = self.given("view_range") else {
            return Ok(None);
        };
        let wrong = || error::wrong_type("view_range", "a list of two integers");
        let items = value.as_array().ok_or_else(wrong)?;
        items.iter().map(|item| item.as_i64().ok_or_else(wrong)).collect::<Result<_, _>>().map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(input: Value) -> String {
        parse(&input).unwrap_err().message().to_owned()
    }

    #[test]
    fn each_command_parses_with_its_parameters() {
        let view = parse(&json!({"command": "view", "path": "/memories", "view_range": [1, -1]}));
        assert_eq!(
            view.unwrap(),
            Command::View { path: "/memories".into(), view_range: Some(vec![1, -1]) }
        );
        let insert = json!({"command": "insert", "path": "/memories/a", "insert_line": 0,
            "insert_text": "x", "view_range": null});
        assert!(matches!(parse(&insert).unwrap(), Command::Insert { insert_line: 0, .. }));
        let rename =
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"});
        assert_eq!(parse(&rename).unwrap().name(), "rename");
    }

    #[test]
    fn bad_input_is_refused_naming_the_parameter() {
        assert!(message(json!("view")).contains("JSON object"));
        assert!(message(json!({})).contains("`command`"));
        assert!(message(json!({"command": "exec"})).starts_with("Unknown command: exec."));
        assert!(
            message(json!({"command": "create", "path": "/memories/a"})).contains("`file_text`")
        );
        let smuggled = json!({"command": "delete", "path": "/memories/a", "user_id": "bob"});
        assert!(message(smuggled).contains("does not take a `user_id` parameter"));
        let float = json!({"command": "insert", "path": "/memories/a", "insert_line": 1.5, "insert_text": ""});
        assert!(message(float).contains("`insert_line` parameter must be an integer"));
        let range = json!({"command": "view", "path": "/memories/a", "view_range": ["1", 2]});
        assert!(message(range).contains("`view_range`"));
    }
}
