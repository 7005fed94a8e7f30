//! Process trees: a command started as the leader of its own session and process
//! group, so that everything it spawns (pipelines, background jobs, grandchildren) can
//! be signalled and killed as one, and none of it has a controlling terminal (it cannot
//! open `/dev/tty` or push keystrokes into the user's terminal with TIOCSTI). Invariant:
//! a `ProcessGroup` dropped before its leader was waited for takes its whole group down
//! with it, so an abandoned call leaks no processes.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Mutex;
use std::time::Duration;
use tokio::process::{Child, Command};

/// How often `terminate` looks whether the group is gone during its grace period.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Groups started by this process and not yet waited for: what `kill_all_groups`
/// takes down when the process must exit at once.
static LIVE_GROUPS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Where the live set is mirrored (see `mirror_groups_to`), when anywhere.
static MIRROR: Mutex<Option<PathBuf>> = Mutex::new(None);

fn track(id: u32, live: bool) {
    if let Ok(mut groups) = LIVE_GROUPS.lock() {
        if live {
            groups.insert(id);
        } else {
            groups.remove(&id);
        }
        // Written under the lock so the file never goes back to an older set.
        write_mirror(&groups);
    }
}

fn write_mirror(groups: &BTreeSet<u32>) {
    let Some(path) = MIRROR.lock().ok().and_then(|mirror| mirror.clone()) else { return };
    let text: String = groups.iter().map(|id| format!("{id}\n")).collect();
    let mut staging = path.clone().into_os_string();
    staging.push(".tmp");
    // Replaced whole, so a reader never sees half a list; a failure only loses the mirror.
    if std::fs::write(&staging, text).is_ok() {
        let _ = std::fs::rename(&staging, &path);
    }
}

/// Keeps `path` listing the ids of the live process groups this process started (one
/// per line), so that whoever supervises this process can kill them with
/// `kill_groups_listed_in` should it die without cleaning up (SIGKILL). Fails when the
/// file cannot be written at once.
pub fn mirror_groups_to(path: &Path) -> io::Result<()> {
    if let Ok(mut mirror) = MIRROR.lock() {
        *mirror = Some(path.to_path_buf());
    }
    let groups = LIVE_GROUPS.lock().map(|g| g.clone()).unwrap_or_default();
    let text: String = groups.iter().map(|id| format!("{id}\n")).collect();
    std::fs::write(path, text)
}

/// Stops mirroring and removes the file: the process is exiting in order.
pub fn stop_mirroring_groups() {
    let path = MIRROR.lock().ok().and_then(|mut mirror| mirror.take());
    if let Some(path) = path {
        let _ = std::fs::remove_file(path);
    }
}

/// Sends `signal` to every group listed in `path` (written by `mirror_groups_to` in a
/// process that has died), then removes the file. Only a group that existed when the
/// list was last written is signalled: an id reused since (the list outlived a reboot,
/// or ids wrapped around) belongs to someone else. Returns how many groups were still
/// there; a missing file lists none. Fails when the file exists but cannot be read.
pub fn kill_groups_listed_in(path: &Path, signal: Signal) -> io::Result<usize> {
    let (text, written) = match std::fs::read_to_string(path)
        .and_then(|text| Ok((text, std::fs::metadata(path)?.modified()?)))
    {
        Ok(read) => read,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(error),
    };
    let mut killed = 0;
    for id in text.lines().filter_map(|line| line.trim().parse::<u32>().ok()) {
        if crate::started::group_started_by(id, written)
            && matches!(kill_group(id, signal), Ok(true))
        {
            killed += 1;
        }
    }
    let _ = std::fs::remove_file(path);
    Ok(killed)
}

#[cfg(unix)]
pub(crate) use imp::lead_new_session;

/// Sends `signal` to every process group this process started that may still run.
/// For a host leaving at once (a second Ctrl+C, SIGTERM): no command it started may
/// outlive it.
pub fn kill_all_groups(signal: Signal) {
    let groups: Vec<u32> =
        LIVE_GROUPS.lock().map(|g| g.iter().copied().collect()).unwrap_or_default();
    for id in groups {
        let _ = kill_group(id, signal);
    }
}

/// A signal to send to a whole process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Asks politely (SIGTERM on Unix): a process may clean up, or ignore it.
    Terminate,
    /// Cannot be caught or ignored (SIGKILL on Unix).
    Kill,
}

/// A child process that leads its own process group.
#[derive(Debug)]
pub struct ProcessGroup {
    child: Child,
    /// The group id, which is the leader's pid.
    id: u32,
    /// Set once the leader has been waited for; after that `Drop` leaves the group alone.
    exited: Option<ExitStatus>,
}

