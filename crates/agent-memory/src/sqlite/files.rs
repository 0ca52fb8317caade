//! The files a writable store creates, private to their owner.
//!
//! On Unix a created folder is `0700` and a created database file `0600`, whatever the
//! process's umask: memories are readable by the user running the store and nobody else on the
//! machine. SQLite creates the write-ahead log (`-wal`) and the shared-memory index (`-shm`)
//! with the database file's own permission bits, so they are `0600` too. An existing folder or
//! file keeps the mode it has: the store never loosens or tightens what an operator chose.

use std::io;
use std::path::Path;

use super::error::PROVIDER;
use crate::error::{MemoryError, Result};

/// Creates the missing folders above `path` and, when absent, an empty database file at
/// `path` (an empty file is a new SQLite database), both private.
///
/// # Errors
/// [`Storage`](MemoryError::Storage) when a folder or the file cannot be created.
pub(super) fn create_private(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_folders(parent).map_err(|err| {
            MemoryError::storage_from(PROVIDER, "creating the database folder failed", err)
        })?;
    }
    create_file(path).map_err(|err| {
        MemoryError::storage_from(PROVIDER, "creating the database file failed", err)
    })
}

#[cfg(unix)]
fn create_folders(folder: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};

    // The folders that do not exist yet, outermost first: only these get the private mode.
    let mut missing = Vec::new();
    let mut next = Some(folder);
    while let Some(dir) = next.filter(|d| !d.as_os_str().is_empty()) {
        if dir.exists() {
            break;
        }
        missing.push(dir);
        next = dir.parent();
    }
    for dir in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            // The umask may have removed bits from 0700; set the mode itself.
            Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?,
            // Another process made it in between: it is theirs to keep as it is.
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn create_folders(folder: &Path) -> io::Result<()> {
    std::fs::create_dir_all(folder)
}

#[cfg(unix)]
fn create_file(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(file) => file.set_permissions(std::fs::Permissions::from_mode(0o600)),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

#[cfg(not(unix))]
fn create_file(_path: &Path) -> io::Result<()> {
    // SQLite creates the file itself, with the platform's default permissions.
    Ok(())
}
