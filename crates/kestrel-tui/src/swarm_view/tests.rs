use super::*;
use crate::test_support;
use kestrel_protocol::swarm::{SwarmEntry, SwarmRole, TurnUsage};
use kestrel_protocol::{SessionId, Timestamp};

const GRAPH: &str = r#"goal = "Add a config loader"

[[task]]
id = "parse"
title = "Parse the config file"
acceptance = ["true"]

[[task]]
id = "cli"
title = "The command line"
depends_on = ["parse"]
acceptance = ["true"]

[[task]]
id = "docs"
title = "Document it"
depends_on = ["parse"]
acceptance = ["true"]
"#;

/// A run whose `parse` merged after two role sessions, whose `cli` waits for input in
/// its live session, and whose `docs` has not started.
fn make_run(home: &KestrelHome, run: &str) -> SwarmRunDir {
    let dir = SwarmRunDir::create(home, run, GRAPH).unwrap();
    let turn = |task: &str, role, session: &str| SwarmEvent::TurnStarted {
        task: task.into(),
        role,
        attempt: 1,
        session: SessionId::from_string(session),
        model: "p/m".into(),
    };
    let events = [
        SwarmEvent::RunStarted {
            run: run.into(),
            repo: "/repo".into(),
            base: "main".into(),
            base_commit: "c0".into(),
            branch: format!("kestrel/{run}"),
            workdir: "/w".into(),
            goal: None,
            tasks: 3,
            max_parallel: 4,
            max_attempts: 3,
            max_cost_usd: None,
        },
        attempt("parse"),
        turn("parse", SwarmRole::Implementer, "impl-parse"),
        SwarmEvent::TurnFinished {
            task: "parse".into(),
            role: SwarmRole::Implementer,
            attempt: 1,
            session: SessionId::from_string("impl-parse"),
            stop_reason: "end_turn".into(),
            usage: TurnUsage::default(),
        },
        turn("parse", SwarmRole::Reviewer, "review-parse"),
        SwarmEvent::Merged { task: "parse".into(), attempt: 1, commit: "m1".into() },
        attempt("cli"),
        turn("cli", SwarmRole::Implementer, "impl-cli"),
        SwarmEvent::NeedsInput {
            task: "cli".into(),
            session: SessionId::from_string("impl-cli"),
            title: "shell: make".into(),
        },
    ];
    for (millis, event) in events.into_iter().enumerate() {
        let ts = Timestamp { millis: i64::try_from(millis).unwrap() * 1000 };
        dir.append(&SwarmEntry { ts, event }).unwrap();
    }
    dir
}

fn attempt(task: &str) -> SwarmEvent {
    SwarmEvent::AttemptStarted {
        task: task.into(),
        attempt: 1,
        branch: format!("kestrel/r-{task}"),
        worktree: format!("/w/{task}"),
        base_commit: "c0".into(),
    }
}

#[test]
fn enter_opens_the_live_session_else_the_tasks_last_one_in_its_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path().join("home"));
    make_run(&home, "run-1");
    // The reviewer's turn came last: its session, in the task's worktree (the session
    // index knows neither session).
    let found = task_session(&home, "run-1", "parse", None).unwrap();
    assert_eq!(found, ("review-parse".to_owned(), PathBuf::from("/w/parse")));
    let found = task_session(&home, "run-1", "cli", Some("impl-cli".into())).unwrap();
    assert_eq!(found.0, "impl-cli");
    let error = task_session(&home, "run-1", "docs", None).unwrap_err();
    assert_eq!(error, "docs has no role session yet");
}

