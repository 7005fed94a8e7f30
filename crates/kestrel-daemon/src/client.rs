//! The client side of the daemon, for the `kestrel` commands: connect (starting the
//! daemon when none listens), ask its status, stop it.

use crate::DaemonError;
use crate::messages;
use crate::status::DaemonStatus;
use kestrel_platform::{Endpoint, IpcStream};
use kestrel_protocol::jsonrpc::{Connection, RpcError};
use kestrel_store::KestrelHome;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// How long a client waits for a daemon it started to listen.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The endpoint of `home`'s daemon.
pub fn endpoint(home: &KestrelHome) -> Endpoint {
    Endpoint::new(&home.run_dir())
}

/// Connects to a running daemon. Fails with [`DaemonError::NotRunning`] when none listens.
pub async fn connect(home: &KestrelHome) -> Result<IpcStream, DaemonError> {
    let endpoint = endpoint(home);
    endpoint
        .connect()
        .await
        .map_err(|_| DaemonError::NotRunning { socket: endpoint.socket_path().to_path_buf() })
}

/// Connects to `home`'s daemon, starting `program daemon` detached when none listens
/// (racing clients start one daemon between them).
///
/// Fails when the daemon cannot be started or does not listen within [`START_TIMEOUT`].
pub async fn connect_or_start(
    home: &KestrelHome,
    program: &Path,
) -> Result<IpcStream, DaemonError> {
    let mut command = std::process::Command::new(program);
    command.arg("daemon").env("KESTREL_HOME", home.root()).current_dir("/");
    // The starting client's mode and model are its own (it passes them in session/new):
    // in the daemon's environment they would become every later session's default.
    command.env_remove("KESTREL_MODE").env_remove("KESTREL_MODEL");
    Ok(kestrel_platform::connect_or_start(&endpoint(home), command, START_TIMEOUT).await?)
}

/// The running daemon's status, or `None` when no daemon listens.
///
/// Fails when the daemon answers with an error or something that is not a status.
pub async fn status(home: &KestrelHome) -> Result<Option<DaemonStatus>, DaemonError> {
    let stream = match connect(home).await {
        Ok(stream) => stream,
        Err(DaemonError::NotRunning { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    let (read, write) = stream.into_split();
    let (connection, _incoming) = Connection::start(read, write);
    let answer = connection.request(messages::DAEMON_STATUS, json!({})).await?;
    serde_json::from_value(answer)
        .map(Some)
        .map_err(|error| DaemonError::BadAnswer(error.to_string()))
}

/// Asks the running daemon to stop and waits up to `wait` for it to exit. Returns the
/// pid it had, or `None` when no daemon was running.
///
/// Fails when the daemon does not exit in time.
pub async fn stop(home: &KestrelHome, wait: Duration) -> Result<Option<u32>, DaemonError> {
    let endpoint = endpoint(home);
    let stream = match connect(home).await {
        Ok(stream) => stream,
        Err(DaemonError::NotRunning { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    let pid = endpoint.running_pid();
    let (read, write) = stream.into_split();
    let (connection, _incoming) = Connection::start(read, write);
    match connection.request(messages::DAEMON_STOP, json!({})).await {
        // A daemon that closes before answering is stopping too.
        Ok(_) => {}
        Err(error) if error == RpcError::closed() => {}
        Err(error) => return Err(error.into()),
    }
    let deadline = tokio::time::Instant::now() + wait;
    while endpoint.running_pid().is_some() {
        if tokio::time::Instant::now() >= deadline {
            return Err(DaemonError::StopTimeout { pid: pid.unwrap_or(0), waited: wait });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(Some(pid.unwrap_or(0)))
}
