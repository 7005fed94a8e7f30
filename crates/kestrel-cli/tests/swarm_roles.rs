//! Swarm role sessions through `kestrel worker` (ARCHITECTURE §10): `session/new` with
//! `_meta.kestrel.swarm/model/mode` tags the record, picks the role's mode and model and
//! offers the role's tool (and never `task`); a restarted worker loads the same role; the
//! planner's and reviewer's tools answer as the orchestrator expects.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod worker_support;

use common::{TestEnv, Wire, body_text};
use kestrel_testkit::{LoggedRequest, Script, Step};
use serde_json::{Value, json};
use std::path::Path;
use worker_support::{Worker, record_items};

fn tag(task: &str, role: &str) -> Value {
    json!({"run": "r1", "task": task, "role": role, "attempt": 1})
}

/// `session/new` with these `_meta.kestrel` fields; the response, or the error.
async fn new_role_session(
    worker: &Worker,
    cwd: &Path,
    kestrel: Value,
) -> Result<Value, kestrel_protocol::jsonrpc::RpcError> {
    let params = json!({"cwd": cwd, "mcpServers": [], "_meta": {"kestrel": kestrel}});
    worker.request("session/new", params).await
}

/// The names of the tools a model request offered.
fn offered(request: &LoggedRequest) -> Vec<String> {
    let tools = request.body["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().map(|tool| tool["function"]["name"].as_str().unwrap().to_string()).collect()
}

/// The model requests for `model`.
fn requests_for(env: &TestEnv, model: &str) -> Vec<LoggedRequest> {
    env.requests().into_iter().filter(|request| request.body["model"] == model).collect()
}

/// The record's first line.
fn header(env: &TestEnv, id: &str) -> Value {
    let path = env.records().into_iter().find(|path| path.to_string_lossy().contains(id)).unwrap();
    common::read_lines(&path).remove(0)
}

/// The record's tool results, in order: `(output, is_error)`.
fn tool_results(env: &TestEnv, id: &str) -> Vec<(String, bool)> {
    record_items(env, id)
        .into_iter()
        .filter(|item| item["type"] == "tool_result")
        .map(|item| {
            (item["output"].as_str().unwrap().to_string(), item["is_error"].as_bool().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn a_reviewer_is_read_only_offered_only_swarm_review_and_stays_so_after_a_restart() {
    let review = |step: Step| step.when(Some("review-model"), None);
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            review(Step::tool_call("write_file", json!({"path": "fix.txt", "content": "x\n"}))),
            review(Step::tool_call(
                "swarm_review",
                json!({"approve": false, "findings": ["parse.rs: the empty file panics"]}),
            )),
            review(Step::text("Rejected: see the findings.")),
            review(Step::text("Still the reviewer.")),
        ]),
    );
    let work = env.work_path();
    let mut worker = Worker::spawn(&env);
    worker.initialize().await;
    let kestrel = json!({"swarm": tag("parse", "reviewer"), "model": "scripted/review-model"});
    let session = new_role_session(&worker, &work, kestrel).await.unwrap();
    let id = session["sessionId"].as_str().unwrap().to_string();
    assert_eq!(session["modes"]["currentModeId"], "read-only");
    assert_eq!(session["configOptions"][0]["currentValue"], "scripted/review-model");
    assert_eq!(header(&env, &id)["swarm"], tag("parse", "reviewer"));
    assert!(header(&env, &id).get("parent_id").is_none(), "not a subagent");

    let prompt = "[kestrel swarm] run=r1 task=parse role=reviewer attempt=1\nReview the diff.";
    // No permission request is expected: read-only refuses the write by itself.
    let outcome = worker.prompt(&id, prompt, &[]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    assert!(!work.join("fix.txt").exists(), "a reviewer writes nothing");
    let results = tool_results(&env, &id);
    assert!(results[0].1, "write_file is refused: {results:?}");
    assert!(!results[1].1, "swarm_review is answered ok: {results:?}");
    assert!(results[1].0.starts_with("recorded"), "{results:?}");

    let requests = requests_for(&env, "review-model");
    assert_eq!(requests.len(), 3);
    for request in &requests {
        let tools = offered(request);
        assert!(tools.contains(&"swarm_review".to_string()), "{tools:?}");
        assert!(!tools.contains(&"swarm_plan".to_string()), "{tools:?}");
        assert!(!tools.contains(&"task".to_string()), "{tools:?}");
    }
    assert!(body_text(&requests[0]).contains("You are the reviewer"), "the role note is sent");

    // The daemon restarts a dead worker with session/load: the role comes back.
    worker.child.start_kill().unwrap();
    worker.child.wait().await.unwrap();
    let mut second = Worker::spawn(&env);
    second.initialize().await;
    let (loaded, _) = second.load(&id, &work).await;
    assert_eq!(loaded.unwrap()["modes"]["currentModeId"], "read-only");
    let outcome = second.prompt(&id, "Anything else?", &[]).await;
    assert_eq!(outcome.text(), "Still the reviewer.");
    let last = requests_for(&env, "review-model").pop().unwrap();
    let tools = offered(&last);
    assert!(tools.contains(&"swarm_review".to_string()), "{tools:?}");
    assert!(!tools.contains(&"task".to_string()), "{tools:?}");
    assert!(body_text(&last).contains("You are the reviewer"));
    assert_eq!(second.close().await, Some(0));
}

#[tokio::test]
async fn a_planners_invalid_plan_gets_every_reason_and_a_valid_one_is_recorded() {
    let task = |id: &str, deps: &[&str], acceptance: &[&str]| {
        json!({"id": id, "title": format!("do {id}"), "description": "d",
               "depends_on": deps, "acceptance": acceptance})
    };
    let invalid = json!({"tasks": [
        task("a", &["b"], &["true"]), task("b", &["a"], &["true"]), task("c", &[], &[])
    ]});
    let valid = json!({"tasks": [task("a", &[], &["true"]), task("b", &["a"], &["true"])]});
    let plan = |step: Step| step.when(Some("plan-model"), Some("role=planner"));
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            plan(Step::tool_call("swarm_plan", invalid)),
            plan(Step::tool_call("swarm_plan", valid)),
            plan(Step::text("Two tasks: a, then b.")),
        ]),
    );
    let work = env.work_path();
    let mut worker = Worker::spawn(&env);
    worker.initialize().await;
    let kestrel = json!({"swarm": tag("plan", "planner"), "model": "scripted/plan-model"});
    let session = new_role_session(&worker, &work, kestrel).await.unwrap();
    let id = session["sessionId"].as_str().unwrap().to_string();
    assert_eq!(session["modes"]["currentModeId"], "read-only");

    let prompt = "[kestrel swarm] run=r1 task=plan role=planner attempt=1\nGoal: a config loader.";
    let outcome = worker.prompt(&id, prompt, &[]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    let results = tool_results(&env, &id);
    let (refusal, is_error) = &results[0];
    assert!(is_error, "{refusal}");
    let lines: Vec<&str> = refusal.lines().collect();
    assert!(lines.iter().any(|line| line.contains("cycle: a -> b -> a")), "{refusal}");
    assert!(lines.iter().any(|line| line.contains("`c` has no acceptance")), "{refusal}");
    assert!(refusal.contains("Call swarm_plan again"), "{refusal}");
    assert_eq!(
        results[1],
        (
            "plan recorded: 2 tasks (a, b). End your turn with a short summary of the plan."
                .to_string(),
            false
        )
    );

    let requests = requests_for(&env, "plan-model");
    let tools = offered(&requests[0]);
    assert!(tools.contains(&"swarm_plan".to_string()), "{tools:?}");
    assert!(!tools.contains(&"swarm_review".to_string()), "{tools:?}");
    assert!(!tools.contains(&"task".to_string()), "{tools:?}");
    assert!(body_text(&requests[1]).contains("cycle: a -> b -> a"), "the model sees the reasons");
    assert_eq!(worker.close().await, Some(0));
}

#[tokio::test]
async fn an_implementer_runs_in_auto_with_no_role_tool_and_no_task() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("write_file", json!({"path": "src/parse.txt", "content": "done\n"})),
            Step::text("Implemented."),
        ]),
    );
    let work = env.work_path();
    let mut worker = Worker::spawn(&env);
    worker.initialize().await;
    let session =
        new_role_session(&worker, &work, json!({"swarm": tag("parse", "implementer")})).await;
    let session = session.unwrap();
    let id = session["sessionId"].as_str().unwrap().to_string();
    assert_eq!(session["modes"]["currentModeId"], "auto");
    // No model in the meta: the configured one.
    assert_eq!(session["configOptions"][0]["currentValue"], "scripted/test-model");

    let prompt = "[kestrel swarm] run=r1 task=parse role=implementer attempt=1\nBuild it.";
    let outcome = worker.prompt(&id, prompt, &[]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    assert_eq!(std::fs::read_to_string(work.join("src/parse.txt")).unwrap(), "done\n");
    let first = &env.requests()[0];
    let tools = offered(first);
    assert!(tools.contains(&"write_file".to_string()), "{tools:?}");
    for absent in ["swarm_plan", "swarm_review", "task"] {
        assert!(!tools.contains(&absent.to_string()), "{absent} in {tools:?}");
    }
    assert!(body_text(first).contains("Do not commit"), "the implementer's note is sent");
    assert_eq!(header(&env, &id)["swarm"], tag("parse", "implementer"));
    assert_eq!(worker.close().await, Some(0));
}

