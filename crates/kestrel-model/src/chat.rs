//! OpenAI Chat Completions (also OpenRouter, vLLM, Ollama, llama.cpp, DeepSeek...):
//! `ModelRequest` → request JSON, and `chat.completion.chunk` SSE → `StreamEvent`s.
//! The stream ends with `data: [DONE]`; usage arrives in a chunk with empty `choices`
//! just before it (`stream_options.include_usage`).

use serde_json::{Value, json};

use crate::body::RequestBody;
use crate::provider_error::{ProviderError, WireError, clip};
use crate::sse::SseEvent;
use crate::types::{
    ContentPart, FinishReason, Message, ModelRequest, Reasoning, StreamEvent, TokenUsage, ToolCall,
};

/// The body as one tree, for the tests.
#[cfg(test)]
pub(crate) fn request_body(request: &ModelRequest) -> Value {
    body(request).to_value().unwrap_or(Value::Null)
}

/// The request body for `POST {base_url}/chat/completions`; the messages are written
/// one at a time.
pub(crate) fn body(request: &ModelRequest) -> RequestBody<'_> {
    let mut body = json!({
        "model": request.model,
        "messages": null,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    if let Some(effort) = request.reasoning {
        body["reasoning_effort"] = json!(effort);
    }
    if let Some(max) = request.max_output_tokens {
        body["max_completion_tokens"] = json!(max);
    }
    if let Some(key) = &request.cache_key {
        body["prompt_cache_key"] = json!(key);
    }
    let messages = move || {
        let system = (!request.system.is_empty())
            .then(|| json!({"role": "system", "content": request.system}));
        Box::new(system.into_iter().chain(request.messages.iter().map(message_json)))
            as Box<dyn Iterator<Item = Value>>
    };
    RequestBody::new(body, "messages", Box::new(messages))
}

fn message_json(message: &Message) -> Value {
    match message {
        Message::User { content } => {
            let mut value = json!({"role": "user", "content": null});
            value["content"] = user_content(content);
            value
        }
        Message::Assistant { text, reasoning, tool_calls } => {
            let mut value = json!({"role": "assistant"});
            value["content"] =
                if text.is_empty() && !tool_calls.is_empty() { Value::Null } else { json!(text) };
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })
                    })
                    .collect();
                value["tool_calls"] = Value::Array(calls);
            }
            // DeepSeek-style thinking models want their `reasoning_content` back on tool
            // turns; we return it only to servers that sent it under that name.
            if let Some(reasoning) = reasoning
                && !reasoning.text.is_empty()
                && came_as_reasoning_content(reasoning.opaque.as_ref())
            {
                value["reasoning_content"] = json!(reasoning.text);
            }
            value
        }
        Message::ToolResult { call_id, content, is_error: _ } => {
            // Chat has no error flag for tool results; the content says what went wrong.
            json!({"role": "tool", "tool_call_id": call_id, "content": content})
        }
    }
}

/// A plain string when the message is text only (every server accepts that), parts
/// when it carries images.
fn user_content(content: &[ContentPart]) -> Value {
    let has_image = content.iter().any(|part| matches!(part, ContentPart::Image { .. }));
    if !has_image {
        let texts: Vec<&str> = content
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text(text) => Some(text.as_str()),
                ContentPart::Image { .. } => None,
            })
            .collect();
        return json!(texts.join("\n\n"));
    }
    let parts: Vec<Value> = content
        .iter()
        .map(|part| match part {
            ContentPart::Text(text) => json!({"type": "text", "text": text}),
            ContentPart::Image { media_type, data } => json!({
                "type": "image_url",
                "image_url": {"url": format!("data:{media_type};base64,{data}")},
            }),
        })
        .collect();
    Value::Array(parts)
}

/// Whether the opaque value (or any part of an array of them) is our marker.
fn came_as_reasoning_content(opaque: Option<&Value>) -> bool {
    let marker = reasoning_content_marker();
    match opaque {
        Some(Value::Array(parts)) => parts.contains(&marker),
        Some(single) => *single == marker,
        None => false,
    }
}

/// Marks reasoning that arrived as `reasoning_content`, so it can be sent back so.
fn reasoning_content_marker() -> Value {
    json!({"wire": "chat", "field": "reasoning_content"})
}

/// A tool call being assembled from deltas.
#[derive(Debug, Default)]
struct PartialCall {
    provider_index: u64,
    id: Option<String>,
    name: String,
    arguments: String,
    started: bool,
}

/// Turns chunk events into `StreamEvent`s.
#[derive(Debug, Default)]
pub(crate) struct ChatDecoder {
    reasoning: String,
    reasoning_field: Option<&'static str>,
    reasoning_open: bool,
    calls: Vec<PartialCall>,
    calls_completed: bool,
    finish_reason: Option<FinishReason>,
}

