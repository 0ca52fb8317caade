//! What commands print on stdout: readable tables for people, one JSON object per line with
//! `--json` for programs.
//!
//! Stored text is data, and data can hold escape sequences: every value shown in human output
//! goes through [`escape_text`], so a memory cannot move the cursor, recolour the terminal or
//! reorder text with bidirectional overrides. JSON output is exact (serde escapes control
//! characters itself).

use std::borrow::Cow;
use std::io::{self, Write};

use agent_memory::{MemoryRecord, MemoryScope, Timestamp};
use serde::Serialize;
use unicode_width::UnicodeWidthStr;

use crate::exit::{CliError, CliResult};

/// Widest content cell in a table, in terminal columns; `get` shows the whole content.
const CONTENT_COLUMNS: usize = 60;

/// Where command results go.
pub struct Output {
    json: bool,
    out: io::BufWriter<io::Stdout>,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output").field("json", &self.json).finish_non_exhaustive()
    }
}

impl Output {
    /// Output on stdout, as JSON Lines when `json` is set.
    pub fn stdout(json: bool) -> Self {
        Self { json, out: io::BufWriter::new(io::stdout()) }
    }

    /// True when `--json` was given.
    pub fn is_json(&self) -> bool {
        self.json
    }

    /// One record: a JSON line, or a `field  value` block for people.
    pub fn record(&mut self, record: &MemoryRecord) -> CliResult {
        if self.json {
            return self.json_line(record);
        }
        let rows = vec![
            vec!["key".to_owned(), escape_text(&record.key).into_owned()],
            vec!["content".to_owned(), escape_text(&record.content).into_owned()],
            vec!["metadata".to_owned(), escape_text(&json_text(&record.metadata)).into_owned()],
            vec!["revision".to_owned(), record.revision.to_string()],
            vec!["created".to_owned(), format_time(record.created_at)],
            vec!["updated".to_owned(), format_time(record.updated_at)],
            vec![
                "expires".to_owned(),
                record.expires_at.map_or_else(|| "never".to_owned(), format_time),
            ],
            vec!["source".to_owned(), escape_text(&json_text(&record.source)).into_owned()],
            vec!["scope".to_owned(), scope_text(&record.scope)],
        ];
        self.table(None, &rows)
    }

    /// Many records: JSON lines, or one table with the content shortened to fit.
    pub fn records(&mut self, records: &[MemoryRecord]) -> CliResult {
        self.listing(
            records,
            |record| record,
            "no records",
            &["KEY", "REVISION", "UPDATED", "EXPIRES", "CONTENT"],
            |r| {
                vec![
                    escape_text(&r.key).into_owned(),
                    r.revision.to_string(),
                    format_time(r.updated_at),
                    r.expires_at.map_or_else(|| "never".to_owned(), format_time),
                    shorten(&escape_text(&r.content), CONTENT_COLUMNS),
                ]
            },
        )
    }

    /// A listing: one JSON line per item (its `json`), or `none` when there are no items, or
    /// a table of their `row`s under `header`.
    pub fn listing<'a, T, J: Serialize>(
        &mut self,
        items: &'a [T],
        json: impl Fn(&'a T) -> J,
        none: &str,
        header: &[&str],
        row: impl Fn(&T) -> Vec<String>,
    ) -> CliResult {
        if self.json {
            return items.iter().try_for_each(|item| self.json_line(&json(item)));
        }
        if items.is_empty() {
            return self.line(none);
        }
        let rows: Vec<Vec<String>> = items.iter().map(row).collect();
        self.table(Some(header), &rows)
    }

    /// A result that is not a record: `value` as one JSON line, or `human` as a sentence.
    pub fn summary(&mut self, human: &str, value: &serde_json::Value) -> CliResult {
        if self.json {
            self.json_line(value)
        } else {
            self.line(human)
        }
    }

    /// A table with an optional header row; the last column is not padded.
    pub fn table(&mut self, header: Option<&[&str]>, rows: &[Vec<String>]) -> CliResult {
        let columns = header.map_or_else(|| rows.first().map_or(0, Vec::len), <[&str]>::len);
        let mut widths = vec![0usize; columns];
        let header_row: Option<Vec<String>> =
            header.map(|h| h.iter().map(|s| (*s).to_owned()).collect());
        for row in header_row.iter().chain(rows) {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.width());
            }
        }
        for row in header_row.iter().chain(rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                line.push_str(cell);
                if i + 1 < row.len() {
                    let pad = widths[i].saturating_sub(cell.width()) + 2;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            self.line(line.trim_end())?;
        }
        Ok(())
    }

    /// One plain line.
    pub fn line(&mut self, text: &str) -> CliResult {
        writeln!(self.out, "{text}").map_err(|e| CliError::io("cannot write to stdout", &e))
    }

    /// One value as compact JSON on its own line.
    pub fn json_line<T: Serialize + ?Sized>(&mut self, value: &T) -> CliResult {
        serde_json::to_writer(&mut self.out, value)
            .map_err(|e| CliError::json_write("cannot write to stdout", &e))?;
        self.out.write_all(b"\n").map_err(|e| CliError::io("cannot write to stdout", &e))
    }

    /// Pushes everything written so far to stdout.
    pub fn flush(&mut self) -> CliResult {
        self.out.flush().map_err(|e| CliError::io("cannot write to stdout", &e))
    }
}