/// Spawns `command` as the leader of a new session and process group (Unix: `setsid()`
/// in the child, unless the command's own setup made it a session leader already, as a
/// sandboxed command's does). Fails when the program cannot be started, with the OS error.
pub fn spawn_group(command: &mut Command) -> io::Result<ProcessGroup> {
    #[cfg(unix)]
    // SAFETY: the hook makes three system calls and touches no memory.
    unsafe {
        command.pre_exec(imp::lead_new_session);
    }
    let child = command.spawn()?;
    let Some(id) = child.id() else {
        return Err(io::Error::other("the spawned process has no id"));
    };
    track(id, true);
    Ok(ProcessGroup { child, id, exited: None })
}

/// Sends `signal` to every process of the group `group_id`. `Ok(false)` when no such
/// group exists any more (everything already exited); `Err` for other OS errors, and
/// always on targets without process groups.
pub fn kill_group(group_id: u32, signal: Signal) -> io::Result<bool> {
    imp::kill_group(group_id, signal)
}

/// True while any process of the group `group_id` exists (zombies included).
pub fn group_exists(group_id: u32) -> bool {
    imp::kill_group_raw(group_id, None).unwrap_or(false)
}

/// What bash reads before it runs a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellStartup {
    /// `bash -lc`: the login profile, on every run.
    Login,
    /// `bash -c`: no startup file (the caller brings the environment, e.g. through
    /// `BASH_ENV`).
    Plain,
}

impl ShellStartup {
    /// bash's flag before the script: `-lc` or `-c`.
    pub fn bash_flag(self) -> &'static str {
        match self {
            ShellStartup::Login => "-lc",
            ShellStartup::Plain => "-c",
        }
    }
}

/// The `bash -lc SCRIPT` command (PowerShell on Windows).
pub fn shell_command(script: &str) -> Command {
    imp::shell_command(script, ShellStartup::Login)
}

/// The `bash -lc SCRIPT` or `bash -c SCRIPT` command (PowerShell on Windows, which reads
/// no profile either way).
pub fn shell_command_with(script: &str, startup: ShellStartup) -> Command {
    imp::shell_command(script, startup)
}

/// `bash`, found once through Kestrel's own PATH (absolute entries only): a command's
/// PATH comes from the login profile and is searched after the chdir to its workdir, so
/// an empty or relative entry there would let a file named `bash` in the repository
/// become the shell. Plain `bash` when no PATH entry has it.
pub fn bash_path() -> &'static std::path::Path {
    static BASH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BASH.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join("bash"))
            .find(|bash| is_executable(bash))
            .unwrap_or_else(|| std::path::PathBuf::from("bash"))
    })
}

fn is_executable(path: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// The signal that ended a process, when it was killed by one (always `None` off Unix).
pub fn exit_signal(status: &ExitStatus) -> Option<i32> {
    imp::exit_signal(status)
}

impl ProcessGroup {
    /// The process group id (the leader's pid).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The leader process, e.g. to take its stdout and stderr pipes.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Waits for the leader to exit; other members of the group may still run.
    /// Cancel-safe: can be used in `tokio::select!`.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.exited {
            return Ok(status);
        }
        let status = self.child.wait().await?;
        self.exited = Some(status);
        track(self.id, false);
        Ok(status)
    }

    /// Sends `signal` to the whole group; `Ok(false)` when it is already gone.
    pub fn signal(&self, signal: Signal) -> io::Result<bool> {
        kill_group(self.id, signal)
    }

    /// Ends the whole group: `Signal::Terminate` first, then `Signal::Kill` to whatever
    /// is left after `grace`, and returns the leader's exit status. A member that ignores
    /// SIGTERM still dies. Fails only when waiting for the leader fails.
    pub async fn terminate(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        // The group may already be gone; a failed signal is not worth failing for.
        let _ = self.signal(Signal::Terminate);
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            if self.exited.is_none()
                && let Some(status) = self.child.try_wait()?
            {
                self.exited = Some(status);
                track(self.id, false);
            }
            // The leader must be reaped first: a zombie leader keeps the group alive.
            if self.exited.is_some() && !group_exists(self.id) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                let _ = self.signal(Signal::Kill);
                break;
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
        self.wait().await
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if self.exited.is_none() {
            // Abandoned mid-run (e.g. the future was dropped): take the tree down.
            let _ = self.signal(Signal::Kill);
        }
        track(self.id, false);
    }
}

#[cfg(unix)]
mod imp {
    use super::Signal;
    use std::io;
    use std::process::ExitStatus;
    use tokio::process::Command;

