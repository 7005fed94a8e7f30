//! Anthropic Messages: the event stream an Anthropic client expects.
#![allow(clippy::expect_used)] // test code: a failed expectation is a failed test

mod support;

use kestrel_testkit::{Script, ScriptedServer, ScriptedToolCall, ScriptedUsage, Step};
use serde_json::{Value, json};
use support::{Event, post, request_body};

fn stream(step: Step) -> Vec<Event> {
    let server = ScriptedServer::start(Script::new([step])).expect("server starts");
    let response = post(&server, "messages", &request_body("messages", true));
    assert_eq!(response.status, 200);
    assert!(response.complete, "terminating chunk missing");
    assert_eq!(response.header("content-type"), Some("text/event-stream; charset=utf-8"));
    assert!(response.header("request-id").is_some_and(|id| id.starts_with("req_")));
    response.events()
}

fn names(events: &[Event]) -> Vec<&str> {
    events.iter().map(|event| event.event.as_deref().unwrap_or("<none>")).collect()
}

fn deltas_of(events: &[Event], index: usize) -> Vec<Value> {
    events
        .iter()
        .map(Event::json)
        .filter(|data| data["type"] == "content_block_delta" && data["index"] == index)
        .map(|data| data["delta"].clone())
        .collect()
}

#[test]
fn text_reply_follows_the_message_event_order() {
    let events = stream(Step::text("Hello! How can I help you today?"));
    for event in &events {
        assert_eq!(event.event.as_deref(), event.json()["type"].as_str());
    }
    let names = names(&events);
    assert_eq!(names[..3], ["message_start", "content_block_start", "ping"]);
    assert_eq!(names[names.len() - 3..], ["content_block_stop", "message_delta", "message_stop"]);

    let start = &events[0].json()["message"];
    assert!(start["id"].as_str().is_some_and(|id| id.starts_with("msg_")));
    assert_eq!(start["type"], "message");
    assert_eq!(start["role"], "assistant");
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["model"], "test-model");
    assert!(start["stop_reason"].is_null());
    assert_eq!(events[1].json()["content_block"], json!({ "type": "text", "text": "" }));

    let deltas = deltas_of(&events, 0);
    assert!(deltas.len() >= 5);
    assert!(deltas.iter().all(|delta| delta["type"] == "text_delta"));
    let text: String = deltas.iter().filter_map(|delta| delta["text"].as_str()).collect();
    assert_eq!(text, "Hello! How can I help you today?");

    let message_delta = events[events.len() - 2].json();
    assert_eq!(message_delta["delta"], json!({ "stop_reason": "end_turn", "stop_sequence": null }));
}

#[test]
fn tool_use_streams_input_json_deltas_and_stops_with_tool_use() {
    let arguments = json!({ "path": "Cargo.toml", "old_string": "a", "new_string": "b" });
    let events = stream(Step::tool_calls(vec![
        ScriptedToolCall::new("edit_file", arguments.clone()),
        ScriptedToolCall::new("list_dir", json!({})).with_id("toolu_given"),
    ]));
    let starts: Vec<Value> = events
        .iter()
        .map(Event::json)
        .filter(|data| data["type"] == "content_block_start")
        .collect();
    assert_eq!(starts.len(), 2);
    let first = &starts[0]["content_block"];
    assert_eq!(first["type"], "tool_use");
    assert_eq!(first["name"], "edit_file");
    assert_eq!(first["input"], json!({}));
    assert!(first["id"].as_str().is_some_and(|id| id.starts_with("toolu_")));
    assert_eq!(starts[1]["content_block"]["id"], "toolu_given");

    let deltas = deltas_of(&events, 0);
    assert!(deltas.len() >= 3);
    assert!(deltas.iter().all(|delta| delta["type"] == "input_json_delta"));
    let joined: String = deltas.iter().filter_map(|delta| delta["partial_json"].as_str()).collect();
    assert_eq!(serde_json::from_str::<Value>(&joined).expect("JSON"), arguments);

    let message_delta = events[events.len() - 2].json();
    assert_eq!(message_delta["delta"]["stop_reason"], "tool_use");
}

