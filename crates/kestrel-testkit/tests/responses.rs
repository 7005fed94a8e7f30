//! OpenAI Responses: the typed event stream a Responses client expects.
#![allow(clippy::expect_used)] // test code: a failed expectation is a failed test

mod support;

use kestrel_testkit::{Script, ScriptedServer, ScriptedToolCall, ScriptedUsage, Step};
use serde_json::{Value, json};
use support::{Event, post, request_body};

fn stream(step: Step, request: Value) -> (ScriptedServer, Vec<Event>) {
    let server = ScriptedServer::start(Script::new([step])).expect("server starts");
    let response = post(&server, "responses", &request);
    assert_eq!(response.status, 200);
    assert!(response.complete, "terminating chunk missing");
    assert_eq!(response.header("content-type"), Some("text/event-stream; charset=utf-8"));
    let events = response.events();
    (server, events)
}

fn of_type(events: &[Event], kind: &str) -> Vec<Value> {
    events.iter().filter(|event| event.event.as_deref() == Some(kind)).map(Event::json).collect()
}

#[test]
fn every_event_has_a_matching_event_line_and_increasing_sequence_numbers() {
    let (_server, events) = stream(
        Step::text("Hello world from the model").with_reasoning("Think first."),
        request_body("responses", true),
    );
    for (index, event) in events.iter().enumerate() {
        let data = event.json();
        assert_eq!(event.event.as_deref(), data["type"].as_str(), "{data}");
        assert_eq!(data["sequence_number"], index, "{data}");
    }
    assert_eq!(events.first().and_then(|event| event.event.as_deref()), Some("response.created"));
    assert_eq!(
        events.get(1).and_then(|event| event.event.as_deref()),
        Some("response.in_progress")
    );
    assert_eq!(events.last().and_then(|event| event.event.as_deref()), Some("response.completed"));
    assert!(events.iter().all(|event| event.data != "[DONE]"), "Responses has no [DONE]");
    let created = &of_type(&events, "response.created")[0]["response"];
    assert_eq!(created["status"], "in_progress");
    assert!(created["id"].as_str().is_some_and(|id| id.starts_with("resp_")));
    assert_eq!(created["model"], "test-model");
}

#[test]
fn text_streams_in_several_output_text_deltas() {
    let (_server, events) =
        stream(Step::text("One two three four five."), request_body("responses", true));
    let added = of_type(&events, "response.output_item.added");
    assert_eq!(added.len(), 1);
    let item_id = added[0]["item"]["id"].as_str().expect("item id").to_owned();
    assert!(item_id.starts_with("msg_"));
    assert_eq!(added[0]["item"]["type"], "message");

    let deltas = of_type(&events, "response.output_text.delta");
    assert!(deltas.len() >= 5);
    assert!(
        deltas
            .iter()
            .all(|delta| delta["item_id"] == item_id.as_str() && delta["output_index"] == 0)
    );
    let text: String = deltas.iter().filter_map(|delta| delta["delta"].as_str()).collect();
    assert_eq!(text, "One two three four five.");
    assert_eq!(of_type(&events, "response.output_text.done")[0]["text"], text.as_str());
    let done = &of_type(&events, "response.output_item.done")[0]["item"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["content"][0]["type"], "output_text");
    assert_eq!(done["content"][0]["text"], text.as_str());
}

#[test]
fn function_call_arguments_stream_in_pieces_then_done() {
    let arguments = json!({ "path": "src/lib.rs", "offset": 10, "limit": 40 });
    let (_server, events) = stream(
        Step::tool_calls(vec![
            ScriptedToolCall::new("read_file", arguments.clone()),
            ScriptedToolCall::raw("shell", "{not json").with_id("call_given"),
        ]),
        request_body("responses", true),
    );
    let added = of_type(&events, "response.output_item.added");
    assert_eq!(added.len(), 2);
    for (index, item) in added.iter().enumerate() {
        let item = &item["item"];
        assert_eq!(item["type"], "function_call");
        assert_eq!(item["arguments"], "");
        assert!(item["id"].as_str().is_some_and(|id| id.starts_with("fc_")));
        let item_id = item["id"].as_str().expect("id");
        let pieces: Vec<Value> = of_type(&events, "response.function_call_arguments.delta")
            .into_iter()
            .filter(|delta| delta["item_id"] == item_id)
            .collect();
        assert!(pieces.len() >= 2, "call {index} arguments not split");
        assert!(pieces.iter().all(|piece| piece["output_index"] == index));
        let joined: String = pieces.iter().filter_map(|piece| piece["delta"].as_str()).collect();
        let done: Vec<Value> = of_type(&events, "response.function_call_arguments.done")
            .into_iter()
            .filter(|done| done["item_id"] == item_id)
            .collect();
        assert_eq!(done[0]["arguments"], joined.as_str());
        if index == 0 {
            assert_eq!(item["name"], "read_file");
            assert!(item["call_id"].as_str().is_some_and(|id| id.starts_with("call_")));
            assert_eq!(serde_json::from_str::<Value>(&joined).expect("JSON"), arguments);
        } else {
            assert_eq!(item["call_id"], "call_given");
            assert_eq!(joined, "{not json");
        }
    }
    let output = &of_type(&events, "response.completed")[0]["response"]["output"];
    assert_eq!(output[0]["status"], "completed");
    assert_eq!(output[1]["arguments"], "{not json");
}

