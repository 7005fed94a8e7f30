//! OpenAI Responses: typed events (`event:` and `data:` lines, each with a
//! `sequence_number`) from `response.created` to `response.completed`. Output items come
//! in order reasoning, message, function calls, each opened by
//! `response.output_item.added` and closed by `response.output_item.done`.

use serde_json::{Value, json};

use super::{Answer, RenderContext};
use crate::script::ScriptedUsage;
use crate::sse::{SseEvent, argument_deltas, text_deltas};

pub(super) fn validate(body: &Value) -> Result<(), String> {
    match body.get("input") {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(items)) => {
            check_images(items)?;
            check_tool_pairing(items)
        }
        Some(_) => Err("Invalid type for 'input': expected a string or an array.".into()),
        None => Err("Missing required parameter: 'input'.".into()),
    }
}

/// As the real API: an `input_image` part (in a message, or in a `function_call_output`
/// list) has `detail` (`low`, `high`, `auto` or `original`) and an `image_url` (http(s)
/// or a base64 data URL) or a `file_id`.
fn check_images(items: &[Value]) -> Result<(), String> {
    for (index, item) in items.iter().enumerate() {
        let parts = item.get("content").or_else(|| item.get("output")).and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            if part.get("type").and_then(Value::as_str) != Some("input_image") {
                continue;
            }
            let detail = part.get("detail").and_then(Value::as_str);
            if !matches!(detail, Some("low" | "high" | "auto" | "original")) {
                return Err(format!(
                    "Invalid value for 'input[{index}].content.detail': expected one of 'low', 'high', 'auto' or 'original'."
                ));
            }
            let url = part.get("image_url").and_then(Value::as_str);
            let valid = match url {
                Some(url) => {
                    url.starts_with("http")
                        || url.starts_with("data:image/") && url.contains(";base64,")
                }
                None => part.get("file_id").is_some_and(Value::is_string),
            };
            if !valid {
                return Err(format!(
                    "Invalid 'input[{index}].content': an input_image needs an image_url (a URL or a base64 data URL) or a file_id."
                ));
            }
        }
    }
    Ok(())
}

/// As the real API (with `store: false`, nothing is looked up server-side): every
/// `function_call` needs a `function_call_output` with its `call_id`, and the reverse.
fn check_tool_pairing(items: &[Value]) -> Result<(), String> {
    let ids = |kind: &str| -> Vec<&str> {
        items
            .iter()
            .filter(|item| item.get("type").and_then(Value::as_str) == Some(kind))
            .filter_map(|item| item.get("call_id").and_then(Value::as_str))
            .collect()
    };
    let (calls, outputs) = (ids("function_call"), ids("function_call_output"));
    if let Some(call) = calls.iter().find(|call| !outputs.contains(call)) {
        return Err(format!("No tool output found for function call {call}."));
    }
    if let Some(output) = outputs.iter().find(|output| !calls.contains(output)) {
        return Err(format!("No tool call found for function call output with call_id {output}."));
    }
    Ok(())
}

/// Numbers events as they are added.
struct Events {
    list: Vec<SseEvent>,
}

impl Events {
    fn push(&mut self, mut event: Value) {
        event["sequence_number"] = self.list.len().into();
        self.list.push(SseEvent::typed(&event));
    }
}

pub(super) fn stream(answer: &Answer<'_>, context: &RenderContext<'_>) -> Vec<SseEvent> {
    let plan = Plan::new(answer, context);
    let mut events = Events { list: Vec::new() };
    let in_progress = response_object(context, &plan.id, "in_progress", Vec::new(), Value::Null);
    events.push(json!({ "type": "response.created", "response": in_progress }));
    events.push(json!({ "type": "response.in_progress", "response": in_progress }));

    for (output_index, item) in plan.items.iter().enumerate() {
        events.push(json!({
            "type": "response.output_item.added",
            "output_index": output_index,
            "item": item.added(),
        }));
        match item {
            Item::Reasoning { id, text, .. } => {
                let position =
                    json!({ "item_id": id, "output_index": output_index, "summary_index": 0 });
                let at =
                    |kind: &str, extra: Value| merge(json!({ "type": kind }), &position, extra);
                events.push(at(
                    "response.reasoning_summary_part.added",
                    json!({ "part": { "type": "summary_text", "text": "" } }),
                ));
                for piece in text_deltas(text) {
                    events.push(at(
                        "response.reasoning_summary_text.delta",
                        json!({ "delta": piece }),
                    ));
                }
                events.push(at("response.reasoning_summary_text.done", json!({ "text": text })));
                events.push(at(
                    "response.reasoning_summary_part.done",
                    json!({ "part": { "type": "summary_text", "text": text } }),
                ));
            }
            Item::Message { id, text } => {
                let position =
                    json!({ "item_id": id, "output_index": output_index, "content_index": 0 });
                let at =
                    |kind: &str, extra: Value| merge(json!({ "type": kind }), &position, extra);
                events.push(at("response.content_part.added", json!({ "part": output_text("") })));
                for piece in text_deltas(text) {
                    events.push(at(
                        "response.output_text.delta",
                        json!({ "delta": piece, "logprobs": [] }),
                    ));
                }
                events
                    .push(at("response.output_text.done", json!({ "text": text, "logprobs": [] })));
                events.push(at("response.content_part.done", json!({ "part": output_text(text) })));
            }
            Item::FunctionCall { id, arguments, .. } => {
                let position = json!({ "item_id": id, "output_index": output_index });
                let at =
                    |kind: &str, extra: Value| merge(json!({ "type": kind }), &position, extra);
                for piece in argument_deltas(arguments) {
                    events.push(at(
                        "response.function_call_arguments.delta",
                        json!({ "delta": piece }),
                    ));
                }
                events.push(at(
                    "response.function_call_arguments.done",
                    json!({ "arguments": arguments }),
                ));
            }
        }
        events.push(json!({
            "type": "response.output_item.done",
            "output_index": output_index,
            "item": item.done(),
        }));
    }

    let completed = plan.completed(context);
    events.push(json!({ "type": "response.completed", "response": completed }));
    events.list
}

