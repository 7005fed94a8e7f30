//! The swarm under faults: a role's worker killed mid-turn, the daemon killed, the
//! orchestrator killed between a commit and its event or between a merge and its event.
//! Each ends merged once, with nothing lost and no attempt counted twice.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod swarm_support;

use kestrel_testkit::{Fault, ScriptedToolCall, Step};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use swarm_support::{IMPLEMENTER, SwarmTest, git, implement, review, stderr};

const GRAPH: &str = r#"
[[task]]
id = "greet"
title = "Write the greeting"
acceptance = ["grep -qx hello hello.txt"]
"#;

/// The implementer's first request streams slowly (the turn to kill), then the turn
/// as sent again: the file written, done.
fn slow_then_steady() -> Vec<Step> {
    let route = "task=greet role=implementer";
    let write = || {
        Step::tool_calls(vec![ScriptedToolCall::new(
            "write_file",
            json!({"path": "hello.txt", "content": "hello\n"}),
        )])
    };
    let mut steps = vec![
        write()
            .with_fault(Fault::SlowChunks { delay_ms: 700 })
            .when(Some(IMPLEMENTER), Some(route)),
    ];
    steps.extend(implement("greet", &[("hello.txt", "hello\n")]));
    steps.extend(review("greet", 1, true, &[]));
    steps
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|event| event["type"] == kind).count()
}

