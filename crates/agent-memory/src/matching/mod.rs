//! What a `search` matches and what `list` and `search` select by: the match mode, the letter
//! case, the metadata filter, and the one matcher every provider confirms records with.
//!
//! Matching stays literal on every provider (ADR 0019): a query, or each of its words, is a
//! substring of the content, never a similarity, and never a tokenizer that differs per
//! datastore.
//!
//! - [`MatchMode::Phrase`] (the default): the whole query is one substring.
//! - [`MatchMode::AllWords`]: the query is split on Unicode white space into at most
//!   [`MAX_QUERY_WORDS`] words; a record matches when every word occurs, in any order.
//! - [`MatchMode::AnyWord`]: at least one word occurs.
//! - [`Case::Insensitive`] compares after Unicode *simple* case folding (CaseFolding.txt
//!   statuses C and S), one character to one character: `K` (U+212A KELVIN SIGN) and `k` match,
//!   `Σ`, `σ` and `ς` match, `ß` matches `ẞ` but never `ss`, and combining marks stay as they
//!   are.
//! - A [`MetadataFilter`] holds equality conditions on top-level metadata fields, all of
//!   which must hold.
//!
//! A datastore may narrow the candidates with its own functions first ([`TextMatcher::prefilter`]
//! says what it may look for), but only to a superset of the true matches: the provider
//! confirms every candidate with [`TextMatcher::matches`] and [`MetadataFilter::matches`].

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use icu_casemap::CaseMapper;
use serde::{Deserialize, Serialize};

use crate::error::{MemoryError, Result};
use crate::search_scan::PREFILTER_BYTES;
use crate::validation;

mod metadata;

pub use metadata::{
    MetadataFilter, MAX_METADATA_FIELD_BYTES, MAX_METADATA_FILTER_FIELDS, MAX_METADATA_VALUE_BYTES,
};

/// Most words a query holds in [`MatchMode::AllWords`] and [`MatchMode::AnyWord`].
pub const MAX_QUERY_WORDS: usize = 16;

/// How a `search` query matches a record's content.
///
/// ```
/// use agent_memory::MatchMode;
///
/// assert_eq!(MatchMode::default(), MatchMode::Phrase);
/// assert_eq!("all_words".parse::<MatchMode>()?, MatchMode::AllWords);
/// assert_eq!(MatchMode::AnyWord.as_str(), "any_word");
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchMode {
    /// The whole query is one literal substring of the content (the default).
    #[default]
    Phrase,
    /// Every word of the query occurs in the content, in any order, anywhere.
    AllWords,
    /// At least one word of the query occurs in the content.
    AnyWord,
}

impl MatchMode {
    /// The mode's name: `phrase`, `all_words` or `any_word`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchMode::Phrase => "phrase",
            MatchMode::AllWords => "all_words",
            MatchMode::AnyWord => "any_word",
        }
    }
}

impl fmt::Display for MatchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MatchMode {
    type Err = MemoryError;

    fn from_str(name: &str) -> Result<Self> {
        match name {
            "phrase" => Ok(MatchMode::Phrase),
            "all_words" => Ok(MatchMode::AllWords),
            "any_word" => Ok(MatchMode::AnyWord),
            _ => Err(MemoryError::invalid("match", "must be phrase, all_words or any_word")),
        }
    }
}

/// Whether a `search` tells upper from lower case.
///
/// ```
/// use agent_memory::Case;
///
/// assert_eq!(Case::default(), Case::Sensitive);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Case {
    /// Characters match only themselves (the default).
    #[default]
    Sensitive,
    /// Characters match after Unicode simple case folding.
    Insensitive,
}

