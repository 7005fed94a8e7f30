//! Faults and control of a swarm run through the real binary: a hanging acceptance
//! command, a task out of attempts and its retry, cancelling a run or one task,
//! `status --json` while it runs and after, one orchestrator per run, two runs in one
//! repository, the budget, an event log that cannot be written, and a role waiting for a
//! person's approval. Each shows a clear outcome with nothing lost and nothing started
//! that should not be.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog_support;
mod swarm_support;

use kestrel_protocol::StopReason;
use kestrel_testkit::{Fault, ScriptedToolCall, Step};
use serde_json::{Value, json};
use std::path::PathBuf;
use swarm_support::{
    ConfigParts, IMPLEMENTER, REVIEWER, SwarmTest, git, implement, implement_slowly, of_type,
    review, stderr, stdout,
};

const FILES: &[(&str, &str)] = &[("README", "toy\n")];

const ONE_TASK: &str = r#"
[[task]]
id = "greet"
title = "Write the greeting"
acceptance = ["grep -qx hello hello.txt"]
"#;

/// How long the slow first response of a turn waits between its events: long enough
/// that the turn is surely in flight while the test looks at it.
const SLOW_MS: u64 = 1500;

fn run_end(test: &SwarmTest, run: &str) -> Value {
    let events = test.events(run);
    let finished = of_type(&events, "run_finished");
    assert_eq!(finished.len(), 1, "{events:#?}");
    finished[0].clone()
}

fn turn_started(event: &Value, task: &str, role: &str) -> bool {
    event["type"] == "turn_started" && event["task"] == task && event["role"] == role
}

/// The last user message of a request (the prompt or a tool's answer).
fn last_message(body: &Value) -> String {
    body["messages"].as_array().unwrap().last().unwrap()["content"].to_string()
}

#[test]
fn a_hanging_acceptance_command_times_out_and_the_next_attempt_is_told() {
    let mut steps = implement("greet", &[("hello.txt", "hello\n")]);
    steps.extend(implement("greet", &[("fixed.txt", "fixed\n")]));
    steps.extend(review("greet", 1, true, &[]));
    steps.extend(review("greet", 2, true, &[]));
    let test = SwarmTest::new(FILES, steps, "");
    test.write_config_parts(&ConfigParts { swarm: "verify_timeout_s = 2", ..Default::default() });
    let graph = test.graph(
        r#"
[[task]]
id = "greet"
title = "Write the greeting"
acceptance = ["test -f fixed.txt || sleep 600"]
"#,
    );
    let output = test.swarm_within(&["run", "--graph", &graph]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = test.run_id();
    let events = test.events(&run);
    let failed = of_type(&events, "attempt_failed");
    assert_eq!(failed.len(), 1, "{events:#?}");
    assert_eq!(failed[0]["attempt"], 1);
    assert_eq!(failed[0]["stage"], "verify");
    let reason = failed[0]["reason"].as_str().unwrap();
    assert!(reason.contains("timed out after 2 s (verify_timeout_s)"), "{reason}");
    assert!(reason.contains("sleep 600"), "the command is named: {reason}");
    // The second attempt's prompt carries the timeout.
    let retry = test
        .requests_for(IMPLEMENTER)
        .into_iter()
        .map(|body| last_message(&body))
        .find(|prompt| prompt.contains("role=implementer attempt=2"))
        .expect("a prompt for attempt 2");
    assert!(retry.contains("timed out after 2 s"), "{retry}");
    let merged = of_type(&events, "merged");
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0]["attempt"], 2);
}

const CHAIN: &str = r#"
[[task]]
id = "base"
title = "Base file"
acceptance = ["grep -qx base base.txt"]

[[task]]
id = "top"
title = "Top file"
depends_on = ["base"]
acceptance = ["grep -qx top top.txt"]
"#;

