//! What one `search` call may cost, and the one matcher every provider uses.
//!
//! A call inspects records in key order while both bounds have room: at most
//! `search_scan_limit` keys and, counted in content bytes, `search_scan_bytes` (it always
//! inspects at least one record, so a call inspects at most the byte budget plus one record's
//! content). When a bound runs out it returns what it found with a cursor after the last key it
//! inspected. Every record content reached counts, expired ones included, because the
//! datastore read it.
//!
//! The match itself is [`contains`]: the standard library's substring search (the Two-Way
//! algorithm), whose cost is linear in the bytes it reads whatever the query and the content
//! are. A datastore whose own substring functions are not linear (PostgreSQL's `strpos` and
//! Lua's `string.find` compare a whole query at each position) only narrows the candidates in
//! the datastore with the query's first [`PREFILTER_BYTES`] bytes ([`prefilter`]), which costs
//! at most that many comparisons per byte, and the provider confirms each candidate with
//! [`contains`].

/// Content bytes one `search` call inspects by default (1 MiB), on every provider.
pub const DEFAULT_SEARCH_SCAN_BYTES: usize = 1_048_576;

/// Longest piece of the query a datastore's own substring function looks for.
pub const PREFILTER_BYTES: usize = 16;

/// The longest start of `query` of at most [`PREFILTER_BYTES`] bytes that ends on a character
/// boundary (a whole query that short is its own prefilter, and then the datastore's answer is
/// exact). Never empty for a non-empty query: a character is at most four bytes.
pub fn prefilter(query: &str) -> &str {
    if query.len() <= PREFILTER_BYTES {
        return query;
    }
    let mut end = PREFILTER_BYTES;
    while !query.is_char_boundary(end) {
        end -= 1;
    }
    &query[..end]
}

/// True when `content` contains `query` as a literal, case-sensitive substring, in time linear
/// in the lengths of both.
pub fn contains(content: &str, query: &str) -> bool {
    content.contains(query)
}

/// The bounds of one `search` call and what it has inspected so far.
#[derive(Debug, Clone)]
pub struct SearchScan {
    max_keys: usize,
    max_bytes: usize,
    keys: usize,
    bytes: usize,
}

impl SearchScan {
    /// A scan of at most `max_keys` keys and, past the first record, `max_bytes` content bytes.
    pub fn new(max_keys: usize, max_bytes: usize) -> Self {
        Self { max_keys, max_bytes, keys: 0, bytes: 0 }
    }

    /// True while another record may be inspected.
    pub fn has_room(&self) -> bool {
        self.keys < self.max_keys && self.bytes < self.max_bytes
    }

    /// Counts one inspected record of `content_bytes` bytes of content.
    pub fn inspect(&mut self, content_bytes: usize) {
        self.keys += 1;
        self.bytes = self.bytes.saturating_add(content_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefilter_cuts_on_a_character_boundary() {
        assert_eq!(prefilter("short"), "short");
        assert_eq!(prefilter(&"a".repeat(40)), "a".repeat(16));
        // Five four-byte characters: 16 bytes hold exactly four.
        assert_eq!(prefilter(&"🦀".repeat(5)), "🦀".repeat(4));
        // "é" is two bytes: 15 of them would end mid-character at 16 after one "a".
        assert_eq!(prefilter(&format!("a{}", "é".repeat(10))), format!("a{}", "é".repeat(7)));
    }

    #[test]
    fn a_scan_inspects_at_least_one_record_and_stops_at_either_bound() {
        let mut scan = SearchScan::new(3, 10);
        assert!(scan.has_room());
        scan.inspect(100);
        assert!(!scan.has_room(), "the byte budget ran out");
        let mut scan = SearchScan::new(2, 1_000);
        scan.inspect(1);
        scan.inspect(1);
        assert!(!scan.has_room(), "the key bound ran out");
    }

    #[test]
    fn contains_is_a_literal_substring() {
        assert!(contains("aaaab", "aab"));
        assert!(contains("abababac", "ababac"));
        assert!(!contains(&"a".repeat(5_000), &format!("{}b", "a".repeat(1_023))));
        assert!(contains("x%y", "%"));
    }
}
