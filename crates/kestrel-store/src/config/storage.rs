//! `[storage]`: how long checkpoint data (what undo puts back) is kept, and how much of
//! it at most (the `storage` module of the crate removes the rest).

use super::ConfigError;
use super::file::StorageTable;
use std::path::PathBuf;

/// Checkpoint data of sessions idle longer than this many days is removed.
pub const DEFAULT_CHECKPOINT_DAYS: u32 = 30;

/// Checkpoint data past this many megabytes is removed, least recently used first.
pub const DEFAULT_CHECKPOINT_MAX_MB: u64 = 5_000;

/// `[storage]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageSettings {
    /// Days a session's checkpoint data is kept after its last activity (at least 1).
    pub checkpoint_days: u32,
    /// Megabytes of checkpoint data kept at most, over all sessions (at least 1).
    pub checkpoint_max_mb: u64,
}

impl Default for StorageSettings {
    fn default() -> Self {
        Self {
            checkpoint_days: DEFAULT_CHECKPOINT_DAYS,
            checkpoint_max_mb: DEFAULT_CHECKPOINT_MAX_MB,
        }
    }
}

/// Checks `[storage]`; `path` names the file an error points at.
pub(super) fn resolve_storage(
    table: StorageTable,
    path: impl Fn() -> PathBuf,
) -> Result<StorageSettings, ConfigError> {
    let invalid = |key: &str| ConfigError::Invalid {
        path: path(),
        message: format!("`[storage] {key}` must be at least 1"),
    };
    let settings = StorageSettings {
        checkpoint_days: table.checkpoint_days.unwrap_or(DEFAULT_CHECKPOINT_DAYS),
        checkpoint_max_mb: table.checkpoint_max_mb.unwrap_or(DEFAULT_CHECKPOINT_MAX_MB),
    };
    if settings.checkpoint_days == 0 {
        return Err(invalid("checkpoint_days"));
    }
    if settings.checkpoint_max_mb == 0 {
        return Err(invalid("checkpoint_max_mb"));
    }
    Ok(settings)
}
