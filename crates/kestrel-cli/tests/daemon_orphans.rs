//! What a killed daemon leaves behind. A worker SIGKILLed together with its daemon
//! cannot end its shell command, and nobody else would: the next daemon kills the
//! process groups the dead worker listed. And a `session/load` sent right after a
//! daemon was SIGKILLed waits for the old worker (still ending its command) to let go
//! of the record instead of failing at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use daemon_support::{DaemonTest, eventually, kill, pid_alive};
use kestrel_testkit::{Script, Step};
use serde_json::json;
use std::path::PathBuf;

/// Kills a process group the test saw started, should an assertion fail first.
struct GroupGuard(u32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let _ = kestrel_platform::kill_group(self.0, kestrel_platform::Signal::Kill);
    }
}

fn groups_file(test: &DaemonTest, worker: u64) -> PathBuf {
    test.env.home.path().join("run").join(format!("worker-{worker}.groups"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_with_its_daemon_has_its_commands_killed_by_the_next_daemon() {
    let test = DaemonTest::new(Script::new([Step::tool_call(
        "shell",
        json!({"command": "touch started.txt; sleep 300"}),
    )]));
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let session = client.new_session(&cwd).await;
    client.set_mode(&session, "yolo").await;
    let _turn = client.prompt(&session, "run something long");
    client.wait_update(&session, "tool_call").await;
    let worker = test.wait_worker_pid(&session, None);
    let daemon = test.daemon_pid().unwrap();
    let list = groups_file(&test, worker);
    eventually("the worker to list its command's group", || {
        std::fs::read_to_string(&list).is_ok_and(|text| !text.trim().is_empty())
    })
    .await;
    eventually("the command to start", || cwd.join("started.txt").exists()).await;
    let group: u32 = std::fs::read_to_string(&list).unwrap().trim().parse().unwrap();
    let _guard = GroupGuard(group);

    // Both stopped first, so neither can clean up after the other: then both killed.
    kill(daemon, libc::SIGSTOP);
    kill(worker as u32, libc::SIGSTOP);
    kill(worker as u32, libc::SIGKILL);
    kill(daemon, libc::SIGKILL);
    eventually("the worker to be gone", || !pid_alive(worker as u32)).await;
    eventually("the daemon to be gone", || test.daemon_pid().is_none()).await;
    drop(client);
    assert!(kestrel_platform::group_exists(group), "the command outlived its worker");
    assert!(list.exists(), "nobody swept the list yet");

    let started = test.command(&["daemon", "start"]).output().unwrap();
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    eventually("the new daemon to kill the orphaned command", || {
        !kestrel_platform::group_exists(group)
    })
    .await;
    assert!(!list.exists(), "the list is removed");
    let log = std::fs::read_to_string(test.env.home.path().join("logs/daemon.log")).unwrap();
    assert!(
        log.contains(&format!("killed 1 process group(s) left running by worker {worker}")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_right_after_the_daemon_was_killed_waits_for_the_old_worker() {
    // The command ignores SIGTERM: the old worker holds the record for the shell tool's
    // whole grace period while it ends it.
    let test = DaemonTest::new(Script::new([
        Step::tool_call("shell", json!({"command": "trap '' TERM; touch started.txt; sleep 30"})),
        Step::text("carrying on"),
    ]));
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let session = client.new_session(&cwd).await;
    client.set_mode(&session, "yolo").await;
    let _turn = client.prompt(&session, "run something stubborn");
    client.wait_update(&session, "tool_call").await;
    eventually("the command to start", || cwd.join("started.txt").exists()).await;
    let worker = test.wait_worker_pid(&session, None) as u32;
    let daemon = test.daemon_pid().unwrap();
    kill(daemon, libc::SIGKILL);
    drop(client);
    eventually("the daemon to be gone", || test.daemon_pid().is_none()).await;
    assert!(pid_alive(worker), "the old worker is still ending its command");

    let next = test.client().await;
    let loaded = next.load(&session, &cwd).await;
    assert!(loaded.is_ok(), "the load waited for the record: {loaded:?}");
    eventually("the old worker to exit", || !pid_alive(worker)).await;
    let ended = test.record_items(&session).into_iter().any(|item| {
        item["type"] == "turn_completed"
            && matches!(item["stop_reason"].as_str(), Some("cancelled" | "interrupted"))
    });
    assert!(ended, "the killed daemon's turn is closed in the record");
    let answer = next.prompt(&session, "go on").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
}