/// Folds `text` with Unicode simple case folding, one character to one character.
///
/// ```
/// use agent_memory::provider::fold_case;
///
/// assert_eq!(fold_case("Berlin"), "berlin");
/// assert_eq!(fold_case("ΣΑΣ ς"), "σασ σ");
/// assert_eq!(fold_case("\u{212A}elvin"), "kelvin"); // the Kelvin sign folds to k
/// assert_eq!(fold_case("Straße"), "straße"); // simple folding keeps ß
/// assert_eq!(fold_case("İ"), "İ"); // only a Turkic or full folding changes it
/// ```
pub fn fold_case(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        if text.bytes().any(|b| b.is_ascii_uppercase()) {
            return Cow::Owned(text.to_ascii_lowercase());
        }
        return Cow::Borrowed(text);
    }
    let mapper = CaseMapper::new();
    if text.chars().all(|c| mapper.simple_fold(c) == c) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().map(|c| mapper.simple_fold(c)).collect())
}

thread_local! {
    /// The folded content [`TextMatcher::matches`] compares with, reused call after call.
    static FOLDED: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Replaces `out` with `text` folded as [`fold_case`] folds it: ASCII text by a copy lowered
/// in place, the rest character by character.
fn fold_into(text: &str, out: &mut String) {
    out.clear();
    if text.is_ascii() {
        out.push_str(text);
        out.make_ascii_lowercase();
        return;
    }
    let mapper = CaseMapper::new();
    out.extend(text.chars().map(|c| mapper.simple_fold(c)));
}

/// Every character that simple case folding takes to the same character as `c`, `c` among
/// them, in code point order.
fn case_class(c: char) -> Vec<char> {
    static CLASSES: OnceLock<HashMap<char, Vec<char>>> = OnceLock::new();
    let classes = CLASSES.get_or_init(|| {
        // Built once, on the first insensitive prefilter: the classes of more than one
        // character, keyed by their folded form.
        let mapper = CaseMapper::new();
        let mut classes: HashMap<char, Vec<char>> = HashMap::new();
        for x in (0..=0x10FFFF).filter_map(char::from_u32) {
            let folded = mapper.simple_fold(x);
            if folded != x {
                classes.entry(folded).or_insert_with(|| vec![folded]).push(x);
            }
        }
        for class in classes.values_mut() {
            class.sort_unstable();
        }
        classes
    });
    let folded = CaseMapper::new().simple_fold(c);
    classes.get(&folded).cloned().unwrap_or_else(|| vec![c])
}

/// A checked query with its mode and case: what confirms each record's content.
///
/// ```
/// use agent_memory::provider::TextMatcher;
/// use agent_memory::{Case, MatchMode};
///
/// let words = TextMatcher::new("berlin warehouse", MatchMode::AllWords, Case::Insensitive)?;
/// assert!(words.matches("Prefers the Berlin WAREHOUSE"));
/// assert!(!words.matches("Prefers Berlin"));
/// let any = TextMatcher::new("tea coffee", MatchMode::AnyWord, Case::Sensitive)?;
/// assert!(any.matches("drinks coffee"));
/// assert!(TextMatcher::new("   ", MatchMode::AnyWord, Case::Sensitive).is_err());
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
#[derive(Clone)]
pub struct TextMatcher {
    mode: MatchMode,
    case: Case,
    /// The phrase, or the words; folded when the case is insensitive.
    needles: Vec<String>,
}

impl TextMatcher {
    /// Checks `query` for `mode` and `case`.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `query`: empty, longer than
    /// [`MAX_QUERY_BYTES`](crate::validation::MAX_QUERY_BYTES), holding NUL, or, in a word
    /// mode, holding no word or more than [`MAX_QUERY_WORDS`].
    pub fn new(query: &str, mode: MatchMode, case: Case) -> Result<Self> {
        validation::query(query)?;
        let words: Vec<&str> = match mode {
            MatchMode::Phrase => vec![query],
            MatchMode::AllWords | MatchMode::AnyWord => query.split_whitespace().collect(),
        };
        if words.is_empty() {
            return Err(MemoryError::invalid("query", "holds no word, only white space"));
        }
        if words.len() > MAX_QUERY_WORDS {
            return Err(MemoryError::invalid(
                "query",
                format!("must hold at most {MAX_QUERY_WORDS} words"),
            ));
        }
        let needles = words
            .into_iter()
            .map(|word| match case {
                Case::Sensitive => word.to_owned(),
                Case::Insensitive => fold_case(word).into_owned(),
            })
            .collect();
        Ok(Self { mode, case, needles })
    }

    /// The match mode.
    pub fn mode(&self) -> MatchMode {
        self.mode
    }

    /// The letter case.
    pub fn case(&self) -> Case {
        self.case
    }

    /// True when `content` matches, in time linear in its length (times the number of words).
    pub fn matches(&self, content: &str) -> bool {
        match self.case {
            Case::Sensitive => self.found_in(content),
            // The folded content goes into a buffer this thread keeps, so confirming a record
            // allocates nothing once the buffer has grown to the longest content seen.
            Case::Insensitive => FOLDED.with(|folded| {
                let mut folded = folded.borrow_mut();
                fold_into(content, &mut folded);
                self.found_in(&folded)
            }),
        }
    }

    /// Whether the needles occur in `text` (folded already when the case is insensitive).
    fn found_in(&self, text: &str) -> bool {
        match self.mode {
            MatchMode::Phrase | MatchMode::AllWords => {
                self.needles.iter().all(|needle| text.contains(needle.as_str()))
            }
            MatchMode::AnyWord => self.needles.iter().any(|needle| text.contains(needle.as_str())),
        }
    }

    /// What a datastore may look for to narrow the candidates; see [`Prefilter`].
    pub fn prefilter(&self) -> Prefilter {
        let needles = self
            .needles
            .iter()
            .map(|needle| match self.case {
                Case::Sensitive => Needle { classes: None, text: head(needle).to_owned() },
                Case::Insensitive => {
                    let classes = needle.chars().take(PREFILTER_BYTES).map(case_class).collect();
                    Needle { classes: Some(classes), text: head(needle).to_owned() }
                }
            })
            .collect();
        Prefilter { every: self.mode != MatchMode::AnyWord, needles }
    }
}

impl fmt::Debug for TextMatcher {
    // The query is content a caller typed: never in a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TextMatcher")
            .field("mode", &self.mode)
            .field("case", &self.case)
            .field("words", &self.needles.len())
            .finish()
    }
}

