//! What a path holds, as far as undo cares: nothing, a file (content hash and mode), a
//! symlink, or something that is not saved (a directory, a file too large to keep).
//! Capturing a state can save the content; restoring one writes it back atomically.

use super::blobs::BlobStore;
use crate::workspace::Place;
use serde::{Deserialize, Serialize};
use std::io::{self, ErrorKind};
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

/// The state of `path` now; with `blobs`, a file's content is saved there too. No
/// symlink is followed on the way (a directory replaced by a symlink would lead outside
/// what was checkpointed): such a path fails, and becomes a conflict undo lists.
///
/// Fails when the path exists but cannot be read (or saved), or a directory on its way
/// is a symlink.
pub(crate) fn capture(path: &Path, blobs: Option<&BlobStore>) -> io::Result<FileState> {
    let place = match Place::open_no_symlinks(path, false) {
        Ok(place) => place,
        Err(error) if matches!(error.kind(), ErrorKind::NotFound) => {
            return Ok(FileState::Absent);
        }
        Err(error) => return Err(explain(path, error)),
    };
    let Some(status) = place.entry_status()? else {
        return Ok(FileState::Absent);
    };
    match status.st_mode & libc::S_IFMT {
        libc::S_IFLNK => return Ok(FileState::Symlink { target: place.read_link()? }),
        libc::S_IFDIR => return Ok(FileState::Unsaved { reason: "a directory".into() }),
        libc::S_IFREG => {}
        _ => return Ok(FileState::Unsaved { reason: "not a regular file".into() }),
    }
    if u64::try_from(status.st_size).unwrap_or(u64::MAX) > MAX_SAVED_BYTES {
        return Ok(FileState::Unsaved {
            reason: format!("a file over {} MiB, too large to save", MAX_SAVED_BYTES >> 20),
        });
    }
    let Some(content) = place.read()? else {
        return Ok(FileState::Absent);
    };
    let sha256 = match blobs {
        Some(blobs) => blobs.put(&content.bytes)?,
        None => super::blobs::sha256(&content.bytes),
    };
    Ok(FileState::File { sha256, mode: content.mode })
}

/// Names the symlink refusal for people.
fn explain(path: &Path, error: io::Error) -> io::Error {
    match error.raw_os_error() {
        Some(libc::ELOOP) => io::Error::new(
            ErrorKind::InvalidInput,
            "a directory on its way is a symlink (not followed, so nothing outside is touched)",
        ),
        Some(libc::ENOTDIR) => io::Error::new(
            ErrorKind::NotADirectory,
            format!("a parent of {} is not a directory now", path.display()),
        ),
        _ => error,
    }
}

/// Puts `state` back at `path`: a file's content from `blobs` (written to a temporary
/// file beside it, then renamed over it), a symlink, or removal. Like [`capture`], it
/// never follows a symlink on the way.
///
/// Fails when the content is missing from the store, is not what the hash says, a
/// directory on the way is a symlink, or the file system refuses; a directory is never
/// removed.
pub(crate) fn restore(path: &Path, state: &FileState, blobs: &BlobStore) -> io::Result<()> {
    match state {
        FileState::Absent => match Place::open_no_symlinks(path, false) {
            Ok(place) => remove(&place),
            Err(error) if matches!(error.kind(), ErrorKind::NotFound) => Ok(()),
            Err(error) => Err(explain(path, error)),
        },
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
            let place =
                Place::open_no_symlinks(path, true).map_err(|error| explain(path, error))?;
            if place
                .entry_status()?
                .is_some_and(|status| status.st_mode & libc::S_IFMT == libc::S_IFDIR)
            {
                return Err(io::Error::other("it is a directory now"));
            }
            place.replace(&content, Some(*mode))
        }
        FileState::Symlink { target } => {
            let place =
                Place::open_no_symlinks(path, true).map_err(|error| explain(path, error))?;
            remove(&place)?;
            place.make_symlink(target)
        }
        FileState::Unsaved { reason } => {
            Err(io::Error::other(format!("it was not saved ({reason})")))
        }
    }
}

/// Removes a file or symlink; nothing there is fine, a directory is an error.
fn remove(place: &Place) -> io::Result<()> {
    match place.entry_status()? {
        Some(status) if status.st_mode & libc::S_IFMT == libc::S_IFDIR => {
            Err(io::Error::other("it is a directory now"))
        }
        Some(_) => place.remove_file(),
        None => Ok(()),
    }
}
