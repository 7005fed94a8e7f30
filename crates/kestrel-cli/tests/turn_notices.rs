//! `_kestrel/session/turn` under races and failures, through the real daemon: two
//! prompts sent at once start one turn; a turn a worker restart interrupted is heard
//! ending (after the restart notice) before a turn prompted since starts; a failed turn
//! says why; a session given up on ends its turn; a subagent's first turn (the daemon's
//! own prompt) runs and ends like any other.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use daemon_support::{AcpClient, DaemonTest, Event, kill, slow};
use kestrel_testkit::{Fault, Script, ScriptedToolCall, Step};
use serde_json::{Value, json};
use std::time::Duration;

/// What a client heard of `session`'s turns and restarts, in order: `true`/`false`
/// for turn notices (with the stop reason or error), `restarted` for a restart.
fn heard(client: &AcpClient, session: &str) -> Vec<String> {
    client
        .seen
        .iter()
        .filter_map(|event| match event {
            Event::Notification(n) if n.params["sessionId"] == session => match n.method.as_str() {
                kestrel_daemon::SESSION_TURN => Some(turn_label(&n.params)),
                kestrel_daemon::WORKER_RESTARTED => Some("restarted".to_owned()),
                _ => None,
            },
            Event::Notification(_) | Event::Request(_) => None,
        })
        .collect()
}

fn turn_label(params: &Value) -> String {
    match (params["running"].as_bool(), params["stopReason"].as_str()) {
        (Some(true), _) => "true".to_owned(),
        (_, Some(reason)) => format!("false:{reason}"),
        (_, None) => format!("false!{}", params["error"].as_str().unwrap_or("(no error)")),
    }
}

fn is_turn_notice(event: &Event, session: &str) -> bool {
    matches!(event, Event::Notification(n) if n.method == kestrel_daemon::SESSION_TURN
        && n.params["sessionId"] == session)
}

