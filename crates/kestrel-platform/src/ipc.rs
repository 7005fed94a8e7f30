//! The daemon's IPC endpoint: a unix socket in `$KESTREL_HOME/run/` (directory 0700,
//! socket 0600), the daemon's pid file (locked for the daemon's whole life, so a stale
//! socket is one whose pid file nobody holds), and connect-or-start for clients: two
//! clients racing to start the daemon serialise on `run/daemon.lock` and start one.
//!
//! Unix socket paths are limited to ~107 bytes. When `run/daemon.sock` would be longer,
//! the socket lives in `/tmp/kestrel-$UID/` (0700, checked to be ours) under a name
//! hashed from the run directory; the lock and pid files stay in `run/`.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest socket path we bind (sun_path is 108 bytes with its NUL on Linux, 104 on macOS).
const MAX_SOCKET_PATH: usize = 100;
/// How often connect-or-start polls for the socket while the daemon comes up.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A connected stream to or from the daemon.
#[cfg(unix)]
pub type IpcStream = tokio::net::UnixStream;

/// What can go wrong binding, connecting to or starting the daemon.
#[derive(Debug, thiserror::Error)]
pub enum IpcError {
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("a daemon is already running (pid {pid}) for {run_dir}")]
    AlreadyRunning { pid: u32, run_dir: PathBuf },
    #[error(
        "the daemon did not start listening on {socket} within {waited:?}; see daemon.log in the logs directory"
    )]
    StartTimeout { socket: PathBuf, waited: Duration },
    #[error("the daemon exited while starting ({status}); see daemon.log in the logs directory")]
    DaemonExited { status: std::process::ExitStatus },
    #[error(
        "{path} is not a private directory of this user: remove it or set KESTREL_HOME to a shorter path"
    )]
    UnsafeDirectory { path: PathBuf },
    #[error("the daemon socket is not supported on this OS yet")]
    Unsupported,
}

impl IpcError {
    fn io(action: &'static str, path: &Path, source: io::Error) -> Self {
        IpcError::Io { action, path: path.to_path_buf(), source }
    }
}

/// Where one home's daemon listens, and the files beside its socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    run_dir: PathBuf,
    socket: PathBuf,
}

impl Endpoint {
    /// The endpoint for a run directory (`$KESTREL_HOME/run`). Pure: nothing is created.
    pub fn new(run_dir: &Path) -> Self {
        let socket = run_dir.join("daemon.sock");
        let socket = if socket.as_os_str().len() > MAX_SOCKET_PATH {
            short_socket_dir()
                .join(format!("{:016x}.sock", fnv1a(run_dir.as_os_str().as_encoded_bytes())))
        } else {
            socket
        };
        Self { run_dir: run_dir.to_path_buf(), socket }
    }

    /// The run directory (0700): lock and pid files.
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// The socket path (in the run directory unless that path is too long).
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// `run/daemon.lock`: held by a client while it starts the daemon.
    pub fn start_lock_path(&self) -> PathBuf {
        self.run_dir.join("daemon.lock")
    }

    /// `run/daemon.pid`: the daemon's pid, locked by the daemon for its whole life.
    pub fn pid_path(&self) -> PathBuf {
        self.run_dir.join("daemon.pid")
    }

    /// The pid of the running daemon, if one holds the pid file.
    pub fn running_pid(&self) -> Option<u32> {
        let file = File::open(self.pid_path()).ok()?;
        match file.try_lock() {
            // We got the lock: nobody holds it, so no daemon runs.
            Ok(()) => None,
            Err(_) => std::fs::read_to_string(self.pid_path()).ok()?.trim().parse().ok(),
        }
    }

    /// Connects to a listening daemon. Fails (`NotFound`, `ConnectionRefused`) when none
    /// listens.
    #[cfg(unix)]
    pub async fn connect(&self) -> io::Result<IpcStream> {
        tokio::net::UnixStream::connect(&self.socket).await
    }