/// Compact JSON of a value, for showing metadata or source in a table.
fn json_text<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// `n` and `noun`, plural unless `n` is 1: "1 record", "2 records".
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `application / user / namespace`, escaped, with `(default)` for the default namespace.
pub fn scope_text(scope: &MemoryScope) -> String {
    format!(
        "{} / {} / {}",
        escape_text(scope.application_id()),
        escape_text(scope.user_id()),
        scope.namespace().map_or(Cow::Borrowed("(default)"), escape_text)
    )
}

/// A namespace as shown in tables: its name, or `(default)`.
pub fn namespace_text(scope: &MemoryScope) -> String {
    scope.namespace().map_or_else(|| "(default)".to_owned(), |ns| escape_text(ns).into_owned())
}

/// True for characters that change how a terminal shows text rather than showing a glyph:
/// C0 and C1 controls (escape sequences start with them) and the bidirectional marks and
/// overrides that make text display in an order other than it is stored.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every unsafe character written as an escape (`\n`, `\t`, `\u{1b}`), so it shows
/// on one line exactly as stored. Borrowed when nothing needed escaping.
pub fn escape_text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            c if is_unsafe(c) => escaped.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => escaped.push(c),
        }
    }
    Cow::Owned(escaped)
}

/// [`escape_text`], then cut to at most `max_chars` characters with a trailing `…`.
pub fn escape_line(text: &str, max_chars: usize) -> String {
    let escaped = escape_text(text);
    if escaped.chars().count() <= max_chars {
        return escaped.into_owned();
    }
    let mut cut: String = escaped.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `text` cut to at most `columns` terminal columns, ending in `…` when cut.
fn shorten(text: &str, columns: usize) -> String {
    if text.width() <= columns {
        return text.to_owned();
    }
    let mut cut = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w + 1 > columns {
            break;
        }
        used += w;
        cut.push(c);
    }
    cut.push('…');
    cut
}

/// A timestamp as `YYYY-MM-DD HH:MM:SSZ` (UTC, whole seconds), for people; JSON keeps the
/// exact epoch seconds.
pub fn format_time(at: Timestamp) -> String {
    let seconds = at.as_micros().div_euclid(1_000_000);
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`), so the CLI needs no calendar crate for one format.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_plural_unless_one() {
        assert_eq!(count(0, "record"), "0 records");
        assert_eq!(count(1, "record"), "1 record");
        assert_eq!(count(2, "expired record"), "2 expired records");
    }

    #[test]
    fn escapes_terminal_controls_and_bidi_overrides() {
        assert_eq!(escape_text("plain"), "plain");
        assert_eq!(escape_text("a\nb\tc\r"), "a\\nb\\tc\\r");
        assert_eq!(escape_text("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(escape_text("\u{9b}x"), "\\u{9b}x");
        assert_eq!(escape_text("abc\u{202E}def"), "abc\\u{202e}def");
    }

    #[test]
    fn escape_line_cuts_long_text() {
        assert_eq!(escape_line("abcdef", 4), "abc…");
        assert_eq!(escape_line("abc", 4), "abc");
    }

    #[test]
    fn shorten_counts_terminal_columns() {
        assert_eq!(shorten("short", 10), "short");
        assert_eq!(shorten("abcdefghij", 5), "abcd…");
        assert_eq!(shorten("日本語日本語", 5), "日本…");
    }

    #[test]
    fn formats_utc_dates() {
        assert_eq!(format_time(Timestamp::EPOCH), "1970-01-01 00:00:00Z");
        let t = Timestamp::from_unix_seconds(1_767_225_600.25).unwrap();
        assert_eq!(format_time(t), "2026-01-01 00:00:00Z");
        let leap = Timestamp::from_unix_seconds(951_825_599.0).unwrap();
        assert_eq!(format_time(leap), "2000-02-29 11:59:59Z");
        let end = Timestamp::from_unix_seconds(253_402_300_799.0).unwrap();
        assert_eq!(format_time(end), "9999-12-31 23:59:59Z");
    }
}