/// Reads `client`'s events until it has heard `count` turn notices of `session` in all.
async fn hear_turn_notices(client: &mut AcpClient, session: &str, count: usize) {
    let mut heard_so_far =
        client.seen.iter().filter(|event| is_turn_notice(event, session)).count();
    if heard_so_far >= count {
        return;
    }
    client
        .wait_for("turn notices", |event| {
            heard_so_far += usize::from(is_turn_notice(event, session));
            heard_so_far == count
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_prompts_sent_at_once_start_one_turn() {
    let rounds = 6;
    let steps: Vec<Step> = (0..rounds).map(|round| slow(&format!("answer {round}"), 200)).collect();
    let test = DaemonTest::new(Script::new(steps));
    let mut first = test.kestrel_client().await;
    let cwd = test.env.work_path();
    let session = first.new_session(&cwd).await;
    let second = test.kestrel_client().await;
    second.load(&session, &cwd).await.expect("attached");
    for round in 0..rounds {
        let one = first.prompt(&session, "one");
        let two = second.prompt(&session, "two");
        let (one, two) = (one.await.unwrap(), two.await.unwrap());
        let answered = [&one, &two].iter().filter(|answer| answer.is_ok()).count();
        assert_eq!(answered, 1, "round {round}: one runs, one is refused: {one:?} {two:?}");
        // Every notice of this round: one start, one end.
        hear_turn_notices(&mut first, &session, 2 * (round + 1)).await;
    }
    first.settle(Duration::from_millis(300)).await;
    let notices = heard(&first, &session);
    let expected: Vec<String> =
        (0..rounds).flat_map(|_| ["true".to_owned(), "false:end_turn".to_owned()]).collect();
    assert_eq!(notices, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_a_restart_interrupted_ends_after_the_restart_and_before_the_next_turn_starts() {
    let test = DaemonTest::new(Script::new([slow("never finished", 1_000), Step::text("again")]));
    let mut first = test.kestrel_client().await;
    let cwd = test.env.work_path();
    let session = first.new_session(&cwd).await;
    let doomed = first.prompt(&session, "slow");
    hear_turn_notices(&mut first, &session, 1).await;
    let mut second = test.kestrel_client().await;
    second.load(&session, &cwd).await.expect("attached mid-turn");
    let pid = test.wait_worker_pid(&session, None);
    kill(pid as u32, libc::SIGKILL);
    // Another client prompts while the worker restarts: it waits for the restart.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let next = second.prompt(&session, "again");
    assert_eq!(doomed.await.unwrap().unwrap()["stopReason"], "cancelled");
    assert_eq!(next.await.unwrap().unwrap()["stopReason"], "end_turn");
    hear_turn_notices(&mut second, &session, 3).await;
    second.settle(Duration::from_millis(300)).await;
    assert_eq!(
        heard(&second, &session),
        ["restarted", "false:cancelled", "true", "false:end_turn"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_fails_is_announced_with_its_error() {
    let fault =
        Fault::Status { status: 401, retry_after_secs: None, message: None, times: Some(1) };
    let test = DaemonTest::new(Script::new([Step::text("x").with_fault(fault)]));
    let mut client = test.kestrel_client().await;
    let session = client.new_session(&test.env.work_path()).await;
    let answer = client.prompt(&session, "hi").await.unwrap();
    hear_turn_notices(&mut client, &session, 2).await;
    let notices = heard(&client, &session);
    let error = answer.expect_err("a 401 fails the prompt");
    assert_eq!(notices, ["true".to_owned(), format!("false!{}", error.message)]);
    assert!(error.message.contains("401"), "{}", error.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_given_up_on_mid_turn_ends_its_turn_with_the_reason() {
    let test = DaemonTest::new(Script::new([slow("never finished", 1_000)]));
    let mut client = test.kestrel_client().await;
    let session = client.new_session(&test.env.work_path()).await;
    let mut pid = test.wait_worker_pid(&session, None);
    for _ in 0..3 {
        kill(pid as u32, libc::SIGKILL);
        pid = test.wait_worker_pid(&session, Some(pid));
    }
    let doomed = client.prompt(&session, "slow");
    hear_turn_notices(&mut client, &session, 1).await;
    kill(pid as u32, libc::SIGKILL);
    let error = doomed.await.unwrap().expect_err("the session is given up on");
    hear_turn_notices(&mut client, &session, 2).await;
    let notices: Vec<String> =
        heard(&client, &session).into_iter().filter(|heard| heard != "restarted").collect();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert_eq!(notices[0], "true", "{notices:?}");
    let end = notices.last().unwrap();
    assert!(end.starts_with("false!") && end.contains("gave up"), "{notices:?}");
    assert!(error.message.contains("gave up"), "{}", error.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_first_turn_runs_for_a_client_attaching_to_it_and_its_end_is_announced() {
    let task = ScriptedToolCall::new("task", json!({"description": "look", "prompt": "brief"}));
    let test = DaemonTest::new(Script::new([
        Step::tool_calls(vec![task]),
        slow("child answer", 800),
        Step::text("parent done"),
    ]));
    let mut client = test.kestrel_client().await;
    let cwd = test.env.work_path();
    let parent = client.new_session(&cwd).await;
    let turn = client.prompt(&parent, "delegate");
    let named = client
        .wait_for("the task call naming its child", |event| {
            matches!(event, Event::Notification(n) if n.method == "session/update"
                && n.params["sessionId"] == parent.as_str()
                && n.params["update"]["_meta"]["kestrel"]["childSessionId"].is_string())
        })
        .await;
    let Event::Notification(named) = named else { unreachable!() };
    let child =
        named.params["update"]["_meta"]["kestrel"]["childSessionId"].as_str().unwrap().to_owned();

    let mut watcher = test.kestrel_client().await;
    let attached = watcher.load(&child, &cwd).await.expect("attach to the child mid-turn");
    assert_eq!(attached["_meta"]["kestrel"]["turnRunning"], true, "{attached}");
    hear_turn_notices(&mut watcher, &child, 1).await;
    assert_eq!(heard(&watcher, &child), ["false:end_turn"]);
    assert_eq!(turn.await.unwrap().unwrap()["stopReason"], "end_turn");
    // The parent's client heard its own turn, not the child's.
    hear_turn_notices(&mut client, &parent, 2).await;
    assert_eq!(heard(&client, &parent), ["true", "false:end_turn"]);
    assert!(heard(&client, &child).is_empty());
}

/// A client that takes no notices (most editors) does not get the session's mode
/// switches as `[kestrel]` agent messages in a load's history (worker restarted from the
/// record) or when attaching to the live session again: it learns
/// the mode from the session's state, and such lines would run into the answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_switches_reach_no_plain_client_as_agent_messages() {
    let test =
        DaemonTest::new(Script::new([Step::text("First answer."), Step::text("Second answer.")]));
    let client = test.client().await;
    let cwd = test.env.work_path();
    let session = client.new_session(&cwd).await;
    client.set_mode(&session, "auto").await;
    client.prompt(&session, "hello").await.unwrap().unwrap();
    client.set_mode(&session, "yolo").await;
    client.prompt(&session, "again").await.unwrap().unwrap();
    // A daemon started afresh replays the record: the switches are notices there.
    drop(client);
    test.stop_daemon();
    let mut client = test.client().await;
    client.load(&session, &cwd).await.unwrap();
    let mut other = test.client().await;
    other.load(&session, &cwd).await.unwrap();
    for plain in [&mut client, &mut other] {
        let text = |plain: &AcpClient| -> String {
            plain
                .updates(&session)
                .iter()
                .filter_map(|update| update["content"]["text"].as_str().map(str::to_owned))
                .collect()
        };
        while !text(plain).contains("Second answer.") {
            plain.wait_for("more of the session's updates", |_| true).await;
        }
        assert!(!text(plain).contains("[kestrel]"), "{}", text(plain));
    }
}
