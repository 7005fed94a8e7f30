//! The store's error: every variant names the file or session it is about and, where
//! there is one, the fix.

use crate::swarm_run::GraphError;
use std::io;
use std::path::PathBuf;

/// Why a store operation (home, records, index, swarm runs) failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Neither `$KESTREL_HOME` nor `$HOME` is set, so there is nowhere to keep anything.
    #[error("cannot find Kestrel's home directory: set KESTREL_HOME (or HOME)")]
    NoHome,

    /// A file system operation failed; `action` says what was being done to `path`.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Another process (or another handle in this one) holds the session's writer lock.
    #[error(
        "session {id} is already open in another process (locked: {}); attach to it instead of opening it twice",
        path.display()
    )]
    Locked { id: String, path: PathBuf },

    /// The record's first line is not a usable session header.
    #[error("{}: not a Kestrel session record: {reason}", path.display())]
    InvalidHeader { path: PathBuf, reason: String },

    /// A session id that cannot be a file name (empty, a path separator, a leading dot...).
    #[error("invalid session id `{id}`: ids contain only letters, digits, `-`, `_` and `.`")]
    InvalidSessionId { id: String },

    /// A record for this id already exists; ids are never reused.
    /// A removal found the session open in a worker (its record locked).
    #[error(
        "session {id} is open in a worker (or a daemon serves it): close it (or `kestrel daemon stop`) before removing it; nothing was removed"
    )]
    SessionLive { id: String },

    #[error("session {id} already exists at {}", path.display())]
    SessionExists { id: String, path: PathBuf },

    /// No session has this id or id prefix.
    #[error("no session matches `{query}`: `kestrel sessions` lists them")]
    SessionNotFound { query: String },

    /// `--last` found nothing to resume (in the given directory).
    #[error("no session to resume{}: start one with `kestrel` or `kestrel exec`", cwd.as_ref().map(|cwd| format!(" in {}", cwd.display())).unwrap_or_default())]
    NoSessions { cwd: Option<PathBuf> },

    /// An id prefix matches several sessions.
    #[error("`{query}` matches several sessions ({}): give more of the id", candidates.join(", "))]
    AmbiguousSession { query: String, candidates: Vec<String> },

    /// `fork --at N` past the source's last item.
    #[error("cannot fork session {id} at item {at}: it has only {items} items")]
    ForkOutOfRange { id: String, at: u64, items: u64 },

    /// A swarm run id that cannot be a directory name.
    #[error(
        "invalid swarm run id `{id}`: run ids are 1 to 128 letters, digits, `-` and `_` (`kestrel swarm list` shows them)"
    )]
    InvalidRunId { id: String },

    /// No swarm run has this id or id prefix.
    #[error("no swarm run matches `{query}`: `kestrel swarm list` lists them")]
    RunNotFound { query: String },

    /// A run id prefix matches several runs.
    #[error("`{query}` matches several swarm runs ({}): give more of the id", candidates.join(", "))]
    AmbiguousRun { query: String, candidates: Vec<String> },

    /// A run directory with this id already exists; run ids are never reused.
    #[error("swarm run {run} already exists at {}", path.display())]
    RunExists { run: String, path: PathBuf },

    /// Another orchestrator holds the run's lock.
    #[error(
        "another orchestrator is running swarm run {run}{} (lock: {}): wait for it to end or stop it first; `kestrel swarm status {run}` shows it",
        pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default(),
        path.display()
    )]
    RunLocked { run: String, pid: Option<u32>, path: PathBuf },

    /// A run's `graph.toml` cannot be read as a task graph.
    #[error("{}: {source}", path.display())]
    Graph {
        path: PathBuf,
        #[source]
        source: GraphError,
    },

    /// A run's event or graph could not be serialised (should not happen).
    #[error("cannot encode the {what} of swarm run {run}: {message}")]
    EncodeRun { run: String, what: &'static str, message: String },

    /// An item could not be serialised (should not happen for record types).
    #[error("cannot encode a record line for session {id}: {source}")]
    Encode {
        id: String,
        #[source]
        source: serde_json::Error,
    },
}

impl StoreError {
    /// Wraps an I/O error with what was being done and to which path.
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io { action, path: path.into(), source }
    }
}

impl StoreError {
    /// True when the user asked for something that is not there or cannot be (an unknown
    /// or ambiguous session or swarm run, a fork point past the end, a run another
    /// orchestrator holds, a task graph that cannot run): a usage error (exit 2), not a
    /// failure.
    pub fn is_usage(&self) -> bool {
        match self {
            StoreError::InvalidSessionId { .. }
            | StoreError::SessionNotFound { .. }
            | StoreError::NoSessions { .. }
            | StoreError::AmbiguousSession { .. }
            | StoreError::ForkOutOfRange { .. }
            | StoreError::InvalidRunId { .. }
            | StoreError::RunNotFound { .. }
            | StoreError::AmbiguousRun { .. }
            | StoreError::RunLocked { .. }
            | StoreError::Graph { .. }
            | StoreError::NoHome => true,
            StoreError::Io { .. }
            | StoreError::RunExists { .. }
            | StoreError::EncodeRun { .. }
            | StoreError::Locked { .. }
            | StoreError::SessionLive { .. }
            | StoreError::InvalidHeader { .. }
            | StoreError::SessionExists { .. }
            | StoreError::Encode { .. } => false,
        }
    }
}
