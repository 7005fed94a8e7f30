//! Anthropic Messages: `ModelRequest` → request JSON, and `message_start` /
//! `content_block_*` / `message_delta` / `message_stop` SSE → `StreamEvent`s.
//! Prompt caching is always on: `cache_control` breakpoints on the last system block,
//! the last tool and the last block of the newest user turn (3 of the 4 allowed).
//! Thinking blocks go back verbatim with their `signature`, as the API requires.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::body::RequestBody;
use crate::provider_error::{ProviderError, WireError, clip};
use crate::sse::SseEvent;
use crate::types::{
    ContentPart, FinishReason, Message, ModelRequest, Reasoning, ReasoningEffort, StreamEvent,
    TokenUsage, ToolCall,
};

/// `max_tokens` is required; this is sent when the request sets none.
const DEFAULT_MAX_TOKENS: u32 = 8192;
/// With thinking on, the budget comes out of `max_tokens`, so the default is larger.
const DEFAULT_MAX_TOKENS_THINKING: u32 = 32000;
/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

/// The body as one tree, for the tests.
#[cfg(test)]
pub(crate) fn request_body(request: &ModelRequest) -> Value {
    body(request).to_value().unwrap_or(Value::Null)
}

/// The request body for `POST {base_url}/messages`. Turns merge messages and the newest
/// user turn carries a cache breakpoint, so the message list is built whole (only when
/// the body is written).
pub(crate) fn body(request: &ModelRequest) -> RequestBody<'_> {
    let thinking_wanted = request.reasoning.is_some();
    let max_tokens = request.max_output_tokens.unwrap_or(if thinking_wanted {
        DEFAULT_MAX_TOKENS_THINKING
    } else {
        DEFAULT_MAX_TOKENS
    });
    let mut body = json!({
        "model": request.model,
        "max_tokens": max_tokens,
        "messages": null,
        "stream": true,
    });
    if !request.system.is_empty() {
        body["system"] = json!([{
            "type": "text",
            "text": request.system,
            "cache_control": {"type": "ephemeral"},
        }]);
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = json!({"type": "ephemeral"});
        }
        body["tools"] = Value::Array(tools);
    }
    if let Some(budget) = request.reasoning.and_then(|effort| thinking_budget(effort, max_tokens)) {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    }
    let messages = move || {
        Box::new(messages_json(&request.messages).into_iter()) as Box<dyn Iterator<Item = Value>>
    };
    RequestBody::new(body, "messages", Box::new(messages))
}

/// The thinking budget for an effort, kept below `max_tokens` with room for an answer;
/// `None` when `max_tokens` is too small to think at all.
fn thinking_budget(effort: ReasoningEffort, max_tokens: u32) -> Option<u32> {
    let wanted = match effort {
        ReasoningEffort::Minimal => MIN_THINKING_BUDGET,
        ReasoningEffort::Low => 4096,
        ReasoningEffort::Medium => 10_000,
        ReasoningEffort::High => 24_000,
    };
    let budget = wanted.min(max_tokens.saturating_sub(MIN_THINKING_BUDGET));
    (budget >= MIN_THINKING_BUDGET).then_some(budget)
}

/// Messages as Anthropic wants them: strictly alternating roles, tool results as
/// `tool_result` blocks of a user turn, no empty content.
fn messages_json(messages: &[Message]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::User { content } => ("user", content.iter().filter_map(user_block).collect()),
            Message::ToolResult { call_id, content, is_error } => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": content,
                    "is_error": is_error,
                })],
            ),
            Message::Assistant { text, reasoning, tool_calls } => {
                let mut blocks = reasoning.as_ref().map(thinking_blocks).unwrap_or_default();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": tool_input(&call.arguments),
                    }));
                }
                ("assistant", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    if let Some((_, blocks)) = turns.iter_mut().rev().find(|(role, _)| *role == "user")
        && let Some(last) = blocks.last_mut()
    {
        last["cache_control"] = json!({"type": "ephemeral"});
    }
    turns
        .into_iter()
        .map(|(role, content)| {
            let mut turn = json!({"role": role, "content": null});
            turn["content"] = Value::Array(content);
            turn
        })
        .collect()
}

