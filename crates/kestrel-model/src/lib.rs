//! Model provider clients: one streaming interface over three wire APIs
//! (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages), with retries,
//! typed errors and cancellation.

mod types;

pub use types::{
    ClientOptions, ContentPart, FinishReason, Message, ModelError, ModelRequest, ProviderConfig,
    Reasoning, ReasoningEffort, RetryNotice, RetryPolicy, StreamEvent, TokenUsage, ToolCall,
    ToolSpec, WireApi,
};
