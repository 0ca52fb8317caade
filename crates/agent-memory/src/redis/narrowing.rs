//! What the `page` script looks for in a record's content to narrow a `search`: the needles of
//! the query's prefilter, as the script's arguments.
//!
//! A case-sensitive needle is the start of a word (or of the phrase) as it is. An insensitive
//! one is the literal that [`Needle::lua_pattern`](crate::provider::Needle::lua_pattern)
//! stands for, looked for in the content with its ASCII letters lowered: that pattern's items
//! are `[Xx]` sets of an ASCII letter in both cases and characters that fold only to
//! themselves, so the content matches the pattern exactly when its lowered form holds the
//! lowered literal, and `string.find` with `plain = true` (at most 16 comparisons per byte)
//! replaces Lua's pattern matcher (several times slower per byte on repetitive text).

use crate::matching::{Case, MatchMode};
use crate::provider::TextMatcher;

/// The needles of one call and how the script uses them.
#[derive(Debug, Default)]
pub(super) struct Narrowing {
    /// `""` (nothing narrows: every live record is a candidate), `"all"` or `"any"`.
    pub(super) mode: &'static str,
    /// Whether the needles are looked for in the content with its ASCII letters lowered.
    pub(super) lowered: bool,
    /// Each distinct needle once.
    pub(super) needles: Vec<String>,
    /// Whether a record holding the needles is a match, without confirming.
    pub(super) exact: bool,
}

impl Narrowing {
    /// The narrowing of `matcher` for `query`; `None` (a `list`) narrows nothing, exactly.
    pub(super) fn new(matcher: Option<&TextMatcher>, query: &str) -> Self {
        let Some(matcher) = matcher else {
            return Self { exact: true, ..Self::default() };
        };
        let prefilter = matcher.prefilter();
        let lowered = matcher.case() == Case::Insensitive;
        let mut needles: Vec<String> = Vec::with_capacity(prefilter.needles.len());
        for needle in &prefilter.needles {
            let literal = if lowered {
                needle.lua_pattern().as_deref().and_then(lowered_literal)
            } else {
                Some(needle.text.clone())
            };
            match literal {
                Some(literal) if !needles.contains(&literal) => needles.push(literal),
                Some(_) => {}
                // A word Lua cannot look for: for `every`, the others still narrow; for one
                // word of many, nothing does.
                None if prefilter.every => {}
                None => return Self::default(),
            }
        }
        if needles.is_empty() {
            return Self::default();
        }
        // A case-sensitive needle that is its whole word is an exact test.
        let words: Vec<&str> = match matcher.mode() {
            MatchMode::Phrase => vec![query],
            MatchMode::AllWords | MatchMode::AnyWord => query.split_whitespace().collect(),
        };
        let exact = !lowered
            && words.len() == prefilter.needles.len()
            && words.iter().zip(&prefilter.needles).all(|(word, needle)| *word == needle.text);
        let mode = if prefilter.every { "all" } else { "any" };
        Self { mode, lowered, needles, exact }
    }
}

/// The literal a pattern of [`Needle::lua_pattern`](crate::provider::Needle::lua_pattern)
/// for an insensitive needle stands for in lowered content: `[Xx]` becomes `x`, `%c` becomes
/// `c`, and everything else stays. `None` for any other shape, which then narrows nothing.
fn lowered_literal(pattern: &str) -> Option<String> {
    let mut literal = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => literal.push(chars.next()?),
            '[' => {
                let set: String = chars.by_ref().take_while(|&c| c != ']').collect();
                let mut members = set.chars();
                let first = members.next()?.to_ascii_lowercase();
                let one_letter = first.is_ascii_lowercase()
                    && members.all(|other| other.to_ascii_lowercase() == first);
                if !one_letter {
                    return None;
                }
                literal.push(first);
            }
            // An upper-case letter outside a set would never occur in lowered content.
            c if c.is_ascii_uppercase() => return None,
            c => literal.push(c),
        }
    }
    Some(literal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn narrowing(query: &str, mode: MatchMode, case: Case) -> Narrowing {
        Narrowing::new(Some(&TextMatcher::new(query, mode, case).expect("a query")), query)
    }

    #[test]
    fn patterns_become_lowered_literals() {
        assert_eq!(lowered_literal("[Bb]erlin").as_deref(), Some("berlin"));
        assert_eq!(lowered_literal("50%%%_[Oo]ff").as_deref(), Some("50%_off"));
        assert_eq!(lowered_literal("straße").as_deref(), Some("straße"));
        assert_eq!(lowered_literal("[%]x]"), None);
        assert_eq!(lowered_literal("[Ab]"), None);
        assert_eq!(lowered_literal("X"), None);
    }

    #[test]
    fn insensitive_words_are_lowered_and_lua_less_words_dropped_or_fatal() {
        let all =
            narrowing("Berlin \u{212A}elvin ΣΑΣ berlin", MatchMode::AllWords, Case::Insensitive);
        assert_eq!((all.mode, all.lowered, all.exact), ("all", true, false));
        // Kelvin's k has no Lua set: the rest of the word; no Greek letter has one either.
        assert_eq!(all.needles, ["berlin", "elvin"]);
        let any = narrowing("Berlin ΣΑΣ", MatchMode::AnyWord, Case::Insensitive);
        assert_eq!((any.mode, any.needles.len()), ("", 0), "one word without a pattern");
        let sigma = narrowing("σας", MatchMode::Phrase, Case::Insensitive);
        assert_eq!(sigma.mode, "", "nothing narrows");
    }

    #[test]
    fn short_case_sensitive_needles_are_exact() {
        let short = narrowing("tea  coffee", MatchMode::AnyWord, Case::Sensitive);
        assert_eq!((short.mode, short.exact), ("any", true));
        assert_eq!(short.needles, ["tea", "coffee"]);
        let long =
            narrowing("a phrase longer than sixteen bytes", MatchMode::Phrase, Case::Sensitive);
        assert_eq!((long.needles[0].as_str(), long.exact), ("a phrase longer ", false));
        assert!(Narrowing::new(None, "").exact);
    }
}
