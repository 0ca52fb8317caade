//! The one way the CLI writes an output file (`export -o`, the API key file of `api-key add`
//! and `api-key revoke`), so every command treats links and special files alike.
//!
//! What the path names decides how it is written:
//!
//! - **A symbolic link** is followed to its final target (through a chain of links, relative
//!   ones read against their own folder): the link stays a link and the file it points to
//!   changes, so a server watching the real file sees the new content.
//! - **A regular file, or nothing yet**, is written atomically: a temporary file in the final
//!   target's folder (so the rename never crosses file systems), filled, flushed to the disk,
//!   then renamed over the target. A write that fails midway leaves the old file as it was. A
//!   new file is created `0600`; an existing file keeps its mode as [`Mode`] says, and its
//!   owner where the process may set it (root writing a user's file).
//! - **A character device or a FIFO** (`/dev/null`, `/dev/stdout`, a named pipe) is opened and
//!   written in place, never renamed over: a device stays a device.
//! - **Anything else** (a folder, a socket, a block device) is refused with a clear error
//!   before anything is written.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::exit::{CliError, CliResult};

/// How many links in a row are followed before the path is declared a loop (Linux's own limit).
const MAX_LINKS: usize = 40;

/// What mode an existing regular file keeps when it is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Memories are personal data: the file keeps its mode when that grants nothing to group
    /// or others, and becomes `0600` otherwise.
    Private,
    /// The file keeps whatever mode it had (the key file: an operator may have made it
    /// readable by the server's group). New files are `0600` all the same.
    Keep,
}

/// An output file being written; nothing is visible at its path until [`finish`](Self::finish).
pub struct OutputFile {
    shown: PathBuf,
    sink: Sink,
}

enum Sink {
    /// A regular file: a temporary file renamed over `target` at the end.
    Replace { writer: BufWriter<tempfile::NamedTempFile>, target: PathBuf, mode: u32 },
    /// A character device or a FIFO, written where it is.
    InPlace(BufWriter<File>),
}

impl std::fmt::Debug for OutputFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputFile").field("path", &self.shown).finish_non_exhaustive()
    }
}

impl OutputFile {
    /// Prepares to write `path` as the module docs say.
    ///
    /// # Errors
    /// `Invalid` when `path` names a folder, a socket, a block device or a loop of links;
    /// `Failure` when the temporary file or the device cannot be opened.
    pub fn create(path: &Path, mode: Mode) -> CliResult<Self> {
        let shown = path.to_path_buf();
        let target = final_target(path)
            .map_err(|e| CliError::io(&format!("cannot follow {}", path.display()), &e))?;
        let existing = match fs::metadata(&target) {
            Ok(meta) => Some(meta),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => {
                return Err(CliError::io(&format!("cannot write {}", path.display()), &err))
            }
        };
        let sink = match existing {
            None => replace(&target, 0o600, None, path)?,
            Some(meta) if meta.is_file() => {
                let mode = kept_mode(&meta, mode);
                replace(&target, mode, Some(&meta), path)?
            }
            Some(meta) if is_stream(&meta) => {
                let file = OpenOptions::new()
                    .write(true)
                    .open(&target)
                    .map_err(|e| CliError::io(&format!("cannot write {}", path.display()), &e))?;
                Sink::InPlace(BufWriter::new(file))
            }
            Some(meta) => {
                return Err(CliError::invalid(format!(
                    "cannot write {}: it is {}, not a file, a character device or a FIFO",
                    path.display(),
                    kind_name(&meta)
                )))
            }
        };
        Ok(Self { shown, sink })
    }

