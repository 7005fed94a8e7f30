//! What `_kestrel/daemon/status` answers (and `kestrel daemon status` prints): the
//! daemon's pid and socket, and each session it has a worker for.

use serde::{Deserialize, Serialize};

/// The daemon as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonStatus {
    pub pid: u32,
    pub socket: String,
    /// Connected clients.
    pub clients: usize,
    pub sessions: Vec<SessionStatus>,
}

/// One session with a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStatus {
    pub session_id: String,
    /// The worker's pid (its process group id); `None` between a crash and its restart.
    pub worker_pid: Option<u32>,
    /// Clients attached to the session.
    pub clients: usize,
    /// Restarts after crashes so far.
    pub restarts: u32,
    /// `starting`, `live`, `restarting`, `failed` or `closed`.
    pub state: String,
}
