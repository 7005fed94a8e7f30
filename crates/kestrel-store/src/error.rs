//! The store's error: every variant names the file or session it is about and, where
//! there is one, the fix.

use std::io;
use std::path::PathBuf;

/// Why a store operation (home, records, index) failed.
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
    /// True when the user asked for something that is not there (an unknown or ambiguous
    /// session, a fork point past the end): a usage error (exit 2), not a failure.
    pub fn is_usage(&self) -> bool {
        match self {
            StoreError::InvalidSessionId { .. }
            | StoreError::SessionNotFound { .. }
            | StoreError::NoSessions { .. }
            | StoreError::AmbiguousSession { .. }
            | StoreError::ForkOutOfRange { .. }
            | StoreError::NoHome => true,
            StoreError::Io { .. }
            | StoreError::Locked { .. }
            | StoreError::InvalidHeader { .. }
            | StoreError::SessionExists { .. }
            | StoreError::Encode { .. } => false,
        }
    }
}
