//! Model provider clients: one streaming interface over three wire APIs
//! (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages), with retries,
//! typed errors and cancellation.

mod anthropic;
mod chat;
mod client;
mod provider_error;
mod responses;
mod retry;
mod sse;
mod stream;
mod tls;
mod types;

pub use client::ModelClient;
pub use stream::ResponseStream;
pub use tls::install_crypto_provider;
pub use types::{
    ClientOptions, ContentPart, FinishReason, Message, ModelError, ModelRequest, ProviderConfig,
    Reasoning, ReasoningEffort, RetryCallback, RetryNotice, RetryPolicy, StreamEvent, TokenUsage,
    ToolCall, ToolSpec, WireApi,
};