#[test]
fn a_task_out_of_attempts_fails_and_blocks_its_dependents_until_retried() {
    let mut steps = implement("base", &[("base.txt", "base\n")]);
    steps.extend(review("base", 1, false, &["say why in a comment"]));
    steps.extend(implement("base", &[("base.txt", "base\n# why: the base\n")]));
    steps.extend(review("base", 2, true, &[]));
    steps.extend(implement("top", &[("top.txt", "top\n")]));
    steps.extend(review("top", 1, true, &[]));
    let test = SwarmTest::new(FILES, steps, "");
    test.write_config_parts(&ConfigParts { swarm: "max_attempts = 1", ..Default::default() });
    let graph = test.graph(CHAIN);

    let output = test.swarm_within(&["run", "--graph", &graph]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    let run = test.run_id();
    assert!(err.contains("base: FAILED"), "{err}");
    assert!(err.contains("top: blocked by base"), "{err}");
    let events = test.events(&run);
    let failed = of_type(&events, "task_failed");
    assert_eq!(failed.len(), 1, "{events:#?}");
    assert_eq!(failed[0]["task"], "base");
    let reason = failed[0]["reason"].as_str().unwrap();
    assert!(reason.contains("1 attempt(s) used") && reason.contains("say why"), "{reason}");
    let blocked = of_type(&events, "task_blocked");
    assert_eq!(blocked.len(), 1);
    assert_eq!((&blocked[0]["task"], &blocked[0]["by"]), (&json!("top"), &json!("base")));
    assert!(!events.iter().any(|event| turn_started(event, "top", "implementer")));
    assert_eq!(run_end(&test, &run)["state"], "failed");
    let status = test.status_json(&run);
    assert_eq!(status["state"], "failed");
    assert_eq!(status["tasks"][0]["state"], "failed");
    assert_eq!(status["tasks"][1]["state"], "blocked");
    let main = git(test.repo.path(), &["rev-parse", "main"]);
    assert_eq!(git(test.repo.path(), &["rev-parse", &format!("kestrel/{run}")]), main);

    let output = test.swarm_within(&["retry", &run, "base"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    let retried: Vec<&Value> = of_type(&events, "task_retried");
    let retried: Vec<&str> = retried.iter().map(|e| e["task"].as_str().unwrap()).collect();
    assert_eq!(retried, ["base", "top"]);
    let merged: Vec<(&str, u64)> = of_type(&events, "merged")
        .iter()
        .map(|e| (e["task"].as_str().unwrap(), e["attempt"].as_u64().unwrap()))
        .collect();
    assert_eq!(merged, [("base", 2), ("top", 1)]);
    assert_eq!(events.last().unwrap()["state"], "done");
    assert_eq!(test.status_json(&run)["state"], "done");
    let branch = format!("kestrel/{run}");
    assert_eq!(git(test.repo.path(), &["show", &format!("{branch}:top.txt")]), "top\n");
    assert_eq!(test.server.remaining(), 0);
}

#[test]
fn cancelling_an_interrupted_run_cancels_its_tasks_and_the_run() {
    let mut steps = implement_slowly("greet", &[("hello.txt", "hello\n")], SLOW_MS);
    steps.extend(review("greet", 1, true, &[]));
    let test = SwarmTest::new(FILES, steps, "");
    let graph = test.graph(ONE_TASK);
    let first = test.spawn_swarm(&["run", "--graph", &graph]);
    test.wait_for_event("the implementer's turn", |e| turn_started(e, "greet", "implementer"));
    // `turn_started` is written before the prompt goes out: interrupted only once the
    // turn runs (its first model request, which streams slowly, has arrived).
    let start = std::time::Instant::now();
    while test.requests_for(IMPLEMENTER).is_empty() {
        assert!(start.elapsed() < swarm_support::WAIT, "the implementer's turn never ran");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    first.interrupt();
    let output = first.wait();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("kestrel swarm resume"), "{err}");
    let run = test.run_id();
    let status = test.status_json(&run);
    assert_eq!(status["state"], "interrupted", "{status:#}");
    assert_eq!(status["tasks"][0]["state"], "implementing");
    assert!(status["tasks"][0]["session"].is_string(), "its turn goes on: {status:#}");

    let session = status["tasks"][0]["session"].as_str().unwrap().to_string();

    let output = test.swarm_within(&["cancel", &run]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // The turn still running in the daemon is stopped too.
    assert_eq!(test.wait_for_turn_end(&session), StopReason::Cancelled);
    let cancelled = of_type(&test.events(&run), "task_cancelled")
        .iter()
        .map(|e| e["task"].as_str().unwrap().to_string())
        .collect::<Vec<_>>();
    assert_eq!(cancelled, ["greet"]);
    assert_eq!(run_end(&test, &run)["state"], "cancelled");
    let status = test.status_json(&run);
    assert_eq!(status["state"], "cancelled");
    assert_eq!(status["tasks"][0]["state"], "cancelled");
    assert_eq!(status["tasks"][0]["session"], Value::Null);
    assert!(test.requests_for(REVIEWER).is_empty(), "no review was started");
}

#[test]
fn cancelling_one_task_of_a_live_run_blocks_its_dependents_and_the_others_finish() {
    let mut steps = implement_slowly("slow", &[("slow.txt", "slow\n")], 3000);
    steps.extend(review("slow", 1, true, &[]));
    steps.extend(implement("after", &[("after.txt", "after\n")]));
    steps.extend(review("after", 1, true, &[]));
    steps.extend(implement("other", &[("other.txt", "other\n")]));
    steps.extend(review("other", 1, true, &[]));
    let test = SwarmTest::new(FILES, steps, "");
    let graph = test.graph(
        r#"
[[task]]
id = "slow"
title = "Slow"
acceptance = ["test -f slow.txt"]

[[task]]
id = "after"
title = "After"
depends_on = ["slow"]
acceptance = ["test -f after.txt"]

[[task]]
id = "other"
title = "Other"
acceptance = ["test -f other.txt"]
"#,
    );
    let running = test.spawn_swarm(&["run", "--graph", &graph]);
    test.wait_for_event("slow's implementer", |e| turn_started(e, "slow", "implementer"));
    let run = test.run_id();
    let slow_session = test.status_json(&run)["tasks"][0]["session"].as_str().unwrap().to_string();
    let output = test.swarm_within(&["cancel", &run, "slow"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("asked the orchestrator"), "{}", stderr(&output));

    let output = running.wait();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    let events = test.events(&run);
    let cancelled: Vec<&Value> = of_type(&events, "task_cancelled");
    assert_eq!(cancelled.len(), 1, "{events:#?}");
    assert_eq!(cancelled[0]["task"], "slow");
    let blocked = of_type(&events, "task_blocked");
    assert_eq!(blocked.len(), 1, "{events:#?}");
    assert_eq!((&blocked[0]["task"], &blocked[0]["by"]), (&json!("after"), &json!("slow")));
    let merged: Vec<&str> =
        of_type(&events, "merged").iter().map(|e| e["task"].as_str().unwrap()).collect();
    assert_eq!(merged, ["other"]);
    assert!(!events.iter().any(|e| turn_started(e, "slow", "reviewer")), "{events:#?}");
    assert_eq!(test.wait_for_turn_end(&slow_session), StopReason::Cancelled);
    assert_eq!(run_end(&test, &run)["state"], "failed");
    let status = test.status_json(&run);
    let states: Vec<(&str, &str)> = status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_str().unwrap(), t["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("slow", "cancelled"), ("after", "blocked"), ("other", "merged")]);
}

/// The key names of a JSON object, sorted.
fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> =
        value.as_object().unwrap_or_else(|| panic!("{value}")).keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

fn assert_status_shape(status: &Value) {
    assert_eq!(keys(status), ["branch", "cost_usd", "run", "state", "tasks"], "{status:#}");
    for task in status["tasks"].as_array().unwrap() {
        assert_eq!(
            keys(task),
            ["attempts", "cost_usd", "elapsed_s", "id", "model", "session", "state", "tokens"],
            "{task:#}"
        );
        assert_eq!(keys(&task["tokens"]), ["input", "output"], "{task:#}");
        assert!(task["tokens"]["input"].is_u64() && task["tokens"]["output"].is_u64());
        assert!(task["cost_usd"].is_f64() && task["elapsed_s"].is_u64(), "{task:#}");
    }
    assert!(status["cost_usd"].is_f64());
}

#[test]
fn status_json_shows_the_live_session_while_running_and_none_after() {
    let mut steps = implement_slowly("greet", &[("hello.txt", "hello\n")], SLOW_MS);
    steps.extend(review("greet", 1, true, &[]));
    let test = SwarmTest::new(FILES, steps, "");
    let graph = test.graph(ONE_TASK);
    let running = test.spawn_swarm(&["run", "--graph", &graph]);
    test.wait_for_event("the implementer's turn", |e| turn_started(e, "greet", "implementer"));
    let run = test.run_id();
    let started = of_type(&test.events(&run), "turn_started")[0].clone();

    let status = test.status_json(&run);
    assert_status_shape(&status);
    assert_eq!(status["run"], run.as_str());
    assert_eq!(status["state"], "running");
    assert_eq!(status["branch"], format!("kestrel/{run}").as_str());
    let task = &status["tasks"][0];
    assert_eq!(task["id"], "greet");
    assert_eq!(task["state"], "implementing");
    assert_eq!(task["attempts"], 1);
    assert_eq!(task["model"], format!("scripted/{IMPLEMENTER}").as_str());
    assert_eq!(task["session"], started["session"], "the live session");
    assert!(task["session"].is_string());

    let output = running.wait();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let status = test.status_json(&run);
    assert_status_shape(&status);
    assert_eq!(status["state"], "done");
    let task = &status["tasks"][0];
    assert_eq!(task["state"], "merged");
    assert_eq!(task["session"], Value::Null);
    assert_eq!(task["model"], format!("scripted/{REVIEWER}").as_str(), "the last turn's model");
    // Two implementer requests and two reviewer requests of 12 in / 8 out each.
    assert_eq!(task["tokens"], json!({"input": 48, "output": 32}));
}

#[test]
fn a_second_resume_of_a_run_exits_2_while_the_first_runs() {
    let mut steps = implement_slowly("greet", &[("hello.txt", "hello\n")], SLOW_MS);
    // The review is slow too: the first resume is still at work when the second comes.
    let mut reviewed = review("greet", 1, true, &[]);
    reviewed[0] = reviewed[0].clone().with_fault(Fault::SlowChunks { delay_ms: SLOW_MS });
    steps.extend(reviewed);
    let test = SwarmTest::new(FILES, steps, "");
    let graph = test.graph(ONE_TASK);
    let first = test.spawn_swarm(&["run", "--graph", &graph]);
    test.wait_for_event("the implementer's turn", |e| turn_started(e, "greet", "implementer"));
    first.interrupt();
    assert_eq!(first.wait().status.code(), Some(1));
    let run = test.run_id();

    let resumed = test.spawn_swarm(&["resume", &run]);
    test.wait_for_event("the resume", |e| e["type"] == "run_resumed");
    let output = test.swarm_within(&["resume", &run]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("another orchestrator"), "{err}");
    assert!(err.contains(&format!("pid {}", resumed.pid())), "names the holder: {err}");

    let output = resumed.wait();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    assert_eq!(of_type(&events, "run_resumed").len(), 1, "{events:#?}");
    assert_eq!(of_type(&events, "merged").len(), 1);
    assert_eq!(run_end(&test, &run)["state"], "done");
}

#[test]
fn two_runs_in_one_repository_at_once_finish_on_their_own_branches() {
    // Three tasks a run: worktrees of both runs are added at the same moments.
    let runs_tasks = [["alpha-1", "alpha-2", "alpha-3"], ["beta-1", "beta-2", "beta-3"]];
    let mut steps = Vec::new();
    for task in runs_tasks.iter().flatten() {
        steps.extend(implement(task, &[(&format!("{task}.txt"), &format!("{task}\n"))]));
        steps.extend(review(task, 1, true, &[]));
    }
    let test = SwarmTest::new(FILES, steps, "");
    let mut graphs = Vec::new();
    for (name, tasks) in ["alpha", "beta"].iter().zip(&runs_tasks) {
        let path: PathBuf = test.home.path().join(format!("{name}.toml"));
        let text: String = tasks
            .iter()
            .map(|task| {
                format!(
                    "[[task]]\nid = \"{task}\"\ntitle = \"{task}\"\n\
                     acceptance = [\"grep -qx {task} {task}.txt\"]\n\n"
                )
            })
            .collect();
        std::fs::write(&path, text).unwrap();
        graphs.push(path.display().to_string());
    }
    let alpha = test.spawn_swarm(&["run", "--graph", &graphs[0]]);
    let beta = test.spawn_swarm(&["run", "--graph", &graphs[1]]);
    let (alpha, beta) = (alpha.wait(), beta.wait());
    assert_eq!(alpha.status.code(), Some(0), "{}", stderr(&alpha));
    assert_eq!(beta.status.code(), Some(0), "{}", stderr(&beta));

    let runs = test.run_ids();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let mut seen = Vec::new();
    for run in &runs {
        let graph = kestrel_store::parse_graph(
            &std::fs::read_to_string(test.home.path().join("swarm").join(run).join("graph.toml"))
                .unwrap(),
        )
        .unwrap();
        let name = graph.tasks[0].id.split('-').next().unwrap().to_string();
        let branch = format!("kestrel/{run}");
        let files = git(test.repo.path(), &["ls-tree", "--name-only", &branch]);
        let files: Vec<&str> = files.lines().collect();
        let expected: Vec<String> = std::iter::once("README".to_string())
            .chain((1..=3).map(|n| format!("{name}-{n}.txt")))
            .collect();
        assert_eq!(files, expected, "{branch} holds its own tasks only");
        assert_eq!(of_type(&test.events(run), "merged").len(), 3);
        assert_eq!(run_end(&test, run)["state"], "done");
        seen.push(name);
    }
    seen.sort();
    assert_eq!(seen, ["alpha", "beta"]);
    assert_eq!(test.server.remaining(), 0);
}

/// A catalog that prices the scripted models at $1000 per million tokens, in and out:
/// a request of 12 + 8 tokens costs $0.02.
const PRICED_CATALOG: &str = r#"{
  "scripted": {"id": "scripted", "name": "Scripted", "env": ["KESTREL_TEST_SCRIPTED_KEY"], "models": {
    "impl": {"id": "impl", "name": "Impl", "tool_call": true,
             "cost": {"input": 1000.0, "output": 1000.0}, "limit": {"context": 64000, "output": 4096}},
    "review": {"id": "review", "name": "Review", "tool_call": true,
               "cost": {"input": 1000.0, "output": 1000.0}, "limit": {"context": 64000, "output": 4096}}
  }}
}"#;

#[test]
fn the_budget_stops_new_turns_and_ends_the_run_budget() {
    // Three independent tasks, one turn at a time: the other two queue for the slot
    // and must not start once the first turn used the budget up.
    let mut steps = Vec::new();
    for task in ["x", "y", "z"] {
        steps.extend(implement(task, &[(&format!("{task}.txt"), "x\n")]));
        steps.extend(review(task, 1, true, &[]));
    }
    let test = SwarmTest::new(FILES, steps, "");
    let catalog = catalog_support::CatalogServer::start(PRICED_CATALOG);
    let top = format!("catalog_url = \"{}\"", catalog.url);
    test.write_config_parts(&ConfigParts { top: &top, ..Default::default() });
    // The catalog cached, as `kestrel models` does: sessions read it offline.
    let mut command = test.command(&["models", "scripted", "--refresh"]);
    command.env_remove("KESTREL_CATALOG_URL");
    let output = test.output_within(command);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(catalog.hits() > 0);
    let three: String = ["x", "y", "z"]
        .iter()
        .map(|id| {
            format!(
                "[[task]]\nid = \"{id}\"\ntitle = \"{id}\"\nacceptance = [\"test -f {id}.txt\"]\n\n"
            )
        })
        .collect();
    let graph = test.graph(&three);

    let mut command = test.command(&[
        "swarm",
        "run",
        "--graph",
        &graph,
        "--max-cost",
        "0.01",
        "--max-parallel",
        "1",
    ]);
    command.env_remove("KESTREL_CATALOG_URL");
    let output = test.output_within(command);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("budget reached"), "{err}");
    let run = test.run_id();
    let events = test.events(&run);
    let budget = events.iter().position(|e| e["type"] == "budget_reached").expect("a budget event");
    assert!(
        !events[budget..].iter().any(|e| e["type"] == "turn_started"),
        "no turn started after the budget: {events:#?}"
    );
    let spent = events[budget]["cost_usd"].as_f64().unwrap();
    assert!((spent - 0.04).abs() < 1e-9, "the implementer's two requests: {spent}");
    assert_eq!(events[budget]["max_cost_usd"], 0.01);
    assert_eq!(run_end(&test, &run)["state"], "budget");
    assert!(test.requests_for(REVIEWER).is_empty(), "the review never started");
    let status = test.status_json(&run);
    assert_eq!(status["state"], "budget");
    assert!((status["cost_usd"].as_f64().unwrap() - 0.04).abs() < 1e-9, "{status:#}");
    let main = git(test.repo.path(), &["rev-parse", "main"]);
    assert_eq!(git(test.repo.path(), &["rev-parse", &format!("kestrel/{run}")]), main);
}

/// `chattr +i` on a file for as long as it lives: not even root may write it.
struct Immutable(PathBuf);

impl Immutable {
    fn set(path: PathBuf) -> Immutable {
        let status = std::process::Command::new("chattr").arg("+i").arg(&path).status().unwrap();
        assert!(status.success(), "chattr +i {}", path.display());
        Immutable(path)
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

#[test]
fn an_event_that_cannot_be_written_stops_the_run_and_a_resume_goes_on() {
    let mut steps = implement_slowly("greet", &[("hello.txt", "hello\n")], SLOW_MS);
    steps.extend(review("greet", 1, true, &[]));
    let test = SwarmTest::new(FILES, steps, "");
    let graph = test.graph(ONE_TASK);
    let running = test.spawn_swarm(&["run", "--graph", &graph]);
    test.wait_for_event("the implementer's turn", |e| turn_started(e, "greet", "implementer"));
    let run = test.run_id();
    let events_file = test.home.path().join("swarm").join(&run).join("events.jsonl");
    let recorded = test.events(&run);
    let lock = Immutable::set(events_file.clone());

    let output = running.wait();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains(&events_file.display().to_string()), "the file is named: {err}");
    assert!(err.contains("not permitted"), "the cause is given: {err}");
    assert_eq!(test.events(&run), recorded, "nothing was written after");
    // Nothing was merged past the last recorded event, nor committed.
    let main = git(test.repo.path(), &["rev-parse", "main"]);
    let branch = format!("kestrel/{run}");
    assert_eq!(git(test.repo.path(), &["rev-parse", &branch]), main);
    let task_branch = format!("kestrel/{run}-greet");
    assert_eq!(git(test.repo.path(), &["rev-parse", &task_branch]), main);

    drop(lock);
    let output = test.swarm_within(&["resume", &run]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    let implementer_turns =
        of_type(&events, "turn_finished").iter().filter(|e| e["role"] == "implementer").count();
    assert_eq!(implementer_turns, 1, "the finished turn is taken, not sent again");
    assert_eq!(test.requests_for(IMPLEMENTER).len(), 2);
    assert_eq!(of_type(&events, "merged").len(), 1);
    assert_eq!(run_end(&test, &run)["state"], "done");
    assert_eq!(git(test.repo.path(), &["show", &format!("{branch}:hello.txt")]), "hello\n");
}

#[test]
fn a_role_waiting_for_an_approval_shows_needs_input() {
    // In auto, a write into the worktree's `.kestrel` needs a person's approval.
    let route = "task=greet role=implementer";
    let write = ScriptedToolCall::new(
        "write_file",
        json!({"path": ".kestrel/config.toml", "content": "model = \"x/y\"\n"}),
    );
    let steps = vec![
        Step::tool_calls(vec![write]).when(Some(IMPLEMENTER), Some(route)),
        Step::text("done").when(Some(IMPLEMENTER), Some(route)),
    ];
    let test = SwarmTest::new(FILES, steps, "");
    let graph = test.graph(ONE_TASK);
    let running = test.spawn_swarm(&["run", "--graph", &graph]);
    test.wait_for_event("a wait for input", |e| e["type"] == "needs_input");
    let run = test.run_id();
    let events = test.events(&run);
    let asked = of_type(&events, "needs_input")[0].clone();
    assert_eq!(asked["task"], "greet");
    assert!(asked["title"].as_str().unwrap().contains(".kestrel"), "{asked}");

    let status = test.status_json(&run);
    assert_eq!(status["state"], "running");
    assert_eq!(status["tasks"][0]["state"], "needs-input");
    assert_eq!(status["tasks"][0]["session"], asked["session"]);
    let table = stdout(&test.swarm_within(&["status", &run]));
    assert!(table.contains("needs-input"), "{table}");
    let session = asked["session"].as_str().unwrap();
    let said = running.stderr_now();
    assert!(said.contains("greet needs input"), "{said}");
    assert!(said.contains(&format!("kestrel resume {session}")), "says how to answer: {said}");

    let output = test.swarm_within(&["cancel", &run]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = running.wait();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(run_end(&test, &run)["state"], "cancelled");
    assert_eq!(test.wait_for_turn_end(session), StopReason::Cancelled);
    assert!(!test.repo.path().join(".kestrel").exists());
}
