//! `kestrel exec --json`'s event order and item lifecycles, as docs/exec-json.md states
//! them: per model request its reasoning and message items (started and updated while
//! they stream, completed when the response ends), then its `usage`, then each tool call
//! (started, completed) followed by the `file_change` of what it changed (completed
//! only); the `plan` item started by the first update_plan, updated by the next,
//! completed before the turn's last line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TestEnv, Wire, stderr, stdout};
use kestrel_testkit::{Reply, Script, ScriptedToolCall, Step};
use serde_json::{Value, json};

fn plan(status: &str) -> ScriptedToolCall {
    ScriptedToolCall::new("update_plan", json!({"plan": [{"step": "write it", "status": status}]}))
}

#[test]
fn events_come_in_the_documented_order_with_the_documented_lifecycles() {
    let planning = Reply {
        text: Some("Planning.".to_string()),
        tool_calls: vec![plan("in_progress")],
        ..Reply::default()
    };
    let script = Script::new([
        Step::from_reply(planning).with_reasoning("Think first."),
        Step::tool_call("write_file", json!({"path": "a.txt", "content": "x\n"})),
        Step::tool_calls(vec![plan("completed")]),
        Step::text("Done."),
    ]);
    let env = TestEnv::new(Wire::Chat, script);
    let output = env.kestrel(&["exec", "--json", "--quiet", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let events: Vec<Value> =
        stdout(&output).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let mut shape: Vec<String> = events
        .iter()
        .map(|event| match event["item"]["type"].as_str() {
            Some(kind) => format!("{} {kind}", event["type"].as_str().unwrap()),
            None => event["type"].as_str().unwrap().to_string(),
        })
        .collect();
    // A streamed text comes in as many pieces as the server sends.
    shape.dedup_by(|next, previous| next == previous && next.starts_with("item.updated"));
    let expected = [
        "session.started",
        "turn.started",
        // Request 1: reasoning and a message streamed, both completed when the response
        // ends, its usage, then its update_plan call.
        "item.started reasoning",
        "item.updated reasoning",
        "item.started agent_message",
        "item.updated agent_message",
        "item.completed reasoning",
        "item.completed agent_message",
        "usage",
        "item.started tool_call",
        "item.started plan",
        "item.completed tool_call",
        // Request 2: a write, and the change it made.
        "usage",
        "item.started tool_call",
        "item.completed tool_call",
        "item.completed file_change",
        // Request 3: the plan again.
        "usage",
        "item.started tool_call",
        "item.updated plan",
        "item.completed tool_call",
        // Request 4: the answer.
        "item.started agent_message",
        "item.updated agent_message",
        "item.completed agent_message",
        "usage",
        "item.completed plan",
        "turn.completed",
    ];
    assert_eq!(shape, expected, "{}", stdout(&output));
    let last_plan = events.iter().rfind(|event| event["item"]["type"] == "plan").unwrap();
    assert_eq!(last_plan["item"]["steps"][0]["status"], "completed");
    let change = events.iter().find(|event| event["item"]["type"] == "file_change").unwrap();
    assert!(change["item"]["paths"][0].as_str().unwrap().ends_with("a.txt"), "{change}");
}