pub(super) fn complete(answer: &Answer<'_>, context: &RenderContext<'_>) -> Value {
    Plan::new(answer, context).completed(context)
}

/// The reply as output items with their ids fixed, so every event agrees on them.
struct Plan {
    id: String,
    items: Vec<Item>,
    usage: ScriptedUsage,
}

enum Item {
    Reasoning { id: String, text: String, encrypted_content: Option<String> },
    Message { id: String, text: String },
    FunctionCall { id: String, call_id: String, name: String, arguments: String },
}

impl Plan {
    fn new(answer: &Answer<'_>, context: &RenderContext<'_>) -> Plan {
        let ids = context.ids;
        let wants_encrypted =
            context.request.get("include").and_then(Value::as_array).is_some_and(|include| {
                include.iter().any(|entry| entry == "reasoning.encrypted_content")
            });
        let mut items = Vec::new();
        if let Some(text) = answer.reasoning {
            items.push(Item::Reasoning {
                id: ids.next("rs_", 48),
                text: text.to_owned(),
                encrypted_content: wants_encrypted.then(|| ids.next("gAAAAAB", 120)),
            });
        }
        if let Some(text) = answer.text {
            items.push(Item::Message { id: ids.next("msg_", 48), text: text.to_owned() });
        }
        for call in answer.tool_calls {
            items.push(Item::FunctionCall {
                id: ids.next("fc_", 48),
                call_id: context.call_id(call, "call_"),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
        Plan { id: ids.next("resp_", 48), items, usage: answer.usage }
    }

    fn completed(&self, context: &RenderContext<'_>) -> Value {
        let output = self.items.iter().map(Item::done).collect();
        response_object(context, &self.id, "completed", output, usage(self.usage))
    }
}

impl Item {
    /// The item as `response.output_item.added` shows it: nothing produced yet.
    fn added(&self) -> Value {
        match self {
            Item::Reasoning { id, .. } => json!({ "id": id, "type": "reasoning", "summary": [] }),
            Item::Message { id, .. } => json!({
                "id": id, "type": "message", "status": "in_progress", "content": [], "role": "assistant",
            }),
            Item::FunctionCall { id, call_id, name, .. } => json!({
                "id": id, "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": call_id, "name": name,
            }),
        }
    }

    /// The finished item, as in `response.output_item.done` and the final `output`.
    fn done(&self) -> Value {
        match self {
            Item::Reasoning { id, text, encrypted_content } => {
                let mut item = json!({
                    "id": id, "type": "reasoning",
                    "summary": [{ "type": "summary_text", "text": text }],
                });
                if let Some(encrypted) = encrypted_content {
                    item["encrypted_content"] = encrypted.as_str().into();
                }
                item
            }
            Item::Message { id, text } => json!({
                "id": id, "type": "message", "status": "completed",
                "content": [output_text(text)], "role": "assistant",
            }),
            Item::FunctionCall { id, call_id, name, arguments } => json!({
                "id": id, "type": "function_call", "status": "completed",
                "arguments": arguments, "call_id": call_id, "name": name,
            }),
        }
    }
}

fn output_text(text: &str) -> Value {
    json!({ "type": "output_text", "annotations": [], "logprobs": [], "text": text })
}

/// `base` with the fields of `position` and `extra` added.
fn merge(mut base: Value, position: &Value, extra: Value) -> Value {
    for source in [position, &extra] {
        if let (Some(target), Some(fields)) = (base.as_object_mut(), source.as_object()) {
            for (key, value) in fields {
                target.insert(key.clone(), value.clone());
            }
        }
    }
    base
}

fn response_object(
    context: &RenderContext<'_>,
    id: &str,
    status: &str,
    output: Vec<Value>,
    usage: Value,
) -> Value {
    let request = context.request;
    let echo = |key: &str, default: Value| request.get(key).cloned().unwrap_or(default);
    json!({
        "id": id,
        "object": "response",
        "created_at": context.created,
        "status": status,
        "background": false,
        "error": null,
        "incomplete_details": null,
        "instructions": echo("instructions", Value::Null),
        "max_output_tokens": echo("max_output_tokens", Value::Null),
        "model": context.model(),
        "output": output,
        "parallel_tool_calls": echo("parallel_tool_calls", true.into()),
        "previous_response_id": null,
        "reasoning": {
            "effort": request.pointer("/reasoning/effort").cloned().unwrap_or(Value::Null),
            "summary": request.pointer("/reasoning/summary").cloned().unwrap_or(Value::Null),
        },
        "store": echo("store", true.into()),
        "temperature": echo("temperature", 1.0.into()),
        "text": { "format": { "type": "text" } },
        "tool_choice": echo("tool_choice", "auto".into()),
        "tools": echo("tools", json!([])),
        "top_p": echo("top_p", 1.0.into()),
        "truncation": "disabled",
        "usage": usage,
        "user": null,
        "metadata": {},
    })
}

fn usage(usage: ScriptedUsage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "input_tokens_details": { "cached_tokens": usage.cached_input_tokens },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": { "reasoning_tokens": usage.reasoning_tokens },
        "total_tokens": usage.input_tokens + usage.output_tokens,
    })
}
