use super::events::known_event_types;
use super::*;
use kestrel_protocol::swarm::{RunEnd, SwarmEntry, SwarmEvent, SwarmRole, TaskState, TurnUsage};
use kestrel_protocol::{RecordEntry, RecordHeader, RecordItem, SessionId, Timestamp, Usage};
use serde_json::json;

const GRAPH: &str = r#"goal = "Add a config loader"
base = "main"

[[task]]
id = "parse"
title = "Parse the config file"
acceptance = ["true"]

[[task]]
id = "load"
title = "Load it"
depends_on = ["parse"]
acceptance = ["true"]
"#;

fn home() -> (tempfile::TempDir, KestrelHome) {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path().join("home"));
    (dir, home)
}

fn at(millis: i64, event: SwarmEvent) -> SwarmEntry {
    SwarmEntry { ts: Timestamp { millis }, event }
}

fn started(run: &str) -> SwarmEvent {
    SwarmEvent::RunStarted {
        run: run.into(),
        repo: "/repo".into(),
        base: "main".into(),
        base_commit: "c0".into(),
        branch: format!("kestrel/{run}"),
        workdir: "/w".into(),
        goal: None,
        tasks: 2,
        max_parallel: 4,
        max_attempts: 3,
        max_cost_usd: None,
    }
}

fn attempt(task: &str, attempt: u32) -> SwarmEvent {
    SwarmEvent::AttemptStarted {
        task: task.into(),
        attempt,
        branch: format!("kestrel/r-{task}"),
        worktree: format!("/w/{task}"),
        base_commit: "c0".into(),
    }
}

fn turn(task: &str, role: SwarmRole, session: &str, model: &str) -> SwarmEvent {
    SwarmEvent::TurnStarted {
        task: task.into(),
        role,
        attempt: 1,
        session: SessionId::from_string(session),
        model: model.into(),
    }
}

fn finished(task: &str, role: SwarmRole, session: &str, usage: TurnUsage) -> SwarmEvent {
    SwarmEvent::TurnFinished {
        task: task.into(),
        role,
        attempt: 1,
        session: SessionId::from_string(session),
        stop_reason: "end_turn".into(),
        usage,
    }
}

fn usage(input: u64, output: u64, cost: f64) -> TurnUsage {
    TurnUsage { input_tokens: input, output_tokens: output, cost_usd: cost }
}

