use super::*;
use crate::stream::test_support::decode_text;
use crate::types::{ModelError, ToolSpec, WireApi};

fn thinking_opaque() -> Value {
    json!({"wire": "anthropic", "block": {"type": "thinking", "thinking": "Check a.", "signature": "EqQBsig"}})
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {name} tool"),
        parameters: json!({"type": "object", "properties": {}}),
    }
}

fn conversation() -> ModelRequest {
    ModelRequest {
        model: "claude-sonnet-4-5".into(),
        system: "You are Kestrel.".into(),
        messages: vec![
            Message::User {
                content: vec![
                    ContentPart::Text("Look".into()),
                    ContentPart::Image {
                        media_type: "image/png".into(),
                        data: "iVBORw0KGgo=".into(),
                    },
                ],
            },
            Message::Assistant {
                text: "Reading.".into(),
                reasoning: Some(Reasoning {
                    text: "Check a.".into(),
                    opaque: Some(thinking_opaque()),
                }),
                tool_calls: vec![
                    ToolCall {
                        id: "toolu_1".into(),
                        name: "read_file".into(),
                        arguments: r#"{"path":"a"}"#.into(),
                    },
                    ToolCall {
                        id: "toolu_2".into(),
                        name: "glob".into(),
                        arguments: "{not json".into(),
                    },
                ],
            },
            Message::ToolResult { call_id: "toolu_1".into(), content: "A".into(), is_error: false },
            Message::ToolResult {
                call_id: "toolu_2".into(),
                content: "bad arguments".into(),
                is_error: true,
            },
            Message::User { content: vec![ContentPart::Text("and now?".into())] },
        ],
        tools: vec![tool("read_file"), tool("glob")],
        reasoning: Some(ReasoningEffort::Medium),
        max_output_tokens: None,
        cache_key: Some("ignored-here".into()),
    }
}

#[test]
fn request_body_maps_every_message_kind_with_cache_breakpoints() {
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(
        request_body(&conversation()),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 32000,
            "stream": true,
            "system": [{"type": "text", "text": "You are Kestrel.", "cache_control": ephemeral}],
            "tools": [
                {"name": "read_file", "description": "The read_file tool", "input_schema": {"type": "object", "properties": {}}},
                {"name": "glob", "description": "The glob tool", "input_schema": {"type": "object", "properties": {}}, "cache_control": ephemeral},
            ],
            "thinking": {"type": "enabled", "budget_tokens": 10000},
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "Look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Check a.", "signature": "EqQBsig"},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "glob", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "bad arguments", "is_error": true},
                    {"type": "text", "text": "and now?", "cache_control": ephemeral},
                ]},
            ],
        })
    );
}

#[test]
fn request_without_tools_system_or_thinking_is_minimal() {
    let request = ModelRequest {
        model: "claude-haiku-4-5".into(),
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
            "model": "claude-haiku-4-5",
            "max_tokens": 8192,
            "stream": true,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Title this", "cache_control": {"type": "ephemeral"}},
            ]}],
        })
    );
}

#[test]
fn cache_breakpoint_goes_on_the_newest_user_turn_even_with_an_assistant_after_it() {
    let mut request = conversation();
    request.messages.push(Message::Assistant {
        text: "partial".into(),
        reasoning: None,
        tool_calls: vec![],
    });
    let body = request_body(&request);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[2]["content"][2]["cache_control"], json!({"type": "ephemeral"}));
    assert!(messages[3]["content"][0].get("cache_control").is_none());
    let breakpoints = body.to_string().matches("ephemeral").count();
    assert_eq!(breakpoints, 3, "system, last tool, newest user turn");
}

#[test]
fn thinking_budget_fits_below_max_tokens() {
    let mut request = conversation();
    request.reasoning = Some(ReasoningEffort::High);
    request.max_output_tokens = Some(16000);
    let body = request_body(&request);
    assert_eq!(body["max_tokens"], json!(16000));
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 14976}));

    request.max_output_tokens = Some(1500);
    assert!(request_body(&request).get("thinking").is_none());
}

#[test]
fn reasoning_from_other_wires_and_empty_messages_are_left_out() {
    let mut request = conversation();
    request.messages = vec![
        Message::User { content: vec![ContentPart::Text("hi".into())] },
        Message::Assistant {
            text: String::new(),
            reasoning: Some(Reasoning {
                text: "t".into(),
                opaque: Some(json!({"wire": "responses", "item": {}})),
            }),
            tool_calls: vec![],
        },
        Message::User { content: vec![ContentPart::Text("again".into())] },
    ];
    let body = request_body(&request);
    // The empty assistant turn vanishes and the two user turns merge: roles alternate.
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(1));
    assert_eq!(body["messages"][0]["content"].as_array().map(Vec::len), Some(2));
}

