//! What the scripted model answers: a list of steps, one consumed per model request,
//! each a reply plus an optional fault, and optionally a `when` that says which requests
//! it is for (so concurrent sessions on different models or prompts each get their own
//! steps). Scripts are plain serde types, so a test can build one in code or load it
//! from a JSON file (the `scripted-model` binary does).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};

/// The whole conversation the server plays, in order.
///
/// JSON form: `{"steps": [{"reply": {"text": "hi"}}, ...]}`; a bare array of steps is
/// accepted too by [`Script::from_json`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    pub steps: Vec<Step>,
}

impl Script {
    /// A script that serves `steps` in order.
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        Self { steps: steps.into_iter().collect() }
    }

    /// Parses a script from JSON text (`{"steps": [...]}` or a bare array of steps).
    ///
    /// Fails on invalid JSON, unknown fields (typos are not silently ignored) and on
    /// steps [`Script::validate`] rejects.
    pub fn from_json(text: &str) -> Result<Script, ScriptError> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|source| ScriptError::Parse { path: None, source })?;
        let value = match value {
            serde_json::Value::Array(steps) => serde_json::json!({ "steps": steps }),
            other => other,
        };
        let script: Script = serde_json::from_value(value)
            .map_err(|source| ScriptError::Parse { path: None, source })?;
        script.validate()?;
        Ok(script)
    }

    /// Reads and parses a script file; see [`Script::from_json`]. Errors name the file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Script, ScriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|source| ScriptError::Read { path: path.to_path_buf(), source })?;
        Script::from_json(&text).map_err(|error| error.in_file(path))
    }

    /// Checks what serde cannot: fault statuses are HTTP error codes (400..=599) and
    /// tool calls have names.
    pub fn validate(&self) -> Result<(), ScriptError> {
        for (index, step) in self.steps.iter().enumerate() {
            if let Some(Fault::Status { status, .. }) = &step.fault
                && !(400..=599).contains(status)
            {
                return Err(ScriptError::Invalid {
                    path: None,
                    step: index,
                    reason: format!("fault status {status} is not an HTTP error (400..=599)"),
                });
            }
            if let Some(call) = step.reply.tool_calls.iter().find(|call| call.name.is_empty()) {
                return Err(ScriptError::Invalid {
                    path: None,
                    step: index,
                    reason: format!(
                        "a tool call has an empty name (arguments {:?})",
                        call.arguments
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read script {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error(
        "script{} is not valid: {source} (expected {{\"steps\": [{{\"reply\": {{\"text\": \"...\"}}}}]}})",
        in_path(path)
    )]
    Parse { path: Option<PathBuf>, source: serde_json::Error },
    #[error("script{} step {step} is invalid: {reason}", in_path(path))]
    Invalid { path: Option<PathBuf>, step: usize, reason: String },
}

impl ScriptError {
    fn in_file(self, file: &Path) -> ScriptError {
        match self {
            ScriptError::Parse { source, .. } => {
                ScriptError::Parse { path: Some(file.to_path_buf()), source }
            }
            ScriptError::Invalid { step, reason, .. } => {
                ScriptError::Invalid { path: Some(file.to_path_buf()), step, reason }
            }
            other @ ScriptError::Read { .. } => other,
        }
    }
}

fn in_path(path: &Option<PathBuf>) -> String {
    match path {
        Some(path) => format!(" {}", path.display()),
        None => String::new(),
    }
}

/// One model response: what to answer, how to misbehave while answering, and which
/// requests it is for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub reply: Reply,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
    /// `None`: any request. A request is served by the first step not yet consumed
    /// whose `when` matches it, so a script without `when` plays in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
}

/// Which requests a step is for; every field given must match.
///
/// JSON form: `"when": {"model": "impl", "contains": "task=parse role=implementer"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// Equals the request body's `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A substring of the request body as compact JSON text (the whole conversation, so
    /// a session's first prompt routes all its requests). Quotes and line ends inside
    /// strings must be written as they appear in JSON (`\"`, `\n`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
}

impl When {
    /// Whether a request with this body (and its compact JSON text) is one for the step.
    pub fn matches(&self, body: &serde_json::Value, body_text: &str) -> bool {
        let model_matches = self
            .model
            .as_deref()
            .is_none_or(|model| body.get("model").and_then(|m| m.as_str()) == Some(model));
        let text_matches = self.contains.as_deref().is_none_or(|needle| body_text.contains(needle));
        model_matches && text_matches
    }
}

impl Step {
    /// A final answer with this text.
    pub fn text(text: &str) -> Step {
        Step::from_reply(Reply { text: Some(text.to_owned()), ..Reply::default() })
    }

    /// A step serving `reply` to any request.
    pub fn from_reply(reply: Reply) -> Step {
        Step { reply, fault: None, when: None }
    }

    /// One tool call with these arguments (sent as compact JSON text).
    pub fn tool_call(name: &str, arguments: serde_json::Value) -> Step {
        Step::tool_calls(vec![ScriptedToolCall::new(name, arguments)])
    }

    /// Several tool calls in one response, in this order.
    pub fn tool_calls(calls: Vec<ScriptedToolCall>) -> Step {
        Step::from_reply(Reply { tool_calls: calls, ..Reply::default() })
    }

    /// Adds reasoning, streamed before the text and tool calls.
    pub fn with_reasoning(mut self, text: &str) -> Step {
        self.reply.reasoning = Some(text.to_owned());
        self
    }

    /// Reports these token counts instead of the defaults.
    pub fn with_usage(mut self, usage: ScriptedUsage) -> Step {
        self.reply.usage = Some(usage);
        self
    }

    /// Misbehaves this way while serving the step.
    pub fn with_fault(mut self, fault: Fault) -> Step {
        self.fault = Some(fault);
        self
    }

    /// Serves only requests for `model` (when given) whose JSON text contains `contains`
    /// (when given); see [`When`].
    pub fn when(mut self, model: Option<&str>, contains: Option<&str>) -> Step {
        self.when =
            Some(When { model: model.map(str::to_owned), contains: contains.map(str::to_owned) });
        self
    }

    /// Whether this step may serve a request with this body; see [`When::matches`].
    pub fn matches(&self, body: &serde_json::Value, body_text: &str) -> bool {
        self.when.as_ref().is_none_or(|when| when.matches(body, body_text))
    }
}

/// The content of one model response. Empty text or reasoning counts as absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// `None`: [`ScriptedUsage::default`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ScriptedUsage>,
}

/// A tool call the model makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// The call id; `None` generates a real-looking one (`call_...`, `toolu_...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    /// Raw argument text, streamed in pieces; may be invalid JSON on purpose. In a JSON
    /// script it may also be written as a JSON object, which is sent compacted.
    #[serde(deserialize_with = "arguments_text")]
    pub arguments: String,
}

impl ScriptedToolCall {
    /// A call of `name` with these arguments as compact JSON text.
    pub fn new(name: &str, arguments: serde_json::Value) -> ScriptedToolCall {
        ScriptedToolCall { id: None, name: name.to_owned(), arguments: arguments.to_string() }
    }

    /// A call whose argument text is sent exactly as given (e.g. broken JSON).
    pub fn raw(name: &str, arguments: &str) -> ScriptedToolCall {
        ScriptedToolCall { id: None, name: name.to_owned(), arguments: arguments.to_owned() }
    }

    /// Uses this call id instead of a generated one.
    pub fn with_id(mut self, id: &str) -> ScriptedToolCall {
        self.id = Some(id.to_owned());
        self
    }
}

fn arguments_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::String(text) => Ok(text),
        other => Ok(other.to_string()),
    }
}