fn user_block(part: &ContentPart) -> Option<Value> {
    match part {
        ContentPart::Text(text) if text.is_empty() => None,
        ContentPart::Text(text) => Some(json!({"type": "text", "text": text})),
        ContentPart::Image { media_type, data } => Some(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        })),
    }
}

/// `tool_use.input` must be an object; arguments the model got wrong become `{}`
/// (the tool result already told it what was wrong).
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({}),
    }
}

/// The thinking blocks this wire produced, verbatim; reasoning from other wires cannot
/// be signed, so it is left out.
fn thinking_blocks(reasoning: &Reasoning) -> Vec<Value> {
    let Some(opaque) = &reasoning.opaque else { return Vec::new() };
    let entries: Vec<&Value> = match opaque {
        Value::Array(entries) => entries.iter().collect(),
        single => vec![single],
    };
    entries
        .into_iter()
        .filter(|entry| entry.get("wire").and_then(Value::as_str) == Some("anthropic"))
        .filter_map(|entry| entry.get("block").cloned())
        .collect()
}

/// A content block being streamed.
#[derive(Debug)]
enum Block {
    Text,
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    ToolUse {
        ordinal: usize,
        id: String,
        name: String,
        json: String,
    },
    /// Server tools and block kinds we do not use.
    Other,
}

/// Turns Messages stream events into `StreamEvent`s.
#[derive(Debug, Default)]
pub(crate) struct AnthropicDecoder {
    blocks: HashMap<u64, Block>,
    tool_calls: usize,
    stop_reason: Option<String>,
    input_tokens: u64,
    cache_read_tokens: u64,
    cache_creation_tokens: u64,
    output_tokens: u64,
}

