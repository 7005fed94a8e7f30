//! The Landlock backend's read-only view of the file system, made in the child's own
//! mount namespace before it execs. Landlock handles writes, but not chmod, chown,
//! utimes or extended attributes, and it cannot take a right back beneath a writable
//! root (`<workspace>/.git`). A read-only mount does both: every mount becomes
//! read-only, then the writable roots (bound onto themselves first) become writable
//! again, and the protected paths beneath them are bound read-only over that.
//! Devices keep working on a read-only mount: only regular files, directories and
//! links are refused.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// The paths to mount, prepared before `fork`.
#[derive(Debug)]
pub(super) struct ReadOnlyTree {
    writable: Vec<CString>,
    protected: Vec<CString>,
    root: CString,
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)
}

/// Whether `path` exists and is not a device (devices stay writable on a read-only mount).
fn is_mountable(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|meta| {
        let kind = meta.file_type();
        !kind.is_char_device() && !kind.is_block_device()
    })
}

impl ReadOnlyTree {
    /// Writable roots and protected paths that exist; the rest are skipped.
    pub(super) fn new(writable: &[PathBuf], protected: &[PathBuf]) -> io::Result<Self> {
        let existing = |paths: &[PathBuf]| -> io::Result<Vec<CString>> {
            paths.iter().filter(|path| is_mountable(path)).map(|path| c_path(path)).collect()
        };
        Ok(Self {
            writable: existing(writable)?,
            protected: existing(protected)?,
            root: c_path(Path::new("/"))?,
        })
    }

    /// Makes the mounts. Fails with the OS error of the first step that failed (the
    /// child can report no more than an errno).
    ///
    /// # Safety
    /// For a freshly forked child that is alone in a new mount namespace (a `pre_exec`
    /// hook after `unshare(CLONE_NEWNS)`): system calls on memory prepared before the fork.
    pub(super) unsafe fn apply(&self) -> io::Result<()> {
        // SAFETY (all blocks below): valid NUL-terminated paths and attribute structs
        // that live across each call.
        // Nothing done here may reach the caller's namespace.
        unsafe { mount(None, &self.root, libc::MS_REC | libc::MS_PRIVATE)? };
        for path in self.writable.iter().chain(&self.protected) {
            unsafe { mount(Some(path), path, libc::MS_BIND | libc::MS_REC)? };
        }
        unsafe { set_read_only(&self.root, true, AT_RECURSIVE)? };
        for path in &self.writable {
            match unsafe { set_read_only(path, false, 0) } {
                Ok(()) => {}
                // A mount that was read-only already stays so (locked in a user namespace).
                Err(error) if error.raw_os_error() == Some(libc::EPERM) => {}
                Err(error) => return Err(error),
            }
        }
        for path in &self.protected {
            unsafe { set_read_only(path, true, AT_RECURSIVE)? };
        }
        // The working directory (set before this hook) still points into the mount
        // beneath the new ones, which is read-only now: enter it again by its path.
        let mut cwd = [0 as libc::c_char; libc::PATH_MAX as usize];
        // SAFETY: the buffer is writable for its whole length.
        if unsafe { libc::getcwd(cwd.as_mut_ptr(), cwd.len()) }.is_null()
            // SAFETY: getcwd wrote a NUL-terminated path into the buffer.
            || unsafe { libc::chdir(cwd.as_ptr()) } != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// mount(2) without a file system type or data.
///
/// # Safety
/// `source` and `target` must be valid C strings (they are references).
unsafe fn mount(
    source: Option<&CString>,
    target: &CString,
    flags: libc::c_ulong,
) -> io::Result<()> {
    let source = source.map_or(std::ptr::null(), |source| source.as_ptr());
    // SAFETY: valid C strings or null, as mount(2) accepts for bind and propagation.
    let done =
        unsafe { libc::mount(source, target.as_ptr(), std::ptr::null(), flags, std::ptr::null()) };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// mount_setattr(2): sets or clears MOUNT_ATTR_RDONLY on the mount at `target`.
///
/// # Safety
/// `target` must be a valid C string (it is a reference).
unsafe fn set_read_only(target: &CString, read_only: bool, flags: libc::c_uint) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a valid path and a mount_attr of the size passed.
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
