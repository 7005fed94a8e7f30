//! Namespaces the Landlock backend's child enters before it execs: a new network
//! namespace when the network is off, where no interface is up (not even loopback), so
//! nothing on the host, `127.0.0.1` included, can be reached; a new mount namespace
//! for its read-only view of the file system (see `mounts`); and, for a contained
//! command, a new PID namespace for what it starts (see `pid_namespace`). Without `CAP_SYS_ADMIN`
//! they are created inside a new user namespace that maps the caller's own uid and gid,
//! so files keep their owner.

use std::ffi::CString;
use std::io;

/// What the child needs to enter its namespaces, prepared before `fork` so the child
/// only makes system calls (no allocation after `fork`).
#[derive(Debug)]
pub(super) struct Namespaces {
    flags: libc::c_int,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    uid_map_path: CString,
    gid_map_path: CString,
    setgroups_path: CString,
}

impl Namespaces {
    /// A new network namespace when `network` is false, a new mount namespace when
    /// `mounts` is true, a new PID namespace (for the children) when `pids` is true.
    pub(super) fn new(network: bool, mounts: bool, pids: bool) -> io::Result<Self> {
        // SAFETY: getuid/getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let path = |text: &str| CString::new(text).map_err(io::Error::other);
        let mut flags = 0;
        if !network {
            flags |= libc::CLONE_NEWNET;
        }
        if mounts {
            flags |= libc::CLONE_NEWNS;
        }
        if pids {
            flags |= libc::CLONE_NEWPID;
        }
        Ok(Self {
            flags,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            uid_map_path: path("/proc/self/uid_map")?,
            gid_map_path: path("/proc/self/gid_map")?,
            setgroups_path: path("/proc/self/setgroups")?,
        })
    }

    /// Moves the calling process into its new namespaces (nothing when none is wanted).
    ///
    /// # Safety
    /// Must run in a freshly forked, single-threaded child (a `pre_exec` hook): it only
    /// makes system calls, but a user namespace cannot be entered by a threaded process.
    pub(super) unsafe fn enter(&self) -> io::Result<()> {
        if self.flags == 0 {
            return Ok(());
        }
        // SAFETY: unshare(2) only changes this process's namespaces.
        if unsafe { libc::unshare(self.flags) } == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EPERM) {
            return Err(error);
        }
        // SAFETY: as above; the user namespace gives the capability the others need.
        if unsafe { libc::unshare(libc::CLONE_NEWUSER | self.flags) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the buffers and paths live as long as `self`, which outlives the call.
        unsafe {
            write_file(&self.uid_map_path, &self.uid_map)?;
            write_file(&self.setgroups_path, b"deny\n")?;
            write_file(&self.gid_map_path, &self.gid_map)?;
        }
        Ok(())
    }
}

/// open + write + close, system calls only.
///
/// # Safety
/// `path` must be a valid C string and `bytes` valid for reads (both are references).
unsafe fn write_file(path: &CString, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: a valid NUL-terminated path; the fd is closed on every path below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `bytes` is a live slice of the given length.
    let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    let error = io::Error::last_os_error();
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
    if usize::try_from(written).ok() == Some(bytes.len()) { Ok(()) } else { Err(error) }
}