/// Token counts reported for a response, in the client's terms: `input_tokens` counts
/// all input (cached included), `output_tokens` all output (reasoning included). Each
/// wire API gets them in its own shape (Anthropic: `input_tokens` without the cached
/// part, which goes to `cache_read_input_tokens`; it has no reasoning count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl Default for ScriptedUsage {
    /// Small non-zero counts, so clients that drop zero usage still see some.
    fn default() -> Self {
        Self { input_tokens: 12, cached_input_tokens: 0, output_tokens: 8, reasoning_tokens: 0 }
    }
}

/// A way to misbehave while serving a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Answer with this HTTP status and the API's error body; the step is NOT consumed
    /// for `times` requests it matches (default 1, counted per step), then the reply is
    /// served. Use status 429 +
    /// `retry_after_secs` for rate limits, 500/503 for server errors, 401 for auth.
    Status {
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_secs: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        times: Option<u32>,
    },
    /// Send the response head and this many SSE events, then cut the connection
    /// (no terminating chunk). A non-streaming response is cut halfway through its body.
    DropAfter { events: usize },
    /// Send an event whose data is not valid JSON after this many events, then the
    /// rest of the stream. A non-streaming response gets a truncated JSON body.
    MalformedJson { after_events: usize },
    /// Sleep this long between SSE events (before the body, if not streaming).
    SlowChunks { delay_ms: u64 },
}
