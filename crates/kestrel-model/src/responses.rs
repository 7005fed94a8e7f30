//! OpenAI Responses: `ModelRequest` → request JSON, and semantic SSE events
//! (`response.output_text.delta`, `response.output_item.done`, ...) → `StreamEvent`s.
//! Nothing is stored server-side: `store: false`, the whole input every time, never a
//! `previous_response_id`; reasoning is carried across requests as encrypted content.
//! The stream ends with `response.completed` (or `response.incomplete`).

use std::collections::HashMap;

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

/// The request body for `POST {base_url}/responses`; the input items are written one
/// message at a time.
pub(crate) fn body(request: &ModelRequest) -> RequestBody<'_> {
    let mut body = json!({
        "model": request.model,
        "input": null,
        "stream": true,
        "store": false,
    });
    if !request.system.is_empty() {
        body["instructions"] = json!(request.system);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "strict": false,
                })
            })
            .collect();
        body["tools"] = Value::Array(tools);
        body["tool_choice"] = json!("auto");
        body["parallel_tool_calls"] = json!(true);
    }
    if let Some(effort) = request.reasoning {
        body["reasoning"] = json!({"effort": effort, "summary": "auto"});
        body["include"] = json!(["reasoning.encrypted_content"]);
    }
    if let Some(max) = request.max_output_tokens {
        body["max_output_tokens"] = json!(max);
    }
    if let Some(key) = &request.cache_key {
        body["prompt_cache_key"] = json!(key);
    }
    let input = move || {
        Box::new(request.messages.iter().flat_map(|message| {
            let mut items = Vec::new();
            push_items(message, &mut items);
            items
        })) as Box<dyn Iterator<Item = Value>>
    };
    RequestBody::new(body, "input", Box::new(input))
}

fn push_items(message: &Message, input: &mut Vec<Value>) {
    match message {
        Message::User { content } => {
            let parts: Vec<Value> = content
                .iter()
                .map(|part| match part {
                    ContentPart::Text(text) => json!({"type": "input_text", "text": text}),
                    ContentPart::Image { media_type, data } => json!({
                        "type": "input_image",
                        "detail": "auto",
                        "image_url": format!("data:{media_type};base64,{data}"),
                    }),
                })
                .collect();
            let mut item = json!({"type": "message", "role": "user", "content": null});
            item["content"] = Value::Array(parts);
            input.push(item);
        }
        Message::Assistant { text, reasoning, tool_calls } => {
            if let Some(reasoning) = reasoning {
                input.extend(reasoning_items(reasoning));
            }
            if !text.is_empty() {
                input.push(json!({
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                }));
            }
            for call in tool_calls {
                // No item `id`: with `store: false` the server cannot resolve it.
                input.push(json!({
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                }));
            }
        }
        Message::ToolResult { call_id, content, is_error: _ } => {
            // The Responses API has no error flag; the output says what went wrong.
            input.push(
                json!({"type": "function_call_output", "call_id": call_id, "output": content}),
            );
        }
    }
}

/// The reasoning items to send back: those this wire produced, with their encrypted
/// content. Without it a reasoning item cannot be resolved (`store: false`), so such
/// items, and reasoning from other wires, are left out.
fn reasoning_items(reasoning: &Reasoning) -> Vec<Value> {
    let Some(opaque) = &reasoning.opaque else { return Vec::new() };
    let entries: Vec<&Value> = match opaque {
        Value::Array(entries) => entries.iter().collect(),
        single => vec![single],
    };
    entries
        .into_iter()
        .filter(|entry| entry.get("wire").and_then(Value::as_str) == Some("responses"))
        .filter_map(|entry| entry.get("item"))
        .filter_map(|item| {
            let encrypted = item.get("encrypted_content").and_then(Value::as_str)?;
            let summary = item.get("summary").cloned().unwrap_or_else(|| json!([]));
            Some(json!({"type": "reasoning", "summary": summary, "encrypted_content": encrypted}))
        })
        .collect()
}

/// A function call being assembled.
#[derive(Debug)]
struct PartialCall {
    ordinal: usize,
    id: String,
    name: String,
    done: bool,
}

/// Turns Responses stream events into `StreamEvent`s.
#[derive(Debug, Default)]
pub(crate) struct ResponsesDecoder {
    /// Function calls by `output_index`.
    calls: HashMap<u64, PartialCall>,
    /// Reasoning text so far, by `output_index`.
    reasoning: HashMap<u64, String>,
}

