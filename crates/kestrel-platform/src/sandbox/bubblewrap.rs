//! The bubblewrap backend: `bwrap` mounts `/` read-only in a new mount namespace, gives
//! the command a minimal `/dev`, its own `/proc` in a new PID namespace (no
//! `/proc/<pid>/root` of a host process to write through), empty tmpfs over the
//! directories that hold other programs' sockets, binds the writable roots over all
//! that read-write and the protected paths read-only over them (later mounts cover
//! earlier ones: the order of the arguments is the order of the mounts), drops every
//! capability, and (network off) makes a new network namespace. Before `bwrap` execs,
//! the child starts a new session and installs the seccomp filter, which `bwrap` and
//! the command inherit. No `--new-session`: the command already has no terminal, and
//! staying in `bwrap`'s process group lets a timeout send it SIGTERM before SIGKILL.

use super::SandboxPolicy;
use super::capabilities;
use super::seccomp::SocketFilter;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::Command;

/// Directories of sockets and runtime state of other programs (the Docker and D-Bus
/// sockets live there), hidden behind an empty tmpfs.
const RUNTIME_DIRS: [&str; 2] = ["/run", "/var/run"];

/// Where DNS is configured; with systemd-resolved, a link into `/run`.
const RESOLV_CONF: &str = "/etc/resolv.conf";

/// The file `resolv_conf` leads to when a hidden directory holds it (systemd-resolved's
/// `/run/systemd/resolve/stub-resolv.conf`): it is bound back, or names would not resolve
/// with the network on.
fn hidden_resolver(hidden: &[PathBuf], resolv_conf: &Path) -> Option<PathBuf> {
    let target = resolv_conf.canonicalize().ok()?;
    let hidden_dirs: Vec<PathBuf> =
        hidden.iter().filter_map(|dir| dir.canonicalize().ok()).collect();
    hidden_dirs.iter().any(|dir| target.starts_with(dir)).then_some(target)
}

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

/// Runs `bwrap ... -- sh -c :` with the arguments and the child setup of a real command,
/// to see that it can set a sandbox up here.
///
/// Fails with bwrap's own message (e.g. no permission to create namespaces).
pub(super) fn probe(program: &Path, isolate_network: bool) -> Result<(), String> {
    let policy = SandboxPolicy {
        writable: Vec::new(),
        protected: Vec::new(),
        network: !isolate_network,
        contained: false,
    };
    let mut command = std::process::Command::new(program);
    command.args(arguments(&policy)).args(["--", "sh", "-c", ":"]);
    let filter = SocketFilter::new();
    // SAFETY: the hook only makes system calls on the filter prepared before the fork.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || child_setup(&filter));
    }
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

/// In the child, before `bwrap` execs: a new session, no new privileges, the filter.
/// Capabilities stay: `bwrap` running as root needs them to set up, and drops them for
/// the command itself (`--cap-drop ALL`).
fn child_setup(filter: &SocketFilter) -> io::Result<()> {
    // SAFETY: system calls only, in the forked child (see each function's contract).
    unsafe {
        super::new_session()?;
        capabilities::no_new_privileges()?;
        filter.install()
    }
}

/// bwrap's options for `policy`, in mount order.
fn arguments(policy: &SandboxPolicy) -> Vec<std::ffi::OsString> {
    let mut arguments: Vec<std::ffi::OsString> = Vec::new();
    let mut push =
        |parts: &[&std::ffi::OsStr]| arguments.extend(parts.iter().map(|part| part.to_os_string()));
    push(&["--ro-bind".as_ref(), "/".as_ref(), "/".as_ref()]);
    push(&["--dev".as_ref(), "/dev".as_ref()]);
    push(&["--unshare-pid".as_ref(), "--proc".as_ref(), "/proc".as_ref()]);
    let mut hidden: Vec<PathBuf> = RUNTIME_DIRS.iter().map(PathBuf::from).collect();
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|dir| !dir.is_empty()) {
        hidden.push(PathBuf::from(dir));
    }
    hidden.retain(|dir| {
        // A symlink (/var/run -> /run) is covered through its target.
        std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir())
    });
    for dir in &hidden {
        push(&["--tmpfs".as_ref(), dir.as_os_str()]);
    }
    if let Some(resolver) = hidden_resolver(&hidden, Path::new(RESOLV_CONF)) {
        push(&["--ro-bind".as_ref(), resolver.as_os_str(), resolver.as_os_str()]);
    }
    for path in &policy.writable {
        // `--dev` already made the standard devices; binding them again is not needed.
        if path.starts_with("/dev") && !path.starts_with("/dev/shm") {
            continue;
        }
        if path.exists() {
            push(&["--bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
    }
    for path in policy.protected_paths() {
        push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
    }
    if !policy.network {
        push(&["--unshare-net".as_ref()]);
    }
    push(&["--cap-drop".as_ref(), "ALL".as_ref(), "--die-with-parent".as_ref()]);
    arguments
}

/// `bwrap ... -- bash -lc SCRIPT` (or `-c`).
pub(super) fn command(
    program: &Path,
    script: &str,
    startup: crate::process::ShellStartup,
    policy: &SandboxPolicy,
) -> io::Result<Command> {
    let mut command = Command::new(program);
    command
        .args(arguments(policy))
        .arg("--")
        .arg(crate::process::bash_path())
        .args([startup.bash_flag(), script]);
    let filter = SocketFilter::new();
    // SAFETY: the hook only makes system calls on the filter prepared before the fork.
    unsafe {
        command.pre_exec(move || child_setup(&filter));
    }
    Ok(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolver_config_inside_a_hidden_directory_is_bound_back() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join("run");
        std::fs::create_dir_all(run.join("systemd/resolve")).unwrap();
        let stub = run.join("systemd/resolve/stub-resolv.conf");
        std::fs::write(&stub, "nameserver 127.0.0.53\n").unwrap();
        let link = root.path().join("resolv.conf");
        std::os::unix::fs::symlink(&stub, &link).unwrap();
        let hidden = vec![run.clone()];
        assert_eq!(hidden_resolver(&hidden, &link), Some(stub.canonicalize().unwrap()));

        let plain = root.path().join("plain.conf");
        std::fs::write(&plain, "nameserver 1.1.1.1\n").unwrap();
        assert_eq!(hidden_resolver(&hidden, &plain), None);
    }
}
