//! The opaque [`Cursor`] and the operations it continues ([`CursorKind`]): the core's own
//! cursor format, its scope tags, and the checks that bind a cursor to its operation, scope,
//! prefix, match mode, case and metadata filter.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::{MemoryError, Result};
use crate::scope::MemoryScope;
use crate::validation;

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
    /// [`list_users`](crate::MemoryStore::list_users): the position is a user id, and the
    /// cursor is bound to the application.
    Users,
    /// [`list_applications`](crate::MemoryStore::list_applications): the position is an
    /// application id.
    Applications,
    /// [`list_keys`](crate::MemoryStore::list_keys): the position is a key, and the cursor is
    /// bound to the prefix as a `list` cursor is.
    Keys,
}

impl CursorKind {
    fn byte(self) -> u8 {
        match self {
            CursorKind::List => b'l',
            CursorKind::Search => b's',
            CursorKind::Purge => b'p',
            CursorKind::Namespaces => b'n',
            CursorKind::Users => b'u',
            CursorKind::Applications => b'a',
            CursorKind::Keys => b'k',
        }
    }

    /// Whether pages of this operation take a key prefix: `list` and `list_keys`.
    pub(super) fn takes_prefix(self) -> bool {
        matches!(self, CursorKind::List | CursorKind::Keys)
    }
}

const CURSOR_VERSION: u8 = 1;
/// Version, kind, then an 8-byte tag of the scope.
const CURSOR_HEADER: usize = 10;

