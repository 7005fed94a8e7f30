//! OpenAI Chat Completions: what a streaming client sees, byte for byte.
#![allow(clippy::expect_used)] // test code: a failed expectation is a failed test

mod support;

use kestrel_testkit::{Script, ScriptedServer, ScriptedToolCall, ScriptedUsage, Step};
use serde_json::{Value, json};
use support::{post, request_body};

fn start(steps: Vec<Step>) -> ScriptedServer {
    ScriptedServer::start(Script::new(steps)).expect("server starts")
}

/// The `delta` of each chunk that has one.
fn deltas(events: &[support::Event]) -> Vec<Value> {
    events
        .iter()
        .filter(|event| event.data != "[DONE]")
        .filter_map(|event| event.json()["choices"].get(0).map(|choice| choice["delta"].clone()))
        .collect()
}

#[test]
fn text_reply_streams_in_several_deltas_and_ends_with_done() {
    let server = start(vec![Step::text("Hello there, how are you today?")]);
    let response = post(&server, "chat/completions", &request_body("chat/completions", true));

    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream; charset=utf-8"));
    assert_eq!(response.header("transfer-encoding"), Some("chunked"));
    assert!(response.complete, "terminating chunk missing");
    let events = response.events();
    assert!(events.iter().all(|event| event.event.is_none()), "chat streams have no event: lines");
    assert_eq!(events.last().map(|event| event.data.as_str()), Some("[DONE]"));
    // One event per chunk, so clients see them as they come.
    assert_eq!(response.chunks.len(), events.len());

    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(support::Event::json).collect();
    let id = chunks[0]["id"].as_str().expect("id");
    assert!(id.starts_with("chatcmpl-"), "{id}");
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["id"], id);
        assert_eq!(chunk["model"], "test-model");
        assert!(chunk["created"].is_u64());
    }
    let deltas = deltas(&events);
    assert_eq!(deltas[0]["role"], "assistant");
    let texts: Vec<&str> = deltas.iter().filter_map(|delta| delta["content"].as_str()).collect();
    assert!(texts.iter().filter(|text| !text.is_empty()).count() >= 5, "{texts:?}");
    assert_eq!(texts.concat(), "Hello there, how are you today?");

    let finish: Vec<&Value> = chunks
        .iter()
        .filter_map(|chunk| chunk["choices"].get(0))
        .filter(|choice| !choice["finish_reason"].is_null())
        .collect();
    assert_eq!(finish.len(), 1);
    assert_eq!(finish[0]["finish_reason"], "stop");
    assert_eq!(server.remaining(), 0);
}

#[test]
fn include_usage_adds_a_final_usage_chunk_with_empty_choices() {
    let usage = ScriptedUsage {
        input_tokens: 1200,
        cached_input_tokens: 1000,
        output_tokens: 50,
        reasoning_tokens: 20,
    };
    let server = start(vec![Step::text("ok").with_usage(usage)]);
    let events =
        post(&server, "chat/completions", &request_body("chat/completions", true)).events();

    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(support::Event::json).collect();
    let (last, others) = chunks.split_last().expect("chunks");
    assert!(others.iter().all(|chunk| chunk["usage"].is_null() && chunk.get("usage").is_some()));
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["prompt_tokens"], 1200);
    assert_eq!(last["usage"]["completion_tokens"], 50);
    assert_eq!(last["usage"]["total_tokens"], 1250);
    assert_eq!(last["usage"]["prompt_tokens_details"]["cached_tokens"], 1000);
    assert_eq!(last["usage"]["completion_tokens_details"]["reasoning_tokens"], 20);
}

#[test]
fn without_include_usage_no_chunk_carries_usage() {
    let server = start(vec![Step::text("ok")]);
    let mut body = request_body("chat/completions", true);
    body.as_object_mut().expect("object").remove("stream_options");
    let events = post(&server, "chat/completions", &body).events();
    for event in &events[..events.len() - 1] {
        let chunk = event.json();
        assert!(chunk.get("usage").is_none(), "{chunk}");
        assert_eq!(chunk["choices"].as_array().map(Vec::len), Some(1));
    }
}

#[test]
fn default_usage_is_small_and_non_zero() {
    let server = start(vec![Step::text("ok")]);
    let events =
        post(&server, "chat/completions", &request_body("chat/completions", true)).events();
    let usage = events[events.len() - 2].json()["usage"].clone();
    assert!(usage["prompt_tokens"].as_u64().is_some_and(|tokens| tokens > 0));
    assert!(usage["completion_tokens"].as_u64().is_some_and(|tokens| tokens > 0));
}