impl AnthropicDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Handles one SSE event, appending what it means to `out`; `Completed` is pushed
    /// on `message_stop`.
    pub fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), WireError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let value: Value = serde_json::from_str(data).map_err(|e| {
            WireError::Malformed(format!("invalid JSON in `{}` ({e}): {}", event.event, clip(data)))
        })?;
        let kind = value.get("type").and_then(Value::as_str).unwrap_or(event.event.as_str());
        let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(usage) = value.pointer("/message/usage") {
                    self.read_usage(usage);
                }
            }
            "content_block_start" => {
                let block = value.get("content_block").unwrap_or(&Value::Null);
                self.start_block(index, block, out);
            }
            "content_block_delta" => {
                let delta = value.get("delta").unwrap_or(&Value::Null);
                self.on_delta(index, delta, out);
            }
            "content_block_stop" => {
                if let Some(block) = self.blocks.remove(&index) {
                    finish_block(block, out);
                }
            }
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = value.get("usage") {
                    self.read_usage(usage);
                }
            }
            "message_stop" => {
                out.push(StreamEvent::Usage(self.usage()));
                out.push(StreamEvent::Completed { finish_reason: self.finish_reason() });
            }
            "error" => {
                let error = value.get("error").unwrap_or(&value);
                return Err(WireError::Provider(ProviderError::from_stream_error(error)));
            }
            // `ping`, and event kinds added later (the API promises to add some).
            _ => {}
        }
        Ok(())
    }

    fn start_block(&mut self, index: u64, block: &Value, out: &mut Vec<StreamEvent>) {
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
        let started = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let initial = text("text");
                if !initial.is_empty() {
                    out.push(StreamEvent::TextDelta(initial));
                }
                Block::Text
            }
            Some("thinking") => {
                let thinking = text("thinking");
                if !thinking.is_empty() {
                    out.push(StreamEvent::ReasoningDelta(thinking.clone()));
                }
                Block::Thinking { thinking, signature: text("signature") }
            }
            Some("redacted_thinking") => Block::RedactedThinking { data: text("data") },
            Some("tool_use") => {
                let ordinal = self.tool_calls;
                self.tool_calls += 1;
                let (id, name) = (text("id"), text("name"));
                out.push(StreamEvent::ToolCallStarted {
                    index: ordinal,
                    id: id.clone(),
                    name: name.clone(),
                });
                // The input arrives as `input_json_delta`s; the start carries `{}`.
                Block::ToolUse { ordinal, id, name, json: String::new() }
            }
            _ => Block::Other,
        };
        self.blocks.insert(index, started);
    }

    fn on_delta(&mut self, index: u64, delta: &Value, out: &mut Vec<StreamEvent>) {
        let Some(block) = self.blocks.get_mut(&index) else { return };
        let field = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or("");
        let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
        match block {
            Block::Text => {
                if kind == "text_delta" && !field("text").is_empty() {
                    out.push(StreamEvent::TextDelta(field("text").to_owned()));
                }
            }
            Block::Thinking { thinking, signature } => match kind {
                "thinking_delta" => {
                    thinking.push_str(field("thinking"));
                    out.push(StreamEvent::ReasoningDelta(field("thinking").to_owned()));
                }
                "signature_delta" => signature.push_str(field("signature")),
                _ => {}
            },
            Block::ToolUse { ordinal, json, .. } => {
                let partial = field("partial_json");
                if kind == "input_json_delta" && !partial.is_empty() {
                    json.push_str(partial);
                    out.push(StreamEvent::ToolCallArgumentsDelta {
                        index: *ordinal,
                        delta: partial.to_owned(),
                    });
                }
            }
            Block::RedactedThinking { .. } | Block::Other => {}
        }
    }

    fn read_usage(&mut self, usage: &Value) {
        let number = |key: &str| usage.get(key).and_then(Value::as_u64);
        // message_delta repeats some counts (cumulative); absent or null ones stay.
        if let Some(n) = number("input_tokens") {
            self.input_tokens = n;
        }
        if let Some(n) = number("cache_read_input_tokens") {
            self.cache_read_tokens = n;
        }
        if let Some(n) = number("cache_creation_input_tokens") {
            self.cache_creation_tokens = n;
        }
        if let Some(n) = number("output_tokens") {
            self.output_tokens = n;
        }
    }

    fn usage(&self) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input_tokens + self.cache_read_tokens + self.cache_creation_tokens,
            cached_input_tokens: self.cache_read_tokens,
            output_tokens: self.output_tokens,
            reasoning_tokens: 0,
            cache_write_tokens: self.cache_creation_tokens,
        }
    }

    fn finish_reason(&self) -> FinishReason {
        match self.stop_reason.as_deref() {
            Some("tool_use") => FinishReason::ToolCalls,
            Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
            Some("refusal") => FinishReason::ContentFilter,
            _ if self.tool_calls > 0 => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        }
    }
}

fn finish_block(block: Block, out: &mut Vec<StreamEvent>) {
    match block {
        Block::Text | Block::Other => {}
        Block::Thinking { thinking, signature } => {
            let block = json!({"type": "thinking", "thinking": thinking, "signature": signature});
            out.push(StreamEvent::ReasoningCompleted(Reasoning {
                text: thinking,
                opaque: Some(json!({"wire": "anthropic", "block": block})),
            }));
        }
        Block::RedactedThinking { data } => {
            let block = json!({"type": "redacted_thinking", "data": data});
            out.push(StreamEvent::ReasoningCompleted(Reasoning {
                text: String::new(),
                opaque: Some(json!({"wire": "anthropic", "block": block})),
            }));
        }
        Block::ToolUse { ordinal, id, name, json } => {
            let arguments = if json.trim().is_empty() { "{}".to_owned() } else { json };
            out.push(StreamEvent::ToolCallCompleted {
                index: ordinal,
                call: ToolCall { id, name, arguments },
            });
        }
    }
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;