#[test]
fn keys_select_tasks_in_display_order_switch_runs_and_close() {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path().join("home"));
    make_run(&home, "run-1");
    make_run(&home, "run-2");
    let status = SwarmRunDir::open(&home, "run-2").unwrap().status().unwrap();
    let runs = kestrel_store::list_runs(&home).unwrap();
    let mut view = SwarmView::showing(runs, status);
    let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
    // The task waiting for input is first, and selected.
    let ids: Vec<&str> = view.rows().iter().map(|task| task.id.as_str()).collect();
    assert_eq!(ids, ["cli", "parse", "docs"]);
    assert_eq!(
        view.handle_key(key(KeyCode::Enter)),
        SwarmAction::Open { task: "cli".into(), live: Some("impl-cli".into()) }
    );
    view.handle_key(key(KeyCode::Down));
    view.handle_key(key(KeyCode::Down));
    view.handle_key(key(KeyCode::Down));
    assert_eq!(
        view.handle_key(key(KeyCode::Enter)),
        SwarmAction::Open { task: "docs".into(), live: None }
    );
    view.handle_key(key(KeyCode::Up));
    assert_eq!(
        view.handle_key(key(KeyCode::Enter)),
        SwarmAction::Open { task: "parse".into(), live: None }
    );
    // Newest first: run-2, then run-1; Right goes to the older one and wraps.
    assert_eq!(view.run_position(), Some((0, 2)));
    assert_eq!(view.handle_key(key(KeyCode::Right)), SwarmAction::SwitchedRun);
    assert_eq!(view.run.as_deref(), Some("run-1"));
    assert!(view.status.is_none(), "the other run is read before it is shown");
    assert_eq!(view.handle_key(key(KeyCode::Tab)), SwarmAction::SwitchedRun);
    assert_eq!(view.run.as_deref(), Some("run-2"));
    assert_eq!(view.handle_key(key(KeyCode::Esc)), SwarmAction::Closed);
}

/// Handles the app's events until `done` says so (10 s at most).
async fn pump_until(
    app: &mut App,
    events: &mut tokio::sync::mpsc::Receiver<AppEvent>,
    mut done: impl FnMut(&App) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done(app) {
        let event = tokio::time::timeout_at(deadline, events.recv()).await.unwrap().unwrap();
        app.handle_event(event);
    }
}

#[tokio::test]
async fn slash_swarm_shows_the_newest_run_reads_it_again_and_stops_when_closed() {
    let (mut app, _dir, mut events) = test_support::app();
    app.run_slash("/swarm");
    pump_until(&mut app, &mut events, |app| app.swarm.as_ref().is_some_and(|v| v.runs.is_some()))
        .await;
    assert!(test_support::screen(&mut app).contains(crate::swarm_table::NO_RUNS));
    // A run started while the view is open shows up with the next listing.
    make_run(&app.home, "run-1");
    pump_until(&mut app, &mut events, |app| app.swarm.as_ref().is_some_and(|v| v.status.is_some()))
        .await;
    let screen = test_support::screen(&mut app);
    assert!(screen.contains("Swarm · run run-1"), "{screen}");
    assert!(screen.contains("! cli needs input"), "{screen}");
    assert!(screen.contains("interrupted · kestrel/run-1"), "{screen}");
    let alive = app.swarm.as_ref().map(|view| view.alive.clone()).unwrap();
    app.handle_terminal_event(test_support::key(KeyCode::Esc));
    assert!(app.swarm.is_none());
    assert!(!alive.load(Ordering::Relaxed), "the ticker stops");
    assert!(!test_support::screen(&mut app).contains("Swarm"));
}

#[tokio::test]
async fn enter_on_a_task_loads_its_session_from_the_daemon() {
    let (mut app, _dir, mut events) = test_support::app();
    make_run(&app.home, "run-1");
    let (_daemon, mut sent) = test_support::connect(&mut app);
    app.run_slash("/swarm");
    pump_until(&mut app, &mut events, |app| app.swarm.as_ref().is_some_and(|v| v.status.is_some()))
        .await;
    app.handle_terminal_event(test_support::key(KeyCode::Enter));
    pump_until(&mut app, &mut events, |app| app.swarm.is_none()).await;
    let message = tokio::time::timeout(Duration::from_secs(10), sent.recv()).await;
    let message = message.unwrap().unwrap();
    assert_eq!(message["method"], "session/load");
    assert_eq!(message["params"]["sessionId"], "impl-cli");
    assert_eq!(message["params"]["cwd"], "/w/cli");
}
