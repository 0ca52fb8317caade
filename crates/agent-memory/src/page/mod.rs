//! Paging: [`PageRequest`], the pages operations return, and the opaque [`Cursor`].

use crate::error::{MemoryError, Result};
use crate::matching::{options_tag, Case, MatchMode, MetadataFilter, TextMatcher};
use crate::record::MemoryRecord;
use crate::scope::MemoryScope;
use crate::validation;

mod cursor;

pub use cursor::{Cursor, CursorKind};

/// Page size used when none is given.
pub const DEFAULT_PAGE_LIMIT: usize = 20;

/// Which page to read: at most `limit` items after the `after` position, and, for `list`, only
/// keys that start with `prefix`.
///
/// ```
/// use agent_memory::PageRequest;
///
/// let first = PageRequest::default();
/// assert_eq!(first.limit, 20);
/// let small = PageRequest::new(5);
/// assert!(small.after.is_none());
/// let notes = PageRequest::new(50).prefix("notes/");
/// assert_eq!(notes.prefix, "notes/");
/// ```
///
/// # Key prefix
///
/// [`prefix`](Self::prefix) restricts [`list`](crate::MemoryStore::list) (and
/// [`list_keys`](crate::MemoryStore::list_keys)) to the keys that start with it, byte for byte: no character is special (`%`, `_`, `*` and `\` match
/// themselves). Every provider applies it in the datastore as a range scan over its ordered key
/// index (from the prefix up to its successor, [`KeyPage::prefix_end`]), so a page costs the
/// same whatever lies outside the prefix. The prefix follows the key rules (at most 256 bytes,
/// no control characters); the empty prefix, the default, means every key.
///
/// A cursor from a prefixed `list` continues only that listing: passed with another prefix (or
/// none), it is [`Invalid`](MemoryError::Invalid) naming `cursor`, so a caller who changes the
/// prefix between pages finds out instead of silently skipping or repeating keys.
///
/// `search` and `purge_expired` take no prefix: a non-empty one is
/// [`Invalid`](MemoryError::Invalid) naming `prefix`, rather than silently ignored.
///
/// # Matching and filters
///
/// A `search` matches its query as one phrase, case-sensitively, unless the request asks
/// for [`all_words`](Self::all_words), [`any_word`](Self::any_word) or
/// [`ignore_case`](Self::ignore_case) (see [`MatchMode`] and [`Case`]); `list` and `search`
/// keep only the records whose metadata passes [`metadata`](Self::metadata), when it names
/// fields. A filtered `list` inspects a bounded number of records per call, as `search`
/// does, so it may return fewer records than `limit`, even none, with a cursor. A cursor is
/// bound to the mode, case and filter of the request that made it: passed with others, it is
/// [`Invalid`](MemoryError::Invalid) naming `cursor`. Other operations take none of them.
///
/// ```
/// use agent_memory::{MetadataFilter, PageRequest};
///
/// let page = PageRequest::new(10)
///     .all_words()
///     .ignore_case()
///     .metadata(MetadataFilter::new().field("category", "preferences"));
/// assert_eq!(page.metadata.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// How many items at most, 1 through 100.
    pub limit: usize,
    /// Continue after this position; `None` starts at the beginning.
    pub after: Option<Cursor>,
    /// `list` and `list_keys` only: only keys that start with this; empty (the default) for
    /// every key.
    pub prefix: String,
    /// `search` only: how the query matches (the default: as one phrase).
    pub matching: MatchMode,
    /// `search` only: whether letter case counts (the default: it does).
    pub case: Case,
    /// `list` and `search` only: conditions on top-level metadata fields, all of which must
    /// hold; empty (the default) for every record.
    pub metadata: MetadataFilter,
}

