//! Usage and cost end to end: each model request's cost from the catalog's prices in the
//! record and in `exec --json`, a turn's totals in `turn.completed`, sums across turns
//! (and a resumed process) in `kestrel sessions`, and the worker's `usage_update` sized
//! by the model's context window with the session's total cost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog_support;
mod common;
mod worker_support;

use catalog_support::{CATALOG, CONTEXT_WINDOW, CatalogServer, cost};
use common::{TestEnv, Wire, stderr, stdout};
use kestrel_testkit::{Script, ScriptedUsage, Step};
use serde_json::{Value, json};
use std::process::Output;
use worker_support::{Worker, record_items};

fn used(input: u64, cached: u64, output: u64, reasoning: u64) -> ScriptedUsage {
    ScriptedUsage {
        input_tokens: input,
        cached_input_tokens: cached,
        output_tokens: output,
        reasoning_tokens: reasoning,
    }
}

/// Two turns: a tool call and an answer, then (resumed) one answer.
fn script() -> Script {
    Script::new([
        Step::tool_call("list_dir", json!({})).with_usage(used(1_000, 400, 200, 50)),
        Step::text("first answer").with_usage(used(2_000, 1_000, 125, 0)),
        Step::text("second answer").with_usage(used(4_000, 0, 500, 100)),
    ])
}

/// Fills the home's catalog cache from a loopback server (then gone), as `kestrel
/// models` does; sessions read it without any network.
fn cached_catalog(env: &TestEnv) -> String {
    let server = CatalogServer::start(CATALOG);
    let output = env
        .command(&["models", "scripted", "--refresh"])
        .env("KESTREL_CATALOG_URL", &server.url)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    server.url.clone()
}

fn kestrel(env: &TestEnv, url: &str, args: &[&str]) -> Output {
    env.command(args).env("KESTREL_CATALOG_URL", url).output().unwrap()
}

