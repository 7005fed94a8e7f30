//! A contained command (`SandboxPolicy::contained`) of the Landlock backend runs in a
//! new PID namespace, as bubblewrap's `--unshare-pid` runs every command: when it ends,
//! everything it started ends with it (a `setsid -f` daemon too), so no process of a
//! line keeps what the line was allowed (a sandbox widened for a line the allow rules
//! cover) after it.
//!
//! `unshare(CLONE_NEWPID)` (with the other namespaces, in `namespace`) puts the next
//! child into the new namespace; so the forked child forks twice more before it execs:
//!
//! - the spawned process (the pid the caller waits for) waits for the namespace's first
//!   process and exits as it did; a signal that ends it (a timeout's SIGTERM, or
//!   Kestrel's own end: `PR_SET_PDEATHSIG`) kills that process too (`PR_SET_PDEATHSIG`),
//!   and with it the namespace;
//! - the first process (pid 1, the namespace's reaper) waits for the command and exits
//!   with its status; the kernel then kills whatever is left in the namespace;
//! - the command (pid 2) goes on to exec.

use std::io;

/// Forks the namespace's reaper and the command; returns in the command only. The
/// other two processes never return: they wait, then `_exit`.
///
/// # Safety
/// For a freshly forked child (a `pre_exec` hook) after `unshare(CLONE_NEWPID)`: only
/// system calls on stack data.
pub(super) unsafe fn fork_into() -> io::Result<()> {
    // SAFETY (all blocks): system calls on local data in a single-threaded child.
    unsafe {
        // Signals wait until the reaper has tied its life to the spawned process.
        let old = block_all_signals();
        // Neither waiting process execs: Kestrel's handlers (SIGTERM, SIGINT...) must not
        // stay theirs, or a timeout's SIGTERM would not end them.
        default_signal_actions();
        // The spawned process ends with Kestrel (as bubblewrap's `--die-with-parent`).
        let kestrel = libc::getppid();
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 || libc::getppid() != kestrel {
            return Err(io::Error::other("Kestrel ended while the command started"));
        }
        let mut ready = [0; 2];
        if libc::pipe2(ready.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        let reaper = libc::fork();
        if reaper < 0 {
            return Err(io::Error::last_os_error());
        }
        if reaper > 0 {
            // The spawned process: once the reaper is tied to it, it takes signals again.
            libc::close(ready[1]);
            let mut byte = 0u8;
            while libc::read(ready[0], (&raw mut byte).cast(), 1) < 0 && interrupted() {}
            libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            close_all();
            exit_as(wait_for(reaper));
        }
        // The reaper, pid 1 of the new namespace.
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            libc::_exit(127);
        }
        libc::close(ready[0]);
        libc::close(ready[1]);
        let command = libc::fork();
        if command < 0 {
            libc::_exit(127);
        }
        if command == 0 {
            libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            return Ok(());
        }
        close_all();
        // Reaps every orphan handed to it until the command ends.
        loop {
            let mut status = 0;
            let pid = libc::wait(&mut status);
            if pid == command {
                // A pid 1 cannot end itself by a signal: a signal becomes 128 + its number.
                if libc::WIFSIGNALED(status) {
                    libc::_exit(128 + libc::WTERMSIG(status));
                }
                libc::_exit(libc::WEXITSTATUS(status));
            }
            if pid < 0 && !interrupted() {
                libc::_exit(127);
            }
        }
    }
}

/// Every signal's action back to the default.
unsafe fn default_signal_actions() {
    for signal in 1..libc::SIGRTMAX() {
        // SAFETY: signal(2) with a valid number; SIGKILL and SIGSTOP just fail.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
        }
    }
}

/// Blocks every signal; returns the mask before.
unsafe fn block_all_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; the calls fill it.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_SETMASK, &all, &mut old);
        old
    }
}

fn interrupted() -> bool {
    io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
}

/// Closes every descriptor: a waiting process must hold no pipe of the command's
/// (its output reaches end of file when the command's side closes) nor the error
/// pipe of the spawn (the spawn returns once the command has exec'd).
unsafe fn close_all() {
    // SAFETY: close_range(2) with plain integers.
    unsafe {
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
    }
}

/// Waits for `pid`; its raw status.
unsafe fn wait_for(pid: libc::pid_t) -> libc::c_int {
    let mut status = 0;
    // SAFETY: waitpid(2) writes the status into a local.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if !interrupted() {
            return 127 << 8;
        }
    }
    status
}

/// Ends this process as `status` ended its child.
unsafe fn exit_as(status: libc::c_int) -> ! {
    // SAFETY: plain system calls; `_exit` does not return.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}
