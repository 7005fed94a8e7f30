//! The OS seam: everything that differs between Unix and Windows lives behind this
//! crate (process groups and tree kills, IPC endpoints, sandbox primitives).