#[tokio::test]
async fn a_mode_in_the_meta_wins_over_the_roles_and_outlives_a_restart() {
    let env = TestEnv::new(Wire::Chat, Script::new([]));
    let work = env.work_path();
    let mut worker = Worker::spawn(&env);
    worker.initialize().await;
    let kestrel = json!({"swarm": tag("parse", "implementer"), "mode": "read-only"});
    let session = new_role_session(&worker, &work, kestrel).await.unwrap();
    let id = session["sessionId"].as_str().unwrap().to_string();
    assert_eq!(session["modes"]["currentModeId"], "read-only");
    worker.child.start_kill().unwrap();
    worker.child.wait().await.unwrap();

    let mut second = Worker::spawn(&env);
    second.initialize().await;
    let (loaded, _) = second.load(&id, &work).await;
    assert_eq!(loaded.unwrap()["modes"]["currentModeId"], "read-only");
    assert_eq!(second.close().await, Some(0));

    // KESTREL_MODE of the worker still has the last word on load.
    let mut third = Worker::spawn_with(&env, &[("KESTREL_MODE", "ask")]);
    third.initialize().await;
    let (loaded, _) = third.load(&id, &work).await;
    assert_eq!(loaded.unwrap()["modes"]["currentModeId"], "ask");
    assert_eq!(third.close().await, Some(0));
}

