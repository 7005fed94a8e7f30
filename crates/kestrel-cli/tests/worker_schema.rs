//! Everything a worker says validates against the ACP schema of the pinned TypeScript
//! SDK (`@agentclientprotocol/sdk`, schema/v1/schema.json): a session with streaming,
//! reasoning, tool calls with diffs, a permission request, a plan, usage, mode and model
//! switches, a history request and errors, then its replay in a second worker. The
//! transcripts are checked by tests/acp/validate-transcript.mjs (Node, ajv).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod worker_support;

use common::{TestEnv, Wire};
use kestrel_testkit::{Script, ScriptedToolCall, Step};
use serde_json::json;
use std::path::PathBuf;
use worker_support::{Answer, Worker};

fn validator_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/acp")
}

/// A client that shows notices, so the replay's notices are in the transcript too.
async fn initialize_with_notices(worker: &Worker) {
    let params = json!({
        "protocolVersion": 1,
        "clientCapabilities": {"session": {"notices": {}}},
        "clientInfo": {"name": "kestrel-schema-test", "version": "0"}
    });
    worker.request("initialize", params).await.unwrap();
}

#[tokio::test]
async fn every_message_of_a_full_session_validates_against_the_acp_schema() {
    let dir = validator_dir();
    let schema = dir.join("node_modules/@agentclientprotocol/sdk/schema/v1/schema.json");
    assert!(
        schema.exists(),
        "the ACP schema validator is not installed: run `npm ci --prefix tests/acp` \
         (missing {})",
        schema.display()
    );
    let plan = json!({"plan": [
        {"step": "read the notes", "status": "completed"},
        {"step": "write the summary", "status": "in_progress"}
    ]});
    let env = TestEnv::new(
        Wire::Anthropic,
        Script::new([
            Step::tool_calls(vec![
                ScriptedToolCall::new("update_plan", plan),
                ScriptedToolCall::new("list_dir", json!({})),
            ])
            .with_reasoning("Plan first."),
            Step::tool_call("write_file", json!({"path": "summary.md", "content": "# Notes\n"})),
            Step::text("Wrote **summary.md**.").with_reasoning("Done, say so."),
            Step::tool_call(
                "edit_file",
                json!({"path": "summary.md", "old_string": "# Notes", "new_string": "# Summary"}),
            ),
            Step::tool_call("shell", json!({"command": "cat summary.md"})),
            Step::text("Renamed the heading."),
        ]),
    );
    let work = env.work_path();
    let mut worker = Worker::spawn(&env);
    initialize_with_notices(&worker).await;
    let id = worker.new_session(&work).await["sessionId"].as_str().unwrap().to_string();

    let outcome = worker.prompt(&id, "summarise", &[Answer::Option("allow_once")]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    assert_eq!(outcome.permissions.len(), 1);
    assert_eq!(outcome.of_kind("plan").len(), 1);
    assert!(!outcome.of_kind("agent_thought_chunk").is_empty());

    let mode = json!({"sessionId": id, "modeId": "auto"});
    worker.request("session/set_mode", mode).await.unwrap();
    let model = json!({"sessionId": id, "configId": "model", "value": "scripted/other-model"});
    worker.request("session/set_config_option", model).await.unwrap();
    let history = worker.request("_kestrel/session/history", json!({"sessionId": id})).await;
    assert!(!history.unwrap()["updates"].as_array().unwrap().is_empty());
    let bad = json!({"sessionId": id, "configId": "model", "value": "nowhere/x"});
    assert!(worker.request("session/set_config_option", bad).await.is_err());
    let elsewhere = json!({"sessionId": "elsewhere", "prompt": [{"type": "text", "text": "hi"}]});
    assert!(worker.request("session/prompt", elsewhere).await.is_err());

    let outcome = worker.prompt(&id, "rename the heading", &[]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    let diffs: Vec<_> = outcome
        .of_kind("tool_call_update")
        .into_iter()
        .filter(|update| update["content"][0]["type"] == "diff")
        .collect();
    assert_eq!(diffs[0]["content"][0]["oldText"], "# Notes\n");
    assert_eq!(diffs[0]["content"][0]["newText"], "# Summary\n");
    let first_transcript = worker.transcript_text();
    assert_eq!(worker.close().await, Some(0));

    let mut replay = Worker::spawn(&env);
    initialize_with_notices(&replay).await;
    let (loaded, updates) = replay.load(&id, &work).await;
    loaded.unwrap();
    assert!(updates.iter().any(|update| update["sessionUpdate"] == "notice"));
    assert!(updates.iter().any(|update| update["sessionUpdate"] == "plan"));
    let replay_transcript = replay.transcript_text();
    assert_eq!(replay.close().await, Some(0));

    let out = tempfile::tempdir().unwrap();
    let files = [("session.jsonl", first_transcript), ("replay.jsonl", replay_transcript)];
    let mut paths = Vec::new();
    for (name, text) in files {
        let path = out.path().join(name);
        std::fs::write(&path, text).unwrap();
        paths.push(path);
    }
    let result = std::process::Command::new("node")
        .arg(dir.join("validate-transcript.mjs"))
        .args(&paths)
        .output()
        .unwrap_or_else(|error| {
            panic!("cannot run node (needed for the ACP schema check): {error}")
        });
    assert!(
        result.status.success(),
        "transcripts do not validate against the ACP schema:\n{}{}",
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    );
}