impl PageRequest {
    /// The first page of `limit` items.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            after: None,
            prefix: String::new(),
            matching: MatchMode::Phrase,
            case: Case::Sensitive,
            metadata: MetadataFilter::new(),
        }
    }

    /// The same request matching the query in `mode` (`search` only).
    pub fn match_mode(mut self, mode: MatchMode) -> Self {
        self.matching = mode;
        self
    }

    /// The same request matching when every word of the query occurs (`search` only).
    pub fn all_words(self) -> Self {
        self.match_mode(MatchMode::AllWords)
    }

    /// The same request matching when any word of the query occurs (`search` only).
    pub fn any_word(self) -> Self {
        self.match_mode(MatchMode::AnyWord)
    }

    /// The same request comparing with `case` (`search` only).
    pub fn case(mut self, case: Case) -> Self {
        self.case = case;
        self
    }

    /// The same request comparing after Unicode simple case folding (`search` only).
    pub fn ignore_case(self) -> Self {
        self.case(Case::Insensitive)
    }

    crate::builder::setters! {
        /// The same request keeping only records whose metadata passes `filter` (`list` and
        /// `search`).
        metadata(filter: MetadataFilter) => metadata = filter;

        /// The same request continuing after `cursor`.
        after(cursor: Cursor) => after = Some(cursor);

        /// The same request continuing after `cursor`, when there is one.
        after_opt(cursor: Option<Cursor>) => after = cursor;

        /// The same request restricted to keys that start with `prefix` (`list` only; empty for
        /// every key). See [Key prefix](Self#key-prefix).
        prefix(prefix: impl Into<String>) => prefix = prefix.into();
    }
}

/// The checks a provider runs on a [`PageRequest`] before any I/O, each giving the checked
/// request its datastore reads: kept off `PageRequest` itself, whose callers never need them.
/// Bring them into scope with `use agent_memory::provider::PageRequestExt;`.
pub trait PageRequestExt {
    /// Checks this request for a page of one scope's keys (`list`, `list_keys`, `search`,
    /// `purge_expired`): the limit, the prefix (`list` and `list_keys` only), and that the
    /// cursor came from the same operation, scope and prefix.
    ///
    /// ```
    /// use agent_memory::provider::{key_cursor, CursorKind};
    /// use agent_memory::provider::PageRequestExt;
    /// use agent_memory::{MemoryScope, PageRequest};
    ///
    /// let scope = MemoryScope::new("app", "user-1")?;
    /// let page = PageRequest::new(5).after(key_cursor(CursorKind::List, &scope, "k0009"));
    /// let checked = page.key_page(CursorKind::List, &scope)?;
    /// assert_eq!((checked.limit, checked.after.as_deref()), (5, Some("k0009")));
    /// assert!(page.key_page(CursorKind::Search, &scope).is_err());
    ///
    /// // A prefix is for `list` only, and binds the listing's cursors to it.
    /// let notes = PageRequest::new(5).prefix("notes/");
    /// assert!(notes.key_page(CursorKind::Search, &scope).is_err());
    /// let checked = notes.key_page(CursorKind::List, &scope)?;
    /// assert_eq!(checked.prefix_end().as_deref(), Some("notes0"));
    /// let cursor = checked.cursor(&scope, "notes/a");
    /// let next = notes.clone().after(cursor.clone()).key_page(CursorKind::List, &scope)?;
    /// assert_eq!(next.after.as_deref(), Some("notes/a"));
    /// let unprefixed = PageRequest::new(5).after(cursor);
    /// assert!(unprefixed.key_page(CursorKind::List, &scope).is_err());
    /// # Ok::<(), agent_memory::MemoryError>(())
    /// ```
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `limit`, `prefix` or `cursor`.
    fn key_page(&self, kind: CursorKind, scope: &MemoryScope) -> Result<KeyPage>;

    /// Checks this request for a page of one application user's namespaces: the ids, the
    /// limit, and that the cursor came from `list_namespaces` for the same user.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `application_id`, `user_id`, `limit`,
    /// `prefix` (namespaces take none) or `cursor`.
    fn namespace_page(&self, application_id: &str, user_id: &str) -> Result<NamePage>;

