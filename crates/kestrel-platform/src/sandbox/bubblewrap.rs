//! The bubblewrap backend: `bwrap` mounts `/` read-only in a new mount namespace, binds
//! the writable roots over it read-write, gives the command a minimal `/dev`, and
//! (network off) a new network namespace. No `--new-session`: the command must stay in
//! the caller's process group so that a timeout or cancel can kill all of it.

use super::SandboxPolicy;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::Command;

/// `bwrap` on `PATH`.
pub(super) fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("bwrap")).find(|candidate| {
        use std::os::unix::fs::PermissionsExt;
        candidate
            .metadata()
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}

/// Runs `bwrap ... -- sh -c :` to see that it can set a sandbox up here.
///
/// Fails with bwrap's own message (e.g. no permission to create namespaces).
pub(super) fn probe(program: &Path, isolate_network: bool) -> Result<(), String> {
    let mut command = std::process::Command::new(program);
    command.args(["--ro-bind", "/", "/", "--dev", "/dev"]);
    if isolate_network {
        command.arg("--unshare-net");
    }
    command.args(["--", "sh", "-c", ":"]);
    let output = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        let message = String::from_utf8_lossy(&output.stderr).trim().to_string();
        Err(format!("{} cannot create a sandbox here: {message}", program.display()))
    }
}

/// `bwrap ... -- bash -lc SCRIPT`.
pub(super) fn command(program: &Path, script: &str, policy: &SandboxPolicy) -> Command {
    let mut command = Command::new(program);
    command.args(["--ro-bind", "/", "/", "--dev", "/dev"]);
    for path in &policy.writable {
        // `--dev` already made the standard devices; binding them again is not needed.
        if path.starts_with("/dev") && !path.starts_with("/dev/shm") {
            continue;
        }
        if path.exists() {
            command.arg("--bind").arg(path).arg(path);
        }
    }
    if !policy.network {
        command.arg("--unshare-net");
    }
    command.args(["--die-with-parent", "--", "bash", "-lc", script]);
    command
}
