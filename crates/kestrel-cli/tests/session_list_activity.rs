//! `session/list` through the daemon (`kestrel acp`) and a worker: `updatedAt` is the
//! session's last activity (within a second of its record's last item once a turn is over),
//! sessions come most recently active first, and the daemon and a worker give the same
//! answer (only the daemon says which sessions are `live`). The TUI's `/resume` picker
//! shows them in that order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;
mod tui_support;
mod worker_support;

use daemon_support::DaemonTest;
use kestrel_protocol::Timestamp;
use kestrel_testkit::{Key, Script, Step};
use serde_json::{Value, json};
use tui_support::TuiTest;
use worker_support::Worker;

/// The record's header line and its last item, as JSON.
fn header_and_last_item(test: &DaemonTest, session_id: &str) -> (Value, Value) {
    let path = test
        .env
        .records()
        .into_iter()
        .find(|path| path.file_stem().is_some_and(|stem| stem == session_id))
        .expect("a record");
    let lines = common::read_lines(&path);
    (lines[0].clone(), lines.last().unwrap().clone())
}

fn entry<'a>(listed: &'a Value, session_id: &str) -> &'a Value {
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|session| session["sessionId"] == session_id)
        .unwrap_or_else(|| panic!("{session_id} is listed: {listed}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_list_puts_the_session_used_last_first_with_its_last_activity() {
    let test = DaemonTest::new(Script::new([
        Step::text("first answer"),
        Step::text("second answer"),
        Step::text("third answer"),
    ]));
    let client = test.client().await;
    let cwd = test.env.work_path();
    let older = client.new_session(&cwd).await;
    let answer = client.prompt(&older, "one").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    let newer = client.new_session(&cwd).await;
    client.prompt(&newer, "two").await.unwrap().unwrap();
    // The older session is used again: it is now the one used last.
    client.prompt(&older, "three").await.unwrap().unwrap();

    let listed = client.request("session/list", json!({})).await.unwrap();
    let order: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(order, [older.as_str(), newer.as_str()], "most recently active first: {listed}");
    for id in [&older, &newer] {
        let (header, last) = header_and_last_item(&test, id);
        assert_eq!(last["type"], "turn_completed");
        let listed = entry(&listed, id);
        // The turn's last activity: its end, or its last model request when the end
        // came within a second of it (such an end writes no index line).
        let millis = |value: &Value| Timestamp::parse(value.as_str().unwrap()).unwrap().millis;
        let (updated, ended) = (millis(&listed["updatedAt"]), millis(&last["ts"]));
        assert!(updated <= ended && ended - updated < 1_000, "the turn's end: {listed} {last}");
        assert_ne!(listed["updatedAt"], header["created_at"], "not the creation time");
    }
    let older_entry = entry(&listed, &older);
    assert_eq!(older_entry["title"], "one");
    assert_eq!(older_entry["_meta"]["kestrel"]["live"], true);

    // `kestrel sessions` lists in the same order and shows when each was used last.
    let output = test.env.kestrel(&["sessions"]);
    let printed = common::stdout(&output);
    let rows: Vec<&str> = printed.lines().collect();
    assert_eq!(rows.len(), 2, "{printed}");
    for (row, id) in rows.iter().zip([&older, &newer]) {
        let updated = entry(&listed, id)["updatedAt"].as_str().unwrap().to_owned();
        assert!(
            row.starts_with(id.as_str()) && row.contains(&updated),
            "{id} used {updated}: {printed}"
        );
    }

    // A worker answers session/list from the same function: the same entries, without
    // `live` (only the daemon knows which sessions run).
    let worker = Worker::spawn(&test.env);
    worker.initialize().await;
    let from_worker = worker.request("session/list", json!({"cwd": cwd})).await.unwrap();
    let mut from_daemon = client.request("session/list", json!({"cwd": cwd})).await.unwrap();
    for session in from_daemon["sessions"].as_array_mut().unwrap() {
        let live = session["_meta"]["kestrel"].as_object_mut().unwrap().remove("live");
        assert!(live.is_some(), "the daemon says whether it is live: {session}");
    }
    assert_eq!(from_worker["sessions"].as_array().unwrap().len(), 2);
    assert_eq!(from_worker, from_daemon);
    let elsewhere = worker.request("session/list", json!({"cwd": "/nowhere"})).await.unwrap();
    assert_eq!(elsewhere, json!({"sessions": []}));

    // Both answer initialize alike too.
    let daemon_init = client.initialize().await;
    let worker_init = worker.initialize().await;
    assert_eq!(daemon_init, worker_init);
}

#[test]
fn the_resume_picker_puts_the_session_used_last_on_top() {
    let script =
        Script::new([Step::text("Old answer."), Step::text("New answer."), Step::text("Again.")]);
    let mut test = TuiTest::new(script);
    let run = |args: &[&str]| {
        let output = test.command(args).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    };
    run(&["exec", "the older task"]);
    let older = test.env.records()[0].file_stem().unwrap().to_string_lossy().into_owned();
    run(&["exec", "the newer task"]);
    // The older session is continued: it was used last.
    run(&["exec", "resume", &older, "once more"]);
    test.start(&[]);
    test.wait("● daemon ready");
    test.type_text("/resume");
    test.press(Key::Enter);
    let screen = test.wait_until("both sessions in the picker", |screen| {
        screen.contains("the older task") && screen.contains("the newer task")
    });
    let older_at = screen.find("the older task").unwrap();
    let newer_at = screen.find("the newer task").unwrap();
    assert!(older_at < newer_at, "the session used last comes first:\n{screen}");
}
