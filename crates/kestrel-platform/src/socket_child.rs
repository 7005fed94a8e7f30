//! A child process that talks to its parent over one socket (its stdin and stdout are the
//! two directions of one end of a socket pair), leads its own session and process group,
//! and is watched without a descriptor of its own: its exit is seen through SIGCHLD. For
//! a parent of thousands of children (the daemon), where two pipes and a pidfd per child
//! would hold three descriptors instead of one.

use crate::process::{Signal, kill_group};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use tokio::net::UnixStream;
use tokio::signal::unix::{SignalKind, signal};

/// A child started by [`spawn_socket_child`]. Dropped before it was waited for, it takes
/// its whole process group down.
#[derive(Debug)]
pub struct SocketChild {
    child: Child,
    id: u32,
    exited: Option<ExitStatus>,
}

/// Starts `command` with stdin and stdout on one end of a new socket pair and returns
/// the other end (shutting down its write side is the child's end of input). The child
/// leads a new session and process group; with `open_file_limit`, its soft RLIMIT_NOFILE
/// is set to that (the limit its parent started with, before raising its own). Must be
/// called inside a tokio runtime. Fails when the pair cannot be made (EMFILE) or the
/// program cannot be started.
pub fn spawn_socket_child(
    command: &mut Command,
    open_file_limit: Option<u64>,
) -> io::Result<(SocketChild, UnixStream)> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let theirs_in: OwnedFd = theirs.try_clone()?.into();
    let theirs_out: OwnedFd = theirs.into();
    command.stdin(Stdio::from(theirs_in)).stdout(Stdio::from(theirs_out));
    // SAFETY: the hook makes only async-signal-safe system calls (setsid, getrlimit,
    // setrlimit) and touches no memory of the parent.
    unsafe {
        command.pre_exec(move || {
            crate::process::lead_new_session()?;
            if let Some(soft) = open_file_limit {
                crate::limits::restore_in_child(soft)?;
            }
            Ok(())
        });
    }
    let spawned = command.spawn();
    // The command holds the child's ends until its stdio is replaced: closed here, so that
    // the child alone has them and its exit is our end of file.
    command.stdin(Stdio::null()).stdout(Stdio::null());
    let child = spawned?;
    let child = SocketChild { id: child.id(), child, exited: None };
    ours.set_nonblocking(true)?;
    Ok((child, UnixStream::from_std(ours)?))
}

impl SocketChild {
    /// The child's pid, also its process group id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Waits for the child to exit, woken by SIGCHLD (no descriptor, no polling).
    /// Cancel-safe. Fails when the status cannot be collected (e.g. SIGCHLD ignored by
    /// whoever started this process, so the kernel reaped it).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.exited {
            return Ok(status);
        }
        // Listening first, then looking: an exit between the two still wakes us.
        let mut exits = signal(SignalKind::child())?;
        loop {
            if let Some(status) = self.child.try_wait()? {
                self.exited = Some(status);
                return Ok(status);
            }
            if exits.recv().await.is_none() {
                return Err(io::Error::other("the runtime's signal handling stopped"));
            }
        }
    }

    /// Sends `signal` to the child's whole process group; `Ok(false)` when it is gone.
    pub fn signal(&self, signal: Signal) -> io::Result<bool> {
        kill_group(self.id, signal)
    }
}

impl Drop for SocketChild {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.signal(Signal::Kill);
            // Reaped now if it is already gone; otherwise a zombie until this process exits.
            let _ = self.child.try_wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    #[tokio::test]
    async fn the_child_reads_and_writes_one_socket_and_its_exit_is_seen() {
        let mut command = Command::new("sh");
        command.arg("-c").arg("read line; echo \"got $line\"; ulimit -n");
        let (mut child, stream) = spawn_socket_child(&mut command, Some(100)).unwrap();
        let (read, mut write) = stream.into_split();
        write.write_all(b"hello\n").await.unwrap();
        drop(write);
        let mut lines = BufReader::new(read).lines();
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("got hello"));
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("100"));
        assert_eq!(lines.next_line().await.unwrap(), None, "end of file once it exited");
        let status = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success());
    }

    #[tokio::test]
    async fn end_of_input_is_the_shutdown_of_our_write_side() {
        let mut command = Command::new("sh");
        command.arg("-c").arg("cat; echo done");
        let (mut child, stream) = spawn_socket_child(&mut command, None).unwrap();
        let (read, write) = stream.into_split();
        // SAFETY: getsid only reads another process's session id.
        let session = unsafe { libc::getsid(child.id() as libc::pid_t) };
        assert_eq!(session, child.id() as libc::pid_t, "it leads its own session");
        drop(write);
        let mut lines = BufReader::new(read).lines();
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("done"));
        tokio::time::timeout(std::time::Duration::from_secs(20), child.wait())
            .await
            .unwrap()
            .unwrap();
    }
}
