//! Anthropic Messages: `message_start`, then per content block (thinking, text,
//! tool_use) `content_block_start` / `content_block_delta` / `content_block_stop`, a
//! `ping` after the first block opens, `message_delta` with the stop reason and final
//! usage, and `message_stop`. Every event has its `event:` line.

use serde_json::{Value, json};

use super::{Answer, RenderContext};
use crate::script::ScriptedUsage;
use crate::sse::{SseEvent, argument_deltas, text_deltas};

pub(super) fn validate(body: &Value, headers: &[(String, String)]) -> Result<(), String> {
    if !headers.iter().any(|(name, _)| name == "anthropic-version") {
        return Err("anthropic-version: header is required".into());
    }
    if !body.get("max_tokens").is_some_and(Value::is_u64) {
        return Err("max_tokens: Field required".into());
    }
    match body.get("messages").and_then(Value::as_array) {
        None => return Err("messages: Field required".into()),
        Some(messages) if messages.is_empty() => {
            return Err("messages: at least one message is required".into());
        }
        Some(messages) => check_messages(messages)?,
    }
    check_cache_breakpoints(body)
}

/// As the real API: the first message is the user's, every `tool_use` has its
/// `tool_result` in the very next message, and text blocks are not empty.
fn check_messages(messages: &[Value]) -> Result<(), String> {
    if messages[0].get("role").and_then(Value::as_str) != Some("user") {
        return Err("messages: first message must use the \"user\" role".into());
    }
    let blocks = |message: &Value| -> Vec<Value> {
        match message.get("content") {
            Some(Value::Array(blocks)) => blocks.clone(),
            Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
            _ => Vec::new(),
        }
    };
    for (index, message) in messages.iter().enumerate() {
        let content = blocks(message);
        if content.is_empty() {
            return Err(format!("messages.{index}: all messages must have non-empty content"));
        }
        if content.iter().any(|b| {
            b.get("type").and_then(Value::as_str) == Some("text")
                && b.get("text").and_then(Value::as_str).is_some_and(str::is_empty)
        }) {
            return Err("messages: text content blocks must be non-empty".into());
        }
        // Images: top-level blocks, and inside a tool_result's content list.
        let nested = content
            .iter()
            .filter_map(|b| b.get("content").and_then(Value::as_array))
            .flatten()
            .cloned();
        for block in content.iter().cloned().chain(nested) {
            check_image(index, &block)?;
        }
        let uses: Vec<String> = content
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_string))
            .collect();
        if uses.is_empty() {
            continue;
        }
        let next = messages.get(index + 1).map(blocks).unwrap_or_default();
        let is_result = |b: &Value| b.get("type").and_then(Value::as_str) == Some("tool_result");
        let answered: Vec<String> = next
            .iter()
            .filter(|b| is_result(b))
            .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str).map(str::to_string))
            .collect();
        let missing: Vec<&str> =
            uses.iter().filter(|id| !answered.contains(id)).map(String::as_str).collect();
        if !missing.is_empty() {
            return Err(format!(
                "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                index + 1,
                missing.join(", ")
            ));
        }
        // The tool results open the message; text and images may only follow them
        // (platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls).
        let leading = next.iter().take_while(|b| is_result(b)).count();
        if leading < uses.len() {
            return Err(format!(
                "messages.{}: Did not find {} tool_result block(s) at the beginning of this message. Messages following tool_use blocks must begin with a matching number of tool_result blocks.",
                index + 1,
                uses.len()
            ));
        }
    }
    Ok(())
}

/// As the real API: an `image` block's base64 `source` names one of the four image types
/// and carries data.
fn check_image(index: usize, block: &Value) -> Result<(), String> {
    if block.get("type").and_then(Value::as_str) != Some("image") {
        return Ok(());
    }
    let source = block.get("source").cloned().unwrap_or(Value::Null);
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media_type = source.get("media_type").and_then(Value::as_str).unwrap_or_default();
            if !matches!(media_type, "image/jpeg" | "image/png" | "image/gif" | "image/webp") {
                return Err(format!(
                    "messages.{index}.content: image source media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
                ));
            }
            if source.get("data").and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(format!("messages.{index}.content: image source data: Field required"));
            }
            Ok(())
        }
        Some("url") if source.get("url").is_some_and(Value::is_string) => Ok(()),
        _ => Err(format!(
            "messages.{index}.content: image source: Input tag does not match 'base64' or 'url'"
        )),
    }
}

/// As the real API: at most 4 blocks may carry `cache_control`.
fn check_cache_breakpoints(body: &Value) -> Result<(), String> {
    fn count(value: &Value) -> usize {
        match value {
            Value::Object(map) => {
                usize::from(map.contains_key("cache_control"))
                    + map.values().map(count).sum::<usize>()
            }
            Value::Array(items) => items.iter().map(count).sum(),
            _ => 0,
        }
    }
    let found = count(body);
    if found > 4 {
        return Err(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {found}."
        ));
    }
    Ok(())
}

/// Anthropic's error shape, with the error type its API uses for each status.
pub(super) fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    };
    json!({ "type": "error", "error": { "type": kind, "message": message } })
}

