//! Whether a session is live, for the code that removes its data. A worker (or exec)
//! locks its session's record while it has it open; between two workers of a daemon (a
//! restart after a crash, a `session/load` not yet answered) nothing does, yet the
//! session is live. So the daemon holds a shared lock on `run/live/<session>` for as long
//! as it serves the session ([`SessionHold`]), and a removal takes that file's lock
//! exclusively for as long as it removes ([`claim`]): a held session is live, and a
//! session being removed is not taken up by the daemon meanwhile.
//!
//! A removal removes the lock file before it unlocks it, so each side checks after
//! locking that the path still names the file it locked (else it locks the new one). A
//! hold never removes it: another hold of the same session may share the file, and a
//! removal must still find it locked.

use crate::StoreError;
use crate::paths::{KestrelHome, ensure_dir};
use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The daemon's hold on one session it serves; released on drop (the file stays: see
/// the module's notes).
#[derive(Debug)]
pub struct SessionHold {
    file: File,
}

impl SessionHold {
    /// Holds session `id` live, waiting while a removal of its data runs (one session's
    /// data: short). This blocks: async code calls [`SessionHold::try_take`] first.
    ///
    /// Fails when the lock file cannot be created or locked.
    pub fn take(home: &KestrelHome, id: &str) -> Result<Self, StoreError> {
        let path = hold_path(home, id);
        loop {
            let file = open(&path)?;
            file.lock_shared().map_err(|source| StoreError::io("lock", &path, source))?;
            if still_named(&file, &path) {
                return Ok(Self { file });
            }
        }
    }

    /// Like [`SessionHold::take`] without waiting: `None` while a removal of the
    /// session's data runs.
    ///
    /// Fails when the lock file cannot be created or locked.
    pub fn try_take(home: &KestrelHome, id: &str) -> Result<Option<Self>, StoreError> {
        let path = hold_path(home, id);
        loop {
            let file = open(&path)?;
            match file.try_lock_shared() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => return Ok(None),
                Err(TryLockError::Error(source)) => {
                    return Err(StoreError::io("lock", &path, source));
                }
            }
            if still_named(&file, &path) {
                return Ok(Some(Self { file }));
            }
        }
    }
}

impl Drop for SessionHold {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// A removal's claim on a session that is not live; released on drop.
#[derive(Debug)]
pub(crate) struct Claim {
    file: File,
    path: PathBuf,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// Claims session `id` for a removal: fails with [`StoreError::SessionLive`] while a
/// daemon holds it.
pub(crate) fn claim(home: &KestrelHome, id: &str) -> Result<Claim, StoreError> {
    let path = hold_path(home, id);
    loop {
        let file = open(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(StoreError::SessionLive { id: id.to_owned() });
            }
            Err(TryLockError::Error(source)) => return Err(StoreError::io("lock", &path, source)),
        }
        if still_named(&file, &path) {
            return Ok(Claim { file, path });
        }
    }
}

/// Removes the lock files of sessions whose data is gone (`gone` says which), each
/// under a claim so that a daemon taking one up meanwhile keeps its own: holds leave
/// their files behind (see the module's notes), one per session ever served. A held one
/// stays. Errors are ignored: the files are only locks, tried again at the next clean-up.
pub(crate) fn remove_stale(home: &KestrelHome, gone: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(home.run_dir().join("live")) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if gone(&name) {
            // The claim removes the file as it is dropped.
            drop(claim(home, &name));
        }
    }
}

/// `run/live/<id>`.
fn hold_path(home: &KestrelHome, id: &str) -> PathBuf {
    home.run_dir().join("live").join(id)
}

fn open(path: &Path) -> Result<File, StoreError> {
    if let Some(parent) = path.parent() {
        ensure_dir(parent)?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|source| StoreError::io("open", path, source))
}

/// Whether `path` still names `file` (no one removed it between the open and the lock).
fn still_named(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(held), Ok(named)) => held.ino() == named.ino() && held.dev() == named.dev(),
        _ => false,
    }
}
