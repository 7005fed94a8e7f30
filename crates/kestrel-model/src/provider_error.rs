//! Errors as providers report them (an HTTP status with a JSON body, or an error event
//! inside a stream), and their mapping to `ModelError`. One place decides what is a
//! context overflow, an auth failure, a rate limit or a server fault.

use crate::types::ModelError;

/// A failure the provider reported, before it is turned into a `ModelError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProviderError {
    /// The HTTP status, or the one an in-stream error stands for.
    pub status: u16,
    /// OpenAI `error.code`/`error.type` or Anthropic `error.type`, when given.
    pub code: Option<String>,
    pub message: String,
}

/// What a decoder can fail with while reading a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WireError {
    /// An event that is not the JSON it should be.
    Malformed(String),
    /// The provider sent an error event instead of the rest of the response.
    Provider(ProviderError),
}

impl ProviderError {
    /// Reads an error response body. OpenAI (`{"error": {"message", "code", "type"}}`),
    /// Anthropic (`{"type": "error", "error": {"type", "message"}}`) and the bare-string
    /// or plain-text bodies of local servers are all understood.
    pub fn from_body(status: u16, body: &str) -> Self {
        let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
        let error = parsed.as_ref().and_then(|v| v.get("error"));
        let message = error
            .and_then(|e| e.get("message").and_then(|m| m.as_str()).or_else(|| e.as_str()))
            .or_else(|| parsed.as_ref().and_then(|v| v.get("message")).and_then(|m| m.as_str()))
            .map(str::to_owned)
            .unwrap_or_else(|| summarize_body(body));
        let code = error.and_then(code_of);
        Self { status, code, message }
    }

    /// An error object found inside a stream (`{"code"?, "type"?, "message"}`), with the
    /// status its code stands for.
    pub fn from_stream_error(error: &serde_json::Value) -> Self {
        let message = error
            .get("message")
            .and_then(|m| m.as_str())
            .unwrap_or("the provider reported an error without a message")
            .to_owned();
        let numeric =
            error.get("code").and_then(|c| c.as_u64()).and_then(|c| u16::try_from(c).ok());
        let code = code_of(error);
        let status = match numeric {
            Some(status) if (400..600).contains(&status) => status,
            _ => code.as_deref().map_or(500, status_for_code),
        };
        Self { status, code, message }
    }

    /// Whether the conversation did not fit the model's context window.
    pub fn is_context_overflow(&self) -> bool {
        if self.code.as_deref() == Some("context_length_exceeded") {
            return true;
        }
        let message = self.message.to_ascii_lowercase();
        [
            "prompt is too long",
            "context_length_exceeded",
            "maximum context length",
            "context length exceeded",
            "context window",
            "input is too long",
            // Local servers: llama.cpp, LM Studio.
            "exceeds the available context size",
            "context the overflows",
            "context length of only",
        ]
        .iter()
        .any(|needle| message.contains(needle))
    }

    /// Whether trying the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        !self.is_context_overflow() && is_retryable_status(self.status)
    }

    /// The user-facing error once no retry is left (or none is allowed).
    pub fn into_model_error(
        self,
        url: &str,
        attempts: u32,
        api_key_env: Option<&str>,
    ) -> ModelError {
        let url = url.to_owned();
        if self.is_context_overflow() {
            return ModelError::ContextWindowExceeded { message: self.message };
        }
        match self.status {
            401 | 403 => ModelError::Auth {
                url,
                status: self.status,
                message: self.message,
                api_key_env: api_key_env.map(str::to_owned),
            },
            429 => ModelError::RateLimited { url, attempts, message: self.message },
            500..=599 => {
                ModelError::Server { url, status: self.status, attempts, message: self.message }
            }
            _ => ModelError::BadRequest { url, status: self.status, message: self.message },
        }
    }
}

/// 408, 409, 429 and 5xx are worth another try; other statuses are the request's fault.
pub(crate) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

fn code_of(error: &serde_json::Value) -> Option<String> {
    let code = error.get("code").and_then(|c| match c {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    });
    code.or_else(|| error.get("type").and_then(|t| t.as_str()).map(str::to_owned))
}

