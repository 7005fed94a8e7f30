//! The daemon's view of which session started which (asked at every permission request,
//! for a subagent's ancestors, and at every worker exit, for its children): read from
//! the session index once for a session made elsewhere, never once per request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use daemon_support::{DaemonTest, kill};
use kestrel_testkit::{Script, Step};
use serde_json::json;

fn lineage_reads(test: &DaemonTest) -> usize {
    let log = std::fs::read_to_string(test.env.home.path().join("logs/daemon.log")).unwrap();
    log.lines().filter(|line| line.contains("read the session index for the lineage")).count()
}

fn allow_once(request: &kestrel_protocol::jsonrpc::Request) -> String {
    let options = request.params["options"].as_array().expect("options");
    let option = options.iter().find(|o| o["kind"] == "allow_once").expect("allow_once");
    option["optionId"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_requests_and_worker_exits_read_the_session_index_once_at_most() {
    let test = DaemonTest::new(Script::new([
        Step::text("made outside the daemon"),
        Step::tool_call("write_file", json!({"path": "one.txt", "content": "1\n"})),
        Step::tool_call("write_file", json!({"path": "two.txt", "content": "2\n"})),
        Step::tool_call("write_file", json!({"path": "three.txt", "content": "3\n"})),
        Step::text("written"),
    ]));
    // A session the daemon did not make: its lineage is in the index only.
    let made = test.command(&["exec", "--json", "hello"]).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let first = String::from_utf8_lossy(&made.stdout).lines().next().unwrap().to_owned();
    let session: serde_json::Value = serde_json::from_str(&first).unwrap();
    let session = session["session_id"].as_str().unwrap().to_owned();

    let mut client = test.client().await;
    let cwd = test.env.work_path();
    client.load(&session, &cwd).await.unwrap();
    client.set_mode(&session, "ask").await;
    let turn = client.prompt(&session, "write three files");
    for _ in 0..3 {
        let asked = client.wait_permission().await;
        client.answer(asked.id.clone(), &allow_once(&asked)).await;
    }
    assert_eq!(turn.await.unwrap().unwrap()["stopReason"], "end_turn");
    assert_eq!(std::fs::read_to_string(cwd.join("three.txt")).unwrap(), "3\n");

    // A worker exit looks for the children to cancel.
    let pid = test.wait_worker_pid(&session, None);
    kill(u32::try_from(pid).unwrap(), libc::SIGKILL);
    test.wait_worker_pid(&session, Some(pid));

    // A session made in the daemon is known without reading anything.
    let fresh = client.new_session(&cwd).await;
    let fresh_pid = test.wait_worker_pid(&fresh, None);
    kill(u32::try_from(fresh_pid).unwrap(), libc::SIGKILL);
    test.wait_worker_pid(&fresh, Some(fresh_pid));

    assert_eq!(lineage_reads(&test), 1, "three requests and two exits, one read");
}
