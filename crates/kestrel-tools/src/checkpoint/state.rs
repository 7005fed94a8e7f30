//! What a path holds, as far as undo cares: nothing, a file (content hash and mode), a
//! symlink, or something that is not saved (a directory, a file too large to keep).
//! Capturing a state can save the content; restoring one writes it back atomically.

use super::blobs::{BlobStore, sha256_file};
use serde::{Deserialize, Serialize};
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};

/// Files larger than this are not saved (their state is `unsaved`).
pub(crate) const MAX_SAVED_BYTES: u64 = 256 * 1024 * 1024;

/// The state of one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FileState {
    /// Nothing at the path.
    Absent,
    /// A regular file: the SHA-256 of its content (hex) and its permission bits.
    File { sha256: String, mode: u32 },
    /// A symbolic link and where it points.
    Symlink { target: PathBuf },
    /// Something undo cannot put back (a directory, a device, a file over the size cap).
    Unsaved { reason: String },
}

impl FileState {
    /// For people: "absent", "a file", "a symlink to x", the reason.
    pub fn describe(&self) -> String {
        match self {
            FileState::Absent => "absent".into(),
            FileState::File { .. } => "a file".into(),
            FileState::Symlink { target } => format!("a symlink to {}", target.display()),
            FileState::Unsaved { reason } => reason.clone(),
        }
    }
}

/// The state of `path` now; with `blobs`, a file's content is saved there too.
///
/// Fails when the path exists but cannot be read (or saved).
pub(crate) fn capture(path: &Path, blobs: Option<&BlobStore>) -> io::Result<FileState> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(FileState::Absent);
        }
        Err(error) => return Err(error),
    };
    let kind = metadata.file_type();
    if kind.is_symlink() {
        return Ok(FileState::Symlink { target: std::fs::read_link(path)? });
    }
    if kind.is_dir() {
        return Ok(FileState::Unsaved { reason: "a directory".into() });
    }
    if !kind.is_file() {
        return Ok(FileState::Unsaved { reason: "not a regular file".into() });
    }
    if metadata.len() > MAX_SAVED_BYTES {
        return Ok(FileState::Unsaved {
            reason: format!("a file over {} MiB, too large to save", MAX_SAVED_BYTES >> 20),
        });
    }
    let sha256 = match blobs {
        Some(blobs) => blobs.put_file(path)?,
        None => sha256_file(path)?,
    };
    Ok(FileState::File { sha256, mode: mode_of(&metadata) })
}

#[cfg(unix)]
fn mode_of(metadata: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    metadata.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_of(metadata: &std::fs::Metadata) -> u32 {
    if metadata.permissions().readonly() { 0o444 } else { 0o644 }
}

/// Puts `state` back at `path`: a file's content from `blobs` (written to a temporary
/// file beside it, then renamed over it), a symlink, or removal.
///
/// Fails when the content is missing from the store, is not what the hash says, or the
/// file system refuses; a directory is never removed.
pub(crate) fn restore(path: &Path, state: &FileState, blobs: &BlobStore) -> io::Result<()> {
    match state {
        FileState::Absent => remove(path),
        FileState::File { sha256, mode } => {
            let content = blobs.get(sha256).map_err(|error| {
                io::Error::new(
                    error.kind(),
                    format!("the saved content {sha256} is missing: {error}"),
                )
            })?;
            if super::blobs::sha256(&content) != *sha256 {
                return Err(io::Error::other(format!("the saved content {sha256} is damaged")));
            }
            write_atomically(path, &content, *mode)
        }
        FileState::Symlink { target } => {
            remove(path)?;
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            symlink(target, path)
        }
        FileState::Unsaved { reason } => {
            Err(io::Error::other(format!("it was not saved ({reason})")))
        }
    }
}

/// Removes a file or symlink; nothing there is fine, a directory is an error.
fn remove(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.is_dir() => Err(io::Error::other("it is a directory now")),
        Ok(_) => std::fs::remove_file(path),
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            Ok(())
        }
        Err(error) => Err(error),
    }
}

fn write_atomically(path: &Path, content: &[u8], mode: u32) -> io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    if std::fs::symlink_metadata(path).is_ok_and(|metadata| metadata.is_dir()) {
        return Err(io::Error::other("it is a directory now"));
    }
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    // An unpredictable name, created new: a symlink planted at a guessable name must
    // not redirect the restored content elsewhere.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    let temp = parent.join(format!(".{name}.kestrel-undo-{}-{nanos:09}", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&temp)?;
        file.write_all(content)?;
        set_mode(&file, mode)?;
        file.sync_all()
    })();
    if let Err(error) = written.and_then(|()| std::fs::rename(&temp, path)) {
        let _ = std::fs::remove_file(&temp);
        return Err(error);
    }
    Ok(())
}

#[cfg(unix)]
fn set_mode(file: &std::fs::File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_file: &std::fs::File, _mode: u32) -> io::Result<()> {
    Ok(())
}

#[cfg(unix)]
fn symlink(target: &Path, path: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, path)
}

#[cfg(not(unix))]
fn symlink(_target: &Path, _path: &Path) -> io::Result<()> {
    Err(io::Error::new(ErrorKind::Unsupported, "symlinks cannot be restored on this OS"))
}