fn events(output: &Output) -> Vec<Value> {
    stdout(output).lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn close(actual: &Value, expected: f64) {
    let actual = actual.as_f64().unwrap_or_else(|| panic!("not a number: {actual}"));
    assert!((actual - expected).abs() < 1e-12, "{actual} != {expected}");
}

#[test]
fn costs_come_from_the_catalog_and_add_up_across_requests_turns_and_processes() {
    let env = TestEnv::new(Wire::Chat, script());
    let url = cached_catalog(&env);
    let (first, second, third) =
        (cost(1_000, 400, 200), cost(2_000, 1_000, 125), cost(4_000, 0, 500));

    let output = kestrel(&env, &url, &["exec", "--json", "look around"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = events(&output);
    let usages: Vec<&Value> = lines.iter().filter(|event| event["type"] == "usage").collect();
    assert_eq!(usages.len(), 2);
    close(&usages[0]["usage"]["cost"], first);
    assert_eq!(usages[0]["usage"]["reasoning_tokens"], 50);
    close(&usages[1]["usage"]["cost"], second);
    let completed = lines.last().unwrap();
    assert_eq!(completed["type"], "turn.completed");
    assert_eq!(
        completed["usage"],
        json!({"input_tokens": 3_000, "cached_input_tokens": 1_400, "output_tokens": 325,
               "reasoning_tokens": 50, "cost": completed["usage"]["cost"]})
    );
    close(&completed["usage"]["cost"], first + second);
    let id = lines[0]["session_id"].as_str().unwrap().to_string();

    let output = kestrel(&env, &url, &["exec", "resume", "--json", &id, "and again"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let completed = events(&output).pop().unwrap();
    close(&completed["usage"]["cost"], third);

    // The record has every request's usage item with its cost.
    let costs: Vec<f64> = env
        .record_items()
        .iter()
        .filter(|item| item["type"] == "usage")
        .map(|item| item["cost"].as_f64().unwrap())
        .collect();
    assert_eq!(costs.len(), 3);
    for (actual, expected) in costs.iter().zip([first, second, third]) {
        assert!((actual - expected).abs() < 1e-12, "{costs:?}");
    }

    // `kestrel sessions` totals both turns, both processes.
    let listing = kestrel(&env, &url, &["sessions", "--json"]);
    let session: Value = serde_json::from_str(stdout(&listing).lines().next().unwrap()).unwrap();
    assert_eq!(session["usage"]["input_tokens"], 7_000);
    assert_eq!(session["usage"]["output_tokens"], 825);
    close(&session["usage"]["cost"], first + second + third);
    assert_eq!(session["total_usage"], session["usage"], "no subagents");
    let table = stdout(&kestrel(&env, &url, &["sessions"]));
    let total = session["total_usage"]["cost"].as_f64().unwrap();
    assert!(table.contains(&format!("${total:.4}")) && table.contains("7.8k tok"), "{table}");
}

#[test]
fn a_model_the_catalog_does_not_know_costs_nothing() {
    let env = TestEnv::new(
        Wire::Responses,
        Script::new([Step::text("hi").with_usage(used(10, 0, 5, 0))]),
    );
    let output = kestrel(&env, "off", &["exec", "--json", "hello"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let completed = events(&output).pop().unwrap();
    assert_eq!(completed["usage"]["input_tokens"], 10);
    assert_eq!(completed["usage"]["cost"], 0.0);
    let table = stdout(&kestrel(&env, "off", &["sessions"]));
    assert!(table.contains("15 tok") && table.contains("$0.0000"), "{table}");
}

#[tokio::test]
async fn the_worker_reports_the_catalog_context_window_and_the_session_cost() {
    let env = TestEnv::new(
        Wire::Anthropic,
        Script::new([
            Step::text("one").with_usage(used(1_000, 0, 100, 0)),
            Step::text("two").with_usage(used(3_000, 2_000, 10, 0)),
        ]),
    );
    let url = cached_catalog(&env);
    let mut worker = Worker::spawn_with(&env, &[("KESTREL_CATALOG_URL", url.as_str())]);
    let id = worker.start_session(&env.work_path()).await;
    let first = worker.prompt(&id, "one", &[]).await;
    let usage = first.of_kind("usage_update").pop().unwrap().clone();
    assert_eq!(usage["size"], CONTEXT_WINDOW);
    assert_eq!(usage["used"], 1_100);
    close(&usage["cost"]["amount"], cost(1_000, 0, 100));

    let second = worker.prompt(&id, "two", &[]).await;
    let usage = second.of_kind("usage_update").pop().unwrap().clone();
    close(&usage["cost"]["amount"], cost(1_000, 0, 100) + cost(3_000, 2_000, 10));
    let recorded: Vec<Value> =
        record_items(&env, &id).into_iter().filter(|item| item["type"] == "usage").collect();
    close(&recorded[1]["cost"], cost(3_000, 2_000, 10));
    worker.close().await;
}

#[tokio::test]
async fn an_unknown_model_on_this_machine_gets_a_small_window_unless_config_sets_one() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([Step::text("one").with_usage(used(100, 0, 10, 0)), Step::text("two")]),
    );
    // No catalog knows `scripted/test-model`, and the scripted server is on 127.0.0.1.
    let mut worker = Worker::spawn(&env);
    let id = worker.start_session(&env.work_path()).await;
    let turn = worker.prompt(&id, "one", &[]).await;
    assert_eq!(turn.of_kind("usage_update").pop().unwrap()["size"], 32_768);
    worker.close().await;

    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    env.write_config(&config.replace("request_max_retries = 2\n", "context_window = 8192\n"));
    let mut worker = Worker::spawn(&env);
    let id = worker.start_session(&env.work_path()).await;
    let turn = worker.prompt(&id, "two", &[]).await;
    assert_eq!(turn.of_kind("usage_update").pop().unwrap()["size"], 8192);
    worker.close().await;
}

#[test]
fn a_session_killed_mid_turn_lists_what_its_requests_spent() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("read_file", json!({"path": "missing.txt"}))
                .with_usage(used(1_000, 0, 100, 0)),
            Step::text("an answer that is still streaming when the process dies")
                .with_fault(kestrel_testkit::Fault::SlowChunks { delay_ms: 10_000 }),
        ]),
    );
    let mut exec = env
        .command(&["exec", "look"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The first request's usage is recorded; the second request is streaming.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while env.requests().iter().filter(|r| r.method == "POST").count() < 2 {
        assert!(std::time::Instant::now() < deadline, "the second request never came");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(env.record_items().iter().any(|item| item["type"] == "usage"));
    exec.kill().unwrap();
    exec.wait().unwrap();

    let listing = kestrel(&env, "off", &["sessions", "--json"]);
    let session: Value = serde_json::from_str(stdout(&listing).lines().next().unwrap()).unwrap();
    assert_eq!(session["usage"]["input_tokens"], 1_000, "{session}");
    assert_eq!(session["usage"]["output_tokens"], 100, "{session}");
    let table = stdout(&kestrel(&env, "off", &["sessions"]));
    assert!(table.contains("1.1k tok"), "{table}");
}