    /// Checks this request for a page of one application's users: the application id, the
    /// limit, and that the cursor came from `list_users` for the same application.
    ///
    /// ```
    /// use agent_memory::provider::user_cursor;
    /// use agent_memory::provider::PageRequestExt;
    /// use agent_memory::PageRequest;
    ///
    /// let page = PageRequest::new(5).after(user_cursor("app", "user-1"));
    /// assert_eq!(page.user_page("app")?.after.as_deref(), Some("user-1"));
    /// assert!(page.user_page("app2").is_err());
    /// assert!(PageRequest::new(5).prefix("u").user_page("app").is_err());
    /// # Ok::<(), agent_memory::MemoryError>(())
    /// ```
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `application_id`, `limit`, `prefix` (users
    /// take none) or `cursor`.
    fn user_page(&self, application_id: &str) -> Result<NamePage>;

    /// Checks this request for a page of the store's applications: the limit, and that the
    /// cursor came from `list_applications`.
    ///
    /// ```
    /// use agent_memory::provider::{application_cursor, user_cursor};
    /// use agent_memory::provider::PageRequestExt;
    /// use agent_memory::PageRequest;
    ///
    /// let page = PageRequest::new(5).after(application_cursor("app-1"));
    /// assert_eq!(page.application_page()?.after.as_deref(), Some("app-1"));
    /// assert!(page.user_page("app-1").is_err());
    /// let users = PageRequest::new(5).after(user_cursor("app-1", "user-1"));
    /// assert!(users.application_page().is_err());
    /// assert!(PageRequest::new(5).prefix("a").application_page().is_err());
    /// # Ok::<(), agent_memory::MemoryError>(())
    /// ```
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `limit`, `prefix` (applications take none) or
    /// `cursor`.
    fn application_page(&self) -> Result<NamePage>;
}

impl PageRequestExt for PageRequest {
    fn key_page(&self, kind: CursorKind, scope: &MemoryScope) -> Result<KeyPage> {
        validation::limit(self.limit)?;
        validation::key_prefix(&self.prefix)?;
        if !kind.takes_prefix() && !self.prefix.is_empty() {
            return Err(MemoryError::invalid("prefix", "applies to list and list_keys only"));
        }
        if kind != CursorKind::Search && self.matching != MatchMode::Phrase {
            return Err(MemoryError::invalid("match", "applies to search only"));
        }
        if kind != CursorKind::Search && self.case != Case::Sensitive {
            return Err(MemoryError::invalid("case", "applies to search only"));
        }
        if !matches!(kind, CursorKind::List | CursorKind::Search) && !self.metadata.is_empty() {
            return Err(MemoryError::invalid("metadata", "applies to list and search only"));
        }
        self.metadata.check()?;
        let options = options_tag(self.matching, self.case, &self.metadata);
        let after = match &self.after {
            Some(cursor) => Some(cursor.position(kind, scope, &self.prefix, &options)?),
            None => None,
        };
        // A position before the prefix's keys (only a forged cursor has one) starts at the
        // first of them, as no cursor does.
        let after = after.filter(|position| *position >= self.prefix);
        Ok(KeyPage {
            kind,
            limit: self.limit,
            after,
            prefix: self.prefix.clone(),
            matching: self.matching,
            case: self.case,
            metadata: self.metadata.clone(),
        })
    }

    fn namespace_page(&self, application_id: &str, user_id: &str) -> Result<NamePage> {
        validation::user(application_id, user_id)?;
        validation::limit(self.limit)?;
        if !self.prefix.is_empty() {
            return Err(MemoryError::invalid("prefix", "applies to list only"));
        }
        let after = match &self.after {
            Some(cursor) => Some(cursor.namespace_position(application_id, user_id)?),
            None => None,
        };
        Ok(NamePage { limit: self.limit, after })
    }

    fn user_page(&self, application_id: &str) -> Result<NamePage> {
        validation::id("application_id", application_id)?;
        validation::limit(self.limit)?;
        if !self.prefix.is_empty() {
            return Err(MemoryError::invalid("prefix", "applies to list only"));
        }
        let after = match &self.after {
            Some(cursor) => Some(cursor.user_position(application_id)?),
            None => None,
        };
        Ok(NamePage { limit: self.limit, after })
    }

