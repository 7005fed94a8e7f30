//! Everything the daemon says to its clients validates against the ACP schema of the
//! pinned TypeScript SDK: its own answers (initialize, session/list, attach), relayed
//! worker traffic, permission requests fanned out, cancel, and the restart messages
//! (`_kestrel/worker/restarted` plus a `notice` or an agent message). The transcripts
//! of two `kestrel acp` clients are checked by tests/acp/validate-transcript.mjs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use daemon_support::{AcpClient, DaemonTest, Event, kill};
use kestrel_testkit::{Script, Step};
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

fn allow_once(request: &kestrel_protocol::jsonrpc::Request) -> String {
    let options = request.params["options"].as_array().unwrap();
    let option = options.iter().find(|option| option["kind"] == "allow_once").unwrap();
    option["optionId"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_through_the_daemon_validates_against_the_acp_schema() {
    let validator = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/acp");
    let schema = validator.join("node_modules/@agentclientprotocol/sdk/schema/v1/schema.json");
    assert!(
        schema.exists(),
        "the ACP schema validator is not installed: run `npm ci --prefix tests/acp`"
    );
    let test = DaemonTest::new(Script::new([
        Step::tool_call("write_file", json!({"path": "a.txt", "content": "a\n"})),
        Step::text("wrote a.txt"),
        Step::tool_call("shell", json!({"command": "sleep 20; echo never"})),
        Step::tool_call("write_file", json!({"path": "b.txt", "content": "b\n"})),
    ]));
    let out = tempfile::tempdir().unwrap();
    let plain_path = out.path().join("plain.jsonl");
    let notices_path = out.path().join("notices.jsonl");
    let plain_file = Arc::new(Mutex::new(std::fs::File::create(&plain_path).unwrap()));
    let notices_file = Arc::new(Mutex::new(std::fs::File::create(&notices_path).unwrap()));
    let mut plain = AcpClient::spawn_recording(&test, Some(plain_file));
    let mut notices = AcpClient::spawn_recording(&test, Some(notices_file));
    plain.initialize().await;
    let with_notices =
        json!({"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}});
    notices.request("initialize", with_notices).await.unwrap();
    let cwd = test.env.work_path();

    plain.request("session/list", json!({})).await.unwrap();
    let session = plain.new_session(&cwd).await;
    plain.set_mode(&session, "ask").await;
    let turn = plain.prompt(&session, "write a.txt");
    let asked = plain.wait_permission().await;
    plain.answer(asked.id.clone(), &allow_once(&asked)).await;
    assert_eq!(turn.await.unwrap().unwrap()["stopReason"], "end_turn");

    // The second client attaches: history replay and the attach answer.
    notices.load(&session, &cwd).await.unwrap();
    notices.request(kestrel_daemon::DAEMON_STATUS, json!({})).await.unwrap();
    plain.request("session/list", json!({})).await.unwrap();

    // A worker killed mid-turn: restart messages to both.
    plain.set_mode(&session, "yolo").await;
    let doomed = plain.prompt(&session, "run the long thing");
    plain.wait_update(&session, "tool_call").await;
    let pid = test.wait_worker_pid(&session, None);
    kill(pid as u32, libc::SIGKILL);
    assert_eq!(doomed.await.unwrap().unwrap()["stopReason"], "cancelled");
    let message = plain.wait_update(&session, "agent_message_chunk").await;
    assert!(message["content"]["text"].as_str().unwrap().contains("restarted"), "{message}");
    notices
        .wait_for("restarted", |event| {
            matches!(event, Event::Notification(n) if n.method == kestrel_daemon::WORKER_RESTARTED)
        })
        .await;
    let notice = notices.wait_update(&session, "notice").await;
    assert!(notice["title"].as_str().unwrap().contains("restarted"), "{notice}");
    test.wait_worker_pid(&session, Some(pid));

    // A permission request cancelled with the turn.
    plain.set_mode(&session, "ask").await;
    let cancelled = plain.prompt(&session, "write b.txt");
    plain.wait_permission().await;
    notices.wait_permission().await;
    plain.connection.notify("session/cancel", json!({"sessionId": session})).await.unwrap();
    assert_eq!(cancelled.await.unwrap().unwrap()["stopReason"], "cancelled");
    notices.request(kestrel_daemon::SESSION_DETACH, json!({"sessionId": session})).await.unwrap();
    plain.settle(std::time::Duration::from_millis(200)).await;

    let result = std::process::Command::new("node")
        .arg(validator.join("validate-transcript.mjs"))
        .arg(&plain_path)
        .arg(&notices_path)
        .output()
        .expect("node runs");
    assert!(
        result.status.success(),
        "transcripts do not validate against the ACP schema:\n{}{}",
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    );
}
