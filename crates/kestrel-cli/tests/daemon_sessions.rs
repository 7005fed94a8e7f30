//! Sessions through the daemon with real processes (`kestrel acp` clients, the daemon,
//! `kestrel worker`s, the scripted model): fan-out to every attached client, detach and
//! reattach mid-turn, sessions outliving their clients, permission requests to every
//! client (first answer wins) or to the next one, and idle workers stopping.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use daemon_support::{DaemonTest, Event, eventually, pid_alive, session_status};
use kestrel_testkit::{Script, Step};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// A slow turn: a shell command that takes a while, then the answer.
fn slow_turn(seconds: u32) -> Script {
    Script::new([
        Step::tool_call("shell", json!({"command": format!("sleep {seconds}; echo slow-done")})),
        Step::text("finished"),
    ])
}

fn tool_call_ids(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .filter(|update| update["sessionUpdate"] == "tool_call")
        .filter_map(|update| update["toolCallId"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_on_one_session_both_receive_its_updates() {
    let test = DaemonTest::new(Script::new([Step::text("hello to both of you")]));
    let mut first = test.client().await;
    let mut second = test.client().await;
    let cwd = test.env.work_path();
    let session = first.new_session(&cwd).await;
    let attached = second.load(&session, &cwd).await.expect("attach to a live session");
    assert!(attached.get("modes").is_some(), "the attach answer carries the modes: {attached}");
    let status = test.status();
    assert_eq!(session_status(&status, &session).unwrap()["clients"], 2, "{status}");

    let answer = first.prompt(&session, "greet us").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    second.wait_update(&session, "agent_message_chunk").await;
    second.settle(Duration::from_millis(300)).await;
    first.settle(Duration::from_millis(100)).await;
    assert_eq!(first.agent_text(&session), "hello to both of you");
    assert_eq!(second.agent_text(&session), "hello to both of you");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_and_reattach_mid_turn_misses_nothing_and_repeats_nothing() {
    let test = DaemonTest::new(slow_turn(3));
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let session = client.new_session(&cwd).await;
    client.set_mode(&session, "yolo").await;
    let turn = client.prompt(&session, "run the slow thing");
    client.wait_update(&session, "tool_call").await;

    let detached =
        client.request(kestrel_daemon::SESSION_DETACH, json!({"sessionId": session})).await;
    assert_eq!(detached.unwrap(), json!({}));
    client.settle(Duration::from_millis(300)).await;
    let before = client.seen.len();
    client.settle(Duration::from_millis(500)).await;
    assert_eq!(client.seen.len(), before, "a detached client gets no updates");
    let status = test.status();
    assert_eq!(session_status(&status, &session).unwrap()["clients"], 0);

    // Another client attaches mid-turn too.
    let mut other = test.client().await;
    other.load(&session, &cwd).await.expect("attach mid-turn");
    let seen_before_reattach = client.seen.len();
    client.load(&session, &cwd).await.expect("reattach mid-turn");

    // The prompt sent before detaching is still answered to its sender.
    let answer = turn.await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    other.wait_update(&session, "agent_message_chunk").await;
    other.settle(Duration::from_millis(300)).await;
    client.settle(Duration::from_millis(100)).await;

    for (name, updates) in
        [("reattached", client.updates(&session)[..].to_vec()), ("second", other.updates(&session))]
    {
        let updates: Vec<Value> = if name == "reattached" {
            client.seen[seen_before_reattach..]
                .iter()
                .filter_map(|event| match event {
                    Event::Notification(n) if n.method == "session/update" => {
                        Some(n.params["update"].clone())
                    }
                    Event::Notification(_) | Event::Request(_) => None,
                })
                .collect()
        } else {
            updates
        };
        let calls = tool_call_ids(&updates);
        assert_eq!(
            calls.len(),
            1,
            "{name}: the tool call once (history), never twice: {updates:#?}"
        );
        let text: String = updates
            .iter()
            .filter(|update| update["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|update| update["content"]["text"].as_str())
            .collect();
        assert_eq!(text, "finished", "{name}: the live end of the turn");
        let prompt_replayed = updates.iter().any(|update| {
            update["sessionUpdate"] == "user_message_chunk"
                && update["content"]["text"] == "run the slow thing"
        });
        assert!(prompt_replayed, "{name}: history starts with the user's prompt");
        let completed = updates.iter().any(|update| {
            update["sessionUpdate"] == "tool_call_update" && update["status"] == "completed"
        });
        assert!(completed, "{name}: the tool call's completion arrives live");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_running_when_its_last_client_leaves() {
    let test = DaemonTest::new(slow_turn(2));
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let session = client.new_session(&cwd).await;
    client.set_mode(&session, "yolo").await;
    let _turn = client.prompt(&session, "keep going without me");
    client.wait_update(&session, "tool_call").await;
    assert!(client.close().await.success());

    // The turn finishes with nobody watching.
    eventually("the turn to complete in the record", || {
        test.record_items(&session)
            .iter()
            .any(|item| item["type"] == "turn_completed" && item["stop_reason"] == "end_turn")
    })
    .await;
    let mut later = test.client().await;
    let listed = later.request("session/list", json!({})).await.unwrap();
    let entry =
        listed["sessions"].as_array().unwrap().iter().find(|s| s["sessionId"] == session).cloned();
    assert_eq!(entry.unwrap()["_meta"]["kestrel"]["live"], true, "{listed}");
    later.load(&session, &cwd).await.unwrap();
    later.settle(Duration::from_millis(200)).await;
    assert_eq!(later.agent_text(&session), "finished", "the finished turn is in the history");
}

fn permission_script() -> Script {
    Script::new([
        Step::tool_call("write_file", json!({"path": "approved.txt", "content": "approved\n"})),
        Step::text("written"),
    ])
}

fn allow_once(request: &kestrel_protocol::jsonrpc::Request) -> String {
    let options = request.params["options"].as_array().expect("options");
    let option =
        options.iter().find(|option| option["kind"] == "allow_once").expect("an allow_once option");
    option["optionId"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_goes_to_every_client_and_the_first_answer_wins() {
    let test = DaemonTest::new(permission_script());
    let mut first = test.client().await;
    let mut second = test.client().await;
    let cwd = test.env.work_path();
    let session = first.new_session(&cwd).await;
    first.set_mode(&session, "ask").await;
    second.load(&session, &cwd).await.unwrap();
    let turn = first.prompt(&session, "write the file");

    let asked_first = first.wait_permission().await;
    let asked_second = second.wait_permission().await;
    assert_eq!(asked_first.params["sessionId"], session);
    assert_eq!(asked_first.params["toolCall"], asked_second.params["toolCall"]);
    second.answer(asked_second.id.clone(), &allow_once(&asked_second)).await;

    let answer = turn.await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    assert_eq!(std::fs::read_to_string(cwd.join("approved.txt")).unwrap(), "approved\n");
    // A late answer from the other client changes nothing.
    first.answer(asked_first.id.clone(), "reject_once").await;
    let after = first.request("session/list", json!({})).await;
    assert!(after.is_ok(), "the daemon still serves the late client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_with_no_client_waits_for_the_next_one() {
    let test = DaemonTest::new(permission_script());
    let mut first = test.client().await;
    let cwd = test.env.work_path();
    let session = first.new_session(&cwd).await;
    first.set_mode(&session, "ask").await;
    let _turn = first.prompt(&session, "write the file");
    first.wait_permission().await;
    // The only client leaves without answering.
    assert!(first.close().await.success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!cwd.join("approved.txt").exists());

    let mut next = test.client().await;
    next.load(&session, &cwd).await.unwrap();
    let asked = next.wait_permission().await;
    next.answer(asked.id.clone(), &allow_once(&asked)).await;
    next.wait_update(&session, "agent_message_chunk").await;
    eventually("the approved write", || cwd.join("approved.txt").exists()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_with_no_client_exits_and_its_session_loads_again() {
    let test =
        DaemonTest::new(Script::new([Step::text("first answer"), Step::text("second answer")]))
            .with_var("KESTREL_WORKER_IDLE_SECS", "0.5");
    let client = test.client().await;
    let cwd = test.env.work_path();
    let session = client.new_session(&cwd).await;
    let answer = client.prompt(&session, "one").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    let pid = test.wait_worker_pid(&session, None);
    // Attached: the worker stays.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(session_status(&test.status(), &session).is_some());

    client.request(kestrel_daemon::SESSION_DETACH, json!({"sessionId": session})).await.unwrap();
    eventually("the idle worker to exit", || session_status(&test.status(), &session).is_none())
        .await;
    eventually("the worker process to be gone", || !pid_alive(pid as u32)).await;

    client.load(&session, &cwd).await.expect("an idle-stopped session loads again");
    let answer = client.prompt(&session, "two").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    assert_ne!(test.wait_worker_pid(&session, None), pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_updates_reaches_a_reading_client_whole() {
    // Thousands of streamed chunks at once: the daemon absorbs the burst.
    let words: Vec<String> = (0..6000).map(|n| format!("word{n}")).collect();
    let text = words.join(" ");
    let test = DaemonTest::new(Script::new([Step::text(&text)]));
    let mut reader = test.client().await;
    let session = reader.new_session(&test.env.work_path()).await;
    let answer = reader.prompt(&session, "talk a lot").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    reader.settle(Duration::from_millis(300)).await;
    assert_eq!(reader.agent_text(&session), text, "every chunk, in order");
    let status = test.status();
    assert_eq!(session_status(&status, &session).unwrap()["clients"], 1, "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_cut_off_without_stalling_the_session() {
    // Thousands of chunks: more than the socket, the connection's queue and the
    // backlog the daemon is told to keep for one client hold together.
    let words: Vec<String> = (0..8000).map(|n| format!("word{n}")).collect();
    let text = words.join(" ");
    let test = DaemonTest::new(Script::new([Step::text(&text)]))
        .with_var("KESTREL_DAEMON_CLIENT_BACKLOG", &(256 * 1024).to_string());
    let mut reader = test.client().await;
    let cwd = test.env.work_path();
    let session = reader.new_session(&cwd).await;
    // A raw socket client that attaches and then never reads.
    let stream = kestrel_daemon::client::connect(&test.home()).await.unwrap();
    let (_never_read, mut write_half) = stream.into_split();
    let load = json!({"jsonrpc": "2.0", "id": 1, "method": "session/load",
        "params": {"sessionId": session, "cwd": cwd, "mcpServers": []}});
    write_half.write_all(format!("{load}\n").as_bytes()).await.unwrap();
    eventually("the silent client to attach", || {
        session_status(&test.status(), &session).is_some_and(|s| s["clients"] == 2)
    })
    .await;

    // The reader steps aside (its prompt is still answered to it), so only the
    // silent client is behind while the session streams.
    reader.request(kestrel_daemon::SESSION_DETACH, json!({"sessionId": session})).await.unwrap();
    let answer = reader.prompt(&session, "talk a lot").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn", "the turn finishes although a client never reads");
    eventually("the silent client to be cut off", || {
        session_status(&test.status(), &session).is_some_and(|s| s["clients"] == 0)
    })
    .await;
    reader.load(&session, &cwd).await.unwrap();
    reader.settle(Duration::from_millis(300)).await;
    assert_eq!(reader.agent_text(&session), text, "the whole answer is there");
    let log = std::fs::read_to_string(test.env.home.path().join("logs/daemon.log")).unwrap();
    assert!(log.contains("cut off: it stopped reading"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_loads_again_and_again_without_reading_is_cut_off() {
    // A long history: every load of it queues far more than the backlog allows.
    let words: Vec<String> = (0..12000).map(|n| format!("word{n}")).collect();
    let text = words.join(" ");
    let test = DaemonTest::new(Script::new([Step::text(&text)]))
        .with_var("KESTREL_DAEMON_CLIENT_BACKLOG", &(4 * 1024 * 1024).to_string());
    let reader = test.client().await;
    let cwd = test.env.work_path();
    let session = reader.new_session(&cwd).await;
    let answer = reader.prompt(&session, "talk a lot").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");

    // A raw socket client that asks for the history over and over and never reads.
    let stream = kestrel_daemon::client::connect(&test.home()).await.unwrap();
    let (_never_read, mut write_half) = stream.into_split();
    let log_path = test.env.home.path().join("logs/daemon.log");
    let cut_off = || {
        std::fs::read_to_string(&log_path)
            .is_ok_and(|log| log.contains("cut off: it stopped reading"))
    };
    for n in 0..200 {
        let load = json!({"jsonrpc": "2.0", "id": n, "method": "session/load",
            "params": {"sessionId": session, "cwd": cwd, "mcpServers": []}});
        if write_half.write_all(format!("{load}\n").as_bytes()).await.is_err() || cut_off() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eventually("the client piling up histories to be cut off", cut_off).await;
    // The daemon still serves everyone else.
    let again = test.client().await;
    again.load(&session, &cwd).await.expect("loaded");
}