    /// Creates the run directory (and the short socket directory when used), 0700.
    ///
    /// Fails when a directory cannot be created, or the short socket directory exists but
    /// is not a private directory of this user.
    pub fn prepare_dirs(&self) -> Result<(), IpcError> {
        create_private_dir(&self.run_dir)?;
        make_private(&self.run_dir)?;
        if let Some(parent) = self.socket.parent()
            && parent != self.run_dir
        {
            create_private_dir(parent)?;
            check_private_dir(parent)?;
        }
        Ok(())
    }
}

/// The daemon's listening socket. It holds the pid file's lock; dropping it removes the
/// socket and the pid file.
#[cfg(unix)]
#[derive(Debug)]
pub struct Listener {
    /// `None` once closed: the daemon is on its way out but still holds the pid lock.
    listener: Option<tokio::net::UnixListener>,
    endpoint: Endpoint,
    _pid_file: File,
}

#[cfg(unix)]
impl Listener {
    /// Takes the pid file's lock, replaces a stale socket file and listens (socket 0600).
    /// Must run inside a tokio runtime.
    ///
    /// Fails with [`IpcError::AlreadyRunning`] when another daemon holds the pid file, or
    /// an I/O error naming the path.
    pub fn bind(endpoint: &Endpoint) -> Result<Listener, IpcError> {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        endpoint.prepare_dirs()?;
        let pid_path = endpoint.pid_path();
        let mut pid_file = private_options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&pid_path)
            .map_err(|source| IpcError::io("open", &pid_path, source))?;
        if pid_file.try_lock().is_err() {
            let pid =
                std::fs::read_to_string(&pid_path).ok().and_then(|text| text.trim().parse().ok());
            return Err(IpcError::AlreadyRunning {
                pid: pid.unwrap_or(0),
                run_dir: endpoint.run_dir.clone(),
            });
        }
        pid_file
            .set_len(0)
            .and_then(|()| pid_file.write_all(format!("{}\n", std::process::id()).as_bytes()))
            .map_err(|source| IpcError::io("write", &pid_path, source))?;
        // We hold the lock, so whatever socket file is there belongs to a dead daemon.
        match std::fs::remove_file(&endpoint.socket) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(IpcError::io("remove the stale socket", &endpoint.socket, source));
            }
        }
        let listener = tokio::net::UnixListener::bind(&endpoint.socket)
            .map_err(|source| IpcError::io("listen on", &endpoint.socket, source))?;
        // The directory is 0700, so nobody else can reach the socket before this chmod.
        std::fs::set_permissions(&endpoint.socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|source| IpcError::io("set permissions of", &endpoint.socket, source))?;
        Ok(Listener { listener: Some(listener), endpoint: endpoint.clone(), _pid_file: pid_file })
    }

    /// Waits for the next client. Fails (`NotConnected`) once the listener is closed.
    pub async fn accept(&self) -> io::Result<IpcStream> {
        let Some(listener) = &self.listener else {
            return Err(io::Error::new(io::ErrorKind::NotConnected, "the listener is closed"));
        };
        let (stream, _) = listener.accept().await?;
        Ok(stream)
    }

    /// Stops listening and removes the socket, keeping the pid lock: a daemon on its way
    /// out accepts no client it would not serve, and `connect_or_start` starts a new one
    /// as soon as this one has exited.
    pub fn close(&mut self) {
        if self.listener.take().is_some() {
            let _ = std::fs::remove_file(&self.endpoint.socket);
        }
    }

    /// The endpoint this listener serves.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }
}

#[cfg(unix)]
impl Drop for Listener {
    fn drop(&mut self) {
        // We still hold the pid lock here, so these files are ours to remove.
        let _ = std::fs::remove_file(&self.endpoint.socket);
        let _ = std::fs::remove_file(self.endpoint.pid_path());
    }
}