/// The start of `text` of at most [`PREFILTER_BYTES`] bytes that ends on a character boundary.
fn head(text: &str) -> &str {
    crate::search_scan::prefilter(text)
}

/// What a datastore may look for before the provider confirms each candidate: for a
/// case-sensitive search, the start of the phrase or of each word
/// ([`Needle::text`], at most [`PREFILTER_BYTES`] bytes) as a literal substring; for an
/// insensitive one, the first characters of each folded word with every character that folds
/// like each ([`Needle::classes`]).
///
/// A record is a candidate when every needle occurs ([`every`](Self::every), the phrase and
/// `all_words`) or when one does (`any_word`). A datastore may also look for fewer needles, or
/// shorter ones, for `every`; never for `any_word`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefilter {
    /// True when every needle must occur; false when one is enough.
    pub every: bool,
    /// One needle per word (one for a phrase).
    pub needles: Vec<Needle>,
}

/// One piece of a [`Prefilter`].
#[derive(Clone, PartialEq, Eq)]
pub struct Needle {
    /// A case-sensitive search's literal: the word's first bytes, at most [`PREFILTER_BYTES`].
    /// For an insensitive search, the folded word's first bytes, which is what only
    /// [`classes`](Self::classes) may be looked for with.
    pub text: String,
    /// For an insensitive search, the word's first characters (at most [`PREFILTER_BYTES`]),
    /// each as every character that folds like it, in code point order; `None` for a
    /// case-sensitive search.
    pub classes: Option<Vec<Vec<char>>>,
}