    fn application_page(&self) -> Result<NamePage> {
        validation::limit(self.limit)?;
        if !self.prefix.is_empty() {
            return Err(MemoryError::invalid("prefix", "applies to list only"));
        }
        let after = match &self.after {
            Some(cursor) => Some(cursor.application_position()?),
            None => None,
        };
        Ok(NamePage { limit: self.limit, after })
    }
}

/// A checked page request over one scope's keys, from [`PageRequestExt::key_page`].
///
/// The keys it asks for run from a start, `after` (exclusive) when there is one and `prefix`
/// (inclusive) otherwise, up to [`prefix_end`](Self::prefix_end) (exclusive) when there is
/// one. `after` is never before `prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPage {
    /// The operation the page is for.
    pub kind: CursorKind,
    /// How many records at most, 1 through 100.
    pub limit: usize,
    /// The key to continue after; `None` starts at the first key (of the prefix).
    pub after: Option<String>,
    /// Only keys that start with this (`list` only); empty for every key.
    pub prefix: String,
    /// How a `search` query matches ([`MatchMode::Phrase`] for every other operation).
    pub matching: MatchMode,
    /// Whether a `search` tells case ([`Case::Sensitive`] for every other operation).
    pub case: Case,
    /// What `list` and `search` keep by metadata; empty for every record.
    pub metadata: MetadataFilter,
}

impl KeyPage {
    /// The exclusive upper end of the keys that start with [`prefix`](Self::prefix): the
    /// smallest string above all of them, so `prefix <= key < end` is exactly "starts with
    /// the prefix". `None` when no string is above them all, so the range is open: for the
    /// empty prefix, and for a prefix made only of U+10FFFF, the highest code point.
    ///
    /// The end is the prefix with its last character moved to the next code point (U+D7FF to
    /// U+E000, over the surrogates), dropping trailing U+10FFFF characters first. It is
    /// always valid UTF-8, so every datastore compares it as text: a successor computed on
    /// bytes could end in a byte no UTF-8 text holds (`ÿ`, C3 BF, would become C3 C0), and
    /// UTF-8's byte order is its code point order, so the two ends select the same keys.
    ///
    /// ```
    /// use agent_memory::provider::PageRequestExt;
    /// use agent_memory::provider::CursorKind;
    /// use agent_memory::{MemoryScope, PageRequest};
    ///
    /// let scope = MemoryScope::new("app", "user-1")?;
    /// let end = |prefix: &str| {
    ///     PageRequest::new(10).prefix(prefix).key_page(CursorKind::List, &scope).unwrap().prefix_end()
    /// };
    /// assert_eq!(end("notes/").as_deref(), Some("notes0"));
    /// assert_eq!(end("ÿ").as_deref(), Some("Ā")); // U+00FF, then U+0100
    /// assert_eq!(end("a\u{10FFFF}").as_deref(), Some("b"));
    /// assert_eq!(end("\u{10FFFF}"), None);
    /// assert_eq!(end(""), None);
    /// # Ok::<(), agent_memory::MemoryError>(())
    /// ```
    pub fn prefix_end(&self) -> Option<String> {
        prefix_end(&self.prefix)
    }

    /// A cursor continuing this page's operation, in `scope`, after the key `position`; bound
    /// to the prefix like every cursor of a prefixed `list`. For providers: what
    /// [`PageBuilder`](crate::provider::PageBuilder) puts on a page, and what a bounded scan
    /// returns when it stops at `position`.
    pub fn cursor(&self, scope: &MemoryScope, position: &str) -> Cursor {
        let options = options_tag(self.matching, self.case, &self.metadata);
        Cursor::for_scope(self.kind, scope, &self.prefix, &options, position)
    }

    /// The matcher of a `search` query for this page's mode and case.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `query`, as [`TextMatcher::new`].
    pub fn matcher(&self, query: &str) -> Result<TextMatcher> {
        TextMatcher::new(query, self.matching, self.case)
    }
}

/// See [`KeyPage::prefix_end`].
fn prefix_end(prefix: &str) -> Option<String> {
    let (at, last) = prefix.char_indices().rev().find(|&(_, c)| c != char::MAX)?;
    let next = match last {
        '\u{D7FF}' => '\u{E000}',
        // Below char::MAX and not U+D7FF, so the next code point is a character.
        c => char::from_u32(u32::from(c) + 1)?,
    };
    let mut end = String::with_capacity(at + next.len_utf8());
    end.push_str(&prefix[..at]);
    end.push(next);
    Some(end)
}

