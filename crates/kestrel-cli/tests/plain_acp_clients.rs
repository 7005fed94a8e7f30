//! A plain ACP client (one that did not advertise `session.notices`: most editors) sees
//! standard ACP only, through the real daemon: no `_kestrel/*` notification and no
//! `notice` update, live or in a history; a worker restart (a warning) reaches it as an
//! agent message with a `messageId` of its own, never as part of the model's reply, and is
//! not replayed by `session/load`. A client that opted in, attached to the same session,
//! hears all of it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use daemon_support::{AcpClient, DaemonTest, Event, eventually, kill};
use kestrel_testkit::{Script, Step};
use serde_json::{Value, json};
use std::time::Duration;

/// The Kestrel-only things `client` received: extension notifications and notices.
fn kestrel_only(client: &AcpClient) -> Vec<String> {
    client
        .seen
        .iter()
        .filter_map(|event| match event {
            Event::Notification(n) if n.method.starts_with('_') => Some(n.method.clone()),
            Event::Notification(n) if n.params["update"]["sessionUpdate"] == "notice" => {
                Some(format!("notice: {}", n.params["update"]))
            }
            Event::Notification(_) | Event::Request(_) => None,
        })
        .collect()
}

/// The agent message chunks `client` received for `session`: (messageId, text).
fn messages(client: &AcpClient, session: &str) -> Vec<(Value, String)> {
    client
        .updates(session)
        .iter()
        .filter(|update| update["sessionUpdate"] == "agent_message_chunk")
        .map(|update| {
            let text = update["content"]["text"].as_str().unwrap_or_default().to_owned();
            (update["messageId"].clone(), text)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_client_sees_standard_acp_only_and_warnings_as_messages_of_their_own() {
    let test = DaemonTest::new(Script::new([
        Step::tool_call("shell", json!({"command": "touch started.txt; sleep 8"})),
        Step::text("Answered after the restart."),
    ]));
    let cwd = test.env.work_path();
    let mut plain = test.client().await;
    let mut kestrel = test.kestrel_client().await;
    let session = plain.new_session(&cwd).await;
    kestrel.load(&session, &cwd).await.unwrap();
    plain.set_mode(&session, "yolo").await;

    // A worker killed mid-turn: a warning for people.
    let doomed = plain.prompt(&session, "start something long");
    plain.wait_update(&session, "tool_call").await;
    let pid = test.wait_worker_pid(&session, None);
    eventually("the command to start", || cwd.join("started.txt").exists()).await;
    kill(pid as u32, libc::SIGKILL);
    assert_eq!(doomed.await.unwrap().unwrap()["stopReason"], "cancelled");
    let restart = plain
        .wait_for("the restart as an agent message", |event| {
            matches!(event, Event::Notification(n)
                if n.params["update"]["content"]["text"].as_str()
                    .is_some_and(|text| text.contains("[kestrel]") && text.contains("restarted")))
        })
        .await;
    kestrel.wait_update(&session, "notice").await;
    test.wait_worker_pid(&session, Some(pid));

    // The mode switch (an info notice) and a whole turn after it.
    plain.set_mode(&session, "auto").await;
    let answer = plain.prompt(&session, "and now?").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    plain.settle(Duration::from_millis(300)).await;
    kestrel.settle(Duration::from_millis(300)).await;

    assert_eq!(kestrel_only(&plain), Vec::<String>::new(), "the plain client");
    let heard = kestrel_only(&kestrel);
    for expected in ["_kestrel/session/turn", "_kestrel/worker/restarted"] {
        assert!(heard.iter().any(|method| method == expected), "{expected}: {heard:?}");
    }
    assert!(heard.iter().any(|heard| heard.starts_with("notice")), "{heard:?}");
    // The restart message stands apart: its own messageId, which no answer shares.
    let Event::Notification(restart) = restart else { unreachable!() };
    let restart_id = restart.params["update"]["messageId"].clone();
    assert!(restart_id.is_string(), "{restart:?}");
    let others: Vec<(Value, String)> = messages(&plain, &session)
        .into_iter()
        .filter(|(_, text)| !text.contains("[kestrel]"))
        .collect();
    let answer: String = others.iter().map(|(_, text)| text.as_str()).collect();
    assert!(answer.contains("Answered after the restart"), "{answer}");
    assert!(others.iter().all(|(id, _)| *id != restart_id), "{others:?}");

    // A load from the record (a daemon started afresh) replays no notice to it, and no
    // restart message: notices are live events.
    drop((plain, kestrel));
    test.stop_daemon();
    let mut plain = test.client().await;
    plain.load(&session, &cwd).await.unwrap();
    plain.settle(Duration::from_millis(300)).await;
    let replayed = messages(&plain, &session);
    let text: String = replayed.iter().map(|(_, text)| text.as_str()).collect();
    assert!(text.contains("Answered after the restart"), "{text}");
    assert!(replayed.iter().all(|(_, text)| !text.contains("[kestrel]")), "{replayed:?}");
    assert_eq!(kestrel_only(&plain), Vec::<String>::new(), "the plain client's load");
    // One that opted in gets the record's notices in its history (the interrupted turn).
    let mut kestrel = test.kestrel_client().await;
    kestrel.load(&session, &cwd).await.unwrap();
    kestrel.settle(Duration::from_millis(300)).await;
    let notices: Vec<Value> = kestrel
        .updates(&session)
        .into_iter()
        .filter(|update| update["sessionUpdate"] == "notice")
        .collect();
    let interrupted = |n: &Value| n["title"].as_str().unwrap().contains("interrupted");
    assert!(notices.iter().any(interrupted), "{notices:?}");
}
