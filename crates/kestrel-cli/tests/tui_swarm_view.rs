//! `/swarm` in the interactive UI through a pty: a run directory made by hand in the
//! test's home (one task merged, one implementing in a live session, one waiting for
//! input) shows as the status table with the waiting task marked first, Esc closes it,
//! and Enter on a task loads that task's role session from the daemon.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tui_support;

use kestrel_protocol::swarm::{SwarmEntry, SwarmEvent, SwarmRole, TurnUsage};
use kestrel_protocol::{SessionId, Timestamp};
use kestrel_store::{KestrelHome, SwarmRunDir};
use kestrel_testkit::{Key, Script, Step};
use tui_support::TuiTest;

const RUN: &str = "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000";
const PARSE_SESSION: &str = "0199aaaa-0000-7000-8000-000000000001";
const CLI_SESSION: &str = "0199aaaa-0000-7000-8000-000000000002";

const GRAPH: &str = r#"goal = "Add a config loader"

[[task]]
id = "parse"
title = "Parse the config file"
acceptance = ["true"]

[[task]]
id = "loader"
title = "Load it"
depends_on = ["parse"]
acceptance = ["true"]

[[task]]
id = "cli"
title = "The command line"
depends_on = ["parse"]
acceptance = ["true"]
"#;

/// Writes the run: `parse` merged, `loader` implementing in `loader_session` (its
/// turn still running), `cli` waiting for a permission answer.
fn write_run(home: &KestrelHome, loader_session: &str, workdir: &std::path::Path) {
    let dir = SwarmRunDir::create(home, RUN, GRAPH).unwrap();
    let attempt = |task: &str| SwarmEvent::AttemptStarted {
        task: task.into(),
        attempt: 1,
        branch: format!("kestrel/{RUN}-{task}"),
        worktree: workdir.join(task).display().to_string(),
        base_commit: "c0".into(),
    };
    let turn = |task: &str, session: &str| SwarmEvent::TurnStarted {
        task: task.into(),
        role: SwarmRole::Implementer,
        attempt: 1,
        session: SessionId::from_string(session),
        model: "scripted/test-model".into(),
    };
    let events = [
        (0, started()),
        (1, attempt("parse")),
        (2, turn("parse", PARSE_SESSION)),
        (
            30,
            SwarmEvent::TurnFinished {
                task: "parse".into(),
                role: SwarmRole::Implementer,
                attempt: 1,
                session: SessionId::from_string(PARSE_SESSION),
                stop_reason: "end_turn".into(),
                usage: TurnUsage { input_tokens: 1200, output_tokens: 300, cost_usd: 0.25 },
            },
        ),
        (65, SwarmEvent::Merged { task: "parse".into(), attempt: 1, commit: "m1".into() }),
        (66, attempt("loader")),
        (67, turn("loader", loader_session)),
        (67, attempt("cli")),
        (68, turn("cli", CLI_SESSION)),
        (
            70,
            SwarmEvent::NeedsInput {
                task: "cli".into(),
                session: SessionId::from_string(CLI_SESSION),
                title: "shell: cargo build".into(),
            },
        ),
    ];
    for (second, event) in events {
        let ts = Timestamp { millis: 1_760_000_000_000 + second * 1000 };
        dir.append(&SwarmEntry { ts, event }).unwrap();
    }
}

fn started() -> SwarmEvent {
    SwarmEvent::RunStarted {
        run: RUN.into(),
        repo: "/repo".into(),
        base: "main".into(),
        base_commit: "c0".into(),
        branch: format!("kestrel/{RUN}"),
        workdir: "/w".into(),
        goal: Some("Add a config loader".into()),
        tasks: 3,
        max_parallel: 4,
        max_attempts: 3,
        max_cost_usd: None,
    }
}

#[test]
fn slash_swarm_shows_the_tasks_marks_needs_input_and_enter_opens_the_tasks_session() {
    let mut test = TuiTest::new(Script::new([Step::text("Implemented the loader.")]));
    // The loader's implementer: a real session record, made headless.
    let output = test.env.kestrel(&["exec", "--json", "build the loader"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let first = String::from_utf8_lossy(&output.stdout).lines().next().unwrap().to_owned();
    let started: serde_json::Value = serde_json::from_str(&first).unwrap();
    let loader_session = started["session_id"].as_str().unwrap().to_owned();
    let home = KestrelHome::at(test.env.home.path());
    write_run(&home, &loader_session, test.env.work.path());

    test.start(&[]);
    test.wait("● daemon ready");
    test.send("/swarm");
    test.wait("needs-input");
    // The loader's live session shows as its last 12 characters, which differ per run:
    // masked to as many.
    let short = &loader_session[loader_session.len() - 12..];
    let screen = test.settled().replace(short, "LIVE-SESSION");
    kestrel_testkit::assert_snapshot(&tui_support::snapshot_dir(), "swarm_view", &screen);
    let rows: Vec<&str> = screen.lines().filter(|line| line.contains("  scripted/")).collect();
    assert_eq!(rows.len(), 3, "{screen}");
    assert!(rows[0].contains("› ! cli") && rows[0].contains("needs-input"), "{screen}");
    assert!(rows[1].contains("parse") && rows[1].contains("merged"), "{screen}");
    assert!(rows[2].contains("loader") && rows[2].contains("implementing"), "{screen}");
    assert!(rows[2].contains("LIVE-SESSION"), "{screen}");
    assert!(screen.contains("! cli needs input"), "{screen}");

    test.press(Key::Esc);
    test.wait_until("the view closed", |screen| !screen.contains("Swarm · run"));

    test.send("/swarm");
    test.wait("needs-input");
    test.press(Key::Down);
    test.press(Key::Down);
    test.wait("›   loader");
    test.press(Key::Enter);
    // The session's history, replayed by the daemon's session/load.
    test.wait("Implemented the loader.");
    let screen = test.wait("resumed the session in");
    assert!(screen.contains("build the loader"), "{screen}");
    assert!(!screen.contains("Swarm · run"), "the view closed: {screen}");
}