impl ChatDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The body ended without `[DONE]`: complete if a finish reason came (the
    /// response is whole), otherwise leave it incomplete (a cut stream).
    pub fn on_end(&mut self, out: &mut Vec<StreamEvent>) {
        if self.finish_reason.is_some() {
            self.complete(out);
        }
    }

    fn complete(&mut self, out: &mut Vec<StreamEvent>) {
        self.close_reasoning(out);
        self.complete_calls(out);
        let finish_reason = match self.finish_reason {
            Some(FinishReason::Stop) | None if !self.calls.is_empty() => FinishReason::ToolCalls,
            Some(reason) => reason,
            None => FinishReason::Stop,
        };
        out.push(StreamEvent::Completed { finish_reason });
    }

    /// Handles one SSE event, appending what it means to `out`. `Completed` is pushed
    /// on `[DONE]`.
    pub fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), WireError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.complete(out);
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            WireError::Malformed(format!("invalid JSON in a chunk ({e}): {}", clip(data)))
        })?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(WireError::Provider(ProviderError::from_stream_error(error)));
        }
        for choice in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
            // We never ask for n > 1.
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.get("delta") {
                self.on_delta(delta, out);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(finish_reason(reason));
                self.close_reasoning(out);
                self.complete_calls(out);
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            out.push(StreamEvent::Usage(usage_from(usage)));
        }
        Ok(())
    }

    fn on_delta(&mut self, delta: &Value, out: &mut Vec<StreamEvent>) {
        for field in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta.get(field).and_then(Value::as_str).filter(|t| !t.is_empty()) {
                self.reasoning.push_str(text);
                self.reasoning_field.get_or_insert(field);
                self.reasoning_open = true;
                out.push(StreamEvent::ReasoningDelta(text.to_owned()));
                break;
            }
        }
        if let Some(text) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            self.close_reasoning(out);
            out.push(StreamEvent::TextDelta(text.to_owned()));
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            self.close_reasoning(out);
            for (position, call) in calls.iter().enumerate() {
                self.on_tool_call_delta(position, call, out);
            }
        }
    }

    fn on_tool_call_delta(&mut self, position: usize, delta: &Value, out: &mut Vec<StreamEvent>) {
        let provider_index = delta.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
        let ordinal = match self.calls.iter().position(|c| c.provider_index == provider_index) {
            Some(ordinal) => ordinal,
            None => {
                self.calls.push(PartialCall { provider_index, ..PartialCall::default() });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[ordinal];
        if let Some(id) = delta.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()) {
            call.id.get_or_insert_with(|| id.to_owned());
        }
        let function = delta.get("function");
        if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str)
            && call.name.is_empty()
        {
            call.name = name.to_owned();
        }
        let arguments =
            function.and_then(|f| f.get("arguments")).and_then(Value::as_str).unwrap_or("");
        call.arguments.push_str(arguments);
        if !call.started && !call.name.is_empty() {
            call.started = true;
            let id = call.id.get_or_insert_with(|| format!("call_{ordinal}")).clone();
            out.push(StreamEvent::ToolCallStarted { index: ordinal, id, name: call.name.clone() });
            if !call.arguments.is_empty() {
                out.push(StreamEvent::ToolCallArgumentsDelta {
                    index: ordinal,
                    delta: call.arguments.clone(),
                });
            }
        } else if call.started && !arguments.is_empty() {
            out.push(StreamEvent::ToolCallArgumentsDelta {
                index: ordinal,
                delta: arguments.to_owned(),
            });
        }
    }

    fn close_reasoning(&mut self, out: &mut Vec<StreamEvent>) {
        if !std::mem::take(&mut self.reasoning_open) {
            return;
        }
        let opaque =
            (self.reasoning_field == Some("reasoning_content")).then(reasoning_content_marker);
        out.push(StreamEvent::ReasoningCompleted(Reasoning {
            text: self.reasoning.clone(),
            opaque,
        }));
    }

    fn complete_calls(&mut self, out: &mut Vec<StreamEvent>) {
        if std::mem::replace(&mut self.calls_completed, true) {
            return;
        }
        for (index, call) in self.calls.iter().enumerate().filter(|(_, c)| c.started) {
            out.push(StreamEvent::ToolCallCompleted {
                index,
                call: ToolCall {
                    id: call.id.clone().unwrap_or_default(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                },
            });
        }
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Stop,
    }
}

fn usage_from(usage: &Value) -> TokenUsage {
    let number = |path: &[&str]| {
        path.iter().try_fold(usage, |value, key| value.get(key)).and_then(Value::as_u64)
    };
    TokenUsage {
        input_tokens: number(&["prompt_tokens"]).unwrap_or(0),
        // DeepSeek reports cache hits under its own name.
        cached_input_tokens: number(&["prompt_tokens_details", "cached_tokens"])
            .or_else(|| number(&["prompt_cache_hit_tokens"]))
            .unwrap_or(0),
        output_tokens: number(&["completion_tokens"]).unwrap_or(0),
        reasoning_tokens: number(&["completion_tokens_details", "reasoning_tokens"]).unwrap_or(0),
        cache_write_tokens: number(&["prompt_tokens_details", "cache_write_tokens"]).unwrap_or(0),
    }
}

#[cfg(test)]
#[path = "chat_tests.rs"]
mod tests;
