//! The daemon run in-process with a stand-in worker (tests/support/fake_worker.mjs, on
//! Node): child sessions through `_kestrel/session/spawn`, and a worker program that
//! cannot start. The real worker is exercised in crates/kestrel-cli/tests/daemon_*.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kestrel_daemon::{DaemonSettings, WorkerCommand, client};
use kestrel_protocol::jsonrpc::{Connection, Incoming, RpcError};
use kestrel_store::KestrelHome;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;

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

    async fn client(&self) -> (Connection, mpsc::Receiver<Incoming>) {
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

fn fake_worker() -> WorkerCommand {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake_worker.mjs");
    WorkerCommand { program: "node".into(), args: vec![script.into()] }
}

async fn request(connection: &Connection, method: &str, params: Value) -> Result<Value, RpcError> {
    tokio::time::timeout(WAIT, connection.request(method, params)).await.expect("answered in time")
}

/// Waits for an agent message of `session` containing `needle`; returns its text.
async fn message_containing(
    incoming: &mut mpsc::Receiver<Incoming>,
    session: &str,
    needle: &str,
) -> String {
    loop {
        let message =
            tokio::time::timeout(WAIT, incoming.recv()).await.expect("an update in time").unwrap();
        if let Incoming::Notification(notification) = message
            && notification.params["sessionId"] == session
            && let Some(text) = notification.params["update"]["content"]["text"].as_str()
            && text.contains(needle)
        {
            return text.to_owned();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_spawns_a_child_session_that_can_be_attached() {
    let daemon = Daemon::start(fake_worker()).await;
    let (connection, mut incoming) = daemon.client().await;
    let cwd = std::env::temp_dir();
    let parent =
        request(&connection, "session/new", json!({"cwd": cwd, "mcpServers": []})).await.unwrap();
    let parent = parent["sessionId"].as_str().unwrap().to_owned();
    let prompt =
        json!({"sessionId": parent, "prompt": [{"type": "text", "text": "spawn look around"}]});
    let answer = request(&connection, "session/prompt", prompt).await.unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    let said = message_containing(&mut incoming, &parent, "child ").await;
    let child = said.trim_start_matches("child ").to_owned();
    assert_ne!(child, parent);

    let status = client::status(&daemon.home).await.unwrap().unwrap();
    let ids: Vec<&str> =
        status.sessions.iter().map(|session| session.session_id.as_str()).collect();
    assert!(ids.contains(&parent.as_str()) && ids.contains(&child.as_str()), "{ids:?}");

    // The child is a session like any other: attach and see its turn.
    let load = json!({"sessionId": child, "cwd": cwd, "mcpServers": []});
    let attached = request(&connection, "session/load", load).await.unwrap();
    assert_eq!(attached["modes"]["currentModeId"], "yolo", "the mode asked for: {attached}");
    message_containing(&mut incoming, &child, "got: look around").await;
    daemon.stop().await;
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
