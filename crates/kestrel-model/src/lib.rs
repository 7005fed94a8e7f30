//! Model provider clients: one streaming interface over three wire APIs
//! (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages), with retries,
//! typed errors and cancellation; and the model catalog (limits and prices, fetched at
//! runtime into the store's cache) that usage costs are computed from.

mod anthropic;
mod body;
mod catalog;
mod chat;
mod client;
pub mod detect;
mod provider_error;
mod refused_image;
mod responses;
mod retry;
mod sse;
mod stream;
mod tls;
mod types;

pub use catalog::{
    BACKGROUND_FETCH_TIMEOUT, CACHE_WRITE_FACTOR, Catalog, CatalogError, CatalogMatch,
    CatalogModel, CatalogProvider, CatalogSettings, CatalogSource, CatalogStore,
    DEFAULT_CATALOG_TTL, DEFAULT_CONTEXT_WINDOW, FOREGROUND_FETCH_TIMEOUT,
    LOCAL_DEFAULT_CONTEXT_WINDOW, ListedModel, LoadedCatalog, ModelProfile, PriceTier, Pricing,
    ProfileOrigin, is_local_url, list_provider_models,
};
pub use client::ModelClient;
pub use refused_image::refused_image;
pub use stream::ResponseStream;
pub use tls::install_crypto_provider;
pub use types::{
    ClientOptions, ContentPart, FinishReason, Message, ModelError, ModelRequest, ProviderConfig,
    Reasoning, ReasoningEffort, RetryCallback, RetryNotice, RetryPolicy, StreamEvent, TokenUsage,
    ToolCall, ToolSpec, WireApi,
};
