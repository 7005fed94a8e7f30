use super::*;
use crate::stream::test_support::decode_text;
use crate::types::{ModelError, ReasoningEffort, ToolSpec, WireApi};

fn reasoning_item() -> Value {
    json!({
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Reading the file."}],
        "encrypted_content": "gAAAAB-secret",
    })
}

fn conversation() -> ModelRequest {
    ModelRequest {
        model: "gpt-5".into(),
        system: "You are Kestrel.".into(),
        messages: vec![
            Message::User {
                content: vec![
                    ContentPart::Text("Describe".into()),
                    ContentPart::Image { media_type: "image/jpeg".into(), data: "/9j/4AAQ".into() },
                ],
            },
            Message::Assistant {
                text: "Let me look.".into(),
                reasoning: Some(Reasoning {
                    text: "Reading the file.".into(),
                    opaque: Some(json!({"wire": "responses", "item": reasoning_item()})),
                }),
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a"}"#.into(),
                }],
            },
            Message::ToolResult {
                call_id: "call_1".into(),
                content: "contents".into(),
                is_error: false,
            },
            Message::Assistant {
                text: "Done.".into(),
                reasoning: Some(Reasoning {
                    text: "from another provider".into(),
                    opaque: Some(json!({"wire": "anthropic", "block": {"type": "thinking"}})),
                }),
                tool_calls: vec![],
            },
        ],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        reasoning: Some(ReasoningEffort::Medium),
        max_output_tokens: Some(2000),
        cache_key: Some("session-1".into()),
    }
}

#[test]
fn request_body_maps_every_message_kind() {
    assert_eq!(
        request_body(&conversation()),
        json!({
            "model": "gpt-5",
            "instructions": "You are Kestrel.",
            "input": [
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "Describe"},
                    {"type": "input_image", "detail": "auto", "image_url": "data:image/jpeg;base64,/9j/4AAQ"},
                ]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Reading the file."}], "encrypted_content": "gAAAAB-secret"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
                {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{\"path\":\"a\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "contents"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
            ],
            "stream": true,
            "store": false,
            "tools": [{
                "type": "function",
                "name": "read_file",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                "strict": false,
            }],
            "tool_choice": "auto",
            "parallel_tool_calls": true,
            "reasoning": {"effort": "medium", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "max_output_tokens": 2000,
            "prompt_cache_key": "session-1",
        })
    );
}

#[test]
fn never_stores_or_chains_responses() {
    let body = request_body(&conversation());
    assert_eq!(body["store"], json!(false));
    assert!(body.get("previous_response_id").is_none());
    // Item ids would point at server-side state that `store: false` never creates.
    let input = body["input"].as_array().unwrap();
    assert!(input.iter().all(|item| item.get("id").is_none()), "{input:?}");
}

#[test]
fn request_without_tools_or_reasoning_has_no_such_fields() {
    let request = ModelRequest {
        model: "gpt-4.1-mini".into(),
        system: String::new(),
        messages: vec![Message::User { content: vec![ContentPart::Text("Title this".into())] }],
        tools: vec![],
        reasoning: None,
        max_output_tokens: None,
        cache_key: None,
    };
    assert_eq!(
        request_body(&request),
        json!({
            "model": "gpt-4.1-mini",
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Title this"}]}],
            "stream": true,
            "store": false,
        })
    );
}

#[test]
fn reasoning_without_encrypted_content_is_not_sent_back() {
    let mut request = conversation();
    request.messages = vec![Message::Assistant {
        text: "x".into(),
        reasoning: Some(Reasoning {
            text: "t".into(),
            opaque: Some(
                json!({"wire": "responses", "item": {"id": "rs_2", "type": "reasoning", "summary": []}}),
            ),
        }),
        tool_calls: vec![],
    }];
    let body = request_body(&request);
    assert_eq!(body["input"].as_array().map(Vec::len), Some(1));
}

#[test]
fn several_reasoning_items_can_be_sent_back_as_an_array() {
    let mut request = conversation();
    let second = json!({"type": "reasoning", "summary": [], "encrypted_content": "second"});
    request.messages = vec![Message::Assistant {
        text: String::new(),
        reasoning: Some(Reasoning {
            text: String::new(),
            opaque: Some(json!([
                {"wire": "responses", "item": reasoning_item()},
                {"wire": "responses", "item": second},
            ])),
        }),
        tool_calls: vec![],
    }];
    let body = request_body(&request);
    let encrypted: Vec<&str> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["encrypted_content"].as_str())
        .collect();
    assert_eq!(encrypted, vec!["gAAAAB-secret", "second"]);
}

/// A reasoning item with two summary parts, text, and a function call, shaped as the
/// streaming reference documents each event.
const STREAM: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}

event: response.reasoning_summary_part.added
data: {"type":"response.reasoning_summary_part.added","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Plan**"}

event: response.reasoning_summary_part.added
data: {"type":"response.reasoning_summary_part.added","sequence_number":5,"item_id":"rs_1","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""}}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","sequence_number":6,"item_id":"rs_1","output_index":0,"summary_index":1,"delta":"Read it."}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"**Plan**"},{"type":"summary_text","text":"Read it."}],"encrypted_content":"gAAAAB-enc"}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":8,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}