#[test]
fn reasoning_summary_streams_first_with_encrypted_content_when_asked() {
    let mut request = request_body("responses", true);
    request["include"] = json!(["reasoning.encrypted_content"]);
    request["reasoning"] = json!({ "effort": "high", "summary": "auto" });
    let (_server, events) =
        stream(Step::text("Answer.").with_reasoning("Let me think about it."), request);
    let added = of_type(&events, "response.output_item.added");
    assert_eq!(added[0]["item"]["type"], "reasoning");
    assert_eq!(added[1]["item"]["type"], "message");
    let deltas = of_type(&events, "response.reasoning_summary_text.delta");
    assert!(deltas.len() >= 2);
    let text: String = deltas.iter().filter_map(|delta| delta["delta"].as_str()).collect();
    assert_eq!(text, "Let me think about it.");
    assert_eq!(of_type(&events, "response.reasoning_summary_part.added").len(), 1);
    let done = &of_type(&events, "response.output_item.done")[0]["item"];
    assert_eq!(done["summary"][0], json!({ "type": "summary_text", "text": text }));
    assert!(done["encrypted_content"].as_str().is_some_and(|content| !content.is_empty()));
    let completed = &of_type(&events, "response.completed")[0]["response"];
    assert_eq!(completed["reasoning"]["effort"], "high");
}

#[test]
fn reasoning_has_no_encrypted_content_unless_included() {
    let (_server, events) =
        stream(Step::text("A.").with_reasoning("think"), request_body("responses", true));
    let done = &of_type(&events, "response.output_item.done")[0]["item"];
    assert_eq!(done["type"], "reasoning");
    assert!(done.get("encrypted_content").is_none());
}

#[test]
fn completed_carries_usage_with_cached_and_reasoning_details() {
    let usage = ScriptedUsage {
        input_tokens: 900,
        cached_input_tokens: 512,
        output_tokens: 70,
        reasoning_tokens: 30,
    };
    let (_server, events) =
        stream(Step::text("ok").with_usage(usage), request_body("responses", true));
    let completed = &of_type(&events, "response.completed")[0]["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(
        completed["usage"],
        json!({
            "input_tokens": 900,
            "input_tokens_details": { "cached_tokens": 512 },
            "output_tokens": 70,
            "output_tokens_details": { "reasoning_tokens": 30 },
            "total_tokens": 970,
        })
    );
    assert_eq!(completed["store"], false, "request options are echoed");
}

#[test]
fn non_streaming_request_gets_the_response_object() {
    let server =
        ScriptedServer::start(Script::new([
            Step::tool_call("glob", json!({ "pattern": "*" })).with_reasoning("hmm")
        ]))
        .expect("server starts");
    let response = post(&server, "responses", &request_body("responses", false));
    assert_eq!(response.status, 200);
    let body = response.json();
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["output"][0]["type"], "reasoning");
    assert_eq!(body["output"][1]["type"], "function_call");
    assert_eq!(body["output"][1]["arguments"], r#"{"pattern":"*"}"#);
    assert!(body["usage"]["total_tokens"].as_u64().is_some_and(|tokens| tokens > 0));
}

#[test]
fn request_without_input_is_rejected_like_openai() {
    let server = ScriptedServer::start(Script::new([Step::text("unused")])).expect("server starts");
    let response = post(&server, "responses", &json!({ "model": "m", "stream": true }));
    assert_eq!(response.status, 400);
    let error = &response.json()["error"];
    assert_eq!(error["type"], "invalid_request_error");
    assert!(error["message"].as_str().is_some_and(|message| message.contains("input")));
    assert_eq!(server.remaining(), 1);
}