#[tokio::test]
async fn bad_swarm_meta_is_refused_naming_the_field() {
    let env = TestEnv::new(Wire::Chat, Script::new([]));
    let work = env.work_path();
    let worker = Worker::spawn(&env);
    worker.initialize().await;
    let cases = [
        (
            json!({"swarm": {"run": "r1", "task": "parse", "role": "boss", "attempt": 1}}),
            "_meta.kestrel.swarm",
        ),
        (json!({"swarm": {"run": "r1", "role": "planner", "attempt": 1}}), "_meta.kestrel.swarm"),
        (json!({"swarm": tag("parse", "reviewer"), "mode": "careful"}), "_meta.kestrel.mode"),
        (json!({"model": "no-provider"}), "_meta.kestrel.model"),
    ];
    for (kestrel, field) in cases {
        let error = new_role_session(&worker, &work, kestrel.clone()).await.unwrap_err();
        assert_eq!(error.code, -32602, "{kestrel}: {error:?}");
        assert!(error.message.starts_with(field), "{kestrel}: {}", error.message);
    }
    // A model whose provider is not configured fails as without the meta, by name.
    let kestrel = json!({"swarm": tag("parse", "reviewer"), "model": "nowhere/m"});
    let error = new_role_session(&worker, &work, kestrel).await.unwrap_err();
    assert!(error.message.contains("unknown provider `nowhere`"), "{}", error.message);
    assert!(env.records().is_empty(), "no record for a refused session");
    assert_eq!(worker.close().await, Some(0));
}