/// Connects to the daemon, starting it with `command` when none listens. Serialised
/// with other clients by `run/daemon.lock`, so racing clients start one daemon; a daemon
/// that is already starting (its pid file locked) is waited for, not started twice.
/// `command` is run detached (see [`spawn_detached`]); `timeout` bounds each wait.
///
/// Fails when the daemon does not listen within `timeout`, exits while starting, or a
/// run file cannot be created.
#[cfg(unix)]
pub async fn connect_or_start(
    endpoint: &Endpoint,
    mut command: std::process::Command,
    timeout: Duration,
) -> Result<IpcStream, IpcError> {
    if let Ok(stream) = endpoint.connect().await {
        return Ok(stream);
    }
    endpoint.prepare_dirs()?;
    let lock_path = endpoint.start_lock_path();
    let lock = private_options()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|source| IpcError::io("open", &lock_path, source))?;
    let deadline = tokio::time::Instant::now() + timeout;
    while lock.try_lock().is_err() {
        if tokio::time::Instant::now() >= deadline {
            return Err(IpcError::StartTimeout {
                socket: endpoint.socket.clone(),
                waited: timeout,
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    // Another client may have started it while we waited for the lock.
    if let Ok(stream) = endpoint.connect().await {
        return Ok(stream);
    }
    let mut child = match endpoint.running_pid() {
        Some(_) => None,
        None => Some(spawn_detached(&mut command).map_err(|source| {
            IpcError::io("start the daemon", Path::new(command.get_program()), source)
        })?),
    };
    let deadline = tokio::time::Instant::now() + timeout;
    // A daemon found stopping (pid locked, socket closed) is replaced once it has exited.
    let mut replaced = child.is_some();
    let result = loop {
        if let Ok(stream) = endpoint.connect().await {
            break Ok(stream);
        }
        if !replaced && child.is_none() && endpoint.running_pid().is_none() {
            replaced = true;
            child = Some(spawn_detached(&mut command).map_err(|source| {
                IpcError::io("start the daemon", Path::new(command.get_program()), source)
            })?);
        }
        if let Some(started) = child.as_mut()
            && let Ok(Some(status)) = started.try_wait()
        {
            child = None;
            // A daemon that lost a race to another starter exits at once: look again.
            if endpoint.running_pid().is_none() {
                break Err(IpcError::DaemonExited { status });
            }
        }
        if tokio::time::Instant::now() >= deadline {
            break Err(IpcError::StartTimeout { socket: endpoint.socket.clone(), waited: timeout });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    };
    drop(lock);
    if let Some(mut child) = child {
        // Reap it whenever it exits, so a long-lived client leaves no zombie behind.
        std::thread::spawn(move || child.wait());
    }
    result
}

/// Starts `command` detached from this process: a new session (`setsid`, so no
/// controlling terminal and no signals from ours) with stdin, stdout and stderr on
/// /dev/null. The caller must reap the returned child (or drop it: it is then reaped by
/// init when this process exits).
///
/// Fails when the program cannot be started.
#[cfg(unix)]
pub fn spawn_detached(command: &mut std::process::Command) -> io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn()
}

fn private_options() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

fn create_private_dir(path: &Path) -> Result<(), IpcError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path).map_err(|source| IpcError::io("create the directory", path, source))
}

/// A run directory that already existed keeps its mode unless told: make it 0700 too
/// (it holds the socket in the window between bind and chmod).
fn make_private(path: &Path) -> Result<(), IpcError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
            .map_err(|source| IpcError::io("make private", path, source))?;
    }
    Ok(())
}

/// The shared `/tmp/kestrel-$UID` must be a real directory of ours that nobody else can
/// enter: otherwise another user could plant a socket there.
fn check_private_dir(path: &Path) -> Result<(), IpcError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let metadata = std::fs::symlink_metadata(path)
            .map_err(|source| IpcError::io("inspect", path, source))?;
        // SAFETY: getuid(2) cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        if !metadata.is_dir() || metadata.uid() != uid || metadata.mode() & 0o077 != 0 {
            return Err(IpcError::UnsafeDirectory { path: path.to_path_buf() });
        }
    }
    Ok(())
}

fn short_socket_dir() -> PathBuf {
    #[cfg(unix)]
    {
        // SAFETY: getuid(2) cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        PathBuf::from(format!("/tmp/kestrel-{uid}"))
    }
    #[cfg(not(unix))]
    {
        std::env::temp_dir().join("kestrel")
    }
}

