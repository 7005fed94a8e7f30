//! Checkpoints and undo (ARCHITECTURE §5, `checkpoint` items): before a call changes
//! files, what they were is saved, and after it a `checkpoint` item records each file
//! the call changed, before and after. `undo` puts the files of the last turns back,
//! refusing files the user changed since. Nothing a model does may lose the user's
//! work: undo itself is recorded the same way, with what it overwrote saved.
//!
//! - File tools (`write_file`, `edit_file`, `apply_patch`) name their paths: each is
//!   saved exactly before the call (content, mode, symlink target, or absence).
//! - Anything else that may change files (`shell`, every command; MCP tools) gets a
//!   snapshot of the workspace (snapshot.rs): every file's git blob id, computed here
//!   from the bytes on disk, with the content git lacks copied into a private object
//!   store under the checkpoint directory (objects.rs; the workspace's own object stores
//!   are alternates, so tracked content is never copied, and no repository code — filter,
//!   hook, fsmonitor — ever runs). Ignored files are walked too, within caps (walk.rs);
//!   what is left out is recorded as not snapshotted. After the call, the two snapshots
//!   are compared and the old content of what changed is copied out.
//!
//! Saved content lives in `$KESTREL_HOME/checkpoints/<session>/blobs/` (directories
//! 0700, files 0600), named by SHA-256. The item's JSON shape is [`CheckpointFiles`]
//! (documented in docs/permissions.md).

mod blobs;
pub(crate) mod ignores;
mod objects;
mod recorder;
mod snapshot;
mod state;
mod undo;
mod walk;
mod wire;

pub use recorder::{Capture, Checkpointer};
pub use snapshot::Snapshot;
pub use state::FileState;
pub use undo::{Conflict, UndoError, UndoOptions, UndoReport, undo};
pub use wire::undo_options;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The version of the checkpoint item's shape.
pub const CHECKPOINT_VERSION: u32 = 1;

/// The `files` value of a `checkpoint` record item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointFiles {
    pub version: u32,
    /// The session whose checkpoint directory holds the saved content (a fork's items
    /// keep naming the session they were made in).
    pub session: String,
    /// The tool call that made the changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Set on the checkpoint an undo writes: the turns it undid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo: Option<UndoMarker>,
    pub changes: Vec<PathChange>,
}

/// Which turns an undo undid (1-based, counted by `turn_started` items of the record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoMarker {
    pub turns: Vec<u64>,
}

/// One file a call (or an undo) changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathChange {
    /// Absolute.
    pub path: PathBuf,
    /// What it was; for a `file`, its content is saved under the checkpoint directory.
    pub before: FileState,
    /// What the change left.
    pub after: FileState,
}

/// `$KESTREL_HOME/checkpoints`.
pub fn checkpoints_dir(home: &kestrel_store::KestrelHome) -> PathBuf {
    home.checkpoints_dir()
}

/// The checkpoint directory of one session.
fn session_dir(home: &kestrel_store::KestrelHome, session: &str) -> PathBuf {
    checkpoints_dir(home).join(session)
}

/// Why a checkpoint could not be made (the call is then not run) or read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("cannot save a checkpoint of {}: {source}", path.display())]
    Save {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl CheckpointError {
    fn save(path: &Path, source: std::io::Error) -> Self {
        CheckpointError::Save { path: path.to_path_buf(), source }
    }
}
