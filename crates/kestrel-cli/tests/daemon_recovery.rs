//! Crash recovery with real processes: a worker killed mid-turn is restarted from its
//! record (the prompt answered, nothing already written lost, the other session's turn
//! untouched), a killed daemon loses no session, and a worker that crashes in a loop
//! is given up on with a clear error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use common::API_KEY_VAR;
use daemon_support::{DaemonTest, Event, eventually, kill, pid_alive, session_status};
use kestrel_testkit::{Script, ScriptedServer, Step};
use serde_json::{Value, json};
use std::time::Duration;

/// A test whose `second` provider is another scripted server, so two sessions' turns
/// can run at once without sharing a script.
fn two_servers(first: Script, second: Script) -> (DaemonTest, ScriptedServer) {
    let test = DaemonTest::new(first);
    let other = ScriptedServer::start(second).unwrap();
    test.env.write_config(&format!(
        "model = \"scripted/test-model\"\n\n[providers.scripted]\nbase_url = \"{}\"\nwire_api = \"chat\"\napi_key_env = \"{API_KEY_VAR}\"\nrequest_max_retries = 2\n\n[providers.second]\nbase_url = \"{}\"\nwire_api = \"chat\"\napi_key_env = \"{API_KEY_VAR}\"\nrequest_max_retries = 2\n",
        test.env.server.base_url(),
        other.base_url()
    ));
    (test, other)
}