#[test]
fn thinking_streams_first_and_ends_with_a_signature() {
    let events = stream(Step::text("4").with_reasoning("Two and two make four."));
    let block = &events[1].json()["content_block"];
    assert_eq!(block["type"], "thinking");
    assert_eq!(block["thinking"], "");
    let deltas = deltas_of(&events, 0);
    let (signature, thinking) = deltas.split_last().expect("deltas");
    assert_eq!(signature["type"], "signature_delta");
    assert!(signature["signature"].as_str().is_some_and(|signature| signature.len() > 20));
    assert!(thinking.len() >= 2 && thinking.iter().all(|delta| delta["type"] == "thinking_delta"));
    let text: String = thinking.iter().filter_map(|delta| delta["thinking"].as_str()).collect();
    assert_eq!(text, "Two and two make four.");
    assert_eq!(deltas_of(&events, 1)[0]["type"], "text_delta");
}

#[test]
fn usage_splits_cached_input_from_input_tokens() {
    let usage = ScriptedUsage {
        input_tokens: 1000,
        cached_input_tokens: 800,
        output_tokens: 42,
        reasoning_tokens: 0,
    };
    let events = stream(Step::text("ok").with_usage(usage));
    let start_usage = &events[0].json()["message"]["usage"];
    assert_eq!(start_usage["input_tokens"], 200);
    assert_eq!(start_usage["cache_read_input_tokens"], 800);
    assert_eq!(start_usage["cache_creation_input_tokens"], 0);
    let final_usage = &events[events.len() - 2].json()["usage"];
    assert_eq!(final_usage["output_tokens"], 42);
    assert_eq!(final_usage["input_tokens"], 200);
    assert_eq!(final_usage["cache_read_input_tokens"], 800);
}

#[test]
fn non_streaming_request_gets_a_message() {
    let server = ScriptedServer::start(Script::new([Step::tool_calls(vec![
        ScriptedToolCall::new("shell", json!({ "command": "ls" })),
        ScriptedToolCall::raw("shell", "{broken"),
    ])
    .with_reasoning("hmm")]))
    .expect("server starts");
    let body = post(&server, "messages", &request_body("messages", false)).json();
    assert_eq!(body["type"], "message");
    assert_eq!(body["stop_reason"], "tool_use");
    assert_eq!(body["content"][0]["type"], "thinking");
    assert!(body["content"][0]["signature"].is_string());
    assert_eq!(body["content"][1]["input"], json!({ "command": "ls" }));
    assert_eq!(body["content"][2]["input"], "{broken");
    assert!(body["usage"]["output_tokens"].as_u64().is_some_and(|tokens| tokens > 0));
}

#[test]
fn requests_missing_what_anthropic_requires_are_rejected_with_its_error_shape() {
    let server = ScriptedServer::start(Script::new([Step::text("unused")])).expect("server starts");
    let body = request_body("messages", true).to_string();
    let without_version = support::send(
        &server,
        "POST",
        "/v1/messages",
        &[("content-type", "application/json")],
        body.as_bytes(),
    );
    assert_eq!(without_version.status, 400);
    assert_eq!(
        without_version.json(),
        json!({ "type": "error", "error": {
            "type": "invalid_request_error",
            "message": "anthropic-version: header is required",
        }})
    );

    let mut no_max_tokens = request_body("messages", true);
    no_max_tokens.as_object_mut().expect("object").remove("max_tokens");
    let response = post(&server, "messages", &no_max_tokens);
    assert_eq!(response.status, 400);
    assert_eq!(response.json()["error"]["message"], "max_tokens: Field required");
    assert_eq!(server.remaining(), 1);
}
