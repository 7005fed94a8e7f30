//! The provider-neutral request, stream events and errors. Each wire module maps these
//! to and from its own JSON; nothing above this crate sees a wire format.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Which HTTP API a provider speaks; decides the path appended to `base_url`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireApi {
    /// `{base_url}/chat/completions`
    Chat,
    /// `{base_url}/responses`
    Responses,
    /// `{base_url}/messages`
    Anthropic,
}

/// A provider as the client needs it: where, how, and with which key (already resolved).
#[derive(Clone)]
pub struct ProviderConfig {
    /// The provider's name in config (`openai`, `local`, ...), for messages.
    pub name: String,
    /// Includes the API version prefix, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub wire_api: WireApi,
    pub api_key: Option<String>,
    /// The variable the key came from, to name it in auth errors.
    pub api_key_env: Option<String>,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for ProviderConfig {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("wire_api", &self.wire_api)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .finish()
    }
}

/// How hard a reasoning model should think. Maps to `reasoning_effort` (Chat),
/// `reasoning.effort` (Responses) or a thinking budget (Anthropic).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as sent (JSON text, possibly invalid).
    pub arguments: String,
}

/// Reasoning the model produced, kept to send back on the next request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reasoning {
    /// Readable reasoning or its summary.
    pub text: String,
    /// Provider data needed to send the reasoning back (Anthropic thinking `signature`,
    /// Responses `encrypted_content` and item id): opaque outside this crate. When one
    /// response yields several `ReasoningCompleted`s (several thinking blocks or
    /// reasoning items), keep them all as a JSON array of their `opaque` values: every
    /// wire accepts an array and sends each part back in order. Reasoning from another
    /// wire (after a model switch) is left out of the request, never sent wrongly.
    pub opaque: Option<serde_json::Value>,
}

/// Part of a user message.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentPart {
    Text(String),
    /// Base64 image data with its media type (`image/png`, ...).
    Image {
        media_type: String,
        data: String,
    },
}

/// One message of the conversation sent to the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    User { content: Vec<ContentPart> },
    Assistant { text: String, reasoning: Option<Reasoning>, tool_calls: Vec<ToolCall> },
    ToolResult { call_id: String, content: String, is_error: bool },
}

/// One request. The whole conversation is sent every time (Responses: `store: false`).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    pub model: String,
    pub system: String,
    pub messages: Vec<Message>,
    /// Empty for requests that are not the conversation (titles, summaries).
    pub tools: Vec<ToolSpec>,
    pub reasoning: Option<ReasoningEffort>,
    pub max_output_tokens: Option<u32>,
    /// Stable per session: OpenAI `prompt_cache_key`. Anthropic gets `cache_control`
    /// breakpoints on system, tools and the newest turn regardless.
    pub cache_key: Option<String>,
}

/// Token counts of one response, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    /// All input tokens, cached ones (reads and writes) included.
    pub input_tokens: u64,
    /// Input read from the prompt cache.
    pub cached_input_tokens: u64,
    /// All output tokens, reasoning included.
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    /// Input written to the prompt cache (Anthropic's `cache_creation_input_tokens`,
    /// OpenRouter's `cache_write_tokens`): billed above the input price.
    pub cache_write_tokens: u64,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// A final answer (or any stop without tool calls).
    Stop,
    /// It wants the tool calls it made to run.
    ToolCalls,
    /// It hit the output token limit.
    Length,
    /// The provider's content filter stopped it.
    ContentFilter,
}

/// What a response stream yields, in order. Tool call arguments arrive as deltas
/// and then once whole in `ToolCallCompleted`.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    ReasoningDelta(String),
    /// Reasoning is done; `opaque` must be sent back with it.
    ReasoningCompleted(Reasoning),
    ToolCallStarted {
        index: usize,
        id: String,
        name: String,
    },
    ToolCallArgumentsDelta {
        index: usize,
        delta: String,
    },
    ToolCallCompleted {
        index: usize,
        call: ToolCall,
    },
    Usage(TokenUsage),
    /// The last event of a complete response.
    Completed {
        finish_reason: FinishReason,
    },
}

/// Told before each retry, so the caller can log it (library crates never print).
#[derive(Debug, Clone)]
pub struct RetryNotice {
    pub url: String,
    /// 2 for the first retry.
    pub attempt: u32,
    pub max_attempts: u32,
    pub delay: Duration,
    pub reason: String,
}

/// Jittered exponential backoff within a time budget.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Tries in all, the first included.
    pub max_attempts: u32,
    pub initial_delay: Duration,
    pub max_delay: Duration,
    /// No retry starts once this much time has passed since the first try.
    pub budget: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            budget: Duration::from_secs(30),
        }
    }
}

/// Called before each retry with what is about to happen (the caller logs it).
pub type RetryCallback = Arc<dyn Fn(&RetryNotice) + Send + Sync>;

/// Client settings beyond the provider itself.
#[derive(Clone)]
pub struct ClientOptions {
    pub retry: RetryPolicy,
    /// A stream that sends nothing for this long is treated as dropped.
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    pub on_retry: Option<RetryCallback>,
    /// Extra trusted root certificates (a PEM file), added to the platform's roots: for
    /// a corporate proxy or a self-hosted server with its own CA. `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR` also work, but replace the system roots instead of adding to them.
    pub ca_bundle: Option<PathBuf>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            idle_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            on_retry: None,
            ca_bundle: None,
        }
    }
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("retry", &self.retry)
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("ca_bundle", &self.ca_bundle)
            .finish()
    }
}

/// Why a request failed. Messages name the cause and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("no API key for provider `{provider}`: set {variable}")]
    MissingApiKey { provider: String, variable: String },
    #[error("{url} rejected the API key (HTTP {status}): {message}{}", key_hint(.api_key_env))]
    Auth { url: String, status: u16, message: String, api_key_env: Option<String> },
    #[error("rate limited by {url} after {attempts} tries: {message}")]
    RateLimited { url: String, attempts: u32, message: String },
    #[error("the conversation is longer than the model's context window: {message}")]
    ContextWindowExceeded { message: String },
    #[error("{url} refused the request (HTTP {status}): {message}")]
    BadRequest { url: String, status: u16, message: String },
    #[error("{url} failed with HTTP {status} after {attempts} tries: {message}")]
    Server { url: String, status: u16, attempts: u32, message: String },
    #[error(
        "cannot reach {url} after {attempts} tries: {message}; check base_url and that the server is up"
    )]
    Network { url: String, attempts: u32, message: String },
    #[error("the response stream from {url} broke off: {message}")]
    StreamInterrupted { url: String, message: String },
    #[error("the response from {url} could not be parsed: {message}")]
    Malformed { url: String, message: String },
    #[error("cancelled")]
    Cancelled,
    /// The provider settings cannot work (a `base_url` that is not a URL, an invalid
    /// header, an unreadable CA bundle); found before any request.
    #[error("provider `{provider}` is misconfigured: {message}")]
    InvalidConfig { provider: String, message: String },
}

fn key_hint(api_key_env: &Option<String>) -> String {
    match api_key_env {
        Some(variable) => format!("; check {variable}"),
        None => String::new(),
    }
}