/// The documented extended-thinking stream, with a tool call added as the tool-use
/// streaming example shows it.
const STREAM: &str = r#"event: message_start
data: {"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000, "output_tokens": 1}}}

event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me solve this step by step:\n\n1. First break down 27 * 453"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: ping
data: {"type": "ping"}

event: content_block_start
data: {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "27 * 453 = 12,231"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":" \"Paris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 89}}

event: message_stop
data: {"type": "message_stop"}

"#;

#[test]
fn streams_thinking_text_and_a_tool_call() {
    let (events, error) = decode_text(WireApi::Anthropic, STREAM);
    assert!(error.is_none(), "{error:?}");
    let thinking = "Let me solve this step by step:\n\n1. First break down 27 * 453";
    assert_eq!(
        events,
        vec![
            StreamEvent::ReasoningDelta(thinking.into()),
            StreamEvent::ReasoningCompleted(Reasoning {
                text: thinking.into(),
                opaque: Some(json!({"wire": "anthropic", "block": {
                    "type": "thinking", "thinking": thinking, "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h",
                }})),
            }),
            StreamEvent::TextDelta("27 * 453 = 12,231".into()),
            StreamEvent::ToolCallStarted {
                index: 0,
                id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                name: "get_weather".into()
            },
            StreamEvent::ToolCallArgumentsDelta { index: 0, delta: "{\"location\":".into() },
            StreamEvent::ToolCallArgumentsDelta { index: 0, delta: " \"Paris\"}".into() },
            StreamEvent::ToolCallCompleted {
                index: 0,
                call: ToolCall {
                    id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                    name: "get_weather".into(),
                    arguments: "{\"location\": \"Paris\"}".into(),
                },
            },
            StreamEvent::Usage(TokenUsage {
                input_tokens: 2125,
                cached_input_tokens: 2000,
                output_tokens: 89,
                reasoning_tokens: 0,
                cache_write_tokens: 100
            }),
            StreamEvent::Completed { finish_reason: FinishReason::ToolCalls },
        ]
    );
}

#[test]
fn streamed_thinking_round_trips_into_the_next_request() {
    let (events, _) = decode_text(WireApi::Anthropic, STREAM);
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
        request_body(&request)["messages"][0]["content"][0],
        json!({"type": "thinking", "thinking": "Let me solve this step by step:\n\n1. First break down 27 * 453", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"})
    );
}

#[test]
fn tool_without_input_completes_with_an_empty_object_and_redacted_thinking_is_kept() {
    let stream = concat!(
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgB\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"list_dir\",\"input\":{}}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":3}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let (events, error) = decode_text(WireApi::Anthropic, stream);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events[0],
        StreamEvent::ReasoningCompleted(Reasoning {
            text: String::new(),
            opaque: Some(
                json!({"wire": "anthropic", "block": {"type": "redacted_thinking", "data": "EmwKAhgB"}})
            ),
        })
    );
    assert_eq!(
        events[2],
        StreamEvent::ToolCallCompleted {
            index: 0,
            call: ToolCall {
                id: "toolu_9".into(),
                name: "list_dir".into(),
                arguments: "{}".into()
            },
        }
    );
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Completed { finish_reason: FinishReason::Length })
    );
}

#[test]
fn overloaded_error_event_is_a_server_error() {
    let stream = concat!(
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
        "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n",
    );
    let (events, error) = decode_text(WireApi::Anthropic, stream);
    assert_eq!(events, vec![StreamEvent::TextDelta("Hi".into())]);
    assert!(
        matches!(&error, Some(ModelError::Server { status: 529, message, .. }) if message == "Overloaded"),
        "{error:?}"
    );
}

#[test]
fn malformed_event_and_missing_message_stop_are_errors() {
    let (_, error) = decode_text(
        WireApi::Anthropic,
        "event: message_start\ndata: {\"type\": \"message_start\", \"mess\n\n",
    );
    assert!(matches!(error, Some(ModelError::Malformed { .. })), "{error:?}");

    let cut = &STREAM[..STREAM.find("event: message_stop").unwrap()];
    let (events, error) = decode_text(WireApi::Anthropic, cut);
    assert!(!events.is_empty());
    assert!(!events.iter().any(|e| matches!(e, StreamEvent::Completed { .. })));
    assert!(matches!(error, Some(ModelError::StreamInterrupted { .. })), "{error:?}");
}