impl Needle {
    /// The needle as a PostgreSQL regular expression (ARE) over the content: one bracket
    /// expression per character class, every character written as a `\U` escape, so no
    /// character of the query is special. `None` for a case-sensitive needle (look for
    /// [`text`](Self::text) with `strpos`).
    ///
    /// ```
    /// use agent_memory::provider::TextMatcher;
    /// use agent_memory::{Case, MatchMode};
    ///
    /// let matcher = TextMatcher::new("ok", MatchMode::Phrase, Case::Insensitive)?;
    /// let regex = matcher.prefilter().needles[0].postgres_regex().unwrap();
    /// assert_eq!(regex, r"[\U0000004F\U0000006F][\U0000004B\U0000006B\U0000212A]");
    /// # Ok::<(), agent_memory::MemoryError>(())
    /// ```
    pub fn postgres_regex(&self) -> Option<String> {
        let classes = self.classes.as_ref()?;
        let mut regex = String::with_capacity(classes.len() * 24);
        for class in classes {
            regex.push('[');
            for c in class {
                regex.push_str(&format!("\\U{:08X}", u32::from(*c)));
            }
            regex.push(']');
        }
        Some(regex)
    }

    /// The needle as a Lua pattern (Redis scripts): Lua's sets hold single bytes, so this is
    /// the longest run of characters whose classes Lua can write (an ASCII letter and its
    /// other case as a set, or a character that only folds to itself as its bytes); `None`
    /// when no character qualifies, and then the datastore cannot narrow by this needle. A
    /// case-sensitive needle's text, escaped, is its own pattern.
    ///
    /// ```
    /// use agent_memory::provider::TextMatcher;
    /// use agent_memory::{Case, MatchMode};
    ///
    /// let matcher = TextMatcher::new("k-9", MatchMode::Phrase, Case::Insensitive)?;
    /// // `k` also matches the three-byte Kelvin sign, which no Lua set can hold.
    /// assert_eq!(matcher.prefilter().needles[0].lua_pattern().as_deref(), Some("%-9"));
    /// # Ok::<(), agent_memory::MemoryError>(())
    /// ```
    pub fn lua_pattern(&self) -> Option<String> {
        let Some(classes) = &self.classes else {
            return Some(self.text.chars().map(lua_literal).collect());
        };
        let pieces: Vec<Option<String>> = classes.iter().map(|class| lua_class(class)).collect();
        let mut best: &[Option<String>] = &[];
        for run in pieces.split(Option::is_none) {
            if run.len() > best.len() {
                best = run;
            }
        }
        if best.is_empty() {
            return None;
        }
        Some(best.iter().flatten().map(String::as_str).collect())
    }
}

/// One character class as a Lua pattern item, when Lua can write it.
fn lua_class(class: &[char]) -> Option<String> {
    match class {
        [c] => Some(lua_literal(*c)),
        _ if class.iter().all(char::is_ascii) => {
            Some(format!("[{}]", class.iter().map(|c| lua_literal(*c)).collect::<String>()))
        }
        _ => None,
    }
}

/// A character as itself in a Lua pattern: `%` before ASCII punctuation, the bytes of the rest.
fn lua_literal(c: char) -> String {
    if c.is_ascii_punctuation() {
        format!("%{c}")
    } else {
        c.to_string()
    }
}

impl fmt::Debug for Needle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Needle").field("bytes", &self.text.len()).finish_non_exhaustive()
    }
}

