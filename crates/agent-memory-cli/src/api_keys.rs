//! API keys for the remote MCP server (`mcp --listen … --api-keys FILE`): the key format, the
//! key file, and how keys are made.
//!
//! A key looks like `amk_<id>_<secret>`: `id` is 12 hex digits (6 random bytes) that name the
//! key in the file, in `api-key list` and in logs, and is not secret; `secret` is 64 hex digits
//! (32 random bytes from the operating system, 256 bits). The key is shown once, when it is
//! made; the file keeps only its SHA-256. A fast hash is right here because the key is random
//! and long: nobody can guess their way back from the hash, so the slow, salted hashes made for
//! human passwords would only cost time on every request.
//!
//! The file holds one JSON object per line ([`KeyEntry`]). `api-key add` appends one line with
//! a single write to a file it creates with mode 0600; `api-key revoke` rewrites the whole file
//! into a temporary file beside it and renames it into place, keeping the file's mode, so a
//! reader sees either the old file or the new one, never half of each. Both follow a symbolic
//! link to the real file (through [`crate::files`] for the rewrite), so the file a server
//! watches is the one that changes. Do not run `add` and
//! `revoke` on the same file at the same moment: a key added during a revoke's rewrite is lost
//! (the revoke wins), and `add` prints it anyway.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use agent_memory::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What every key starts with, so a leaked key is easy to recognise (and to tell from a JWT).
pub const KEY_PREFIX: &str = "amk_";
/// The only hash algorithm a key file names.
pub const HASH_ALGORITHM: &str = "sha256";
/// Random bytes in a key id.
const ID_BYTES: usize = 6;
/// Random bytes in a key's secret part: 256 bits.
const SECRET_BYTES: usize = 32;

/// One line of the key file: a key's hash and what it grants.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    /// The key's id, the non-secret part of the key.
    pub id: String,
    /// Always [`HASH_ALGORITHM`].
    pub hash_algorithm: String,
    /// SHA-256 of the whole key, as 64 lowercase hex digits.
    pub hash: String,
    /// The application the key is for (`api-key add --app`): a server of another application
    /// refuses it. Entries without one (written before keys named their application, or by
    /// `add` without `--app`) work for whichever application the server reading the file has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// The user the key acts for.
    pub user: String,
    /// The namespace the key acts in; the default namespace when `None`.
    pub namespace: Option<String>,
    /// True when the key may only call the read tools.
    pub read_only: bool,
    /// The operator's note about the key (who has it, what for).
    pub label: Option<String>,
    /// When the key was made.
    pub created_at: Timestamp,
    /// When the key was revoked; a revoked key is refused.
    pub revoked_at: Option<Timestamp>,
}

impl fmt::Debug for KeyEntry {
    /// The id and the access only: the user and the label are personal data.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyEntry")
            .field("id", &self.id)
            .field("read_only", &self.read_only)
            .field("revoked", &self.revoked_at.is_some())
            .finish_non_exhaustive()
    }
}

impl KeyEntry {
    /// A new key for `user` (and `namespace`), with an id none of `taken` has. Returns the key,
    /// to be shown once, and the entry to store.
    ///
    /// # Errors
    /// When the operating system's random source fails.
    pub fn generate(
        user: String,
        namespace: Option<String>,
        read_only: bool,
        label: Option<String>,
        taken: &[KeyEntry],
    ) -> io::Result<(String, KeyEntry)> {
        let id = loop {
            let id = hex(&random::<ID_BYTES>()?);
            if !taken.iter().any(|entry| entry.id == id) {
                break id;
            }
        };
        let key = format!("{KEY_PREFIX}{id}_{}", hex(&random::<SECRET_BYTES>()?));
        let entry = KeyEntry {
            id,
            hash_algorithm: HASH_ALGORITHM.to_owned(),
            hash: hex(&key_hash(&key)),
            app: None,
            user,
            namespace,
            read_only,
            label,
            created_at: Timestamp::now(),
            revoked_at: None,
        };
        Ok((key, entry))
    }

    /// The stored hash as bytes, when the entry names SHA-256 and the hex is well formed.
    pub fn hash_bytes(&self) -> Option<[u8; 32]> {
        if self.hash_algorithm != HASH_ALGORITHM {
            return None;
        }
        unhex::<32>(&self.hash)
    }
}

/// The SHA-256 of a presented key: what the file stores and what is compared.
pub fn key_hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// The id of a key that has the key format, without checking the key against anything.
pub fn key_id(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(KEY_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let well_formed = id.len() == 2 * ID_BYTES
        && secret.len() == 2 * SECRET_BYTES
        && id.bytes().chain(secret.bytes()).all(|b| b.is_ascii_hexdigit());
    well_formed.then_some(id)
}

/// Why a key file could not be used.
#[derive(Debug)]
pub enum FileError {
    /// The file could not be read.
    Io(io::Error),
    /// The last line has no newline yet: a write is in progress; read again shortly.
    Incomplete,
    /// Line `line` (1-based) is not a key entry.
    Invalid {
        /// The line number.
        line: usize,
        /// What is wrong with it (never the line's text: it holds hashes and user ids).
        reason: String,
    },
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io(err) => write!(f, "cannot read the key file: {err}"),
            FileError::Incomplete => f.write_str("the key file's last line is incomplete"),
            FileError::Invalid { line, reason } => {
                write!(f, "line {line} of the key file is not a key entry: {reason}")
            }
        }
    }
}

