//! The OS seam: everything that differs between Unix and Windows lives behind this
//! crate (process groups and tree kills, IPC endpoints, sandbox primitives).

pub mod process;

pub use process::{
    ProcessGroup, Signal, exit_signal, group_exists, kill_group, shell_command, spawn_group,
};
