//! Subagents end to end: `task` calls run child sessions (each a `kestrel worker` of the
//! exec host, or of the daemon), in parallel, with records that name their parent, their
//! answers and usage lines back in the parent's conversation, costs that add up, and
//! children that stop when the parent is cancelled.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog_support;
mod common;
mod daemon_support;

use catalog_support::{CATALOG, CatalogServer, cost};
use common::{TestEnv, Wire, body_text, read_lines, stderr, stdout};
use daemon_support::{DaemonTest, WAIT, eventually};
use kestrel_testkit::{Fault, Script, ScriptedToolCall, ScriptedUsage, Step};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn used(input: u64, output: u64) -> ScriptedUsage {
    ScriptedUsage {
        input_tokens: input,
        cached_input_tokens: 0,
        output_tokens: output,
        reasoning_tokens: 0,
    }
}

fn task(description: &str, prompt: &str) -> ScriptedToolCall {
    ScriptedToolCall::new("task", json!({"description": description, "prompt": prompt}))
}

/// The parent asks for two subagents at once, each answers, the parent sums up. Which
/// child gets which answer depends on who asks the model first.
fn two_tasks() -> Script {
    Script::new([
        Step::tool_calls(vec![
            task("look at alpha", "ALPHA brief"),
            task("look at beta", "BETA brief"),
        ])
        .with_usage(used(1_000, 100)),
        Step::text("child answer one").with_usage(used(500, 50)),
        Step::text("child answer two").with_usage(used(500, 50)),
        Step::text("both done").with_usage(used(3_000, 200)),
    ])
}

/// Every record's header, by session id.
fn headers(records: &[PathBuf]) -> Vec<Value> {
    records.iter().map(|path| read_lines(path).remove(0)).collect()
}

fn items_of(records: &[PathBuf], id: &str) -> Vec<Value> {
    let path = records.iter().find(|path| path.file_stem().is_some_and(|stem| stem == id)).unwrap();
    read_lines(path).into_iter().skip(1).collect()
}

/// The model requests (the catalog refresh also lists the provider's models).
fn model_requests(env: &TestEnv) -> Vec<kestrel_testkit::LoggedRequest> {
    env.requests().into_iter().filter(|request| request.method == "POST").collect()
}

