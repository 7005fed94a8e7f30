//! The orchestrator's errors, split by what the user should do: fix the command or the
//! configuration (exit 2), or look at what went wrong in the run (exit 1).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SwarmError {
    /// A bad graph, flag, config or repository: nothing was started.
    #[error("{0}")]
    Usage(String),
    /// The run stopped for a reason it cannot get past alone (e.g. the climb's baseline
    /// broke); it stays resumable.
    #[error("{0}")]
    Stopped(String),
    #[error("{command} failed in {}: {message}", dir.display())]
    Git { command: String, dir: PathBuf, message: String },
    /// The run's state could not be read or written (the run stops there).
    #[error(transparent)]
    Store(#[from] kestrel_store::StoreError),
    /// The daemon could not be reached or refused a request.
    #[error("the daemon: {0}")]
    Daemon(String),
    /// The Ray cluster or a job on it (the `ray` executor).
    #[error("{0}")]
    Ray(String),
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SwarmError {
    /// 2 for usage and configuration errors, 1 for everything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            SwarmError::Usage(_) => 2,
            // An unknown or ambiguous run, a run another orchestrator holds, a bad graph.
            SwarmError::Store(error) if error.is_usage() => 2,
            SwarmError::Git { .. }
            | SwarmError::Stopped(_)
            | SwarmError::Store(_)
            | SwarmError::Daemon(_)
            | SwarmError::Ray(_)
            | SwarmError::Io { .. } => 1,
        }
    }

    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SwarmError::Io { what, path: path.into(), source }
    }
}
