//! The daemon crate's one error type, for starting, running and talking to the daemon.

use kestrel_platform::IpcError;
use kestrel_protocol::jsonrpc::RpcError;
use std::path::PathBuf;

/// What can go wrong running the daemon or talking to it as a client.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The socket could not be bound, connected to or the daemon started.
    #[error(transparent)]
    Ipc(#[from] IpcError),
    /// The store (home, config, logs) could not be used.
    #[error(transparent)]
    Store(#[from] kestrel_store::StoreError),
    /// An environment override is not a number of seconds.
    #[error("{variable}={value:?} is not a number of seconds (e.g. 30 or 0.5)")]
    BadSeconds { variable: &'static str, value: String },
    /// An environment override is not a number of bytes.
    #[error("{variable}={value:?} is not a number of bytes")]
    BadBytes { variable: &'static str, value: String },
    /// No daemon listens on the socket.
    #[error("the daemon is not running (no one listens on {socket})")]
    NotRunning { socket: PathBuf },
    /// The daemon answered a request with an error, or went away mid-request.
    #[error("the daemon answered: {0}")]
    Rpc(#[from] RpcError),
    /// The daemon's answer did not have the documented shape.
    #[error("unexpected answer from the daemon: {0}")]
    BadAnswer(String),
    /// The daemon did not exit within the grace period after `stop`.
    #[error("the daemon (pid {pid}) did not exit within {waited:?} of being asked to stop")]
    StopTimeout { pid: u32, waited: std::time::Duration },
    /// An I/O failure outside the socket (signals, runtime).
    #[error("cannot {action}: {source}")]
    Io {
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
}