/// Reads every entry of the key file at `path`.
///
/// # Errors
/// [`FileError`]: the file is unreadable, ends in an incomplete line, or holds a line that is
/// not an entry.
pub fn read(path: &Path) -> Result<Vec<KeyEntry>, FileError> {
    parse(&fs::read(path).map_err(FileError::Io)?)
}

/// Parses a key file's bytes: blank lines are skipped, every other line must be an entry, ids
/// must be unique.
///
/// # Errors
/// As [`read`].
pub fn parse(bytes: &[u8]) -> Result<Vec<KeyEntry>, FileError> {
    match parse_complete(bytes)? {
        (entries, false) => Ok(entries),
        (_, true) => Err(FileError::Incomplete),
    }
}

/// Parses the complete lines of a key file's bytes, as [`parse`], ignoring a last line that
/// has no newline yet; the flag says whether there was one. The server applies the complete
/// lines at once and treats such a tail as pending (see `mcp::http::reload`).
///
/// # Errors
/// As [`read`], except [`FileError::Incomplete`].
pub fn parse_complete(bytes: &[u8]) -> Result<(Vec<KeyEntry>, bool), FileError> {
    let (complete, tail_pending) = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => (&bytes[..=end], end + 1 < bytes.len()),
        None => (&bytes[..0], !bytes.is_empty()),
    };
    let mut entries: Vec<KeyEntry> = Vec::new();
    for (index, line) in complete.split(|&b| b == b'\n').enumerate() {
        let invalid = |reason: String| FileError::Invalid { line: index + 1, reason };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // serde's message names the field or position, never the value.
        let entry: KeyEntry =
            serde_json::from_slice(line).map_err(|err| invalid(err.to_string()))?;
        if entry.hash_bytes().is_none() {
            return Err(invalid(format!("the hash must be {HASH_ALGORITHM} as 64 hex digits")));
        }
        if entries.iter().any(|other| other.id == entry.id) {
            return Err(invalid("the id appears twice".to_owned()));
        }
        entries.push(entry);
    }
    Ok((entries, tail_pending))
}

/// Appends `entry` to the key file at `path` in one write, creating the file with mode 0600.
///
/// # Errors
/// When the file cannot be opened or written.
pub fn append(path: &Path, entry: &KeyEntry) -> io::Result<()> {
    let mut line = serde_json::to_vec(entry).map_err(io::Error::other)?;
    line.push(b'\n');
    let mut file = OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
    file.write_all(&line)?;
    file.sync_all()
}

/// Replaces the key file at `path` by `entries`, atomically and with the same mode, through
/// [`crate::files`]: a symbolic link is followed, so the file a server watches is the one that
/// changes.
///
/// # Errors
/// When the file cannot be written or renamed, or `path` is not a file.
pub fn rewrite(path: &Path, entries: &[KeyEntry]) -> Result<(), crate::exit::CliError> {
    let mut bytes = Vec::new();
    for entry in entries {
        serde_json::to_writer(&mut bytes, entry)
            .map_err(|err| crate::exit::CliError::failure(format!("cannot encode a key: {err}")))?;
        bytes.push(b'\n');
    }
    crate::files::write(path, crate::files::Mode::Keep, &bytes)
}

fn random<const N: usize>() -> io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|err| io::Error::other(err.to_string()))?;
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_key_has_the_format_and_matches_its_entry() {
        let (key, entry) = KeyEntry::generate("u".into(), None, false, None, &[]).unwrap();
        assert_eq!(key_id(&key), Some(entry.id.as_str()));
        assert_eq!(entry.hash_bytes(), Some(key_hash(&key)));
        assert_eq!(key.len(), KEY_PREFIX.len() + 12 + 1 + 64);
        let (other, _) = KeyEntry::generate("u".into(), None, false, None, &[]).unwrap();
        assert_ne!(key, other);
    }

    #[test]
    fn malformed_keys_have_no_id() {
        for key in [
            "",
            "amk_",
            "amk_abc_def",
            "Bearer x",
            &format!("amk_{}_{}", "g".repeat(12), "0".repeat(64)),
        ] {
            assert_eq!(key_id(key), None, "{key}");
        }
    }

    #[test]
    fn a_file_with_a_partial_last_line_is_incomplete_and_a_bad_line_is_named() {
        let (_, entry) = KeyEntry::generate("u".into(), None, true, None, &[]).unwrap();
        let mut bytes = serde_json::to_vec(&entry).unwrap();
        bytes.push(b'\n');
        assert_eq!(parse(&bytes).unwrap(), vec![entry.clone()]);
        assert!(matches!(parse(&bytes[..bytes.len() - 1]), Err(FileError::Incomplete)));
        bytes.extend_from_slice(b"{\"id\": 1}\n");
        assert!(matches!(parse(&bytes), Err(FileError::Invalid { line: 2, .. })));
    }

    #[test]
    fn debug_shows_no_user_or_hash() {
        let (_, entry) =
            KeyEntry::generate("alice@example.com".into(), None, false, Some("laptop".into()), &[])
                .unwrap();
        let shown = format!("{entry:?}");
        assert!(
            !shown.contains("alice") && !shown.contains(&entry.hash) && !shown.contains("laptop")
        );
    }
}