#[test]
fn tool_calls_stream_with_split_arguments_and_finish_with_tool_calls() {
    let arguments = json!({ "command": "cargo test --workspace", "timeout_ms": 60000 });
    let server = start(vec![Step::tool_calls(vec![
        ScriptedToolCall::new("shell", arguments.clone()),
        ScriptedToolCall::raw("read_file", "{\"path\": \"src/ma").with_id("call_fixed"),
    ])]);
    let events =
        post(&server, "chat/completions", &request_body("chat/completions", true)).events();

    let calls: Vec<Value> = deltas(&events)
        .iter()
        .filter_map(|delta| delta.get("tool_calls").cloned())
        .flat_map(|calls| calls.as_array().cloned().unwrap_or_default())
        .collect();
    for index in 0..2 {
        let parts: Vec<&Value> = calls.iter().filter(|call| call["index"] == index).collect();
        assert!(parts.len() >= 3, "arguments of call {index} not split: {parts:?}");
        let first = parts[0];
        assert_eq!(first["type"], "function");
        assert_eq!(first["function"]["arguments"], "");
        assert!(
            parts[1..]
                .iter()
                .all(|part| part.get("id").is_none() && part["function"].get("name").is_none())
        );
        let joined: String =
            parts.iter().filter_map(|part| part["function"]["arguments"].as_str()).collect();
        if index == 0 {
            assert_eq!(first["function"]["name"], "shell");
            assert!(first["id"].as_str().is_some_and(|id| id.starts_with("call_")));
            assert_eq!(serde_json::from_str::<Value>(&joined).expect("valid JSON"), arguments);
        } else {
            assert_eq!(first["function"]["name"], "read_file");
            assert_eq!(first["id"], "call_fixed");
            assert_eq!(joined, "{\"path\": \"src/ma");
        }
    }
    let finish = events[events.len() - 3].json();
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(finish["choices"][0]["delta"], json!({}));
}

#[test]
fn reasoning_streams_as_reasoning_content_before_the_text() {
    let server =
        start(vec![Step::text("The answer is 4.").with_reasoning("Two plus two is four.")]);
    let events =
        post(&server, "chat/completions", &request_body("chat/completions", true)).events();
    let deltas = deltas(&events);
    let first_text = deltas
        .iter()
        .position(|delta| delta["content"].as_str().is_some_and(|text| !text.is_empty()))
        .expect("text");
    let reasoning: Vec<&str> = deltas[..first_text]
        .iter()
        .filter_map(|delta| delta["reasoning_content"].as_str())
        .collect();
    assert!(reasoning.len() >= 2);
    assert_eq!(reasoning.concat(), "Two plus two is four.");
}

#[test]
fn non_streaming_request_gets_a_chat_completion_object() {
    let server = start(vec![
        Step::text("Done.").with_reasoning("thought"),
        Step::tool_call("glob", json!({ "pattern": "*.rs" })),
    ]);
    let response = post(&server, "chat/completions", &request_body("chat/completions", false));
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    let body = response.json();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["message"]["content"], "Done.");
    assert_eq!(body["choices"][0]["message"]["reasoning_content"], "thought");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert!(body["usage"]["total_tokens"].as_u64().is_some_and(|tokens| tokens > 0));

    let body = post(&server, "chat/completions", &request_body("chat/completions", false)).json();
    let message = &body["choices"][0]["message"];
    assert!(message["content"].is_null());
    assert_eq!(message["tool_calls"][0]["type"], "function");
    assert_eq!(message["tool_calls"][0]["function"]["name"], "glob");
    assert_eq!(message["tool_calls"][0]["function"]["arguments"], r#"{"pattern":"*.rs"}"#);
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
}

#[test]
fn request_without_messages_is_rejected_like_openai_without_using_a_step() {
    let server = start(vec![Step::text("unused")]);
    let response = post(&server, "chat/completions", &json!({ "model": "m", "stream": true }));
    assert_eq!(response.status, 400);
    let error = &response.json()["error"];
    assert_eq!(error["type"], "invalid_request_error");
    assert!(error["message"].as_str().is_some_and(|message| message.contains("messages")));
    assert_eq!(server.remaining(), 1);
}
