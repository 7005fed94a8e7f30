//! Kestrel's per-user daemon (ARCHITECTURE §2): a socket server that routes ACP by
//! `sessionId` to one supervised worker process per session, fans updates out to every
//! attached client, and restarts crashed workers from their records. It links no
//! model, tool or agent code: messages are relayed mostly as JSON.

mod capacity;
pub mod client;
mod client_link;
mod error;
mod idle;
mod lineage;
mod log;
mod messages;
mod orphans;
mod permission;
mod router;
mod server;
mod session;
mod settings;
mod severable;
mod status;
mod supervisor;
mod worker;

pub use client_link::MAX_BACKLOG_BYTES;
pub use error::DaemonError;
pub use messages::{
    DAEMON_STATUS, DAEMON_STOP, SESSION_DETACH, SESSION_HISTORY, SESSION_SPAWN, SESSION_TURN,
    WORKER_RESTARTED,
};
pub use server::run;
pub use settings::{
    CLIENT_BACKLOG_ENV, DAEMON_IDLE_ENV, DEFAULT_DAEMON_IDLE, DaemonSettings, WORKER_IDLE_ENV,
    WorkerCommand,
};
pub use status::{DaemonStatus, SessionStatus};
