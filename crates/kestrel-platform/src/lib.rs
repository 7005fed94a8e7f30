//! The OS seam: everything that differs between Unix and Windows lives behind this
//! crate (process groups and tree kills, IPC endpoints, sandbox primitives).

pub mod ipc;
pub mod process;
pub mod sandbox;

pub use ipc::{Endpoint, IpcError};
#[cfg(unix)]
pub use ipc::{IpcStream, Listener, connect_or_start, spawn_detached};
pub use process::{
    ProcessGroup, Signal, exit_signal, group_exists, kill_all_groups, kill_group, shell_command,
    spawn_group,
};
pub use sandbox::{
    SANDBOX_ENV, Sandbox, SandboxError, SandboxKind, SandboxPolicy, SandboxUnavailable,
};
