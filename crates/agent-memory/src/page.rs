//! Paging: [`PageRequest`], the pages operations return, and the opaque [`Cursor`].

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::{MemoryError, Result};
use crate::record::MemoryRecord;
use crate::scope::MemoryScope;
use crate::validation;

/// Page size used when none is given.
pub const DEFAULT_PAGE_LIMIT: usize = 20;

/// Which page to read: at most `limit` items after the `after` position.
///
/// ```
/// use agent_memory::PageRequest;
///
/// let first = PageRequest::default();
/// assert_eq!(first.limit, 20);
/// let small = PageRequest::new(5);
/// assert!(small.after.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// How many items at most, 1 through 100.
    pub limit: usize,
    /// Continue after this position; `None` starts at the beginning.
    pub after: Option<Cursor>,
}

impl PageRequest {
    /// The first page of `limit` items.
    pub fn new(limit: usize) -> Self {
        Self { limit, after: None }
    }

    /// The same request continuing after `cursor`.
    pub fn after(mut self, cursor: Cursor) -> Self {
        self.after = Some(cursor);
        self
    }

    /// The same request continuing after `cursor`, when there is one.
    pub fn after_opt(mut self, cursor: Option<Cursor>) -> Self {
        self.after = cursor;
        self
    }
}

impl PageRequest {
    /// Checks this request for a page of one scope's keys (`list`, `search`,
    /// `purge_expired`): the limit, and that the cursor came from the same operation and scope.
    ///
    /// ```
    /// use agent_memory::provider::{key_cursor, CursorKind};
    /// use agent_memory::{MemoryScope, PageRequest};
    ///
    /// let scope = MemoryScope::new("app", "user-1")?;
    /// let page = PageRequest::new(5).after(key_cursor(CursorKind::List, &scope, "k0009"));
    /// let checked = page.key_page(CursorKind::List, &scope)?;
    /// assert_eq!((checked.limit, checked.after.as_deref()), (5, Some("k0009")));
    /// assert!(page.key_page(CursorKind::Search, &scope).is_err());
    /// # Ok::<(), agent_memory::MemoryError>(())
    /// ```
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `limit` or `cursor`.
    pub fn key_page(&self, kind: CursorKind, scope: &MemoryScope) -> Result<KeyPage> {
        validation::limit(self.limit)?;
        let after = match &self.after {
            Some(cursor) => Some(cursor.position(kind, scope)?),
            None => None,
        };
        Ok(KeyPage { limit: self.limit, after })
    }

    /// Checks this request for a page of one application user's namespaces: the ids, the
    /// limit, and that the cursor came from `list_namespaces` for the same user.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `application_id`, `user_id`, `limit` or
    /// `cursor`.
    pub fn namespace_page(&self, application_id: &str, user_id: &str) -> Result<NamePage> {
        validation::user(application_id, user_id)?;
        validation::limit(self.limit)?;
        let after = match &self.after {
            Some(cursor) => Some(cursor.namespace_position(application_id, user_id)?),
            None => None,
        };
        Ok(NamePage { limit: self.limit, after })
    }
}

/// A checked page request over one scope's keys, from [`PageRequest::key_page`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPage {
    /// How many records at most, 1 through 100.
    pub limit: usize,
    /// The key to continue after; `None` starts at the first key.
    pub after: Option<String>,
}

/// A checked page request over names (the namespaces of one application user), from
/// [`PageRequest::namespace_page`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePage {
    /// How many names at most, 1 through 100.
    pub limit: usize,
    /// The name to continue after (the empty string for the default namespace); `None` starts
    /// at the first.
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

/// The operation a cursor continues; a cursor works only for the operation and scope that
/// produced it. For providers: see [`crate::provider`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorKind {
    /// [`list`](crate::MemoryStore::list): the position is a key.
    List,
    /// [`search`](crate::MemoryStore::search): the position is a key.
    Search,
    /// [`purge_expired`](crate::MemoryStore::purge_expired): the position is a key.
    Purge,
    /// [`list_namespaces`](crate::MemoryStore::list_namespaces): the position is a namespace
    /// (empty for the default one).
    Namespaces,
}

impl CursorKind {
    fn byte(self) -> u8 {
        match self {
            CursorKind::List => b'l',
            CursorKind::Search => b's',
            CursorKind::Purge => b'p',
            CursorKind::Namespaces => b'n',
        }
    }
}

const CURSOR_VERSION: u8 = 1;
/// Version, kind, then an 8-byte tag of the scope.
const CURSOR_HEADER: usize = 10;
/// Longest token accepted: the header plus a 256-byte position, base64 encoded, with room.
const MAX_CURSOR_CHARS: usize = 512;

/// Opaque continuation token: a position (the last key or namespace returned or inspected),
/// not a snapshot.
///
/// A cursor names its operation and carries a tag of the scope it came from, so a cursor
/// passed to another operation or another scope is rejected as
/// [`Invalid`](MemoryError::Invalid) instead of silently starting somewhere else. The tag is a
/// checksum against mistakes, not a secret: a forged cursor can only name a position, never
/// widen what the scope can read.
///
/// Callers pass cursors back as they got them; tokens that came from outside (a CLI flag, a
/// tool argument) parse with [`Cursor::parse`] or [`str::parse`]. Providers make them with
/// [`provider::key_cursor`](crate::provider::key_cursor) and
/// [`provider::namespace_cursor`](crate::provider::namespace_cursor).
///
/// ```
/// use agent_memory::{Cursor, MemoryScope, PageRequest};
///
/// assert!(Cursor::parse("not a cursor").is_err());
/// assert!("not a cursor".parse::<Cursor>().is_err());
///
/// # use agent_memory::provider::{key_cursor, CursorKind};
/// let scope = MemoryScope::new("app", "user-1")?;
/// let cursor: Cursor = key_cursor(CursorKind::List, &scope, "k0009").as_str().parse()?;
/// let other = MemoryScope::new("app", "user-2")?;
/// let foreign = PageRequest::default().after(cursor);
/// assert!(foreign.key_page(CursorKind::List, &other).is_err());
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cursor(String);

