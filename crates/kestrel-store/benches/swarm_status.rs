//! A swarm run's status and event log through the store's API: `SwarmRunDir::status`
//! (what `kestrel swarm status` does: graph, every event, the lock probe and one listing
//! of the session index) of a run of 10,000 events beside an index of 1,000 sessions,
//! its parts alone, and the cost of one synced `append`.
//!
//! `cargo bench -p kestrel-store --bench swarm_status -- [--runs N] [--events 10000]
//! [--sessions 1000] [--tasks 50] [--appends 200] [--json]`
//!
//! `... -- --generate DIR [--events N] [--sessions N] [--tasks N]` writes such a home
//! (the run and the sessions) and prints the run's id: bench/run.py times
//! `kestrel swarm status` on it.

#![allow(clippy::print_stdout)]

mod support;

use kestrel_protocol::swarm::{SwarmEntry, SwarmEvent, SwarmRole, TurnUsage};
use kestrel_protocol::{RecordEntry, RecordHeader, RecordItem, SessionId, Timestamp, Usage};
use kestrel_store::{KestrelHome, SessionIndex, SessionRecord, SwarmRunDir, list_runs};
use std::fmt::Write as _;
use std::time::Instant;
use support::{BenchResult, Flags, report};

/// Tasks in the generated graph unless `--tasks` says otherwise; events are spread over
/// them.
const TASKS: usize = 50;

/// The generated run's id.
const RUN_ID: &str = "0190aaaa-bench";