/// Opaque continuation token: a position (the last key or namespace returned or inspected),
/// not a snapshot.
///
/// The core's own cursors, which every provider of this crate makes with the helpers of
/// [`provider`](crate::provider), name their operation and carry a tag of the scope they came
/// from (and, for a prefixed `list`, of the prefix), so a cursor passed to another operation,
/// another scope or another prefix is rejected as [`Invalid`](MemoryError::Invalid) instead of
/// silently starting somewhere else. The tag is a checksum against mistakes, not a secret: a
/// forged cursor can only name a position, never widen what the scope can read.
///
/// # Whose token it is
///
/// A `Cursor` is whatever token the provider put on a page, carried opaquely: the core asks
/// only that it is 1 to [`MAX_CURSOR_BYTES`](crate::validation::MAX_CURSOR_BYTES) printable
/// ASCII bytes ([`validation::cursor_token`](crate::validation::cursor_token)), and the
/// provider that gets it back judges it. The core's page checks
/// ([`PageRequestExt::key_page`](crate::provider::PageRequestExt::key_page) and its siblings) accept only the core's own cursors, so a
/// provider built on them refuses every other token as `Invalid` naming `cursor`. A provider
/// with cursors of its own (a store written in Python with its own format, say) returns them
/// through [`Cursor::parse`] and must refuse, as `Invalid` naming `cursor`, every token it did
/// not make for the same operation and scope (and prefix): the conformance suite checks that
/// with the core's cursors, which are foreign to it.
///
/// Callers pass cursors back as they got them; tokens that came from outside (a CLI flag, a
/// tool argument) parse with [`Cursor::parse`] or [`str::parse`].
///
/// ```
/// use agent_memory::provider::PageRequestExt;
/// use agent_memory::{Cursor, MemoryScope, PageRequest};
///
/// assert!(Cursor::parse("not a cursor").is_err()); // spaces: no provider's token
/// assert!("".parse::<Cursor>().is_err());
/// // A well-shaped token the core did not make is carried, and refused by the core's checks.
/// let theirs = Cursor::parse("v2.bGlzdA.42")?;
/// # use agent_memory::provider::CursorKind as Kind;
/// # let scope = MemoryScope::new("app", "user-1")?;
/// assert!(PageRequest::default().after(theirs).key_page(Kind::List, &scope).is_err());
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
    /// A cursor for `kind` in `scope` (and, for `list`, `prefix`, empty for none), positioned
    /// after `position`.
    pub(crate) fn for_scope(
        kind: CursorKind,
        scope: &MemoryScope,
        prefix: &str,
        options: &str,
        position: &str,
    ) -> Self {
        Self::encode(kind, scope_tag(kind, scope, prefix, options), position)
    }

    /// A [`CursorKind::Namespaces`] cursor for one application user, positioned after the
    /// namespace `position` (empty for the default namespace).
    pub(crate) fn for_user(application_id: &str, user_id: &str, position: &str) -> Self {
        Self::encode(CursorKind::Namespaces, user_tag(application_id, user_id), position)
    }

    /// A [`CursorKind::Users`] cursor for one application, positioned after the user id
    /// `position`.
    pub(crate) fn for_application(application_id: &str, position: &str) -> Self {
        Self::encode(CursorKind::Users, application_tag(application_id), position)
    }

    /// A [`CursorKind::Applications`] cursor, positioned after the application id `position`.
    pub(crate) fn for_applications(position: &str) -> Self {
        Self::encode(CursorKind::Applications, applications_tag(), position)
    }

    fn encode(kind: CursorKind, tag: u64, position: &str) -> Self {
        let mut bytes = Vec::with_capacity(CURSOR_HEADER + position.len());
        bytes.push(CURSOR_VERSION);
        bytes.push(kind.byte());
        bytes.extend_from_slice(&tag.to_be_bytes());
        bytes.extend_from_slice(position.as_bytes());
        Self(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Checks the shape of a token: one that came from outside (a tool argument, a CLI flag),
    /// or a provider's own (see [Whose token it is](Self#whose-token-it-is)). Whether it
    /// belongs to an operation and scope is for the provider to judge when it gets it back.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) naming `cursor` for a token no provider may produce:
    /// empty, longer than [`MAX_CURSOR_BYTES`](crate::validation::MAX_CURSOR_BYTES), or with a
    /// byte outside printable ASCII.
    pub fn parse(token: &str) -> Result<Self> {
        validation::cursor_token(token)?;
        Ok(Self(token.to_owned()))
    }

    /// The token as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is one of the core's own cursors (of any operation and scope) rather than
    /// a provider's own token. The conformance cases that forge or garble the core's format
    /// ask it of a store's real cursor first; an adapter that serves one operation from
    /// another (the Python bindings' `list_keys` from a store's `list`) asks it to know which
    /// tokens it may translate and which belong to the provider.
    ///
    /// ```
    /// use agent_memory::Cursor;
    /// assert!(!Cursor::parse("a-token-of-my-own")?.is_core_format());
    /// # Ok::<(), agent_memory::MemoryError>(())
    /// ```
    pub fn is_core_format(&self) -> bool {
        decode(&self.0).is_ok()
    }

    /// The position this cursor continues after, checked against the operation, the scope and
    /// the `list` prefix (empty for none).
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) when the cursor is malformed or came from another
    /// operation, scope or prefix.
    pub(crate) fn position(
        &self,
        kind: CursorKind,
        scope: &MemoryScope,
        prefix: &str,
        options: &str,
    ) -> Result<String> {
        let position = self.checked(kind, scope_tag(kind, scope, prefix, options))?;
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

    /// The user id a [`CursorKind::Users`] cursor continues after, checked against the
    /// application.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) when the cursor is malformed or came from another
    /// operation or application.
    pub(crate) fn user_position(&self, application_id: &str) -> Result<String> {
        let position = self.checked(CursorKind::Users, application_tag(application_id))?;
        validation::id("user_id", &position).map_err(|_| malformed())?;
        Ok(position)
    }

    /// The application id a [`CursorKind::Applications`] cursor continues after.
    ///
    /// # Errors
    /// [`Invalid`](MemoryError::Invalid) when the cursor is malformed or came from another
    /// operation.
    pub(crate) fn application_position(&self) -> Result<String> {
        let position = self.checked(CursorKind::Applications, applications_tag())?;
        validation::id("application_id", &position).map_err(|_| malformed())?;
        Ok(position)
    }

    fn checked(&self, kind: CursorKind, tag: u64) -> Result<String> {
        let (found_kind, found_tag, position) = decode(&self.0)?;
        if found_kind != kind.byte() {
            return Err(MemoryError::invalid("cursor", "belongs to another operation"));
        }
        if found_tag != tag && kind.takes_prefix() {
            return Err(MemoryError::invalid(
                "cursor",
                "belongs to another scope, prefix or metadata filter",
            ));
        }
        if found_tag != tag && kind == CursorKind::Search {
            return Err(MemoryError::invalid(
                "cursor",
                "belongs to another scope, match mode, case or metadata filter",
            ));
        }
        if found_tag != tag && kind == CursorKind::Users {
            return Err(MemoryError::invalid("cursor", "belongs to another application"));
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

/// The parts of one of the core's own cursors; any other token is malformed.
fn decode(token: &str) -> Result<(u8, u64, String)> {
    if validation::cursor_token(token).is_err() {
        return Err(malformed());
    }
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| malformed())?;
    if bytes.len() < CURSOR_HEADER || bytes[0] != CURSOR_VERSION {
        return Err(malformed());
    }
    let kind = bytes[1];
    if ![b'l', b's', b'p', b'n', b'u', b'a', b'k'].contains(&kind) {
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

/// The tag of one operation in one scope; a `list` prefix is a fifth part and the match mode,
/// case and metadata filter ([`options_tag`]) a sixth, so a prefixed or filtered listing's
/// cursors differ from every other listing's (and a plain request's tag stays as it was
/// before prefixes and filters existed).
fn scope_tag(kind: CursorKind, scope: &MemoryScope, prefix: &str, options: &str) -> u64 {
    let namespace = match scope.namespace() {
        Some(ns) => [b"n" as &[u8], ns.as_bytes()].concat(),
        None => b"d".to_vec(),
    };
    let parts: [&[u8]; 6] = [
        &[kind.byte()],
        scope.application_id().as_bytes(),
        scope.user_id().as_bytes(),
        &namespace,
        prefix.as_bytes(),
        options.as_bytes(),
    ];
    let count = match (prefix.is_empty(), options.is_empty()) {
        (true, true) => 4,
        (false, true) => 5,
        (_, false) => 6,
    };
    tag_of(&parts[..count])
}

fn user_tag(application_id: &str, user_id: &str) -> u64 {
    tag_of(&[&[CursorKind::Namespaces.byte()], application_id.as_bytes(), user_id.as_bytes()])
}

fn application_tag(application_id: &str) -> u64 {
    tag_of(&[&[CursorKind::Users.byte()], application_id.as_bytes()])
}

/// The store has one list of applications, so the tag names only the operation.
fn applications_tag() -> u64 {
    tag_of(&[&[CursorKind::Applications.byte()]])
}

crate::record::token_formatting!(Cursor);

impl std::str::FromStr for Cursor {
    type Err = MemoryError;

    /// As [`Cursor::parse`].
    fn from_str(token: &str) -> Result<Self> {
        Self::parse(token)
    }
}

impl TryFrom<String> for Cursor {
    type Error = MemoryError;

    /// As [`Cursor::parse`].
    fn try_from(token: String) -> Result<Self> {
        validation::cursor_token(&token)?;
        Ok(Self(token))
    }
}

impl From<Cursor> for String {
    fn from(cursor: Cursor) -> Self {
        cursor.0
    }
}
