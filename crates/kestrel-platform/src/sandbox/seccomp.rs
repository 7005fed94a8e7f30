//! The seccomp filter every sandboxed command runs under (both backends). Path sockets
//! are not network-namespaced and Landlock does not control `connect(2)` to them, so a
//! command could reach the Kestrel daemon, Docker or D-Bus; seccomp cannot read
//! `connect`'s address, but it can read `socket`'s first argument. So:
//!
//! - `socket(AF_UNIX, …)` fails with EPERM (abstract sockets included);
//! - `socketpair(AF_UNIX, SOCK_DGRAM, …)` fails too (a datagram socket can `sendto` any
//!   path); stream and seqpacket pairs stay allowed: they reach no one;
//! - io_uring fails (its SOCKET/CONNECT operations would bypass the filter), and so does
//!   `pidfd_getfd` (taking a socket from another process);
//! - `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)` fail: no typing into a terminal, even one
//!   the command somehow holds (it runs without a controlling terminal anyway);
//! - system calls of another ABI (32-bit on a 64-bit kernel, x32) fail: their socket
//!   calls (`socketcall`) cannot be inspected.
//!
//! Raw classic BPF: a dozen instructions do not need a crate.

use std::io;

/// `struct seccomp_data` offsets.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
/// The low 32 bits of `args[0]` and `args[1]` (little-endian targets only).
const OFFSET_ARG0: u32 = 16;
const OFFSET_ARG1: u32 = 24;

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_AND_K: u16 = 0x54;
const BPF_RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_EPERM: u32 = 0x0005_0000 | libc::EPERM as u32;

/// `SOCK_TYPE_MASK`: the type without SOCK_NONBLOCK / SOCK_CLOEXEC.
const SOCK_TYPE_MASK: u32 = 0xf;

#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64

/// Terminal ioctls that inject input (same numbers on x86_64 and aarch64).
const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541c;

/// x32 system calls carry this bit in their number (x86_64 only; harmless elsewhere).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// A compiled filter, built before `fork` so the child only installs it.
#[derive(Debug)]
pub(super) struct SocketFilter {
    program: Vec<libc::sock_filter>,
}

fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// A system call number as the filter sees it.
fn nr(number: libc::c_long) -> u32 {
    u32::try_from(number).unwrap_or(u32::MAX)
}

impl SocketFilter {
    /// The filter described in the module docs.
    pub(super) fn new() -> Self {
        let denied = [
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
            libc::SYS_pidfd_getfd,
        ];
        let mut program = vec![
            statement(BPF_LD_W_ABS, OFFSET_ARCH),
            jump(BPF_JEQ_K, NATIVE_ARCH, 1, 0),
            statement(BPF_RET_K, RET_EPERM),
            statement(BPF_LD_W_ABS, OFFSET_NR),
            jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),
            statement(BPF_RET_K, RET_EPERM),
        ];
        for number in denied {
            program.push(jump(BPF_JEQ_K, nr(number), 0, 1));
            program.push(statement(BPF_RET_K, RET_EPERM));
        }
        // ioctl(_, TIOCSTI | TIOCLINUX, …)
        program.push(jump(BPF_JEQ_K, nr(libc::SYS_ioctl), 0, 5));
        program.push(statement(BPF_LD_W_ABS, OFFSET_ARG1));
        program.push(jump(BPF_JEQ_K, TIOCSTI, 1, 0));
        program.push(jump(BPF_JEQ_K, TIOCLINUX, 0, 1));
        program.push(statement(BPF_RET_K, RET_EPERM));
        program.push(statement(BPF_RET_K, RET_ALLOW));
        // socket(AF_UNIX, …)
        program.push(jump(BPF_JEQ_K, nr(libc::SYS_socket), 0, 4));
        program.push(statement(BPF_LD_W_ABS, OFFSET_ARG0));
        program.push(jump(BPF_JEQ_K, libc::AF_UNIX as u32, 0, 1));
        program.push(statement(BPF_RET_K, RET_EPERM));
        program.push(statement(BPF_RET_K, RET_ALLOW));
        // socketpair(AF_UNIX, SOCK_DGRAM, …)
        program.push(jump(BPF_JEQ_K, nr(libc::SYS_socketpair), 0, 6));
        program.push(statement(BPF_LD_W_ABS, OFFSET_ARG0));
        program.push(jump(BPF_JEQ_K, libc::AF_UNIX as u32, 0, 4));
        program.push(statement(BPF_LD_W_ABS, OFFSET_ARG1));
        program.push(statement(BPF_AND_K, SOCK_TYPE_MASK));
        program.push(jump(BPF_JEQ_K, libc::SOCK_DGRAM as u32, 0, 1));
        program.push(statement(BPF_RET_K, RET_EPERM));
        program.push(statement(BPF_RET_K, RET_ALLOW));
        Self { program }
    }

    /// Installs the filter on the calling thread and everything it starts.
    ///
    /// # Safety
    /// For a freshly forked child (a `pre_exec` hook): it makes one system call on memory
    /// prepared before the fork. `PR_SET_NO_NEW_PRIVS` (or CAP_SYS_ADMIN) must be set.
    pub(super) unsafe fn install(&self) -> io::Result<()> {
        let Ok(len) = u16::try_from(self.program.len()) else {
            return Err(io::Error::other("seccomp filter too long"));
        };
        let program = libc::sock_fprog { len, filter: self.program.as_ptr().cast_mut() };
        // SAFETY: `program` points at a live, well-formed filter of `len` instructions.
        let installed = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &program as *const libc::sock_fprog,
                0,
                0,
            )
        };
        if installed != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
