//! The Landlock backend, by raw system calls (no crate needed for three calls). The
//! ruleset is built in this process — it handles only the ways to *change* the file
//! system, so reading and executing stay unrestricted — and the child applies it to
//! itself right before it execs (`pre_exec`): namespaces first (network off, and its own
//! mounts for the read-only view of `mounts`), then a new session, no new privileges,
//! the ruleset, no capabilities and the seccomp filter. Rights the running kernel does
//! not know are left out, so the rules work on every ABI version (1 = Linux 5.13 and
//! later); from ABI 6 the command is also scoped: no abstract unix sockets and no
//! signals to processes outside the sandbox.

use super::SandboxPolicy;
use super::capabilities;
use super::mounts::ReadOnlyTree;
use super::namespace::Namespaces;
use super::pid_namespace;
use super::seccomp::SocketFilter;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use tokio::process::Command;

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;

const WRITE_FILE: u64 = 1 << 1;
const REMOVE_DIR: u64 = 1 << 4;
const REMOVE_FILE: u64 = 1 << 5;
const MAKE_CHAR: u64 = 1 << 6;
const MAKE_DIR: u64 = 1 << 7;
const MAKE_REG: u64 = 1 << 8;
const MAKE_SOCK: u64 = 1 << 9;
const MAKE_FIFO: u64 = 1 << 10;
const MAKE_BLOCK: u64 = 1 << 11;
const MAKE_SYM: u64 = 1 << 12;
/// ABI 2: links and renames across directories.
const REFER: u64 = 1 << 13;
/// ABI 3: truncate(2) and O_TRUNC.
const TRUNCATE: u64 = 1 << 14;

/// ABI 6: no connecting to abstract unix sockets and no signals out of the sandbox.
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// `struct landlock_ruleset_attr` of ABI 6. Older kernels accept it whole as long as
/// the fields they do not know are zero.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed in the kernel's header).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI version the kernel supports.
///
/// Fails with the reason when the kernel has no Landlock or it is turned off.
pub(super) fn abi_version() -> Result<u32, String> {
    // SAFETY: with the VERSION flag, a null attribute and size 0 are what the call expects.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if version >= 1 {
        return u32::try_from(version).map_err(|_| "Landlock reported a bad ABI version".into());
    }
    let error = io::Error::last_os_error();
    Err(match error.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel has no Landlock support (Linux 5.13+ needed)".into(),
        Some(libc::EOPNOTSUPP) => {
            "Landlock is disabled in this kernel (add `landlock` to the lsm= boot parameter)".into()
        }
        _ => format!("Landlock is unavailable: {error}"),
    })
}

/// Whether a command can be confined here with this network setting: starts `sh -c :`
/// (not the login shell: a user's profile can cost 100+ ms) through every step of the child's setup (namespaces, mounts, Landlock, capabilities,
/// seccomp). Probed once per setting. Fails with the OS error of the step that failed.
pub(super) fn probe(abi: u32, network: bool) -> Result<(), String> {
    static WITH_NETWORK: OnceLock<Result<(), String>> = OnceLock::new();
    static WITHOUT_NETWORK: OnceLock<Result<(), String>> = OnceLock::new();
    let cell = if network { &WITH_NETWORK } else { &WITHOUT_NETWORK };
    cell.get_or_init(|| {
        let policy = SandboxPolicy::read_only(network);
        let mut plain = Command::new("sh");
        plain.args(["-c", ":"]);
        let mut command = confined(abi, plain, &policy).map_err(|error| error.to_string())?;
        // A failed setup step fails the spawn; the exit code does not matter.
        command
            .as_std_mut()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|_| ())
            .map_err(|error| error.to_string())
    })
    .clone()
}

/// Every write-like right this ABI knows.
fn handled_rights(abi: u32) -> u64 {
    let mut rights = WRITE_FILE
        | REMOVE_DIR
        | REMOVE_FILE
        | MAKE_CHAR
        | MAKE_DIR
        | MAKE_REG
        | MAKE_SOCK
        | MAKE_FIFO
        | MAKE_BLOCK
        | MAKE_SYM;
    if abi >= 2 {
        rights |= REFER;
    }
    if abi >= 3 {
        rights |= TRUNCATE;
    }
    rights
}

