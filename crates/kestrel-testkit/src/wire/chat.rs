//! OpenAI Chat Completions: `chat.completion.chunk` objects as `data:` lines, tool calls
//! as indexed `delta.tool_calls` with the arguments in pieces, `reasoning_content` deltas
//! (DeepSeek, vLLM), a usage-only chunk when `stream_options.include_usage` is set, and
//! `data: [DONE]` last.

use serde_json::{Value, json};

use super::{Answer, RenderContext};
use crate::script::ScriptedUsage;
use crate::sse::{SseEvent, argument_deltas, text_deltas};

const SYSTEM_FINGERPRINT: &str = "fp_scripted";

pub(super) fn validate(body: &Value) -> Result<(), String> {
    match body.get("messages").and_then(Value::as_array) {
        None => Err("Missing required parameter: 'messages'.".into()),
        Some(messages) if messages.is_empty() => {
            Err("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.".into())
        }
        Some(messages) => {
            check_images(messages)?;
            check_tool_pairing(messages)
        }
    }
}

/// As the real API: a `tool` message carries text only (a string or `text` parts); an
/// image goes in a user message as an `image_url` part whose `url` is an http(s) or
/// `data:image/...;base64,` URL.
fn check_images(messages: &[Value]) -> Result<(), String> {
    for (index, message) in messages.iter().enumerate() {
        let Some(parts) = message.get("content").and_then(Value::as_array) else { continue };
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        for part in parts {
            let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
            if role == "tool" && kind != "text" {
                return Err(format!(
                    "Invalid 'messages[{index}].content': a tool message's content parts must be of type 'text', got '{kind}'."
                ));
            }
            if kind == "image_url" {
                let url =
                    part.pointer("/image_url/url").and_then(Value::as_str).unwrap_or_default();
                if !(url.starts_with("http")
                    || url.starts_with("data:image/") && url.contains(";base64,"))
                {
                    return Err(format!(
                        "Invalid 'messages[{index}].content': image_url.url must be a URL or a base64 data URL."
                    ));
                }
            }
        }
    }
    Ok(())
}

/// As the real API: an assistant message with `tool_calls` must be followed by a `tool`
/// message for each call id, and a `tool` message must answer such a call.
fn check_tool_pairing(messages: &[Value]) -> Result<(), String> {
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        if role == "tool" {
            let id = message.get("tool_call_id").and_then(Value::as_str).unwrap_or_default();
            match open.iter().position(|open_id| open_id == id) {
                Some(index) => {
                    open.remove(index);
                }
                None => {
                    return Err("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".into());
                }
            }
            continue;
        }
        if !open.is_empty() {
            return Err(format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                open.join(", ")
            ));
        }
        if role == "assistant" {
            let calls = message.get("tool_calls").and_then(Value::as_array);
            open = calls
                .into_iter()
                .flatten()
                .filter_map(|call| call.get("id").and_then(Value::as_str).map(str::to_string))
                .collect();
        }
    }
    if open.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            open.join(", ")
        ))
    }
}

pub(super) fn stream(answer: &Answer<'_>, context: &RenderContext<'_>) -> Vec<SseEvent> {
    let id = context.ids.next("chatcmpl-", 29);
    let include_usage = context
        .request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let chunk = |choices: Value, usage: Value| {
        let mut chunk = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": context.created,
            "model": context.model(),
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": choices,
        });
        // With include_usage, every chunk carries `usage`: null but the last.
        if include_usage {
            chunk["usage"] = usage;
        }
        SseEvent::data(&chunk)
    };
    let delta = |delta: Value| {
        chunk(
            json!([{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": null }]),
            Value::Null,
        )
    };

    let mut events = vec![delta(json!({ "role": "assistant", "content": "", "refusal": null }))];
    for piece in answer.reasoning.map(text_deltas).unwrap_or_default() {
        events.push(delta(json!({ "reasoning_content": piece })));
    }
    for piece in answer.text.map(text_deltas).unwrap_or_default() {
        events.push(delta(json!({ "content": piece })));
    }
    for (index, call) in answer.tool_calls.iter().enumerate() {
        events.push(delta(json!({ "tool_calls": [{
            "index": index,
            "id": context.call_id(call, "call_"),
            "type": "function",
            "function": { "name": call.name, "arguments": "" },
        }]})));
        for piece in argument_deltas(&call.arguments) {
            events.push(delta(json!({ "tool_calls": [{
                "index": index,
                "function": { "arguments": piece },
            }]})));
        }
    }
    events.push(chunk(
        json!([{ "index": 0, "delta": {}, "logprobs": null, "finish_reason": finish_reason(answer) }]),
        Value::Null,
    ));
    if include_usage {
        events.push(chunk(json!([]), usage(answer.usage)));
    }
    events.push(SseEvent { event: None, data: "[DONE]".into() });
    events
}

pub(super) fn complete(answer: &Answer<'_>, context: &RenderContext<'_>) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": answer.text,
        "refusal": null,
    });
    if let Some(reasoning) = answer.reasoning {
        message["reasoning_content"] = reasoning.into();
    }
    if !answer.tool_calls.is_empty() {
        let calls: Vec<Value> = answer
            .tool_calls
            .iter()
            .map(|call| {
                json!({
                    "id": context.call_id(call, "call_"),
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.arguments },
                })
            })
            .collect();
        message["tool_calls"] = calls.into();
    }
    json!({
        "id": context.ids.next("chatcmpl-", 29),
        "object": "chat.completion",
        "created": context.created,
        "model": context.model(),
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(answer),
        }],
        "usage": usage(answer.usage),
    })
}

fn finish_reason(answer: &Answer<'_>) -> &'static str {
    if answer.tool_calls.is_empty() { "stop" } else { "tool_calls" }
}

fn usage(usage: ScriptedUsage) -> Value {
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": { "cached_tokens": usage.cached_input_tokens, "audio_tokens": 0 },
        "completion_tokens_details": {
            "reasoning_tokens": usage.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    })
}
