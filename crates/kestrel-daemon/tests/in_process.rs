//! The daemon run in-process with a worker program that cannot start. Everything else
//! runs the real `kestrel worker` in crates/kestrel-cli/tests/daemon_*.rs and
//! subagents.rs (child sessions through `_kestrel/session/spawn`): the only fake in the
//! project is the scripted model server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kestrel_daemon::{DaemonSettings, WorkerCommand, client};
use kestrel_protocol::jsonrpc::{Connection, Incoming, RpcError};
use kestrel_store::KestrelHome;
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

struct Daemon {
    home: KestrelHome,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<Result<(), kestrel_daemon::DaemonError>>,
}

impl Daemon {
    async fn start(worker: WorkerCommand) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let home = KestrelHome::at(dir.path());
        let settings = DaemonSettings::new(home.clone(), worker);
        let task = tokio::spawn(kestrel_daemon::run(settings));
        for _ in 0..200 {
            if client::connect(&home).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Daemon { home, _dir: dir, task }
    }

    async fn client(&self) -> (Connection, tokio::sync::mpsc::Receiver<Incoming>) {
        let (read, write) = client::connect(&self.home).await.unwrap().into_split();
        let (connection, incoming) = Connection::start(read, write);
        let init = json!({"protocolVersion": 1, "clientCapabilities": {}});
        request(&connection, "initialize", init).await.unwrap();
        (connection, incoming)
    }

    async fn stop(self) {
        assert!(client::stop(&self.home, WAIT).await.unwrap().is_some());
        tokio::time::timeout(WAIT, self.task).await.unwrap().unwrap().unwrap();
    }
}

async fn request(connection: &Connection, method: &str, params: Value) -> Result<Value, RpcError> {
    tokio::time::timeout(WAIT, connection.request(method, params)).await.expect("answered in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_cannot_start_is_a_clear_error() {
    let missing = WorkerCommand { program: "/nonexistent/kestrel-worker".into(), args: Vec::new() };
    let daemon = Daemon::start(missing).await;
    let (connection, _incoming) = daemon.client().await;
    let error = request(&connection, "session/new", json!({"cwd": "/tmp", "mcpServers": []}))
        .await
        .unwrap_err();
    assert!(error.message.contains("/nonexistent/kestrel-worker"), "{error}");
    let status = client::status(&daemon.home).await.unwrap().unwrap();
    assert!(status.sessions.is_empty(), "{status:?}");
    daemon.stop().await;
}