/// A content block with its ids fixed.
enum Block {
    Thinking { text: String, signature: String },
    Text { text: String },
    ToolUse { id: String, name: String, arguments: String },
}

fn blocks(answer: &Answer<'_>, context: &RenderContext<'_>) -> Vec<Block> {
    let mut blocks = Vec::new();
    if let Some(text) = answer.reasoning {
        blocks
            .push(Block::Thinking { text: text.to_owned(), signature: context.ids.next("Eq", 94) });
    }
    if let Some(text) = answer.text {
        blocks.push(Block::Text { text: text.to_owned() });
    }
    for call in answer.tool_calls {
        blocks.push(Block::ToolUse {
            id: context.call_id(call, "toolu_01"),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
    }
    blocks
}

pub(super) fn stream(answer: &Answer<'_>, context: &RenderContext<'_>) -> Vec<SseEvent> {
    let usage = answer.usage;
    let mut start_message = message_object(context, Vec::new(), Value::Null);
    start_message["usage"] = start_usage(usage);
    let mut events =
        vec![SseEvent::typed(&json!({ "type": "message_start", "message": start_message }))];
    let ping = SseEvent::typed(&json!({ "type": "ping" }));

    let blocks = blocks(answer, context);
    if blocks.is_empty() {
        events.push(ping.clone());
    }
    for (index, block) in blocks.iter().enumerate() {
        let delta = |delta: Value| {
            SseEvent::typed(
                &json!({ "type": "content_block_delta", "index": index, "delta": delta }),
            )
        };
        let start = match block {
            Block::Thinking { .. } => {
                json!({ "type": "thinking", "thinking": "", "signature": "" })
            }
            Block::Text { .. } => json!({ "type": "text", "text": "" }),
            Block::ToolUse { id, name, .. } => {
                json!({ "type": "tool_use", "id": id, "name": name, "input": {} })
            }
        };
        events.push(SseEvent::typed(
            &json!({ "type": "content_block_start", "index": index, "content_block": start }),
        ));
        if index == 0 {
            events.push(ping.clone());
        }
        match block {
            Block::Thinking { text, signature } => {
                for piece in text_deltas(text) {
                    events.push(delta(json!({ "type": "thinking_delta", "thinking": piece })));
                }
                events.push(delta(json!({ "type": "signature_delta", "signature": signature })));
            }
            Block::Text { text } => {
                for piece in text_deltas(text) {
                    events.push(delta(json!({ "type": "text_delta", "text": piece })));
                }
            }
            Block::ToolUse { arguments, .. } => {
                events.push(delta(json!({ "type": "input_json_delta", "partial_json": "" })));
                for piece in argument_deltas(arguments) {
                    events
                        .push(delta(json!({ "type": "input_json_delta", "partial_json": piece })));
                }
            }
        }
        events.push(SseEvent::typed(&json!({ "type": "content_block_stop", "index": index })));
    }

    events.push(SseEvent::typed(&json!({
        "type": "message_delta",
        "delta": { "stop_reason": stop_reason(answer), "stop_sequence": null },
        "usage": final_usage(usage),
    })));
    events.push(SseEvent::typed(&json!({ "type": "message_stop" })));
    events
}

pub(super) fn complete(answer: &Answer<'_>, context: &RenderContext<'_>) -> Value {
    let content = blocks(answer, context)
        .into_iter()
        .map(|block| match block {
            Block::Thinking { text, signature } => {
                json!({ "type": "thinking", "thinking": text, "signature": signature })
            }
            Block::Text { text } => json!({ "type": "text", "text": text }),
            Block::ToolUse { id, name, arguments } => {
                json!({ "type": "tool_use", "id": id, "name": name, "input": tool_input(&arguments) })
            }
        })
        .collect();
    let mut message = message_object(context, content, stop_reason(answer).into());
    let mut usage = final_usage(answer.usage);
    usage["service_tier"] = "standard".into();
    message["usage"] = usage;
    message
}

/// A complete message carries the input as an object; scripted text that is not JSON
/// (a deliberate fault) is passed through as a string rather than dropped.
fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
}

fn message_object(context: &RenderContext<'_>, content: Vec<Value>, stop_reason: Value) -> Value {
    json!({
        "id": context.ids.next("msg_01", 22),
        "type": "message",
        "role": "assistant",
        "model": context.model(),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": null,
    })
}

fn stop_reason(answer: &Answer<'_>) -> &'static str {
    if answer.tool_calls.is_empty() { "end_turn" } else { "tool_use" }
}

/// Anthropic counts cached input apart from `input_tokens`.
fn input_fields(usage: ScriptedUsage) -> Value {
    json!({
        "input_tokens": usage.input_tokens.saturating_sub(usage.cached_input_tokens),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_input_tokens,
    })
}

fn start_usage(usage: ScriptedUsage) -> Value {
    let mut fields = input_fields(usage);
    fields["output_tokens"] = usage.output_tokens.min(1).into();
    fields["service_tier"] = "standard".into();
    fields
}

fn final_usage(usage: ScriptedUsage) -> Value {
    let mut fields = input_fields(usage);
    fields["output_tokens"] = usage.output_tokens.into();
    fields
}