/// Whether a request offered the `task` tool.
fn offers_task(body: &str) -> bool {
    body.contains(r#""name":"task""#)
}

/// Fills the home's catalog cache from a loopback server, so sessions price requests.
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

fn close(actual: &Value, expected: f64) {
    let actual = actual.as_f64().unwrap_or_else(|| panic!("not a number: {actual}"));
    assert!((actual - expected).abs() < 1e-12, "{actual} != {expected}");
}

/// Processes whose environment has this `KESTREL_HOME` (workers, daemons of the test).
fn processes_of_home(home: &Path) -> Vec<u32> {
    let needle = format!("KESTREL_HOME={}", home.display());
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter(|pid| {
            let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else { return false };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // Zombies are gone in all but name.
            let state = stat.rsplit(") ").next().and_then(|rest| rest.chars().next());
            state != Some('Z') && environ.split(|b| *b == 0).any(|var| var == needle.as_bytes())
        })
        .collect()
}

#[test]
fn two_parallel_tasks_through_exec_return_their_answers_with_linked_records_and_costs() {
    let env = TestEnv::new(Wire::Chat, two_tasks());
    let url = cached_catalog(&env);
    let output = env
        .command(&["exec", "--json", "--mode", "auto", "look at alpha and beta"])
        .env("KESTREL_CATALOG_URL", &url)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let events: Vec<Value> =
        stdout(&output).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let parent = events[0]["session_id"].as_str().unwrap().to_string();

    // Three records: the parent and two children naming it.
    let records = env.records();
    assert_eq!(records.len(), 3, "{records:?}");
    let children: Vec<String> = headers(&records)
        .iter()
        .filter(|header| header["parent_id"] == parent.as_str())
        .map(|header| header["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(children.len(), 2, "{:?}", headers(&records));
    for child in &children {
        let items = items_of(&records, child);
        assert!(
            items.iter().any(|i| i["type"] == "turn_completed" && i["stop_reason"] == "end_turn")
        );
    }

    // The parent offered `task`; the children got a fresh context, a subagent's system
    // prompt and no `task` of their own.
    let requests = model_requests(&env);
    assert_eq!(requests.len(), 4);
    assert!(offers_task(&body_text(&requests[0])));
    let briefs: Vec<String> = requests[1..3].iter().map(body_text).collect();
    for brief in &briefs {
        assert!(brief.contains("You are a subagent"), "{brief}");
        assert!(!offers_task(brief), "a subagent must not start subagents: {brief}");
        assert!(!brief.contains("look at alpha and beta"), "a child starts fresh: {brief}");
    }
    assert!(
        briefs.iter().any(|b| b.contains("ALPHA brief"))
            && briefs.iter().any(|b| b.contains("BETA brief"))
    );
    // Both answers, with their usage lines, are in the parent's next request.
    let last = body_text(&requests[3]);
    assert!(last.contains("child answer one") && last.contains("child answer two"), "{last}");
    for child in &children {
        assert!(last.contains(&format!("[subagent {child}: 1 request, 550 tokens, $")), "{last}");
    }

    // exec --json: the task items name their child, the children's usage is reported
    // and the turn's totals include it.
    let completed_tasks: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["name"] == "task")
        .collect();
    assert_eq!(completed_tasks.len(), 2);
    for item in &completed_tasks {
        assert_eq!(item["item"]["status"], "completed");
        assert!(children.iter().any(|c| item["item"]["session_id"] == c.as_str()), "{item}");
    }
    let child_usage: Vec<&Value> =
        events.iter().filter(|e| e["type"] == "usage" && e.get("session_id").is_some()).collect();
    assert_eq!(child_usage.len(), 2);
    let turn = events.last().unwrap();
    assert_eq!(turn["type"], "turn.completed");
    assert_eq!(turn["usage"]["input_tokens"], 5_000);
    assert_eq!(turn["usage"]["output_tokens"], 400);
    let total = cost(1_000, 0, 100) + 2.0 * cost(500, 0, 50) + cost(3_000, 0, 200);
    close(&turn["usage"]["cost"], total);
    let summed: f64 = events
        .iter()
        .filter(|e| e["type"] == "usage")
        .map(|e| e["usage"]["cost"].as_f64().unwrap())
        .sum();
    assert!((summed - total).abs() < 1e-12, "usage events add up to the turn's total");

    // The parent's record has only its own usage; `kestrel sessions` adds the children.
    let own: Vec<Value> =
        items_of(&records, &parent).into_iter().filter(|i| i["type"] == "usage").collect();
    assert_eq!(own.len(), 2);
    let listing =
        env.command(&["sessions", "--json"]).env("KESTREL_CATALOG_URL", "off").output().unwrap();
    let sessions: Vec<Value> =
        stdout(&listing).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let listed = sessions.iter().find(|s| s["id"] == parent.as_str()).unwrap();
    assert_eq!(listed["usage"]["input_tokens"], 4_000);
    assert_eq!(listed["total_usage"]["input_tokens"], 5_000);
    close(&listed["total_usage"]["cost"], total);
    let table = stdout(&env.command(&["sessions"]).output().unwrap());
    let lines: Vec<&str> = table.lines().collect();
    let parent_line = lines.iter().position(|l| l.starts_with(&parent)).unwrap();
    for child in &children {
        let child_line = lines.iter().position(|l| l.contains(child.as_str())).unwrap();
        assert!(child_line > parent_line && lines[child_line].starts_with("  └ "), "{table}");
    }
}

#[test]
fn a_subagent_never_gets_more_than_its_parents_mode() {
    let env = TestEnv::new(
        Wire::Anthropic,
        Script::new([
            Step::tool_call(
                "task",
                json!({"description": "write", "prompt": "write child.txt", "mode": "yolo"}),
            ),
            Step::tool_call("write_file", json!({"path": "child.txt", "content": "x"})),
            Step::text("I could not write it."),
            Step::text("The subagent could not write."),
        ]),
    );
    let output = env.kestrel(&["exec", "--mode", "read-only", "have a subagent write"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "The subagent could not write.\n");
    assert!(!env.work.path().join("child.txt").exists(), "a read-only parent's child wrote");
    let records = env.records();
    let child = headers(&records).into_iter().find(|h| h["parent_id"].is_string()).unwrap();
    let items = items_of(&records, child["id"].as_str().unwrap());
    let refused = items.iter().find(|i| i["type"] == "tool_result").unwrap();
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(refused["output"].as_str().unwrap().contains("read-only"), "{refused}");
    let last = body_text(&env.requests()[3]);
    assert!(last.contains("I could not write it."), "{last}");
}

#[test]
fn a_task_call_with_bad_arguments_is_a_clear_tool_error() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("task", json!({"description": "nothing to do"})),
            Step::text("ok"),
        ]),
    );
    let output = env.kestrel(&["exec", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(env.records().len(), 1, "no child was started");
    let last = body_text(&env.requests()[1]);
    assert!(last.contains("`task` needs `prompt`"), "{last}");
}

#[test]
fn cancelling_exec_cancels_and_stops_its_subagents() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("task", json!({"description": "slow", "prompt": "take your time"})),
            Step::text("a slow answer that never finishes")
                .with_fault(Fault::SlowChunks { delay_ms: 5_000 }),
        ]),
    );
    let mut exec = env
        .command(&["exec", "wait for the subagent"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the child's model request is in flight.
    let deadline = Instant::now() + WAIT;
    while env.requests().len() < 2 {
        assert!(Instant::now() < deadline, "the subagent never asked the model");
        std::thread::sleep(Duration::from_millis(50));
    }
    daemon_support::kill(exec.id(), libc::SIGTERM);
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = exec.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "exec did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(1));

    let records = env.records();
    let parent = headers(&records).into_iter().find(|h| h.get("parent_id").is_none()).unwrap();
    let child = headers(&records).into_iter().find(|h| h["parent_id"] == parent["id"]).unwrap();
    let child_items = items_of(&records, child["id"].as_str().unwrap());
    let end = child_items.iter().rev().find(|i| i["type"] == "turn_completed").unwrap();
    assert_eq!(end["stop_reason"], "cancelled", "{child_items:?}");
    let parent_items = items_of(&records, parent["id"].as_str().unwrap());
    let result = parent_items.iter().find(|i| i["type"] == "tool_result").unwrap();
    assert_eq!(result["is_error"], true);
    assert!(result["output"].as_str().unwrap().contains("cancelled"), "{result}");
    // No worker of this home outlives the exec.
    let deadline = Instant::now() + WAIT;
    while !processes_of_home(env.home.path()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left running: {:?}",
            processes_of_home(env.home.path())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_parallel_tasks_through_the_daemon_are_child_sessions_the_client_can_see() {
    let test = DaemonTest::new(two_tasks());
    let out = tempfile::tempdir().unwrap();
    let transcript = out.path().join("client.jsonl");
    let file =
        std::sync::Arc::new(std::sync::Mutex::new(std::fs::File::create(&transcript).unwrap()));
    let mut client = daemon_support::AcpClient::spawn_recording(&test, Some(file));
    client.initialize().await;
    let cwd = test.env.work_path();
    let parent = client.new_session(&cwd).await;
    let answer = client.prompt(&parent, "look at alpha and beta").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    client.settle(Duration::from_millis(300)).await;
    assert!(client.agent_text(&parent).contains("both done"));

    // The task calls' updates name their child sessions.
    let children: std::collections::BTreeSet<String> = client
        .updates(&parent)
        .iter()
        .filter_map(|update| {
            update["_meta"]["kestrel"]["childSessionId"].as_str().map(str::to_string)
        })
        .collect();
    assert_eq!(children.len(), 2, "{:#?}", client.updates(&parent));
    for child in &children {
        let header = read_lines(
            &test
                .env
                .records()
                .into_iter()
                .find(|p| p.file_stem().is_some_and(|s| s == child.as_str()))
                .unwrap(),
        )
        .remove(0);
        assert_eq!(header["parent_id"], parent.as_str());
    }
    let requests = test.env.requests();
    assert_eq!(requests.len(), 4);
    let last = body_text(&requests[3]);
    assert!(last.contains("child answer one") && last.contains("child answer two"), "{last}");

    // session/list shows the children under their parent.
    let listed = client.request("session/list", json!({})).await.unwrap();
    let sessions = listed["sessions"].as_array().unwrap();
    for child in &children {
        let entry = sessions.iter().find(|s| s["sessionId"] == child.as_str()).unwrap();
        assert_eq!(entry["_meta"]["kestrel"]["parentSessionId"], parent.as_str(), "{entry}");
    }

    // What the client saw (the task calls' `_meta` included) is valid ACP.
    client.settle(Duration::from_millis(100)).await;
    let validator = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/acp");
    let result = std::process::Command::new("node")
        .arg(validator.join("validate-transcript.mjs"))
        .arg(&transcript)
        .output()
        .expect("node runs (`npm ci --prefix tests/acp` installs the validator)");
    assert!(
        result.status.success(),
        "the transcript does not validate against the ACP schema:\n{}{}",
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_parent_through_the_daemon_cancels_its_subagent() {
    let test = DaemonTest::new(Script::new([
        Step::tool_call("task", json!({"description": "slow", "prompt": "take your time"})),
        Step::text("a slow answer that never finishes")
            .with_fault(Fault::SlowChunks { delay_ms: 5_000 }),
        Step::text("unused"),
    ]));
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let parent = client.new_session(&cwd).await;
    let turn = client.prompt(&parent, "wait for the subagent");
    eventually("the subagent's model request", || test.env.requests().len() >= 2).await;
    let child = loop {
        let update = client.wait_update(&parent, "tool_call_update").await;
        if let Some(child) = update["_meta"]["kestrel"]["childSessionId"].as_str() {
            break child.to_string();
        }
    };
    client.connection.notify("session/cancel", json!({"sessionId": parent})).await.unwrap();
    let answer = tokio::time::timeout(WAIT, turn).await.unwrap().unwrap().unwrap();
    assert_eq!(answer["stopReason"], "cancelled");
    eventually("the subagent's turn to end cancelled", || {
        test.record_items(&child)
            .iter()
            .any(|i| i["type"] == "turn_completed" && i["stop_reason"] == "cancelled")
    })
    .await;
}

/// The cost of the newest `usage_update` a client saw for `session`.
fn last_cost(updates: &[Value]) -> Value {
    let update = updates
        .iter()
        .rev()
        .find(|update| update["sessionUpdate"] == "usage_update")
        .unwrap_or_else(|| panic!("no usage_update in {updates:#?}"));
    update["cost"]["amount"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parents_usage_update_cost_includes_its_subagents_live_and_after_a_reload() {
    let test = DaemonTest::new(two_tasks());
    cached_catalog(&test.env);
    let total = cost(1_000, 0, 100) + 2.0 * cost(500, 0, 50) + cost(3_000, 0, 200);
    let cwd = test.env.work_path();
    let parent = {
        let mut client = test.client().await;
        let parent = client.new_session(&cwd).await;
        let answer = client.prompt(&parent, "look at alpha and beta").await.unwrap().unwrap();
        assert_eq!(answer["stopReason"], "end_turn");
        client.settle(Duration::from_millis(300)).await;
        close(&last_cost(&client.updates(&parent)), total);
        client.close().await;
        parent
    };
    // A new worker loads the session from its record: its replayed usage still counts
    // the children, whose cost is in their own records.
    test.stop_daemon();
    let mut client = test.client().await;
    client.load(&parent, &cwd).await.unwrap();
    client.settle(Duration::from_millis(300)).await;
    close(&last_cost(&client.updates(&parent)), total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_that_fails_midway_leaves_no_live_child_behind() {
    let test = DaemonTest::new(Script::new([
        Step::tool_call(
            "task",
            json!({"description": "d", "prompt": "p", "model": "nonesuch/model"}),
        ),
        Step::text("gave up"),
    ]));
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let parent = client.new_session(&cwd).await;
    // The child's worker starts and creates its session, then its model is refused.
    let answer = client.prompt(&parent, "delegate").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    let requests = test.env.requests();
    assert_eq!(requests.len(), 2, "the child never asked the model");
    let result = body_text(&requests[1]);
    assert!(result.contains("could not start") && result.contains("nonesuch"), "{result}");
    eventually("the half-started child to be gone from the daemon", || {
        let status = test.status();
        let sessions = status["sessions"].as_array().cloned().unwrap_or_default();
        sessions.len() == 1 && sessions[0]["sessionId"] == parent.as_str()
    })
    .await;
    client.settle(Duration::from_millis(50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_gets_the_mcp_servers_its_parents_client_gave() {
    let everything = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/node_modules/.bin/mcp-server-everything");
    assert!(everything.exists(), "run npm ci --prefix tests/mcp");
    let test = DaemonTest::new(Script::new([
        Step::tool_call(
            "task",
            json!({"description": "echo", "prompt": "use the echo tool", "mode": "auto"}),
        ),
        Step::tool_call("mcp__editor__echo", json!({"message": "from the child"})),
        Step::text("the child echoed"),
        Step::text("done"),
    ]));
    let client = test.client().await;
    let cwd = test.env.work_path();
    let server = json!({"name": "editor", "command": everything, "args": ["stdio"], "env": []});
    let answer =
        client.request("session/new", json!({"cwd": cwd, "mcpServers": [server]})).await.unwrap();
    let parent = answer["sessionId"].as_str().unwrap().to_string();
    // MCP tools run without asking in `auto` (a read-only child would be refused them).
    client.set_mode(&parent, "auto").await;
    let answer = client.prompt(&parent, "delegate").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    let requests = test.env.requests();
    assert_eq!(requests.len(), 4);
    // The child's second request has the echo result: it had the parent's server.
    let child_second = body_text(&requests[2]);
    assert!(child_second.contains("Echo: from the child"), "{child_second}");
    assert!(body_text(&requests[3]).contains("the child echoed"));
}

/// A parent whose `task` call starts a child that answers very slowly.
fn slow_child() -> Script {
    Script::new([
        Step::tool_call("task", json!({"description": "slow", "prompt": "take your time"})),
        Step::text("a slow answer that never finishes, in many small pieces")
            .with_fault(Fault::SlowChunks { delay_ms: 15_000 }),
        Step::text("unused"),
    ])
}

/// The children of `parent` that have records, by id.
fn children_of(test: &DaemonTest, parent: &str) -> Vec<String> {
    // A record being created may have no header yet.
    test.env
        .records()
        .iter()
        .filter_map(|path| read_lines(path).into_iter().next())
        .filter(|header| header["parent_id"] == parent)
        .filter_map(|header| header["id"].as_str().map(str::to_string))
        .collect()
}

fn ended_cancelled(test: &DaemonTest, child: &str) -> bool {
    test.record_items(child)
        .iter()
        .any(|i| i["type"] == "turn_completed" && i["stop_reason"] == "cancelled")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_parent_while_its_subagent_is_starting_cancels_the_subagent() {
    let test = DaemonTest::new(slow_child());
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let parent = client.new_session(&cwd).await;
    let turn = client.prompt(&parent, "wait for the subagent");
    // The cancel comes once the daemon has launched the child's worker and before the
    // child's session and prompt are set up: without waiting for that, a cancel that
    // overtakes the spawn request rightly starts no child at all.
    client.wait_update(&parent, "tool_call").await;
    let log = test.env.home.path().join("logs/daemon.log");
    let workers_started =
        || std::fs::read_to_string(&log).unwrap_or_default().matches("started for session").count();
    eventually("the daemon to launch the subagent's worker", || workers_started() >= 2).await;
    client.connection.notify("session/cancel", json!({"sessionId": parent})).await.unwrap();
    let answer = tokio::time::timeout(WAIT, turn).await.unwrap().unwrap().unwrap();
    assert_eq!(answer["stopReason"], "cancelled");
    // The daemon went on starting the child; the parent cancelled it once it existed.
    eventually("the subagent's record", || children_of(&test, &parent).len() == 1).await;
    let child = children_of(&test, &parent).remove(0);
    eventually("the subagent's turn to end cancelled", || ended_cancelled(&test, &child)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_whose_worker_crashes_has_its_running_subagents_cancelled() {
    let test = DaemonTest::new(slow_child());
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let parent = client.new_session(&cwd).await;
    let _turn = client.prompt(&parent, "wait for the subagent");
    let child = loop {
        let update = client.wait_update(&parent, "tool_call_update").await;
        if let Some(child) = update["_meta"]["kestrel"]["childSessionId"].as_str() {
            break child.to_string();
        }
    };
    eventually("the subagent's model request", || test.env.requests().len() >= 2).await;
    let pid = test.wait_worker_pid(&parent, None);
    daemon_support::kill(pid as u32, libc::SIGKILL);
    eventually("the subagent's turn to end cancelled", || ended_cancelled(&test, &child)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_permission_request_reaches_the_parents_client_naming_the_subagent() {
    let test = DaemonTest::new(Script::new([
        Step::tool_call(
            "task",
            json!({"description": "write", "prompt": "write the notes", "mode": "ask"}),
        ),
        Step::tool_call("write_file", json!({"path": "notes.txt", "content": "from the child\n"})),
        Step::text("the child wrote the notes"),
        Step::text("done"),
    ]));
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let parent = client.new_session(&cwd).await;
    client.set_mode(&parent, "ask").await;
    let turn = client.prompt(&parent, "delegate the writing");
    // Only the parent's client is attached; the child's request comes to it.
    let asked = client.wait_permission().await;
    assert_eq!(asked.params["sessionId"], parent.as_str(), "{}", asked.params);
    let child = asked.params["_meta"]["kestrel"]["childSessionId"].as_str().unwrap().to_string();
    assert_ne!(child, parent);
    let title = asked.params["toolCall"]["title"].as_str().unwrap();
    assert!(title.starts_with(&format!("subagent {child}: ")), "{title}");
    let option = asked.params["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|option| option["kind"] == "allow_once")
        .and_then(|option| option["optionId"].as_str())
        .unwrap()
        .to_string();
    client.answer(asked.id.clone(), &option).await;
    let answer = tokio::time::timeout(WAIT, turn).await.unwrap().unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    assert_eq!(std::fs::read_to_string(cwd.join("notes.txt")).unwrap(), "from the child\n");
    let header = read_lines(
        &test
            .env
            .records()
            .into_iter()
            .find(|p| p.file_stem().is_some_and(|s| s == child.as_str()))
            .unwrap(),
    )
    .remove(0);
    assert_eq!(header["parent_id"], parent.as_str());
}

/// The id of the `allow_once` option of a permission request.
fn allow_once(asked: &kestrel_protocol::jsonrpc::Request) -> String {
    asked.params["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|option| option["kind"] == "allow_once")
        .and_then(|option| option["optionId"].as_str())
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_loading_the_parent_after_the_asked_one_left_is_asked_the_subagents_request() {
    let test = DaemonTest::new(Script::new([
        Step::tool_call(
            "task",
            json!({"description": "write", "prompt": "write the notes", "mode": "ask"}),
        ),
        Step::tool_call("write_file", json!({"path": "notes.txt", "content": "from the child\n"})),
        Step::text("the child wrote the notes"),
        Step::text("done"),
    ]));
    let cwd = test.env.work_path();
    let mut first = test.client().await;
    let parent = first.new_session(&cwd).await;
    first.set_mode(&parent, "ask").await;
    let _turn = first.prompt(&parent, "delegate the writing");
    let asked = first.wait_permission().await;
    let child = asked.params["_meta"]["kestrel"]["childSessionId"].as_str().unwrap().to_string();
    // The editor quits without answering; another one opens the parent.
    first.close().await;
    let mut second = test.client().await;
    second.load(&parent, &cwd).await.unwrap();
    let asked = second.wait_permission().await;
    assert_eq!(asked.params["sessionId"], parent.as_str(), "{}", asked.params);
    assert_eq!(asked.params["_meta"]["kestrel"]["childSessionId"], child.as_str());
    let title = asked.params["toolCall"]["title"].as_str().unwrap();
    assert!(title.starts_with(&format!("subagent {child}: ")), "{title}");
    second.answer(asked.id.clone(), &allow_once(&asked)).await;
    eventually("the subagent's write", || {
        std::fs::read_to_string(cwd.join("notes.txt")).is_ok_and(|text| text == "from the child\n")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_whose_worker_crashes_while_its_subagent_starts_has_the_subagent_cancelled() {
    let test = DaemonTest::new(slow_child());
    let client = test.client().await;
    let cwd = test.env.work_path();
    let parent = client.new_session(&cwd).await;
    let parent_pid = test.wait_worker_pid(&parent, None) as u32;
    let known = [Some(parent_pid), test.daemon_pid(), client.pid()];
    let _turn = client.prompt(&parent, "wait for the subagent");
    // The parent's worker dies as soon as the child's worker process exists: the child
    // is still being set up and prompted.
    let deadline = Instant::now() + WAIT;
    while !processes_of_home(test.env.home.path()).iter().any(|pid| !known.contains(&Some(*pid))) {
        assert!(Instant::now() < deadline, "no subagent worker started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    daemon_support::kill(parent_pid, libc::SIGKILL);
    eventually("the subagent's record", || children_of(&test, &parent).len() == 1).await;
    let child = children_of(&test, &parent).remove(0);
    eventually("the subagent's turn to end cancelled", || ended_cancelled(&test, &child)).await;
}
