//! The three wire APIs a provider may speak. Each submodule renders a scripted reply as
//! that API's SSE stream or JSON body and shapes its errors; this module picks the API
//! from the request path and holds what they share.

mod anthropic;
mod chat;
mod responses;

use serde_json::{Value, json};

use crate::ids::IdGenerator;
use crate::script::{Reply, ScriptedToolCall, ScriptedUsage};
use crate::sse::SseEvent;

/// The model name used when a request names none.
pub(crate) const DEFAULT_MODEL: &str = "scripted-model";

/// Which API a request speaks, by the end of its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireApi {
    /// `POST {base}/chat/completions`
    Chat,
    /// `POST {base}/responses`
    Responses,
    /// `POST {base}/messages`
    Anthropic,
}

impl WireApi {
    /// The API served at `path` (query already stripped), if any.
    pub fn from_path(path: &str) -> Option<WireApi> {
        let path = path.trim_end_matches('/');
        if path.ends_with("/chat/completions") {
            Some(WireApi::Chat)
        } else if path.ends_with("/responses") {
            Some(WireApi::Responses)
        } else if path.ends_with("/messages") {
            Some(WireApi::Anthropic)
        } else {
            None
        }
    }

    /// Rejects requests the real API would reject for missing required parts, with the
    /// message to put in the 400 error body.
    pub fn validate(self, body: &Value, headers: &[(String, String)]) -> Result<(), String> {
        if !body.is_object() {
            return Err("scripted model: the request body must be a JSON object".into());
        }
        if !body.get("model").is_some_and(Value::is_string) {
            return Err(match self {
                WireApi::Chat | WireApi::Responses => "Missing required parameter: 'model'.".into(),
                WireApi::Anthropic => "model: Field required".into(),
            });
        }
        match self {
            WireApi::Chat => chat::validate(body),
            WireApi::Responses => responses::validate(body),
            WireApi::Anthropic => anthropic::validate(body, headers),
        }
    }

    /// The whole reply as this API's event stream, in order.
    pub fn stream(self, reply: &Reply, context: &RenderContext<'_>) -> Vec<SseEvent> {
        let answer = Answer::of(reply);
        match self {
            WireApi::Chat => chat::stream(&answer, context),
            WireApi::Responses => responses::stream(&answer, context),
            WireApi::Anthropic => anthropic::stream(&answer, context),
        }
    }

    /// The whole reply as this API's non-streaming JSON body.
    pub fn complete(self, reply: &Reply, context: &RenderContext<'_>) -> Value {
        let answer = Answer::of(reply);
        match self {
            WireApi::Chat => chat::complete(&answer, context),
            WireApi::Responses => responses::complete(&answer, context),
            WireApi::Anthropic => anthropic::complete(&answer, context),
        }
    }

    /// The API's own error body for this status.
    pub fn error_body(self, status: u16, message: &str) -> Value {
        match self {
            WireApi::Chat | WireApi::Responses => openai_error_body(status, message),
            WireApi::Anthropic => anthropic::error_body(status, message),
        }
    }

    /// Provider-specific headers of every response (request ids).
    pub fn response_headers(self, ids: &IdGenerator) -> Vec<(String, String)> {
        match self {
            WireApi::Chat | WireApi::Responses => {
                vec![("x-request-id".into(), ids.next("req_", 32))]
            }
            WireApi::Anthropic => vec![("request-id".into(), ids.next("req_01", 22))],
        }
    }
}

/// OpenAI's error shape, shared by Chat Completions, Responses and the other endpoints.
pub(crate) fn openai_error_body(status: u16, message: &str) -> Value {
    let (kind, code) = match status {
        401 => ("invalid_request_error", Value::from("invalid_api_key")),
        403 => ("invalid_request_error", Value::from("unsupported_country_region_territory")),
        404 => ("invalid_request_error", Value::Null),
        429 => ("requests", Value::from("rate_limit_exceeded")),
        500..=599 => ("server_error", Value::Null),
        _ => ("invalid_request_error", Value::Null),
    };
    json!({ "error": { "message": message, "type": kind, "param": null, "code": code } })
}

/// The `GET {base}/models` body: OpenAI's list shape, with Anthropic's fields as well so
/// either kind of client can read it.
pub(crate) fn models_body(created: u64) -> Value {
    json!({
        "object": "list",
        "data": [{
            "id": DEFAULT_MODEL,
            "object": "model",
            "created": created,
            "owned_by": "kestrel-testkit",
            "type": "model",
            "display_name": "Scripted Model",
            "created_at": "2025-01-01T00:00:00Z",
        }],
        "has_more": false,
        "first_id": DEFAULT_MODEL,
        "last_id": DEFAULT_MODEL,
    })
}

/// What a rendering needs besides the reply.
pub(crate) struct RenderContext<'a> {
    /// The request body, for the model name and options such as `include_usage`.
    pub request: &'a Value,
    /// Unix seconds, stamped on every object.
    pub created: u64,
    pub ids: &'a IdGenerator,
}

impl RenderContext<'_> {
    /// The model the request asked for, echoed back as providers do.
    fn model(&self) -> &str {
        self.request.get("model").and_then(Value::as_str).unwrap_or(DEFAULT_MODEL)
    }

    /// The scripted id, or a new one with this prefix.
    fn call_id(&self, call: &ScriptedToolCall, prefix: &str) -> String {
        match &call.id {
            Some(id) => id.clone(),
            None => self.ids.next(prefix, 24),
        }
    }
}

/// A reply with empty parts dropped and usage resolved.
struct Answer<'a> {
    text: Option<&'a str>,
    reasoning: Option<&'a str>,
    tool_calls: &'a [ScriptedToolCall],
    usage: ScriptedUsage,
}

impl<'a> Answer<'a> {
    fn of(reply: &'a Reply) -> Answer<'a> {
        Answer {
            text: reply.text.as_deref().filter(|text| !text.is_empty()),
            reasoning: reply.reasoning.as_deref().filter(|text| !text.is_empty()),
            tool_calls: &reply.tool_calls,
            usage: reply.usage.unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_picks_the_api() {
        assert_eq!(WireApi::from_path("/v1/chat/completions"), Some(WireApi::Chat));
        assert_eq!(WireApi::from_path("/v1/responses"), Some(WireApi::Responses));
        assert_eq!(WireApi::from_path("/v1/messages"), Some(WireApi::Anthropic));
        assert_eq!(WireApi::from_path("/v1/models"), None);
    }
}
