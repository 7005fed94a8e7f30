use super::*;
use crate::stream::test_support::decode_text;
use crate::types::{ModelError, ReasoningEffort, ToolSpec, WireApi};

fn conversation() -> ModelRequest {
    ModelRequest {
        model: "gpt-4.1".into(),
        system: "You are Kestrel.".into(),
        messages: vec![
            Message::User {
                content: vec![
                    ContentPart::Text("What is in this image?".into()),
                    ContentPart::Image {
                        media_type: "image/png".into(),
                        data: "iVBORw0KGgo=".into(),
                    },
                ],
            },
            Message::Assistant {
                text: String::new(),
                reasoning: Some(Reasoning {
                    text: "Look at the file first.".into(),
                    opaque: Some(json!({"wire": "chat", "field": "reasoning_content"})),
                }),
                tool_calls: vec![ToolCall {
                    id: "call_abc".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a.png"}"#.into(),
                }],
            },
            Message::ToolResult {
                call_id: "call_abc".into(),
                content: "binary file".into(),
                is_error: true,
            },
            Message::Assistant { text: "It is a PNG.".into(), reasoning: None, tool_calls: vec![] },
            Message::User {
                content: vec![ContentPart::Text("Thanks".into()), ContentPart::Text("Bye".into())],
            },
        ],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }],
        reasoning: Some(ReasoningEffort::High),
        max_output_tokens: Some(4096),
        cache_key: Some("session-1".into()),
    }
}

#[test]
fn request_body_maps_every_message_kind() {
    assert_eq!(
        request_body(&conversation()),
        json!({
            "model": "gpt-4.1",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "You are Kestrel."},
                {"role": "user", "content": [
                    {"type": "text", "text": "What is in this image?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                ]},
                {"role": "assistant", "content": null, "reasoning_content": "Look at the file first.", "tool_calls": [
                    {"id": "call_abc", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.png\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_abc", "content": "binary file"},
                {"role": "assistant", "content": "It is a PNG."},
                {"role": "user", "content": "Thanks\n\nBye"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            }}],
            "reasoning_effort": "high",
            "max_completion_tokens": 4096,
            "prompt_cache_key": "session-1",
        })
    );
}

#[test]
fn request_without_tools_or_options_has_no_such_fields() {
    let request = ModelRequest {
        model: "llama3".into(),
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
            "model": "llama3",
            "messages": [{"role": "user", "content": "Title this"}],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[test]
fn reasoning_from_other_wires_is_not_sent_as_reasoning_content() {
    let mut request = conversation();
    request.messages = vec![Message::Assistant {
        text: "ok".into(),
        reasoning: Some(Reasoning {
            text: "thought".into(),
            opaque: Some(json!({"wire": "anthropic", "block": {}})),
        }),
        tool_calls: vec![],
    }];
    let body = request_body(&request);
    assert_eq!(body["messages"][1], json!({"role": "assistant", "content": "ok"}));
}

/// The documented streaming example, with `include_usage`.
const TEXT_STREAM: &str = r#"data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" there!"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":60,"total_tokens":1260,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":20,"audio_tokens":0}}}

data: [DONE]

"#;

#[test]
fn streams_text_then_usage_then_completed() {
    let (events, error) = decode_text(WireApi::Chat, TEXT_STREAM);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta("Hello".into()),
            StreamEvent::TextDelta(" there!".into()),
            StreamEvent::Usage(TokenUsage {
                input_tokens: 1200,
                cached_input_tokens: 1024,
                output_tokens: 60,
                reasoning_tokens: 20,
                cache_write_tokens: 0,
            }),
            StreamEvent::Completed { finish_reason: FinishReason::Stop },
        ]
    );
}

/// Two parallel calls, arguments in pieces, as the function-calling guide shows them.
const TOOL_STREAM: &str = r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":null,"type":null,"function":{"name":null,"arguments":"{\"location\":"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"read_file","arguments":"{}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}

data: [DONE]

"#;

#[test]
fn streams_tool_calls_with_arguments_in_pieces() {
    let (events, error) = decode_text(WireApi::Chat, TOOL_STREAM);
    assert!(error.is_none(), "{error:?}");
    let call = |id: &str, name: &str, arguments: &str| ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    };
    assert_eq!(
        events,
        vec![
            StreamEvent::ToolCallStarted {
                index: 0,
                id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
                name: "get_weather".into()
            },
            StreamEvent::ToolCallArgumentsDelta { index: 0, delta: "{\"location\":".into() },
            StreamEvent::ToolCallArgumentsDelta { index: 0, delta: "\"Paris\"}".into() },
            StreamEvent::ToolCallStarted {
                index: 1,
                id: "call_2".into(),
                name: "read_file".into()
            },
            StreamEvent::ToolCallArgumentsDelta { index: 1, delta: "{}".into() },
            StreamEvent::ToolCallCompleted {
                index: 0,
                call: call(
                    "call_DdmO9pD3xa9XTPNJ32zg2hcA",
                    "get_weather",
                    "{\"location\":\"Paris\"}"
                ),
            },
            StreamEvent::ToolCallCompleted { index: 1, call: call("call_2", "read_file", "{}") },
            StreamEvent::Usage(TokenUsage {
                input_tokens: 10,
                cached_input_tokens: 0,
                output_tokens: 5,
                reasoning_tokens: 0,
                cache_write_tokens: 0
            }),
            StreamEvent::Completed { finish_reason: FinishReason::ToolCalls },
        ]
    );
}

#[test]
fn tool_calls_with_a_stop_finish_reason_still_finish_as_tool_calls() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"glob\",\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let (events, error) = decode_text(WireApi::Chat, stream);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events[0],
        StreamEvent::ToolCallStarted { index: 0, id: "call_0".into(), name: "glob".into() }
    );
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Completed { finish_reason: FinishReason::ToolCalls })
    );
}