impl Cursor {
    /// A cursor for `kind` in `scope`, positioned after `position`.
    pub(crate) fn for_scope(kind: CursorKind, scope: &MemoryScope, position: &str) -> Self {
        Self::encode(kind, scope_tag(kind, scope), position)
    }

    /// A [`CursorKind::Namespaces`] cursor for one application user, positioned after the
    /// namespace `position` (empty for the default namespace).
    pub(crate) fn for_user(application_id: &str, user_id: &str, position: &str) -> Self {
        Self::encode(CursorKind::Namespaces, user_tag(application_id, user_id), position)
    }

    fn encode(kind: CursorKind, tag: u64, position: &str) -> Self {
        let mut bytes = Vec::with_capacity(CURSOR_HEADER + position.len());
        bytes.push(CURSOR_VERSION);
        bytes.push(kind.byte());
        bytes.extend_from_slice(&tag.to_be_bytes());
        bytes.extend_from_slice(position.as_bytes());
        Self(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Checks the shape of a token that came from outside (a tool argument, a CLI flag).
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) for a token no provider could have produced.
    pub fn parse(token: &str) -> Result<Self> {
        decode(token)?;
        Ok(Self(token.to_owned()))
    }

    /// The token as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The position this cursor continues after, checked against the operation and scope.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) when the cursor is malformed or came from another
    /// operation or scope.
    pub(crate) fn position(&self, kind: CursorKind, scope: &MemoryScope) -> Result<String> {
        let position = self.checked(kind, scope_tag(kind, scope))?;
        validation::key(&position).map_err(|_| malformed())?;
        Ok(position)
    }

    /// The namespace a [`CursorKind::Namespaces`] cursor continues after (empty for the default
    /// namespace), checked against the application user.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) when the cursor is malformed or came from another
    /// operation or user.
    pub(crate) fn namespace_position(&self, application_id: &str, user_id: &str) -> Result<String> {
        let position = self.checked(CursorKind::Namespaces, user_tag(application_id, user_id))?;
        if !position.is_empty() {
            validation::id("namespace", &position).map_err(|_| malformed())?;
        }
        Ok(position)
    }

    fn checked(&self, kind: CursorKind, tag: u64) -> Result<String> {
        let (found_kind, found_tag, position) = decode(&self.0)?;
        if found_kind != kind.byte() {
            return Err(MemoryError::invalid("cursor", "belongs to another operation"));
        }
        if found_tag != tag {
            return Err(MemoryError::invalid("cursor", "belongs to another scope"));
        }
        Ok(position)
    }
}

fn malformed() -> MemoryError {
    MemoryError::invalid("cursor", "is malformed")
}

fn decode(token: &str) -> Result<(u8, u64, String)> {
    if token.is_empty() || token.len() > MAX_CURSOR_CHARS {
        return Err(malformed());
    }
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| malformed())?;
    if bytes.len() < CURSOR_HEADER || bytes[0] != CURSOR_VERSION {
        return Err(malformed());
    }
    let kind = bytes[1];
    if ![b'l', b's', b'p', b'n'].contains(&kind) {
        return Err(malformed());
    }
    let mut tag = [0u8; 8];
    tag.copy_from_slice(&bytes[2..CURSOR_HEADER]);
    let position = String::from_utf8(bytes[CURSOR_HEADER..].to_vec()).map_err(|_| malformed())?;
    Ok((kind, u64::from_be_bytes(tag), position))
}

/// FNV-1a over length-prefixed parts, so no two different part lists hash the same input.
fn tag_of(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for part in parts {
        feed(&(part.len() as u64).to_be_bytes());
        feed(part);
    }
    hash
}

fn scope_tag(kind: CursorKind, scope: &MemoryScope) -> u64 {
    let namespace = match scope.namespace() {
        Some(ns) => [b"n" as &[u8], ns.as_bytes()].concat(),
        None => b"d".to_vec(),
    };
    tag_of(&[
        &[kind.byte()],
        scope.application_id().as_bytes(),
        scope.user_id().as_bytes(),
        &namespace,
    ])
}

fn user_tag(application_id: &str, user_id: &str) -> u64 {
    tag_of(&[&[CursorKind::Namespaces.byte()], application_id.as_bytes(), user_id.as_bytes()])
}

impl fmt::Debug for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cursor({})", self.0)
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Cursor {
    type Err = MemoryError;

    /// As [`Cursor::parse`].
    fn from_str(token: &str) -> Result<Self> {
        Self::parse(token)
    }
}

impl TryFrom<String> for Cursor {
    type Error = MemoryError;

    fn try_from(token: String) -> Result<Self> {
        decode(&token)?;
        Ok(Self(token))
    }
}

impl From<Cursor> for String {
    fn from(cursor: Cursor) -> Self {
        cursor.0
    }
}