    /// Makes the written bytes the file's content: flushes, and for a regular file syncs it to
    /// the disk and renames it into place.
    ///
    /// # Errors
    /// `Failure` when flushing, syncing or renaming fails; the old file is then untouched.
    pub fn finish(self) -> CliResult {
        let failed =
            |e: &io::Error| CliError::io(&format!("cannot write {}", self.shown.display()), e);
        match self.sink {
            Sink::InPlace(mut writer) => writer.flush().map_err(|e| failed(&e)),
            Sink::Replace { writer, target, mode } => {
                let temp = writer.into_inner().map_err(|e| failed(e.error()))?;
                set_mode(temp.as_file(), mode).map_err(|e| failed(&e))?;
                temp.as_file().sync_all().map_err(|e| failed(&e))?;
                temp.persist(&target).map_err(|e| failed(&e.error))?;
                Ok(())
            }
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.sink {
            Sink::Replace { writer, .. } => writer.write(buf),
            Sink::InPlace(writer) => writer.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.sink {
            Sink::Replace { writer, .. } => writer.flush(),
            Sink::InPlace(writer) => writer.flush(),
        }
    }
}

/// Writes `bytes` to `path` as the module docs say, in one call.
///
/// # Errors
/// As [`OutputFile::create`] and [`OutputFile::finish`].
pub fn write(path: &Path, mode: Mode, bytes: &[u8]) -> CliResult {
    let mut file = OutputFile::create(path, mode)?;
    file.write_all(bytes)
        .map_err(|e| CliError::io(&format!("cannot write {}", path.display()), &e))?;
    file.finish()
}

/// The path at the end of `path`'s chain of symbolic links (`path` itself when it is none);
/// the end may not exist yet (a dangling link names the file to create).
fn final_target(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let next = fs::read_link(&current)?;
                current = match current.parent() {
                    Some(parent) if next.is_relative() => parent.join(next),
                    _ => next,
                };
            }
            Ok(_) => return Ok(current),
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(current),
            Err(err) => return Err(err),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// A temporary file in `target`'s folder, to be renamed over `target`.
fn replace(
    target: &Path,
    mode: u32,
    existing: Option<&fs::Metadata>,
    shown: &Path,
) -> CliResult<Sink> {
    let folder = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    // tempfile creates it owner-only (0600), so nobody reads the content before the rename.
    let temp =
        tempfile::Builder::new().prefix(".agent-memory-").tempfile_in(folder).map_err(|e| {
            CliError::io(
                &format!("cannot write {}: cannot create a file beside it", shown.display()),
                &e,
            )
        })?;
    if let Some(meta) = existing {
        keep_owner(temp.as_file(), meta);
    }
    Ok(Sink::Replace { writer: BufWriter::new(temp), target: target.to_path_buf(), mode })
}

#[cfg(unix)]
fn is_stream(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    meta.file_type().is_char_device() || meta.file_type().is_fifo()
}

#[cfg(not(unix))]
fn is_stream(_meta: &fs::Metadata) -> bool {
    false
}

#[cfg(unix)]
fn kind_name(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn kind_name(meta: &fs::Metadata) -> &'static str {
    if meta.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

#[cfg(unix)]
fn kept_mode(meta: &fs::Metadata, mode: Mode) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    let existing = meta.permissions().mode() & 0o7777;
    match mode {
        Mode::Keep => existing,
        Mode::Private if existing & 0o077 == 0 => existing,
        Mode::Private => 0o600,
    }
}

#[cfg(not(unix))]
fn kept_mode(_meta: &fs::Metadata, _mode: Mode) -> u32 {
    0o600
}

#[cfg(unix)]
fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_file: &File, _mode: u32) -> io::Result<()> {
    Ok(())
}

/// Gives the replacement the replaced file's owner and group, where the process may (as root,
/// or a group it belongs to); otherwise it stays the process's own, as any new file would be.
#[cfg(unix)]
fn keep_owner(file: &File, meta: &fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    let _ = std::os::unix::fs::fchown(file, Some(meta.uid()), Some(meta.gid()));
}

#[cfg(not(unix))]
fn keep_owner(_file: &File, _meta: &fs::Metadata) {}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode_of(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_chain_of_links_is_written_at_its_end_and_stays_links() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("sub").join("real.jsonl");
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(&real, "old").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink("sub/real.jsonl", dir.path().join("one")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("one"), dir.path().join("two")).unwrap();
        write(&dir.path().join("two"), Mode::Keep, b"new").unwrap();
        assert!(fs::symlink_metadata(dir.path().join("two")).unwrap().file_type().is_symlink());
        assert!(fs::symlink_metadata(dir.path().join("one")).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(mode_of(&real), 0o640);
        // Private narrows a mode that lets others read, and keeps one that does not.
        write(&dir.path().join("two"), Mode::Private, b"newer").unwrap();
        assert_eq!(mode_of(&real), 0o600);
        fs::set_permissions(&real, fs::Permissions::from_mode(0o400)).unwrap();
        write(&real, Mode::Private, b"newest").unwrap();
        assert_eq!(mode_of(&real), 0o400);
    }

    #[test]
    fn a_dangling_link_creates_its_target_private() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("target.jsonl", dir.path().join("link")).unwrap();
        write(&dir.path().join("link"), Mode::Private, b"x").unwrap();
        assert_eq!(fs::read_to_string(dir.path().join("target.jsonl")).unwrap(), "x");
        assert_eq!(mode_of(&dir.path().join("target.jsonl")), 0o600);
    }

    #[test]
    fn folders_sockets_and_link_loops_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = write(dir.path(), Mode::Private, b"x").unwrap_err();
        assert!(err.message().contains("it is a directory"), "{}", err.message());
        let socket = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let err = write(&socket, Mode::Private, b"x").unwrap_err();
        assert!(err.message().contains("it is a socket"), "{}", err.message());
        std::os::unix::fs::symlink("b", dir.path().join("a")).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("b")).unwrap();
        let err = write(&dir.path().join("a"), Mode::Private, b"x").unwrap_err();
        assert!(err.message().contains("symbolic links"), "{}", err.message());
    }
}