/// The rights that make sense on a file that is not a directory.
fn file_rights(abi: u32) -> u64 {
    if abi >= 3 { WRITE_FILE | TRUNCATE } else { WRITE_FILE }
}

/// `bash -lc SCRIPT` (or `-c`) that confines itself to `policy` before it execs.
pub(super) fn command(
    abi: u32,
    script: &str,
    startup: crate::process::ShellStartup,
    policy: &SandboxPolicy,
) -> io::Result<Command> {
    confined(abi, crate::process::shell_command_with(script, startup), policy)
}

/// `command`, made to confine itself to `policy` before it execs.
fn confined(abi: u32, mut command: Command, policy: &SandboxPolicy) -> io::Result<Command> {
    let ruleset = Arc::new(ruleset(abi, &policy.writable)?);
    let namespaces = Namespaces::new(policy.network, true, policy.contained)?;
    let contained = policy.contained;
    let tree = ReadOnlyTree::new(&policy.writable, &policy.protected_paths())?;
    let filter = SocketFilter::new();
    let hook = move || -> io::Result<()> {
        // SAFETY: this runs in the forked child before exec, on data prepared before the
        // fork (see each function's contract); the order matters: mounts need the
        // capabilities that are dropped last, Landlock forbids mounting once applied.
        unsafe {
            namespaces.enter()?;
            tree.apply()?;
            super::new_session()?;
            capabilities::no_new_privileges()?;
            restrict_self(&ruleset)?;
            capabilities::drop_all()?;
            filter.install()?;
            if contained { pid_namespace::fork_into() } else { Ok(()) }
        }
    };
    // SAFETY: the hook only makes system calls on data prepared before the fork.
    unsafe {
        command.pre_exec(hook);
    }
    Ok(command)
}

/// A ruleset that handles every write right and grants them beneath `writable`.
fn ruleset(abi: u32, writable: &[std::path::PathBuf]) -> io::Result<OwnedFd> {
    let handled = handled_rights(abi);
    let scoped = if abi >= 6 { SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL } else { 0 };
    let attr = RulesetAttr { handled_access_fs: handled, handled_access_net: 0, scoped };
    // SAFETY: `attr` is a valid ruleset attribute of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let Ok(fd) = i32::try_from(fd) else {
        return Err(io::Error::other("landlock_create_ruleset returned a bad descriptor"));
    };
    // SAFETY: the call returned a new descriptor that nothing else owns.
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd) };
    for path in writable {
        let Some((target, is_dir)) = open_path(path) else { continue };
        let allowed = if is_dir { handled } else { file_rights(abi) & handled };
        let rule = PathBeneathAttr { allowed_access: allowed, parent_fd: target.as_raw_fd() };
        // SAFETY: `rule` is a valid path-beneath attribute and both fds are open.
        let added = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset.as_raw_fd(),
                RULE_PATH_BENEATH,
                &rule as *const PathBeneathAttr,
                0u32,
            )
        };
        if added != 0 {
            let error = io::Error::last_os_error();
            return Err(io::Error::new(
                error.kind(),
                format!("cannot allow writes beneath {}: {error}", path.display()),
            ));
        }
    }
    Ok(ruleset)
}

/// An `O_PATH` descriptor of `path` and whether it is a directory; `None` when it does
/// not exist (a missing `$TMPDIR` is no reason to fail).
fn open_path(path: &Path) -> Option<(OwnedFd, bool)> {
    let text = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid NUL-terminated path; O_PATH opens nothing for reading or writing.
    let fd = unsafe { libc::open(text.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let is_dir = std::fs::metadata(path).ok()?.is_dir();
    Some((fd, is_dir))
}

/// In the child, after `no_new_privileges`: applies the ruleset.
fn restrict_self(ruleset: &OwnedFd) -> io::Result<()> {
    // SAFETY: the ruleset fd is open (the closure holding it lives until after exec).
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
