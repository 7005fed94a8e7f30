//! Privileges a sandboxed command gives up in the child, before it execs: no new
//! privileges (setuid and file capabilities stop working), an empty bounding set, no
//! ambient, inheritable, permitted or effective capabilities. Root inside the sandbox is
//! then uid 0 without CAP_SYS_TIME, CAP_CHOWN, CAP_DAC_OVERRIDE and the rest: it cannot
//! set the clock, and only the owner's permissions let it touch a file.

use std::io;

const PR_CAPBSET_DROP: libc::c_int = 24;
const PR_CAP_AMBIENT: libc::c_int = 47;
const PR_CAP_AMBIENT_CLEAR_ALL: libc::c_ulong = 4;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// Beyond the highest capability any kernel knows (40 in Linux 6.x); the loop stops at
/// the first one this kernel rejects as unknown.
const CAPABILITY_LIMIT: libc::c_ulong = 64;

#[repr(C)]
struct CapabilityHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapabilityData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Sets `PR_SET_NO_NEW_PRIVS`: needed for Landlock and seccomp without CAP_SYS_ADMIN, and
/// what keeps an exec from gaining privileges back.
///
/// # Safety
/// Safe in a `pre_exec` hook: one system call, no memory.
pub(super) unsafe fn no_new_privileges() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS takes plain integers.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Drops every capability of the calling process for good.
///
/// # Safety
/// Safe in a `pre_exec` hook: system calls on stack memory only. Call it after anything
/// that needs a capability (namespaces, mounts) and after `no_new_privileges`.
pub(super) unsafe fn drop_all() -> io::Result<()> {
    for capability in 0..CAPABILITY_LIMIT {
        // SAFETY: prctl with plain integers.
        if unsafe { libc::prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) } == 0 {
            continue;
        }
        match io::Error::last_os_error().raw_os_error() {
            // Past the kernel's last capability.
            Some(libc::EINVAL) => break,
            // No CAP_SETPCAP: an unprivileged user's bounding set cannot be used anyway,
            // since no new privileges stops setuid and file capabilities.
            Some(libc::EPERM) => break,
            _ => return Err(io::Error::last_os_error()),
        }
    }
    // SAFETY: prctl with plain integers; EINVAL only on kernels before ambient sets (4.3).
    if unsafe { libc::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) } != 0
        && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
    {
        return Err(io::Error::last_os_error());
    }
    let mut header = CapabilityHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let data = [CapabilityData { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: a version-3 header and the two data words it expects, all on the stack.
    let set = unsafe {
        libc::syscall(libc::SYS_capset, &mut header as *mut CapabilityHeader, data.as_ptr())
    };
    if set != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
