//! One daemon with 200 sessions, a prompt to each at once, and 20 random workers
//! SIGKILLed during the burst: every prompt is answered (the killed sessions'
//! `cancelled`), every killed session is restarted and says so, every record parses
//! line by line, no turn is sent to the model twice, and the restarted sessions take
//! their next prompt. (The 2,000-session figures are bench/run.py's `scale` group.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use common::body_text;
use daemon_support::{DaemonTest, Event, kill, session_status, slow};
use kestrel_testkit::Script;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const SESSIONS: usize = 200;
const VICTIMS: usize = 20;
/// The bound on opening all sessions and on the burst (the machine has 2 cores).
const BURST_WAIT: Duration = Duration::from_secs(240);

/// The prompt of session `index`, ended by a dot so no prompt's text is inside another's.
fn prompt_text(index: usize) -> String {
    format!("prompt number {index}.")
}

/// `count` distinct indices below `below`, from a small fixed-seed generator: random
/// enough to hit workers at every point of their turn, the same on every run.
fn victims(count: usize, below: usize) -> BTreeSet<usize> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut chosen = BTreeSet::new();
    while chosen.len() < count {
        state =
            state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        chosen.insert((state >> 33) as usize % below);
    }
    chosen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_random_workers_during_a_burst_of_200_prompts_loses_and_repeats_nothing() {
    // Answers streamed in pieces with pauses, so many turns are mid-stream at the kill.
    let steps = (0..SESSIONS + VICTIMS).map(|_| slow("one two three four five six", 20));
    let test = DaemonTest::new(Script::new(steps));
    let mut client = test.kestrel_client().await;
    let cwd = test.env.work_path();

    let opening: Vec<_> = (0..SESSIONS)
        .map(|_| {
            let connection = client.connection.clone();
            let params = json!({"cwd": cwd, "mcpServers": []});
            tokio::spawn(async move {
                tokio::time::timeout(BURST_WAIT, connection.request("session/new", params)).await
            })
        })
        .collect();
    let mut sessions = Vec::new();
    for opened in opening {
        let answer = opened.await.unwrap().expect("opened in time").expect("session/new");
        sessions.push(answer["sessionId"].as_str().unwrap().to_owned());
    }

    let prompts: Vec<_> = (0..SESSIONS)
        .map(|index| {
            let connection = client.connection.clone();
            let params = json!({"sessionId": sessions[index],
                "prompt": [{"type": "text", "text": prompt_text(index)}]});
            tokio::spawn(async move {
                tokio::time::timeout(BURST_WAIT, connection.request("session/prompt", params)).await
            })
        })
        .collect();
    // Mid-burst: once a tenth of the turns have started.
    for _ in 0..SESSIONS / 10 {
        client
            .wait_for("a turn to start", |event| {
                matches!(event, Event::Notification(n) if n.method == kestrel_daemon::SESSION_TURN
                    && n.params["running"] == true)
            })
            .await;
    }
    let chosen = victims(VICTIMS, SESSIONS);
    let status = test.status();
    let mut killed = Vec::new();
    for &index in &chosen {
        let pid = session_status(&status, &sessions[index]).unwrap()["workerPid"]
            .as_u64()
            .unwrap_or_else(|| panic!("session {index} has a worker: {status}"));
        kill(pid as u32, libc::SIGKILL);
        killed.push((index, pid));
    }

    let mut interrupted = 0;
    for (index, prompt) in prompts.into_iter().enumerate() {
        let answer = prompt.await.unwrap().expect("answered in time");
        let reason = match &answer {
            Ok(answer) => answer["stopReason"].as_str().unwrap_or("?").to_owned(),
            Err(error) => format!("error: {}", error.message),
        };
        if chosen.contains(&index) {
            interrupted += usize::from(reason == "cancelled");
            assert!(
                reason == "end_turn" || reason == "cancelled",
                "killed session {index}: {reason}"
            );
        } else {
            assert_eq!(reason, "end_turn", "session {index} was not killed");
        }
    }

    assert!(interrupted > 0, "the kills landed in the burst: some prompts were cut short");

    // Every killed session restarted and said so.
    let mut unreported: BTreeSet<&str> =
        chosen.iter().map(|&index| sessions[index].as_str()).collect();
    let restarted = |event: &Event| matches!(event, Event::Notification(n) if n.method == kestrel_daemon::WORKER_RESTARTED);
    for event in &client.seen {
        if let Event::Notification(n) = event
            && restarted(event)
        {
            unreported.remove(n.params["sessionId"].as_str().unwrap_or_default());
        }
    }
    while !unreported.is_empty() {
        let event = client.wait_for("the killed sessions' restarts", restarted).await;
        if let Event::Notification(n) = event {
            unreported.remove(n.params["sessionId"].as_str().unwrap_or_default());
        }
    }
    for &(index, pid) in &killed {
        let new_pid = test.wait_worker_pid(&sessions[index], Some(pid));
        assert_ne!(new_pid, pid);
    }

    // Every record parses (record_items reads each line as JSON) and closes its turns.
    for (index, session) in sessions.iter().enumerate() {
        let items = test.record_items(session);
        let started = items.iter().filter(|item| item["type"] == "turn_started").count();
        let ended: Vec<&Value> =
            items.iter().filter(|item| item["type"] == "turn_completed").collect();
        assert_eq!(started, ended.len(), "session {index}: every turn closed: {items:?}");
        if !chosen.contains(&index) {
            assert_eq!(ended.len(), 1, "session {index}: {items:?}");
            assert_eq!(ended[0]["stop_reason"], "end_turn", "session {index}");
        }
    }

    // No turn sent twice: each prompt reached the model at most once (once if its
    // session was not killed).
    let requests = test.env.requests();
    for index in 0..SESSIONS {
        let text = prompt_text(index);
        let sent = requests.iter().filter(|request| body_text(request).contains(&text)).count();
        let expected = if chosen.contains(&index) { 0..=1 } else { 1..=1 };
        assert!(expected.contains(&sent), "prompt {index} reached the model {sent} times");
    }

    // The restarted sessions take their next prompt.
    let next: Vec<_> =
        chosen.iter().map(|&index| client.prompt(&sessions[index], "again")).collect();
    for answer in next {
        assert_eq!(answer.await.unwrap().unwrap()["stopReason"], "end_turn");
    }
}