/// The part of a cursor's tag that names a request's match mode, case and metadata filter:
/// empty for the defaults, so cursors of plain requests keep the tag they always had.
pub(crate) fn options_tag(mode: MatchMode, case: Case, metadata: &MetadataFilter) -> String {
    if mode == MatchMode::Phrase && case == Case::Sensitive && metadata.is_empty() {
        return String::new();
    }
    let case = match case {
        Case::Sensitive => "s",
        Case::Insensitive => "i",
    };
    format!("{};{case};{}", mode.as_str(), metadata.canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(query: &str, mode: MatchMode, case: Case) -> TextMatcher {
        TextMatcher::new(query, mode, case).expect("a valid query")
    }

    #[test]
    fn simple_folding_is_one_character_to_one() {
        let insensitive =
            |q: &str, c: &str| matcher(q, MatchMode::Phrase, Case::Insensitive).matches(c);
        assert!(insensitive("kelvin", "\u{212A}ELVIN"));
        assert!(insensitive("σας", "ΣΑΣ"));
        assert!(insensitive("ß", "\u{1E9E}"));
        assert!(!insensitive("ss", "ß"), "full folding only");
        assert!(!insensitive("i", "İ"), "Turkic and full folding only");
        assert!(insensitive("привет", "ПРИВЕТ"));
        // A combining mark stays itself: é as e + U+0301 is not the precomposed é.
        assert!(!insensitive("é", "e\u{301}"));
        assert!(insensitive("E\u{301}", "e\u{301}"));
    }

    #[test]
    fn the_buffered_fold_is_fold_case() {
        let mut out = String::from("left over");
        for text in ["", "Berlin", "ΣΟΦΟΣ \u{212A}", "Straße İ", "plain"] {
            fold_into(text, &mut out);
            assert_eq!(out, fold_case(text));
        }
    }

    #[test]
    fn word_modes_split_on_unicode_white_space() {
        let all = matcher("berlin\u{3000}warehouse", MatchMode::AllWords, Case::Sensitive);
        assert!(all.matches("warehouse in berlin"));
        assert!(!all.matches("berlin"));
        let any = matcher(" tea\tcoffee ", MatchMode::AnyWord, Case::Sensitive);
        assert!(any.matches("coffee"));
        assert!(!any.matches("Coffee"));
        let too_many = vec!["w"; MAX_QUERY_WORDS + 1].join(" ");
        assert!(TextMatcher::new(&too_many, MatchMode::AllWords, Case::Sensitive).is_err());
        assert!(TextMatcher::new(&too_many, MatchMode::Phrase, Case::Sensitive).is_ok());
        assert!(TextMatcher::new(" \u{2003}", MatchMode::AllWords, Case::Sensitive).is_err());
    }

    #[test]
    fn equal_filters_bind_cursors_alike() {
        let one = MetadataFilter::new().field("n", 1).field("a", "x");
        let float = MetadataFilter::new().field("a", "x").field("n", 1.0);
        assert_eq!(
            options_tag(MatchMode::Phrase, Case::Sensitive, &one),
            options_tag(MatchMode::Phrase, Case::Sensitive, &float)
        );
        assert_eq!(options_tag(MatchMode::Phrase, Case::Sensitive, &MetadataFilter::new()), "");
        assert_ne!(
            options_tag(MatchMode::AllWords, Case::Sensitive, &one),
            options_tag(MatchMode::AnyWord, Case::Sensitive, &one)
        );
    }

    #[test]
    fn prefilters_never_miss_a_true_match() {
        let m = matcher("Σκ", MatchMode::Phrase, Case::Insensitive);
        let needle = &m.prefilter().needles[0];
        let classes = needle.classes.as_ref().expect("insensitive");
        assert_eq!(classes[0], vec!['Σ', 'ς', 'σ']);
        assert_eq!(classes[1], vec!['Κ', 'κ', 'ϰ']);
        // Lua can write neither class: no pattern.
        assert_eq!(needle.lua_pattern(), None);
        let any = matcher("tea Tee", MatchMode::AnyWord, Case::Sensitive).prefilter();
        assert!(!any.every);
        assert_eq!(any.needles[1].lua_pattern().as_deref(), Some("Tee"));
        assert_eq!(
            matcher("50%_off", MatchMode::Phrase, Case::Sensitive).prefilter().needles[0]
                .lua_pattern()
                .as_deref(),
            Some("50%%%_off")
        );
    }
}
