//! The scripted server refuses conversations the real APIs refuse (a tool call without
//! its result, and the like), so client bugs fail tests instead of passing against a
//! lenient fake.

#![allow(clippy::expect_used)]

mod support;

use kestrel_testkit::{Script, ScriptedServer, Step};
use serde_json::json;
use support::post;

fn start() -> ScriptedServer {
    ScriptedServer::start(Script::new([Step::text("unused")])).expect("server starts")
}

fn message(response: &support::RawResponse) -> String {
    let body = response.json();
    body["error"]["message"].as_str().unwrap_or_default().to_string()
}

#[test]
fn chat_refuses_a_tool_call_without_its_result() {
    let server = start();
    let body = json!({"model": "m", "stream": true, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "next"}
    ]});
    let response = post(&server, "chat/completions", &body);
    assert_eq!(response.status, 400);
    assert!(message(&response).contains("call_1"), "{}", message(&response));
    let orphan = json!({"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_9", "content": "x"}
    ]});
    assert_eq!(post(&server, "chat/completions", &orphan).status, 400);
    assert_eq!(server.remaining(), 1, "refused requests use no step");
}

#[test]
fn responses_refuses_unpaired_calls_and_outputs() {
    let server = start();
    let call =
        json!({"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"});
    let body = json!({"model": "m", "store": false, "input": [
        {"role": "user", "content": "hi"}, call]});
    let response = post(&server, "responses", &body);
    assert_eq!(response.status, 400);
    assert!(message(&response).contains("No tool output found for function call call_1"));
    let output = json!({"type": "function_call_output", "call_id": "call_2", "output": "x"});
    let body =
        json!({"model": "m", "store": false, "input": [{"role": "user", "content": "hi"}, output]});
    assert_eq!(post(&server, "responses", &body).status, 400);
}

#[test]
fn anthropic_refuses_tool_use_without_result_empty_text_and_too_many_breakpoints() {
    let server = start();
    let tool_use = json!({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}});
    let body = json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [tool_use]},
        {"role": "user", "content": [{"type": "text", "text": "next"}]}
    ]});
    let response = post(&server, "messages", &body);
    assert_eq!(response.status, 400);
    assert!(message(&response).contains("toolu_1"), "{}", message(&response));

    let empty = json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "text", "text": ""}]}]});
    assert_eq!(post(&server, "messages", &empty).status, 400);

    let marked = json!({"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}});
    let crowded = json!({"model": "m", "max_tokens": 10,
        "system": [marked.clone(), marked.clone(), marked.clone()],
        "messages": [{"role": "user", "content": [marked.clone(), marked]}]});
    let response = post(&server, "messages", &crowded);
    assert_eq!(response.status, 400);
    assert!(message(&response).contains("maximum of 4"), "{}", message(&response));
    assert_eq!(server.remaining(), 1);
}

#[test]
fn images_are_refused_in_shapes_the_real_apis_refuse() {
    let server = start();
    let data = "data:image/png;base64,iVBORw0KGgo=";
    // Chat: a tool message carries text only; an image goes in a user message.
    let call =
        json!({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}});
    let tool_image = json!({"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": [
            {"type": "image_url", "image_url": {"url": data}}]}
    ]});
    let response = post(&server, "chat/completions", &tool_image);
    assert_eq!(response.status, 400);
    assert!(message(&response).contains("tool message"), "{}", message(&response));
    let bad_url = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "iVBORw0KGgo="}}]}]});
    assert_eq!(post(&server, "chat/completions", &bad_url).status, 400);
    // Responses: input_image needs `detail` and a URL.
    let no_detail = json!({"model": "m", "store": false, "input": [{"type": "message",
        "role": "user", "content": [{"type": "input_image", "image_url": data}]}]});
    let response = post(&server, "responses", &no_detail);
    assert_eq!(response.status, 400);
    assert!(message(&response).contains("detail"), "{}", message(&response));
    // Anthropic: only the four image types, with data.
    let bmp = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "Qk0="}}]}]});
    let response = post(&server, "messages", &bmp);
    assert_eq!(response.status, 400);
    assert!(message(&response).contains("media_type"), "{}", message(&response));
    assert_eq!(server.remaining(), 1, "refused requests use no step");
}