/// A session in the index with `tokens` input tokens spent, costing `cost`.
fn indexed_session(home: &KestrelHome, id: &str, tokens: u64, cost: f64) {
    // From JSON, so the test does not depend on every field of the header.
    let header: RecordHeader = serde_json::from_value(json!({
        "id": id, "version": 1, "created_at": "2026-01-02T03:04:05.000Z",
        "cwd": "/w", "provider": "p", "model": "m"
    }))
    .unwrap();
    let mut record = crate::SessionRecord::create(home, header).unwrap();
    let spent =
        Usage { input_tokens: tokens, output_tokens: tokens / 10, cost, ..Usage::default() };
    record
        .append(&RecordEntry { ts: Timestamp::now(), item: RecordItem::Usage { usage: spent } })
        .unwrap();
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn create_writes_a_private_graph_and_refuses_an_existing_run() {
    let (_dir, home) = home();
    let run = SwarmRunDir::create(&home, "r1", GRAPH).unwrap();
    assert_eq!(run.path(), home.swarm_run_dir("r1"));
    assert_eq!(std::fs::read_to_string(run.graph_file()).unwrap(), GRAPH);
    assert!(run.logs_dir().is_dir());
    assert_eq!(run.graph().unwrap().order(), ["parse", "load"]);
    #[cfg(unix)]
    {
        assert_eq!(mode(run.path()), 0o700);
        assert_eq!(mode(&run.graph_file()), 0o600);
        assert_eq!(mode(&run.logs_dir()), 0o700);
    }
    let error = SwarmRunDir::create(&home, "r1", GRAPH).unwrap_err();
    assert!(matches!(error, StoreError::RunExists { .. }), "{error}");
    // A GOAL run's graph has no tasks yet; a text that is no graph leaves nothing behind.
    SwarmRunDir::create(&home, "goal", "goal = \"x\"\n").unwrap();
    let error = SwarmRunDir::create(&home, "bad", "[[tsk]]\n").unwrap_err();
    assert!(matches!(error, StoreError::Graph { .. }), "{error}");
    assert!(error.to_string().contains("line 1, column"), "{error}");
    assert!(!home.swarm_run_dir("bad").exists());
    for bad in ["", "../x", "a/b", "a.b", ".x", &"x".repeat(129)] {
        let error = SwarmRunDir::create(&home, bad, GRAPH).unwrap_err();
        assert!(matches!(error, StoreError::InvalidRunId { .. }), "{bad}: {error}");
        assert!(error.is_usage());
    }
}

#[test]
fn open_takes_a_whole_id_or_a_unique_prefix() {
    let (_dir, home) = home();
    let error = SwarmRunDir::open(&home, "0190").unwrap_err();
    assert!(error.to_string().contains("`kestrel swarm list`"), "{error}");
    for id in ["0190-aa", "0190-ab", "0191-c", "0191"] {
        SwarmRunDir::create(&home, id, GRAPH).unwrap();
    }
    std::fs::write(home.swarm_dir().join("0192-file"), "").unwrap();
    assert_eq!(SwarmRunDir::open(&home, "0190-aa").unwrap().run_id(), "0190-aa");
    assert!(SwarmRunDir::open(&home, "0190-b").unwrap_err().is_usage());
    // An exact id wins over the longer ids it is a prefix of.
    assert_eq!(SwarmRunDir::open(&home, "0191").unwrap().run_id(), "0191");
    assert_eq!(SwarmRunDir::open(&home, "0191-").unwrap().run_id(), "0191-c");
    let error = SwarmRunDir::open(&home, "0190-a").unwrap_err();
    assert!(
        matches!(&error, StoreError::AmbiguousRun { candidates, .. } if candidates == &["0190-aa", "0190-ab"]),
        "{error}"
    );
    // Files are not runs.
    let error = SwarmRunDir::open(&home, "0192").unwrap_err();
    assert!(matches!(error, StoreError::RunNotFound { .. }), "{error}");
    let error = SwarmRunDir::open(&home, "../home").unwrap_err();
    assert!(matches!(error, StoreError::InvalidRunId { .. }), "{error}");
}

#[test]
fn write_graph_replaces_the_graph_and_refuses_one_that_cannot_run() {
    let (_dir, home) = home();
    let run = SwarmRunDir::create(&home, "r1", "goal = \"Add a config loader\"\n").unwrap();
    let planned = parse_graph(GRAPH).unwrap();
    run.write_graph(&planned).unwrap();
    assert_eq!(run.graph().unwrap(), planned);
    #[cfg(unix)]
    assert_eq!(mode(&run.graph_file()), 0o600);
    let mut broken = planned.clone();
    broken.tasks[0].depends_on = vec!["load".into()];
    let error = run.write_graph(&broken).unwrap_err();
    assert!(error.to_string().contains("cycle"), "{error}");
    assert_eq!(run.graph().unwrap(), planned);
    // No temporary file is left beside it.
    let names: Vec<_> =
        std::fs::read_dir(run.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[test]
fn appended_events_read_back_and_a_torn_last_line_is_left_out() {
    let (_dir, home) = home();
    let run = SwarmRunDir::create(&home, "r1", GRAPH).unwrap();
    assert_eq!(run.events().unwrap(), EventLog::default());
    let events = [at(1, started("r1")), at(2, attempt("parse", 1))];
    for event in &events {
        run.append(event).unwrap();
    }
    #[cfg(unix)]
    assert_eq!(mode(&run.events_file()), 0o600);
    let mut file = std::fs::OpenOptions::new().append(true).open(run.events_file()).unwrap();
    file.write_all(br#"{"ts":"1970-01-01T00:00:00.003Z","type":"merg"#).unwrap();
    let log = run.events().unwrap();
    assert_eq!(log.entries, events);
    assert!(log.torn_tail);
    assert_eq!(log.skipped, SkippedEvents::default());
    // The next append ends the torn line first: it is not lost in it.
    let merged = at(4, SwarmEvent::Merged { task: "parse".into(), attempt: 1, commit: "m".into() });
    run.append(&merged).unwrap();
    let log = run.events().unwrap();
    assert_eq!(log.entries.len(), 3);
    assert_eq!(log.entries[2], merged);
    assert!(!log.torn_tail);
    assert_eq!((log.skipped.corrupt, log.skipped.first_corrupt_line), (1, Some(3)));
}

#[test]
fn unknown_event_types_are_skipped_and_corrupt_lines_counted() {
    let (_dir, home) = home();
    let run = SwarmRunDir::create(&home, "r1", GRAPH).unwrap();
    let good = serde_json::to_string(&at(1, started("r1"))).unwrap();
    let lines = [
        good.as_str(),
        r#"{"ts":"1970-01-01T00:00:00.002Z","type":"task_paused","task":"parse"}"#,
        "",
        "not json at all",
        r#"{"ts":"1970-01-01T00:00:00.003Z","type":"merged","task":"parse"}"#,
        r#"{"ts":"1970-01-01T00:00:00.004Z","type":"task_cancelled","task":"load","new":1}"#,
    ];
    std::fs::write(run.events_file(), format!("{}\n", lines.join("\n"))).unwrap();
    let log = run.events().unwrap();
    assert_eq!(log.entries.len(), 2);
    assert_eq!(log.entries[1].event, SwarmEvent::TaskCancelled { task: "load".into() });
    // The newer type is skipped quietly; a known type without its fields is corrupt.
    assert_eq!(log.skipped, SkippedEvents { unknown: 1, corrupt: 2, first_corrupt_line: Some(4) });
}

#[test]
fn the_known_event_types_are_the_enums_own() {
    let known = known_event_types();
    for name in ["run_started", "turn_finished", "needs_input", "merged", "run_finished"] {
        assert!(known.contains(&name), "{name}: {known:?}");
    }
    assert!(!known.contains(&"task_paused"));
}

#[test]
fn an_append_that_cannot_be_written_returns_the_error() {
    let (_dir, home) = home();
    let run = SwarmRunDir::create(&home, "r1", GRAPH).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let read_only = std::fs::Permissions::from_mode(0o500);
        std::fs::set_permissions(run.path(), read_only).unwrap();
        let privileged = std::fs::File::create(run.path().join("probe")).is_ok();
        if privileged {
            // Root writes through permissions: a device that refuses every write stands
            // in for the read-only directory.
            std::fs::remove_file(run.path().join("probe")).unwrap();
            std::os::unix::fs::symlink("/dev/full", run.events_file()).unwrap();
        }
        let error = run.append(&at(1, started("r1"))).unwrap_err();
        assert!(matches!(error, StoreError::Io { .. }), "{error}");
        assert!(error.to_string().contains("events.jsonl"), "{error}");
        std::fs::set_permissions(run.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}

#[test]
fn the_lock_is_exclusive_and_probing_it_takes_nothing() {
    let (_dir, home) = home();
    let run = SwarmRunDir::create(&home, "r1", GRAPH).unwrap();
    assert!(!run.is_locked());
    assert!(!run.lock_file().exists(), "a probe creates nothing");
    let lock = run.lock().unwrap();
    assert_eq!(lock.path(), run.lock_file());
    assert!(run.is_locked());
    assert!(run.is_locked(), "a probe leaves the lock as it was");
    let error = SwarmRunDir::open(&home, "r1").unwrap().lock().unwrap_err();
    let pid = std::process::id();
    assert!(
        matches!(&error, StoreError::RunLocked { pid: Some(holder), .. } if *holder == pid),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains(&format!("another orchestrator is running swarm run r1 (pid {pid})")),
        "{error}"
    );
    assert!(error.is_usage());
    drop(lock);
    assert!(!run.is_locked());
    let _again = run.lock().unwrap();
}

#[test]
fn status_json_has_exactly_the_documented_shape() {
    let (_dir, home) = home();
    let run = SwarmRunDir::create(&home, "r1", GRAPH).unwrap();
    // s1 is in the session index with more than its finished turn said (a later
    // request); s2 is not (its cost comes from the events); s0 is the planner's.
    indexed_session(&home, "s1", 1000, 2.0);
    let events = [
        at(1_000, started("r1")),
        at(1_500, turn("plan", SwarmRole::Planner, "s0", "a/opus")),
        at(1_600, finished("plan", SwarmRole::Planner, "s0", usage(5, 5, 0.5))),
        at(2_000, attempt("parse", 1)),
        at(3_000, turn("parse", SwarmRole::Implementer, "s1", "o/codex")),
        at(4_000, finished("parse", SwarmRole::Implementer, "s1", usage(10, 1, 0.25))),
        at(5_000, turn("parse", SwarmRole::Reviewer, "s2", "a/sonnet")),
        at(6_000, finished("parse", SwarmRole::Reviewer, "s2", usage(20, 2, 0.125))),
        at(7_000, turn("parse", SwarmRole::Reviewer, "s2", "a/sonnet")),
        at(
            64_000,
            SwarmEvent::NeedsInput {
                task: "parse".into(),
                session: SessionId::from_string("s2"),
                title: "run cargo".into(),
            },
        ),
    ];
    for event in &events {
        run.append(event).unwrap();
    }
    let status = run.status().unwrap();
    let expected = json!({
        "run": "r1",
        "state": "interrupted",
        "branch": "kestrel/r1",
        "cost_usd": 2.625,
        "tasks": [
            {
                "id": "parse",
                "state": "needs-input",
                "attempts": 1,
                "cost_usd": 2.125,
                "tokens": {"input": 1020, "output": 102},
                "model": "a/sonnet",
                "session": "s2",
                // Not running: up to the last event.
                "elapsed_s": 62
            },
            {
                "id": "load",
                "state": "waiting",
                "attempts": 0,
                "cost_usd": 0.0,
                "tokens": {"input": 0, "output": 0},
                "model": null,
                "session": null,
                "elapsed_s": 0
            }
        ]
    });
    assert_eq!(serde_json::to_value(&status).unwrap(), expected);
    let text = serde_json::to_string(&status).unwrap();
    assert!(
        text.starts_with(r#"{"run":"r1","state":"interrupted","branch":"kestrel/r1","cost_usd":"#),
        "{text}"
    );
    assert!(text.contains(r#"{"id":"load","state":"waiting","attempts":0,"cost_usd":0.0,"tokens":{"input":0,"output":0},"model":null,"session":null,"elapsed_s":0}"#), "{text}");

    let _lock = run.lock().unwrap();
    assert_eq!(run.status().unwrap().state, kestrel_protocol::swarm::RunState::Running);
}

#[test]
fn list_runs_is_newest_first_with_state_counts_and_cost() {
    let (_dir, home) = home();
    assert_eq!(list_runs(&home).unwrap(), Vec::new());
    let done = SwarmRunDir::create(&home, "0190-done", GRAPH).unwrap();
    for event in [
        at(10, started("0190-done")),
        at(11, turn("parse", SwarmRole::Implementer, "s9", "o/codex")),
        at(12, finished("parse", SwarmRole::Implementer, "s9", usage(1, 1, 1.5))),
        at(13, SwarmEvent::Merged { task: "parse".into(), attempt: 1, commit: "m".into() }),
        at(
            14,
            SwarmEvent::RunFinished {
                state: RunEnd::Done,
                branch: "kestrel/0190-done".into(),
                land: "git merge kestrel/0190-done".into(),
                cost_usd: 1.5,
            },
        ),
    ] {
        done.append(&event).unwrap();
    }
    let running = SwarmRunDir::create(&home, "0192-running", GRAPH).unwrap();
    running.append(&at(30, started("0192-running"))).unwrap();
    let _lock = running.lock().unwrap();
    SwarmRunDir::create(&home, "0191-interrupted", "goal = \"later\"\n").unwrap();
    std::fs::create_dir(home.swarm_run_dir("0193-broken")).unwrap();
    std::fs::write(home.swarm_dir().join("0194.tmp"), "").unwrap();

    let runs = list_runs(&home).unwrap();
    let ids: Vec<&str> = runs.iter().map(|run| run.run.as_str()).collect();
    assert_eq!(ids, ["0193-broken", "0192-running", "0191-interrupted", "0190-done"]);
    assert!(runs[0].error.as_deref().is_some_and(|e| e.contains("graph.toml")), "{:?}", runs[0]);
    assert_eq!(runs[1].state, kestrel_protocol::swarm::RunState::Running);
    assert_eq!(runs[1].created_at, Some(Timestamp { millis: 30 }));
    assert_eq!(
        (runs[2].state.as_str(), runs[2].tasks, runs[2].goal.as_deref()),
        ("interrupted", 0, Some("later"))
    );
    assert_eq!(runs[2].created_at, None);
    let finished = &runs[3];
    assert_eq!((finished.state.as_str(), finished.tasks, finished.merged), ("done", 2, 1));
    assert_eq!(finished.cost_usd, 1.5);
    assert_eq!(finished.goal.as_deref(), Some("Add a config loader"));
    let line = serde_json::to_value(finished).unwrap();
    assert_eq!(line["state"], "done");
    assert!(line.get("error").is_none());
}

#[test]
fn a_run_of_ten_thousand_events_folds_to_the_right_status() {
    let (_dir, home) = home();
    let run = SwarmRunDir::create(&home, "big", GRAPH).unwrap();
    let mut text = String::new();
    let mut push = |event: SwarmEntry| {
        text.push_str(&serde_json::to_string(&event).unwrap());
        text.push('\n');
    };
    push(at(0, started("big")));
    push(at(1, attempt("parse", 1)));
    let mut count = 2;
    while count < 10_000 {
        let session = format!("s{}", count % 7);
        push(at(count, turn("parse", SwarmRole::Implementer, &session, "o/codex")));
        push(at(count + 1, finished("parse", SwarmRole::Implementer, &session, usage(3, 2, 0.5))));
        count += 2;
    }
    std::fs::write(run.events_file(), text).unwrap();
    let status = run.status().unwrap();
    assert_eq!(run.events().unwrap().entries.len(), 10_000);
    let parse = &status.tasks[0];
    assert_eq!(parse.state, TaskState::Implementing);
    assert_eq!(parse.tokens.input, 3 * 4_999);
    assert_eq!(parse.cost_usd, 0.5 * 4_999.0);
    assert_eq!(parse.session, None);
    assert_eq!(status.cost_usd, parse.cost_usd);
}