#[test]
fn reads_reasoning_content_and_marks_it_for_sending_back() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"Let me\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\" think.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"42\"},\"finish_reason\":\"length\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let (events, error) = decode_text(WireApi::Chat, stream);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events,
        vec![
            StreamEvent::ReasoningDelta("Let me".into()),
            StreamEvent::ReasoningDelta(" think.".into()),
            StreamEvent::ReasoningCompleted(Reasoning {
                text: "Let me think.".into(),
                opaque: Some(json!({"wire": "chat", "field": "reasoning_content"})),
            }),
            StreamEvent::TextDelta("42".into()),
            StreamEvent::Completed { finish_reason: FinishReason::Length },
        ]
    );
}

#[test]
fn reads_openrouter_style_reasoning_without_a_send_back_marker() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"hmm\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let (events, _) = decode_text(WireApi::Chat, stream);
    assert_eq!(
        events[1],
        StreamEvent::ReasoningCompleted(Reasoning { text: "hmm".into(), opaque: None })
    );
}

#[test]
fn malformed_json_fails_after_the_events_before_it() {
    let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"choices\":[{\"index\n\n";
    let (events, error) = decode_text(WireApi::Chat, stream);
    assert_eq!(events, vec![StreamEvent::TextDelta("Hi".into())]);
    assert!(
        matches!(&error, Some(ModelError::Malformed { message, .. }) if message.contains("invalid JSON")),
        "{error:?}"
    );
}

#[test]
fn a_stream_without_done_or_finish_reason_is_interrupted() {
    let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    let (events, error) = decode_text(WireApi::Chat, stream);
    assert_eq!(events, vec![StreamEvent::TextDelta("Hi".into())]);
    assert!(matches!(error, Some(ModelError::StreamInterrupted { .. })), "{error:?}");
}

#[test]
fn a_finish_reason_without_done_completes_the_response() {
    // Some local servers end the body after the finish reason without `[DONE]`.
    let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n";
    let (events, error) = decode_text(WireApi::Chat, stream);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta("Hi".into()),
            StreamEvent::Completed { finish_reason: FinishReason::Stop }
        ]
    );
}

#[test]
fn an_error_chunk_becomes_the_providers_error() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
        "data: {\"error\":{\"message\":\"Provider returned error\",\"code\":502}}\n\n",
    );
    let (_, error) = decode_text(WireApi::Chat, stream);
    assert!(
        matches!(&error, Some(ModelError::Server { status: 502, message, .. }) if message == "Provider returned error"),
        "{error:?}"
    );
}

#[test]
fn deepseek_cache_hits_count_as_cached_input() {
    let stream = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"prompt_cache_hit_tokens\":80,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";
    let (events, _) = decode_text(WireApi::Chat, stream);
    assert_eq!(
        events[0],
        StreamEvent::Usage(TokenUsage {
            input_tokens: 100,
            cached_input_tokens: 80,
            output_tokens: 3,
            reasoning_tokens: 0,
            cache_write_tokens: 0
        })
    );
}

#[test]
fn reasoning_content_marker_is_found_inside_an_array_of_parts() {
    let mut request = conversation();
    request.messages = vec![Message::Assistant {
        text: "ok".into(),
        reasoning: Some(Reasoning {
            text: "thought".into(),
            opaque: Some(json!([{"wire": "chat", "field": "reasoning_content"}])),
        }),
        tool_calls: vec![],
    }];
    assert_eq!(request_body(&request)["messages"][1]["reasoning_content"], json!("thought"));
}