fn item_types(items: &[Value]) -> Vec<String> {
    items.iter().map(|item| item["type"].as_str().unwrap_or("?").to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_mid_turn_is_restarted_from_its_record() {
    let (test, other) = two_servers(
        Script::new([
            Step::tool_call(
                "shell",
                json!({"command": "touch started.txt; sleep 8; echo never > never.txt"}),
            ),
            Step::text("after the restart"),
        ]),
        Script::new([
            Step::tool_call("shell", json!({"command": "sleep 2; echo other-done"})),
            Step::text("the other session finished"),
        ]),
    );
    let mut client = test.kestrel_client().await;
    let mut watcher = test.client().await;
    let cwd = test.env.work_path();
    let victim = client.new_session(&cwd).await;
    client.set_mode(&victim, "yolo").await;
    let bystander = watcher.new_session(&cwd).await;
    watcher.set_mode(&bystander, "yolo").await;
    let switched =
        json!({"sessionId": bystander, "configId": "model", "value": "second/test-model"});
    watcher.request("session/set_config_option", switched).await.expect("model switched");

    let doomed = client.prompt(&victim, "start something long");
    let unaffected = watcher.prompt(&bystander, "do the other thing");
    client.wait_update(&victim, "tool_call").await;
    let pid = test.wait_worker_pid(&victim, None);
    let written = item_types(&test.record_items(&victim));
    assert!(written.contains(&"tool_call".to_owned()), "{written:?}");

    // The worker lists its command's process group as soon as it has started it.
    let groups = test.env.home.path().join("run").join(format!("worker-{pid}.groups"));
    eventually("the worker to list the command's process group", || {
        std::fs::read_to_string(&groups).is_ok_and(|text| !text.trim().is_empty())
    })
    .await;
    // Killed once the command itself runs, not while `bash -l` runs the login profile: a
    // profile killed halfway can leave a lock behind (pyenv's rehash lock made every later
    // login shell on the machine wait 60 s, the other session's included).
    eventually("the command to start", || cwd.join("started.txt").exists()).await;
    kill(pid as u32, libc::SIGKILL);
    let killed_at = std::time::Instant::now();
    let answer = doomed.await.unwrap().expect("the pending prompt is answered");
    assert_eq!(answer["stopReason"], "cancelled");
    let restarted = client
        .wait_for("_kestrel/worker/restarted", |event| {
            matches!(event, Event::Notification(n) if n.method == kestrel_daemon::WORKER_RESTARTED)
        })
        .await;
    let Event::Notification(restarted) = restarted else { unreachable!() };
    assert_eq!(restarted.params["sessionId"], victim);
    assert_eq!(restarted.params["restarts"], 1);
    assert!(
        restarted.params["reason"].as_str().unwrap().contains("signal 9"),
        "{}",
        restarted.params
    );
    let notice = client.wait_update(&victim, "notice").await;
    assert!(notice["title"].as_str().unwrap().contains("restarted"), "{notice}");

    let new_pid = test.wait_worker_pid(&victim, Some(pid));
    assert_ne!(new_pid, pid);
    let items = test.record_items(&victim);
    let types = item_types(&items);
    for (index, kind) in written.iter().enumerate() {
        assert_eq!(&types[index], kind, "items written before the crash are kept: {types:?}");
    }
    let interrupted = items
        .iter()
        .any(|item| item["type"] == "turn_completed" && item["stop_reason"] == "interrupted");
    assert!(interrupted, "the unfinished turn is recorded as interrupted: {types:?}");
    // Never re-sent to the model by itself: one request so far.
    assert_eq!(test.env.requests().len(), 1);

    // The other session's turn went on undisturbed.
    let other_answer = unaffected.await.unwrap().unwrap();
    assert_eq!(other_answer["stopReason"], "end_turn");
    watcher.settle(Duration::from_millis(200)).await;
    assert_eq!(watcher.agent_text(&bystander), "the other session finished");
    assert_eq!(other.requests().len(), 2);

    // The restarted session takes the next prompt.
    let next = client.prompt(&victim, "carry on").await.unwrap().unwrap();
    assert_eq!(next["stopReason"], "end_turn");
    assert_eq!(test.env.requests().len(), 2);

    // The killed worker's shell command died with it: past its sleep, it wrote nothing.
    let past_the_sleep = Duration::from_secs(10).saturating_sub(killed_at.elapsed());
    tokio::time::sleep(past_the_sleep).await;
    assert!(!cwd.join("never.txt").exists(), "the interrupted command kept running");
    assert!(!groups.exists(), "the list is removed once its groups are killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_daemon_loses_no_session() {
    let test = DaemonTest::new(Script::new([
        Step::text("answer one"),
        Step::text("answer two"),
        Step::text("answer three"),
    ]));
    let client = test.client().await;
    let cwd = test.env.work_path();
    let first = client.new_session(&cwd).await;
    let second = client.new_session(&cwd).await;
    for (session, text) in [(&first, "question one"), (&second, "question two")] {
        let answer = client.prompt(session, text).await.unwrap().unwrap();
        assert_eq!(answer["stopReason"], "end_turn");
    }
    let daemon = test.daemon_pid().unwrap();
    let workers = [test.wait_worker_pid(&first, None), test.wait_worker_pid(&second, None)];
    kill(daemon, libc::SIGKILL);
    // Its workers see their input close and exit.
    eventually("the orphaned workers to exit", || {
        workers.iter().all(|pid| !pid_alive(*pid as u32))
    })
    .await;
    drop(client);

    let mut next = test.client().await;
    assert_ne!(test.daemon_pid(), Some(daemon), "a new daemon");
    let listed = next.request("session/list", json!({})).await.unwrap();
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert!(ids.contains(&first.as_str()) && ids.contains(&second.as_str()), "{listed}");
    for (session, said) in [(&first, "answer one"), (&second, "answer two")] {
        next.load(session, &cwd).await.expect("every session loads");
        next.settle(Duration::from_millis(200)).await;
        assert_eq!(next.agent_text(session), said);
    }
    let answer = next.prompt(&first, "question three").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_crashes_in_a_loop_is_given_up_on() {
    let test = DaemonTest::new(Script::new([Step::text("still here")]));
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let session = client.new_session(&cwd).await;
    let mut pid = test.wait_worker_pid(&session, None);
    for restart in 1..=3 {
        kill(pid as u32, libc::SIGKILL);
        pid = test.wait_worker_pid(&session, Some(pid));
        let status = test.status();
        assert_eq!(session_status(&status, &session).unwrap()["restarts"], restart, "{status}");
    }
    kill(pid as u32, libc::SIGKILL);
    let gave_up = client
        .wait_for("the give-up message", |event| {
            matches!(event, Event::Notification(n) if n.method == "session/update"
                && n.params["update"]["content"]["text"].as_str().is_some_and(|t| t.contains("gave up")))
        })
        .await;
    let Event::Notification(gave_up) = gave_up else { unreachable!() };
    let text = gave_up.params["update"]["content"]["text"].as_str().unwrap().to_owned();
    assert!(text.contains("crashed 4 times") && text.contains("session/load"), "{text}");
    eventually("the session to leave the daemon", || {
        session_status(&test.status(), &session).is_none()
    })
    .await;
    let error = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await
        .unwrap_err();
    assert!(error.message.contains("session/load"), "{error}");

    // The record is kept: loading it again starts a fresh worker.
    client.load(&session, &cwd).await.expect("loads again after giving up");
    let answer = client.prompt(&session, "are you there").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_worker_keeps_the_mode_the_session_switched_to() {
    let test = DaemonTest::new(Script::new([
        Step::tool_call("write_file", json!({"path": "yolo.txt", "content": "written\n"})),
        Step::text("wrote it"),
    ]));
    let mut client = test.kestrel_client().await;
    let cwd = test.env.work_path();
    let session = client.new_session(&cwd).await;
    client.set_mode(&session, "yolo").await;
    let pid = test.wait_worker_pid(&session, None);
    kill(pid as u32, libc::SIGKILL);
    client
        .wait_for("_kestrel/worker/restarted", |event| {
            matches!(event, Event::Notification(n) if n.method == kestrel_daemon::WORKER_RESTARTED)
        })
        .await;

    // A client attaching now is told the mode the session has.
    let other = test.client().await;
    let loaded = other.load(&session, &cwd).await.expect("loaded");
    assert_eq!(loaded["modes"]["currentModeId"], "yolo", "{loaded}");

    // Still yolo: the write runs without asking.
    let turn = client.prompt(&session, "write the file");
    tokio::select! {
        answer = turn => assert_eq!(answer.unwrap().unwrap()["stopReason"], "end_turn"),
        request = client.wait_permission() => panic!("asked after the restart: {request:?}"),
    }
    assert_eq!(std::fs::read_to_string(cwd.join("yolo.txt")).unwrap(), "written\n");
}