/// A checked page request over names (the namespaces of one application user, the users of
/// one application, or the applications of the store), from [`PageRequestExt::namespace_page`],
/// [`PageRequestExt::user_page`] or [`PageRequestExt::application_page`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePage {
    /// How many names at most, 1 through 100.
    pub limit: usize,
    /// The name to continue after (the empty string for the default namespace; a user id for
    /// users; an application id for applications); `None` starts at the first.
    pub after: Option<String>,
}

impl Default for PageRequest {
    fn default() -> Self {
        Self::new(DEFAULT_PAGE_LIMIT)
    }
}

/// A page of records from [`list`](crate::MemoryStore::list) or
/// [`search`](crate::MemoryStore::search), in ascending key order.
///
/// Pass `next_cursor` back as [`PageRequest::after`] until it is `None`, even when `items` is
/// empty: a bounded search may stop scanning before it found a match.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryPage {
    /// The records of this page.
    pub items: Vec<MemoryRecord>,
    /// Where the next page starts; `None` when nothing is left.
    pub next_cursor: Option<Cursor>,
}

/// One live key from [`list_keys`](crate::MemoryStore::list_keys), with the size of its
/// record's content, read without reading the content.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyInfo {
    /// The record's key.
    pub key: String,
    /// The length of the record's content in bytes (UTF-8), what `content.len()` of the
    /// record [`get`](crate::MemoryStore::get) returns would be.
    pub content_len: u64,
}

impl KeyInfo {
    /// The key `key` whose content is `content_len` bytes long (for providers).
    pub fn new(key: impl Into<String>, content_len: u64) -> Self {
        Self { key: key.into(), content_len }
    }
}

/// A page of keys from [`list_keys`](crate::MemoryStore::list_keys), in ascending key order.
///
/// Pass `next_cursor` back as [`PageRequest::after`] until it is `None`, even when `items` is
/// short or empty: a provider may stop a bounded scan early and still say that more may follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfoPage {
    /// The keys of this page, each with its content's size.
    pub items: Vec<KeyInfo>,
    /// Where the next page starts; `None` when nothing is left.
    pub next_cursor: Option<Cursor>,
}

/// What one bounded [`purge_expired`](crate::MemoryStore::purge_expired) sweep removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryCleanupPage {
    /// Expired records physically removed by this call.
    pub deleted: u64,
    /// Where the next sweep starts; `None` when the namespace was swept to its end.
    pub next_cursor: Option<Cursor>,
}

/// A page of namespaces from [`list_namespaces`](crate::MemoryStore::list_namespaces).
#[derive(Debug, Clone, PartialEq)]
pub struct NamespacePage {
    /// One scope per namespace that holds a record, the default namespace included.
    pub items: Vec<MemoryScope>,
    /// Where the next page starts; `None` when nothing is left.
    pub next_cursor: Option<Cursor>,
}

/// A page of user ids from [`list_users`](crate::MemoryStore::list_users), in ascending byte
/// order.
///
/// Pass `next_cursor` back as [`PageRequest::after`] until it is `None`, even when `items` is
/// short or empty: a provider may stop early and still say that more may follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserPage {
    /// The ids of the application's users that hold at least one record.
    pub items: Vec<String>,
    /// Where the next page starts; `None` when nothing is left.
    pub next_cursor: Option<Cursor>,
}

/// A page of application ids from
/// [`list_applications`](crate::MemoryStore::list_applications), in ascending byte order.
///
/// Pass `next_cursor` back as [`PageRequest::after`] until it is `None`, even when `items` is
/// short or empty: a provider may stop early and still say that more may follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplicationPage {
    /// The ids of the applications that hold at least one record.
    pub items: Vec<String>,
    /// Where the next page starts; `None` when nothing is left.
    pub next_cursor: Option<Cursor>,
}