impl ResponsesDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Handles one SSE event, appending what it means to `out`; `Completed` is pushed
    /// on `response.completed` / `response.incomplete`.
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
        let output_index = value.get("output_index").and_then(Value::as_u64).unwrap_or(0);
        let delta = || value.get("delta").and_then(Value::as_str).unwrap_or("").to_owned();
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                let text = delta();
                if !text.is_empty() {
                    out.push(StreamEvent::TextDelta(text));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let text = delta();
                self.reasoning.entry(output_index).or_default().push_str(&text);
                out.push(StreamEvent::ReasoningDelta(text));
            }
            "response.reasoning_summary_part.added" => {
                let summary_index = value.get("summary_index").and_then(Value::as_u64).unwrap_or(0);
                if summary_index > 0 {
                    self.reasoning.entry(output_index).or_default().push_str("\n\n");
                    out.push(StreamEvent::ReasoningDelta("\n\n".to_owned()));
                }
            }
            "response.output_item.added" => {
                if let Some(item) = value.get("item").filter(|i| is_type(i, "function_call")) {
                    self.start_call(output_index, item, out);
                }
            }
            "response.function_call_arguments.delta" => {
                let text = delta();
                if let Some(call) = self.calls.get(&output_index)
                    && !text.is_empty()
                {
                    out.push(StreamEvent::ToolCallArgumentsDelta {
                        index: call.ordinal,
                        delta: text,
                    });
                }
            }
            "response.output_item.done" => {
                if let Some(item) = value.get("item") {
                    self.finish_item(output_index, item, out);
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = value.get("response").unwrap_or(&Value::Null);
                if let Some(usage) = response.get("usage").filter(|u| u.is_object()) {
                    out.push(StreamEvent::Usage(usage_from(usage)));
                }
                out.push(StreamEvent::Completed {
                    finish_reason: self.finish_reason(kind, response),
                });
            }
            "response.failed" => {
                let error =
                    value.get("response").and_then(|r| r.get("error")).filter(|e| e.is_object());
                let failure = match error {
                    Some(error) => ProviderError::from_stream_error(error),
                    None => ProviderError {
                        status: 500,
                        code: None,
                        message: "the response failed".to_owned(),
                    },
                };
                return Err(WireError::Provider(failure));
            }
            "error" => return Err(WireError::Provider(ProviderError::from_stream_error(&value))),
            // Lifecycle and `.done` events repeat what the deltas already said.
            _ => {}
        }
        Ok(())
    }

    fn start_call(&mut self, output_index: u64, item: &Value, out: &mut Vec<StreamEvent>) -> usize {
        if let Some(call) = self.calls.get(&output_index) {
            return call.ordinal;
        }
        let ordinal = self.calls.len();
        let id = str_field(item, "call_id");
        let name = str_field(item, "name");
        out.push(StreamEvent::ToolCallStarted {
            index: ordinal,
            id: id.clone(),
            name: name.clone(),
        });
        self.calls.insert(output_index, PartialCall { ordinal, id, name, done: false });
        ordinal
    }

    fn finish_item(&mut self, output_index: u64, item: &Value, out: &mut Vec<StreamEvent>) {
        if is_type(item, "function_call") {
            let ordinal = self.start_call(output_index, item, out);
            let Some(call) = self.calls.get_mut(&output_index) else { return };
            call.done = true;
            let call = ToolCall {
                id: non_empty(str_field(item, "call_id"), &call.id),
                name: non_empty(str_field(item, "name"), &call.name),
                arguments: str_field(item, "arguments"),
            };
            out.push(StreamEvent::ToolCallCompleted { index: ordinal, call });
        } else if is_type(item, "reasoning") {
            let streamed = self.reasoning.remove(&output_index);
            let text = streamed.unwrap_or_else(|| reasoning_text(item));
            out.push(StreamEvent::ReasoningCompleted(Reasoning {
                text,
                opaque: Some(json!({"wire": "responses", "item": item})),
            }));
        }
    }

    fn finish_reason(&self, kind: &str, response: &Value) -> FinishReason {
        if kind == "response.incomplete" {
            let reason = response.pointer("/incomplete_details/reason").and_then(Value::as_str);
            return match reason {
                Some("content_filter") => FinishReason::ContentFilter,
                _ => FinishReason::Length,
            };
        }
        if self.calls.values().any(|call| call.done) {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        }
    }
}

fn is_type(item: &Value, kind: &str) -> bool {
    item.get("type").and_then(Value::as_str) == Some(kind)
}

fn str_field(item: &Value, key: &str) -> String {
    item.get(key).and_then(Value::as_str).unwrap_or("").to_owned()
}

fn non_empty(value: String, fallback: &str) -> String {
    if value.is_empty() { fallback.to_owned() } else { value }
}

/// The readable text of a finished reasoning item: its summaries, else its content.
fn reasoning_text(item: &Value) -> String {
    let texts = |key: &str| -> Vec<String> {
        item.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|part| part.get("text").and_then(Value::as_str).map(str::to_owned))
            .collect()
    };
    let summary = texts("summary");
    if summary.is_empty() { texts("content").join("\n\n") } else { summary.join("\n\n") }
}

fn usage_from(usage: &Value) -> TokenUsage {
    let number = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    TokenUsage {
        input_tokens: number("/input_tokens"),
        cached_input_tokens: number("/input_tokens_details/cached_tokens"),
        output_tokens: number("/output_tokens"),
        reasoning_tokens: number("/output_tokens_details/reasoning_tokens"),
        cache_write_tokens: 0,
    }
}

#[cfg(test)]
#[path = "responses_tests.rs"]
mod tests;