fn main() -> BenchResult<()> {
    let flags = Flags::parse(15)?;
    let [events] = flags.counts("--events", &[10_000])?[..] else {
        return Err("--events takes one count".into());
    };
    let [sessions] = flags.counts("--sessions", &[1_000])?[..] else {
        return Err("--sessions takes one count".into());
    };
    let [appends] = flags.counts("--appends", &[200])?[..] else {
        return Err("--appends takes one count".into());
    };
    let [tasks] = flags.counts("--tasks", &[TASKS])?[..] else {
        return Err("--tasks takes one count".into());
    };
    if tasks == 0 {
        return Err("--tasks must be at least 1".into());
    }
    if let Some(dir) = flags.value("--generate") {
        let home = KestrelHome::at(std::path::Path::new(dir));
        let run = generate(&home, events, sessions, tasks)?;
        // As a user's home would be: the index settled by a first listing.
        assert_eq!(run.status()?.tasks.len(), tasks);
        println!("{}", run.run_id());
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let home = KestrelHome::at(dir.path());
    let run = generate(&home, events, sessions, tasks)?;
    // The first listing may rebuild or compact the index: not what is measured.
    let status = run.status()?;
    assert_eq!(status.tasks.len(), tasks);

    let param = format!("{events} events");
    let runs = flags.runs;
    report(flags.json, "swarm status", &param, "ms", time(runs, || run.status())?);
    report(flags.json, "swarm events", &param, "ms", time(runs, || run.events())?);
    let index = format!("{sessions} sessions");
    report(
        flags.json,
        "session index list",
        &index,
        "ms",
        time(runs, || SessionIndex::list(&home))?,
    );
    report(flags.json, "swarm list (1 run)", &param, "ms", time(runs, || list_runs(&home))?);

    let entry = SwarmEntry::now(SwarmEvent::TaskCancelled { task: "t0".into() });
    let mut values = Vec::new();
    for _ in 0..appends {
        let started = Instant::now();
        run.append(&entry)?;
        values.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    report(flags.json, "swarm append (fdatasync)", &format!("{appends} appends"), "ms", values);
    Ok(())
}

/// Milliseconds of `runs` calls of `call`, each with what it returns dropped.
fn time<T, E: Into<Box<dyn std::error::Error>>>(
    runs: usize,
    mut call: impl FnMut() -> Result<T, E>,
) -> BenchResult<Vec<f64>> {
    let mut values = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let result = call().map_err(Into::into)?;
        drop(result);
        values.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(values)
}

/// A run of `events` events over `tasks` tasks (attempts, role turns, reviews, merges),
/// its role sessions among `sessions` sessions in the index.
fn generate(
    home: &KestrelHome,
    events: usize,
    sessions: usize,
    tasks: usize,
) -> BenchResult<SwarmRunDir> {
    let mut graph = String::from("goal = \"bench\"\n");
    for task in 0..tasks {
        let depends = if task == 0 { String::new() } else { format!("\"t{}\"", task - 1) };
        write!(
            graph,
            "\n[[task]]\nid = \"t{task}\"\ntitle = \"Task {task}\"\ndescription = \"Do {task}.\"\n\
             depends_on = [{depends}]\nacceptance = [\"cargo test -q\"]\n"
        )?;
    }
    let run = SwarmRunDir::create(home, RUN_ID, &graph)?;
    let start = Timestamp::now().millis - 3_600_000;
    let at = |n: usize| Timestamp { millis: start + n as i64 * 100 };
    let mut lines = Vec::with_capacity(events);
    lines.push(SwarmEntry {
        ts: at(0),
        event: SwarmEvent::RunStarted {
            run: "0190aaaa-bench".into(),
            repo: "/work/project".into(),
            base: "main".into(),
            base_commit: "0".repeat(40),
            branch: "kestrel/0190aaaa-bench".into(),
            workdir: "/cache/kestrel/swarm/0190aaaa-bench".into(),
            goal: Some("bench".into()),
            tasks,
            max_parallel: 4,
            max_attempts: 3,
            max_cost_usd: None,
        },
    });
    let mut role_sessions = Vec::new();
    let mut step = 0;
    while lines.len() < events {
        let task = format!("t{}", step % tasks);
        let attempt = u32::try_from(step / tasks % 3 + 1)?;
        let implementer = SessionId::from_string(format!("impl-{task}"));
        let reviewer = SessionId::from_string(format!("rev-{task}-{attempt}"));
        role_sessions.extend([implementer.clone(), reviewer.clone()]);
        let usage = TurnUsage { input_tokens: 12_000, output_tokens: 800, cost_usd: 0.05 };
        let turn = |role, session: &SessionId, model: &str| SwarmEvent::TurnStarted {
            task: task.clone(),
            role,
            attempt,
            session: session.clone(),
            model: model.into(),
        };
        let done = |role, session: &SessionId| SwarmEvent::TurnFinished {
            task: task.clone(),
            role,
            attempt,
            session: session.clone(),
            stop_reason: "end_turn".into(),
            usage,
        };
        for event in [
            SwarmEvent::AttemptStarted {
                task: task.clone(),
                attempt,
                branch: format!("kestrel/0190aaaa-bench-{task}"),
                worktree: format!("/cache/kestrel/swarm/0190aaaa-bench/{task}"),
                base_commit: "1".repeat(40),
            },
            turn(SwarmRole::Implementer, &implementer, "openai/gpt-5.1-codex"),
            done(SwarmRole::Implementer, &implementer),
            SwarmEvent::Committed { task: task.clone(), attempt, commit: "2".repeat(40) },
            turn(SwarmRole::Reviewer, &reviewer, "anthropic/claude-sonnet-4-5"),
            done(SwarmRole::Reviewer, &reviewer),
            SwarmEvent::Reviewed {
                task: task.clone(),
                attempt,
                approve: false,
                findings: vec!["the parser accepts an empty key; reject it".into()],
            },
            SwarmEvent::AttemptFailed {
                task: task.clone(),
                attempt,
                stage: kestrel_protocol::swarm::FailedStage::Review,
                reason: "the reviewer rejected it".into(),
                findings: vec!["the parser accepts an empty key; reject it".into()],
                log: None,
            },
        ] {
            lines.push(SwarmEntry { ts: at(lines.len()), event });
        }
        step += 1;
    }
    lines.truncate(events);
    let mut text = String::new();
    for line in &lines {
        text.push_str(&serde_json::to_string(line)?);
        text.push('\n');
    }
    std::fs::write(run.events_file(), text)?;

    role_sessions.sort();
    role_sessions.dedup();
    let others = (0..sessions.saturating_sub(role_sessions.len()))
        .map(|n| SessionId::from_string(format!("other-{n}")));
    for (n, id) in role_sessions.into_iter().chain(others).take(sessions).enumerate() {
        // From JSON, so the bench does not depend on every field of the header.
        let header: RecordHeader = serde_json::from_value(serde_json::json!({
            "id": id, "version": 1, "created_at": at(n), "cwd": "/work/project",
            "provider": "openai", "model": "gpt-5.1-codex"
        }))?;
        let mut record = SessionRecord::create(home, header)?;
        let usage =
            Usage { input_tokens: 13_000, output_tokens: 900, cost: 0.06, ..Usage::default() };
        record.append(&RecordEntry { ts: at(n + 1), item: RecordItem::Usage { usage } })?;
    }
    Ok(run)
}
