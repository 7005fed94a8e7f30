//! The store's one locking mechanism: `flock` through std's `File::try_lock`, held as long
//! as the `File` lives. Session records and swarm runs lock with it; a lock dies with its
//! process, so a crash never leaves one behind.

use crate::StoreError;
use std::fs::{File, TryLockError};
use std::path::Path;

/// Takes an exclusive lock on `file` without waiting: `Ok(false)` when another open
/// file (in this process or another) holds a lock on it.
pub(crate) fn try_lock_exclusive(file: &File, path: &Path) -> Result<bool, StoreError> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(source)) => Err(StoreError::io("lock", path, source)),
    }
}

/// Whether someone holds an exclusive lock on `path`, by taking a shared lock for a
/// moment (never a lasting one). A missing or unopenable file is not locked.
pub(crate) fn is_locked_exclusively(path: &Path) -> bool {
    let Ok(file) = File::open(path) else { return false };
    match file.try_lock_shared() {
        // Released when `file` closes.
        Ok(()) => false,
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(_)) => false,
    }
}