event: response.content_part.added
data: {"type":"response.content_part.added","sequence_number":9,"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":10,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Checking"}

event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":11,"item_id":"msg_1","output_index":1,"content_index":0,"text":"Checking"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":12,"output_index":1,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Checking","annotations":[]}]}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":13,"output_index":2,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":14,"item_id":"fc_1","output_index":2,"delta":"{\"location\":"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":15,"item_id":"fc_1","output_index":2,"delta":"\"Paris\"}"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":16,"item_id":"fc_1","output_index":2,"arguments":"{\"location\":\"Paris\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":17,"output_index":2,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris\"}","call_id":"call_1","name":"get_weather"}}

event: response.completed
data: {"type":"response.completed","sequence_number":18,"response":{"id":"resp_1","object":"response","status":"completed","usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":128},"output_tokens":52,"output_tokens_details":{"reasoning_tokens":32},"total_tokens":380}}}

"#;

#[test]
fn streams_reasoning_text_and_a_tool_call() {
    let (events, error) = decode_text(WireApi::Responses, STREAM);
    assert!(error.is_none(), "{error:?}");
    let item = json!({
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "**Plan**"}, {"type": "summary_text", "text": "Read it."}],
        "encrypted_content": "gAAAAB-enc",
    });
    assert_eq!(
        events,
        vec![
            StreamEvent::ReasoningDelta("**Plan**".into()),
            StreamEvent::ReasoningDelta("\n\n".into()),
            StreamEvent::ReasoningDelta("Read it.".into()),
            StreamEvent::ReasoningCompleted(Reasoning {
                text: "**Plan**\n\nRead it.".into(),
                opaque: Some(json!({"wire": "responses", "item": item})),
            }),
            StreamEvent::TextDelta("Checking".into()),
            StreamEvent::ToolCallStarted {
                index: 0,
                id: "call_1".into(),
                name: "get_weather".into()
            },
            StreamEvent::ToolCallArgumentsDelta { index: 0, delta: "{\"location\":".into() },
            StreamEvent::ToolCallArgumentsDelta { index: 0, delta: "\"Paris\"}".into() },
            StreamEvent::ToolCallCompleted {
                index: 0,
                call: ToolCall {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    arguments: "{\"location\":\"Paris\"}".into()
                },
            },
            StreamEvent::Usage(TokenUsage {
                input_tokens: 328,
                cached_input_tokens: 128,
                output_tokens: 52,
                reasoning_tokens: 32,
                cache_write_tokens: 0
            }),
            StreamEvent::Completed { finish_reason: FinishReason::ToolCalls },
        ]
    );
}

#[test]
fn a_reasoning_item_streamed_back_round_trips_into_the_next_request() {
    let (events, _) = decode_text(WireApi::Responses, STREAM);
    let Some(StreamEvent::ReasoningCompleted(reasoning)) =
        events.into_iter().find(|e| matches!(e, StreamEvent::ReasoningCompleted(_)))
    else {
        panic!("no reasoning");
    };
    let mut request = conversation();
    request.messages = vec![Message::Assistant {
        text: String::new(),
        reasoning: Some(reasoning),
        tool_calls: vec![],
    }];
    assert_eq!(
        request_body(&request)["input"][0],
        json!({
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "**Plan**"}, {"type": "summary_text", "text": "Read it."}],
            "encrypted_content": "gAAAAB-enc",
        })
    );
}

#[test]
fn incomplete_response_finishes_with_length() {
    let stream = concat!(
        "event: response.output_text.delta\n",
        "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hel\"}\n\n",
        "event: response.incomplete\n",
        "data: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"usage\":{\"input_tokens\":5,\"output_tokens\":16}}}\n\n",
    );
    let (events, error) = decode_text(WireApi::Responses, stream);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Completed { finish_reason: FinishReason::Length })
    );
}

#[test]
fn failed_response_maps_its_error_code() {
    let stream = concat!(
        "event: response.failed\n",
        "data: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model.\"}}}\n\n",
    );
    let (events, error) = decode_text(WireApi::Responses, stream);
    assert!(events.is_empty());
    assert!(matches!(error, Some(ModelError::ContextWindowExceeded { .. })), "{error:?}");

    let stream = "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\",\"param\":null}\n\n";
    let (_, error) = decode_text(WireApi::Responses, stream);
    assert!(
        matches!(&error, Some(ModelError::Server { status: 500, message, .. }) if message == "boom"),
        "{error:?}"
    );
}

#[test]
fn malformed_event_and_missing_completion_are_errors() {
    let stream = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\nevent: response.output_text.delta\ndata: not json\n\n";
    let (events, error) = decode_text(WireApi::Responses, stream);
    assert_eq!(events, vec![StreamEvent::TextDelta("a".into())]);
    assert!(matches!(error, Some(ModelError::Malformed { .. })), "{error:?}");

    let stream = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n";
    let (_, error) = decode_text(WireApi::Responses, stream);
    assert!(matches!(error, Some(ModelError::StreamInterrupted { .. })), "{error:?}");
}
