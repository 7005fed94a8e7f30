//! The OS seam: everything that differs between Unix and Windows lives behind this
//! crate (process groups and tree kills, IPC endpoints, sandbox primitives).

pub mod files;
pub mod ipc;
pub mod limits;
pub mod memory;
pub mod process;
pub mod sandbox;
pub mod secrets;
#[cfg(unix)]
pub mod socket_child;
pub mod started;

#[cfg(unix)]
pub use files::read_small_regular;
pub use ipc::{Endpoint, IpcError};
#[cfg(unix)]
pub use ipc::{IpcStream, Listener, connect_or_start, spawn_detached};
pub use limits::{OpenFileLimit, open_descriptors, out_of_files, raise_open_file_limit};
pub use memory::{ReadOnlyData, release_relocation_table, trim_heap};
pub use process::{
    ProcessGroup, ShellStartup, Signal, exit_signal, group_exists, kill_all_groups, kill_group,
    kill_groups_listed_in, mirror_groups_to, shell_command, shell_command_with, spawn_group,
    stop_mirroring_groups,
};
pub use sandbox::{
    METADATA_DEPTH, MetadataWatch, SANDBOX_ENV, Sandbox, SandboxError, SandboxKind, SandboxPolicy,
    SandboxUnavailable,
};
pub use secrets::{is_secret_name, remove_secret_variables};
#[cfg(unix)]
pub use socket_child::{SocketChild, spawn_socket_child};
pub use started::{group_started_by, process_started_by};