    pub fn kill_group(group_id: u32, signal: Signal) -> io::Result<bool> {
        let number = match signal {
            Signal::Terminate => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        kill_group_raw(group_id, Some(number))
    }

    /// `kill(-group, signal)`; `None` sends no signal and only checks existence.
    pub fn kill_group_raw(group_id: u32, signal: Option<i32>) -> io::Result<bool> {
        let Ok(group) = libc::pid_t::try_from(group_id) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "process group id too large"));
        };
        // Group 0 or 1 would signal our own group or every process: never.
        if group <= 1 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("refusing to signal process group {group}"),
            ));
        }
        // SAFETY: kill(2) with a negative pid only sends a signal; no memory is involved.
        let result = unsafe { libc::kill(-group, signal.unwrap_or(0)) };
        if result == 0 {
            return Ok(true);
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::ESRCH) => Ok(false),
            _ => Err(error),
        }
    }

    /// In the child: `setsid()`, unless it leads a session already.
    pub fn lead_new_session() -> io::Result<()> {
        // SAFETY: getpid, getsid and setsid take integers and touch no memory.
        unsafe {
            let pid = libc::getpid();
            if libc::getsid(0) == pid {
                return Ok(());
            }
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    pub fn shell_command(script: &str, startup: super::ShellStartup) -> Command {
        let mut command = Command::new(super::bash_path());
        command.arg(startup.bash_flag()).arg(script);
        command
    }

    pub fn exit_signal(status: &ExitStatus) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        status.signal()
    }
}

#[cfg(not(unix))]
mod imp {
    //! Stub: Windows needs Job Objects to kill a tree; until then, group operations
    //! report `Unsupported` and only the leader can be killed through its `Child`.
    use super::Signal;
    use std::io;
    use std::process::ExitStatus;
    use tokio::process::Command;

    fn unsupported() -> io::Error {
        io::Error::new(io::ErrorKind::Unsupported, "process groups are not supported on this OS")
    }

    pub fn kill_group(_group_id: u32, _signal: Signal) -> io::Result<bool> {
        Err(unsupported())
    }

    pub fn kill_group_raw(_group_id: u32, _signal: Option<i32>) -> io::Result<bool> {
        Err(unsupported())
    }

    pub fn shell_command(script: &str, _startup: super::ShellStartup) -> Command {
        let mut command = Command::new("powershell.exe");
        command.args(["-NoLogo", "-NoProfile", "-NonInteractive", "-Command", script]);
        command
    }

    pub fn exit_signal(_status: &ExitStatus) -> Option<i32> {
        None
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::process::Stdio;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.arg("-c").arg(script).stdin(Stdio::null());
        command
    }

    #[tokio::test]
    async fn terminate_kills_a_member_that_ignores_sigterm() {
        let mut group =
            spawn_group(sh("trap '' TERM; sleep 60 & wait").stdout(Stdio::null())).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(group_exists(group.id()));
        let status = tokio::time::timeout(
            Duration::from_secs(20),
            group.terminate(Duration::from_millis(300)),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(exit_signal(&status), Some(libc::SIGKILL));
    }

    #[tokio::test]
    async fn kill_group_of_a_finished_group_reports_it_gone() {
        let mut group = spawn_group(&mut sh("exit 3")).unwrap();
        let status = group.wait().await.unwrap();
        assert_eq!(status.code(), Some(3));
        assert!(!kill_group(group.id(), Signal::Terminate).unwrap());
        assert!(!group_exists(group.id()));
    }

    #[tokio::test]
    async fn listed_groups_are_killed_and_the_list_removed() {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("groups");
        let group = spawn_group(sh("sleep 60").stdout(Stdio::null())).unwrap();
        std::fs::write(&list, format!("{}\nnot-a-number\n", group.id())).unwrap();
        assert_eq!(kill_groups_listed_in(&list, Signal::Kill).unwrap(), 1);
        assert!(!list.exists());
        assert_eq!(kill_groups_listed_in(&list, Signal::Kill).unwrap(), 0);
    }

    #[tokio::test]
    async fn a_spawned_group_leads_its_own_session_and_its_tree_dies_with_it() {
        let mut group = spawn_group(sh("sleep 60 & wait").stdout(Stdio::null())).unwrap();
        let id = libc::pid_t::try_from(group.id()).unwrap();
        // SAFETY: getsid and getpgid only read another process's ids.
        let (session, process_group) = unsafe { (libc::getsid(id), libc::getpgid(id)) };
        assert_eq!(session, id, "a new session: no controlling terminal");
        assert_eq!(process_group, id);
        tokio::time::timeout(Duration::from_secs(20), group.terminate(Duration::from_millis(300)))
            .await
            .unwrap()
            .unwrap();
        // The killed background sleep is a zombie until its new parent reaps it, which a
        // loaded machine may take a moment to do.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while group_exists(group.id()) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!group_exists(group.id()), "the background sleep died too");
    }

    #[test]
    fn refuses_to_signal_init_or_its_own_group() {
        assert!(kill_group(1, Signal::Kill).is_err());
        assert!(kill_group(0, Signal::Kill).is_err());
    }
}