/// The pid of the worker running the implementer's session, once it runs.
fn implementer_worker(test: &SwarmTest) -> u32 {
    let start = Instant::now();
    while start.elapsed() < swarm_support::WAIT {
        let session = test
            .home
            .path()
            .join("swarm")
            .read_dir()
            .ok()
            .and_then(|mut runs| runs.next())
            .and_then(|run| run.ok())
            .map(|run| test.events(&run.file_name().to_string_lossy()))
            .and_then(|events| {
                events
                    .iter()
                    .find(|e| e["type"] == "turn_started" && e["role"] == "implementer")
                    .map(|e| e["session"].as_str().unwrap().to_string())
            });
        if let Some(session) = session {
            let output = test.command(&["daemon", "status", "--json"]).output().unwrap();
            let status: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
            let pid = status["sessions"]
                .as_array()
                .and_then(|sessions| sessions.iter().find(|s| s["sessionId"] == session.as_str()))
                .and_then(|s| s["workerPid"].as_u64());
            if let Some(pid) = pid {
                return pid as u32;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the implementer's worker never ran");
}

fn kill(pid: u32) {
    // SAFETY: kill(2) only sends a signal, to a process this test's run started.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

#[test]
fn a_worker_killed_mid_turn_is_restarted_and_the_turn_sent_again_in_the_same_attempt() {
    let test = SwarmTest::new(&[("README", "toy\n")], slow_then_steady(), "");
    let graph = test.graph(GRAPH);
    let orchestrator = test
        .command(&["swarm", "run", "--graph", &graph])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Killed while its first model request still streams.
    std::thread::sleep(Duration::from_millis(300));
    kill(implementer_worker(&test));
    let output = orchestrator.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = test.run_id();
    let events = test.events(&run);
    assert_eq!(count(&events, "attempt_started"), 1, "not counted twice: {events:#?}");
    assert_eq!(count(&events, "attempt_failed"), 0, "{events:#?}");
    assert_eq!(count(&events, "merged"), 1);
    assert_eq!(test.server.remaining(), 0, "the turn was sent again, once");
    let merged = git(test.repo.path(), &["show", &format!("kestrel/{run}:hello.txt")]);
    assert_eq!(merged, "hello\n");
}

#[test]
fn a_daemon_killed_mid_turn_is_replaced_and_the_run_ends_merged() {
    let mut steps = slow_then_steady();
    // A turn the old worker may still finish on its own before it notices.
    steps.extend(implement("greet", &[("hello.txt", "hello\n")]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let graph = test.graph(GRAPH);
    let orchestrator = test
        .command(&["swarm", "run", "--graph", &graph])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    implementer_worker(&test);
    let pid: u32 = std::fs::read_to_string(test.home.path().join("run/daemon.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    kill(pid);
    let output = orchestrator.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = test.run_id();
    let events = test.events(&run);
    assert_eq!(count(&events, "merged"), 1, "{events:#?}");
    assert_eq!(events.last().unwrap()["state"], "done");
    let merged = git(test.repo.path(), &["show", &format!("kestrel/{run}:hello.txt")]);
    assert_eq!(merged, "hello\n");
}

/// Runs the graph with the orchestrator crashing at `point`, then resumes it.
fn crash_at_and_resume(point: &str) -> (SwarmTest, String) {
    let mut steps = implement("greet", &[("hello.txt", "hello\n")]);
    steps.extend(review("greet", 1, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let graph = test.graph(GRAPH);
    let crashed = test
        .command(&["swarm", "run", "--graph", &graph])
        .env("KESTREL_SWARM_FAILPOINT", point)
        .output()
        .unwrap();
    assert_ne!(crashed.status.code(), Some(0), "it crashed at {point}");
    let run = test.run_id();
    let output = test.swarm(&["resume", &run]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    (test, run)
}

#[test]
fn a_commit_whose_event_was_lost_is_found_and_not_made_again() {
    let (test, run) = crash_at_and_resume("commit");
    let events = test.events(&run);
    assert_eq!(count(&events, "committed"), 1, "{events:#?}");
    assert_eq!(count(&events, "attempt_failed"), 0, "the work was not lost: {events:#?}");
    let branch = format!("kestrel/{run}");
    // The merge's second parent is the one commit the implementer's turn made.
    let base = git(test.repo.path(), &["rev-parse", "main"]);
    let commits =
        git(test.repo.path(), &["rev-list", "--count", &format!("{}..{branch}^2", base.trim())]);
    assert_eq!(commits.trim(), "1");
    assert_eq!(test.server.remaining(), 0, "no turn was sent again");
}

#[test]
fn a_merge_whose_event_was_lost_is_found_in_git_and_never_merged_twice() {
    let (test, run) = crash_at_and_resume("merge");
    let events = test.events(&run);
    assert_eq!(count(&events, "merged"), 1, "{events:#?}");
    let branch = format!("kestrel/{run}");
    let merges = git(test.repo.path(), &["rev-list", "--merges", "--count", &branch]);
    assert_eq!(merges.trim(), "1", "merged once");
    assert_eq!(events.last().unwrap()["state"], "done");
}

#[test]
fn a_rate_limited_turn_pauses_every_new_turn_and_is_sent_again_in_the_same_attempt() {
    let two = r#"
[[task]]
id = "greet"
title = "Write the greeting"
acceptance = ["grep -qx hello hello.txt"]

[[task]]
id = "later"
title = "Write another file (independent: its turns fall in the pause)"
acceptance = ["test -f later.txt"]
"#;
    let route = "task=greet role=implementer";
    // Both tries of the first request (request_max_retries = 1) get a 429.
    let limited = Step::tool_calls(vec![ScriptedToolCall::new(
        "write_file",
        json!({"path": "hello.txt", "content": "hello\n"}),
    )])
    .with_fault(Fault::Status {
        status: 429,
        retry_after_secs: Some(0),
        message: None,
        times: Some(2),
    })
    .when(Some(IMPLEMENTER), Some(route));
    let mut steps = vec![limited, Step::text("done").when(Some(IMPLEMENTER), Some(route))];
    steps.extend(review("greet", 1, true, &[]));
    // Slow enough that its reviewer comes after the other task's 429.
    steps.extend(swarm_support::implement_slowly("later", &[("later.txt", "x\n")], 300));
    steps.extend(review("later", 1, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let graph = test.graph(two);
    let output = test.swarm(&["run", "--graph", &graph]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&test.run_id());
    let limited: Vec<&Value> = events.iter().filter(|e| e["type"] == "rate_limited").collect();
    assert_eq!(limited.len(), 1, "{events:#?}");
    assert_eq!(count(&events, "attempt_failed"), 0, "the attempt did not count: {events:#?}");
    assert_eq!(count(&events, "attempt_started"), 2);
    // No turn of any task started before the pause was over, the other task's
    // reviewer included.
    let later_review = events
        .iter()
        .position(|e| {
            e["type"] == "turn_started" && e["task"] == "later" && e["role"] == "reviewer"
        })
        .unwrap();
    assert!(later_review > events.iter().position(|e| e["type"] == "rate_limited").unwrap());
    let until = kestrel_protocol::Timestamp::parse(limited[0]["until"].as_str().unwrap()).unwrap();
    let at = events.iter().position(|e| e["type"] == "rate_limited").unwrap();
    for event in &events[at..] {
        if event["type"] == "turn_started" {
            let ts = kestrel_protocol::Timestamp::parse(event["ts"].as_str().unwrap()).unwrap();
            assert!(ts.millis + 50 >= until.millis, "{event} started during the pause");
        }
    }
    assert_eq!(test.server.remaining(), 0);
}