/// The status an in-stream error code stands for (Anthropic error types, OpenAI codes).
fn status_for_code(code: &str) -> u16 {
    match code {
        "invalid_request_error" | "invalid_prompt" | "context_length_exceeded" => 400,
        "authentication_error" | "invalid_api_key" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" | "rate_limit_exceeded" | "insufficient_quota" => 429,
        "overloaded_error" => 529,
        "api_error" | "server_error" | "internal_error" => 500,
        // OpenAI's other codes name problems with the input (images, files).
        _ if code.starts_with("invalid_") || code.contains("image") => 400,
        _ => 500,
    }
}

/// The start of a long payload, for error messages.
pub(crate) fn clip(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A short, single-line rendering of a body that is not a JSON error.
fn summarize_body(body: &str) -> String {
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return "(empty response body)".to_owned();
    }
    let line: String = trimmed.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_openai_error_bodies() {
        let body = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let error = ProviderError::from_body(400, body);
        assert_eq!(error.code.as_deref(), Some("context_length_exceeded"));
        assert!(error.is_context_overflow());
        assert!(matches!(
            error.into_model_error("u", 1, None),
            ModelError::ContextWindowExceeded { message } if message.contains("128000")
        ));
    }

    #[test]
    fn local_servers_context_overflows_are_recognised() {
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#;
        let lm_studio = r#"{"error":"Trying to keep the first 9000 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough."}"#;
        for body in [llama, lm_studio] {
            let error = ProviderError::from_body(400, body);
            assert!(error.is_context_overflow(), "{body}");
        }
    }

    #[test]
    fn reads_anthropic_error_bodies() {
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        let error = ProviderError::from_body(400, body);
        assert!(error.is_context_overflow());
        assert!(!error.is_retryable());

        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#;
        let error =
            ProviderError::from_body(400, body).into_model_error("http://x/v1/messages", 1, None);
        assert!(
            matches!(&error, ModelError::BadRequest { status: 400, message, .. } if message == "max_tokens: Field required")
        );
    }

    #[test]
    fn plain_text_and_empty_bodies_still_give_a_message() {
        assert_eq!(
            ProviderError::from_body(502, "<html>\n Bad   gateway\n</html>").message,
            "<html> Bad gateway </html>"
        );
        assert_eq!(ProviderError::from_body(500, "").message, "(empty response body)");
        assert_eq!(
            ProviderError::from_body(404, r#"{"error":"model 'x' not found"}"#).message,
            "model 'x' not found"
        );
    }

    #[test]
    fn statuses_map_to_errors() {
        let error = |status| ProviderError { status, code: None, message: "m".into() };
        assert!(matches!(
            error(401).into_model_error("u", 1, Some("OPENAI_API_KEY")),
            ModelError::Auth { status: 401, api_key_env: Some(v), .. } if v == "OPENAI_API_KEY"
        ));
        assert!(matches!(error(403).into_model_error("u", 1, None), ModelError::Auth { .. }));
        assert!(matches!(
            error(429).into_model_error("u", 5, None),
            ModelError::RateLimited { attempts: 5, .. }
        ));
        assert!(matches!(
            error(503).into_model_error("u", 5, None),
            ModelError::Server { status: 503, .. }
        ));
        assert!(matches!(
            error(404).into_model_error("u", 1, None),
            ModelError::BadRequest { status: 404, .. }
        ));
    }

    #[test]
    fn only_transient_statuses_are_retried() {
        for status in [408, 409, 429, 500, 502, 503, 529] {
            assert!(is_retryable_status(status), "{status}");
        }
        for status in [400, 401, 403, 404, 413, 422] {
            assert!(!is_retryable_status(status), "{status}");
        }
    }

    #[test]
    fn stream_errors_get_the_status_of_their_code() {
        let overloaded = serde_json::json!({"type": "overloaded_error", "message": "Overloaded"});
        let error = ProviderError::from_stream_error(&overloaded);
        assert_eq!((error.status, error.message.as_str()), (529, "Overloaded"));
        assert!(error.is_retryable());

        let openrouter = serde_json::json!({"code": 502, "message": "Provider returned error"});
        assert_eq!(ProviderError::from_stream_error(&openrouter).status, 502);

        let responses = serde_json::json!({"code": "rate_limit_exceeded", "message": "slow down"});
        assert_eq!(ProviderError::from_stream_error(&responses).status, 429);
    }
}