/// FNV-1a: a stable, dependency-free hash for the short socket name.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_long_run_dir_gets_a_short_socket_path_under_tmp() {
        let long = PathBuf::from(format!("/tmp/{}/run", "x".repeat(120)));
        let endpoint = Endpoint::new(&long);
        assert!(endpoint.socket_path().as_os_str().len() <= MAX_SOCKET_PATH);
        assert!(endpoint.socket_path().to_string_lossy().starts_with("/tmp/kestrel-"));
        assert_eq!(endpoint.pid_path(), long.join("daemon.pid"));
        assert_eq!(Endpoint::new(&long), endpoint, "the short name is stable");
        let short = Endpoint::new(Path::new("/k/run"));
        assert_eq!(short.socket_path(), Path::new("/k/run/daemon.sock"));
    }

    #[tokio::test]
    async fn bind_makes_private_files_and_refuses_a_second_daemon() {
        let home = tempfile::tempdir().unwrap();
        let endpoint = Endpoint::new(&home.path().join("run"));
        let listener = Listener::bind(&endpoint).unwrap();
        let dir_mode = std::fs::metadata(endpoint.run_dir()).unwrap().permissions().mode();
        let socket_mode = std::fs::metadata(endpoint.socket_path()).unwrap().permissions().mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        assert_eq!(socket_mode & 0o777, 0o600);
        assert_eq!(endpoint.running_pid(), Some(std::process::id()));
        let error = Listener::bind(&endpoint).unwrap_err();
        assert!(matches!(error, IpcError::AlreadyRunning { .. }), "{error}");
        let accepted = tokio::spawn(async move {
            let _stream = listener.accept().await.unwrap();
            listener
        });
        endpoint.connect().await.unwrap();
        drop(accepted.await.unwrap());
        assert!(!endpoint.socket_path().exists(), "the socket is removed on drop");
        assert_eq!(endpoint.running_pid(), None);
    }

    #[tokio::test]
    async fn a_stale_socket_file_is_replaced() {
        let home = tempfile::tempdir().unwrap();
        let endpoint = Endpoint::new(&home.path().join("run"));
        endpoint.prepare_dirs().unwrap();
        // A socket left behind by a killed daemon: the file exists, nobody listens.
        drop(std::os::unix::net::UnixListener::bind(endpoint.socket_path()).unwrap());
        assert!(endpoint.socket_path().exists());
        assert!(endpoint.connect().await.is_err());
        let _listener = Listener::bind(&endpoint).unwrap();
        endpoint.connect().await.unwrap();
    }

    #[tokio::test]
    async fn connect_or_start_reports_a_daemon_that_exits_while_starting() {
        let home = tempfile::tempdir().unwrap();
        let endpoint = Endpoint::new(&home.path().join("run"));
        let command = std::process::Command::new("true");
        let error =
            connect_or_start(&endpoint, command, Duration::from_secs(10)).await.unwrap_err();
        assert!(matches!(error, IpcError::DaemonExited { .. }), "{error}");
    }

    #[tokio::test]
    async fn connect_or_start_reports_a_daemon_that_never_listens() {
        let home = tempfile::tempdir().unwrap();
        let endpoint = Endpoint::new(&home.path().join("run"));
        let mut command = std::process::Command::new("sleep");
        command.arg("2");
        let error =
            connect_or_start(&endpoint, command, Duration::from_millis(300)).await.unwrap_err();
        assert!(matches!(error, IpcError::StartTimeout { .. }), "{error}");
    }

    #[test]
    fn a_foreign_short_socket_dir_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let error = check_private_dir(dir.path()).unwrap_err();
        assert!(error.to_string().contains("not a private directory"), "{error}");
    }

    #[test]
    fn an_existing_open_run_dir_is_made_private() {
        use std::os::unix::fs::MetadataExt;
        let home = tempfile::tempdir().unwrap();
        let run = home.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
        Endpoint::new(&run).prepare_dirs().unwrap();
        assert_eq!(std::fs::metadata(&run).unwrap().mode() & 0o777, 0o700);
    }
}
