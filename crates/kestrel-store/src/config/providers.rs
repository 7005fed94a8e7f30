//! Model providers: which wire API each speaks and where it is, resolved from the
//! merged `[providers.NAME]` tables (built-ins first, the user's keys over them).

use super::ConfigError;
use super::file::ProviderTable;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// Which wire API a provider speaks; requests go to `{base_url}/chat/completions`,
/// `{base_url}/responses` or `{base_url}/messages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireApiSetting {
    /// OpenAI Chat Completions (also OpenRouter, vLLM, Ollama, llama.cpp...).
    Chat,
    /// OpenAI Responses.
    Responses,
    /// Anthropic Messages.
    Anthropic,
}

impl WireApiSetting {
    /// The name used in config files.
    pub fn as_str(self) -> &'static str {
        match self {
            WireApiSetting::Chat => "chat",
            WireApiSetting::Responses => "responses",
            WireApiSetting::Anthropic => "anthropic",
        }
    }
}

impl fmt::Display for WireApiSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider, resolved: built-in values with the user's and project's over them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    /// The API root including its version prefix, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub wire_api: WireApiSetting,
    /// The environment variable holding the API key; `None` for keyless local servers.
    pub api_key_env: Option<String>,
    /// Extra HTTP headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// Retries after the first try (`None`: the client's default).
    pub request_max_retries: Option<u32>,
    /// A stream silent this long counts as dropped (`None`: the client's default).
    pub stream_idle_timeout_ms: Option<u64>,
    /// The context window of every model of this provider, over the catalog's (a local
    /// server started with a smaller context than the model allows).
    pub context_window: Option<u64>,
    /// Whether every model of this provider takes images, over the catalog (`None`: as
    /// the catalog says; a model it does not know takes none).
    pub images: Option<bool>,
}

/// Checks one merged `[providers.NAME]` table; `path` is the file an error names.
pub(super) fn resolve_provider(
    name: String,
    table: ProviderTable,
    path: PathBuf,
) -> Result<ProviderSettings, ConfigError> {
    let Some(base_url) = table.base_url.filter(|url| !url.trim().is_empty()) else {
        return Err(ConfigError::MissingBaseUrl { provider: name, path });
    };
    Ok(ProviderSettings {
        base_url: base_url.trim_end_matches('/').to_owned(),
        // Chat Completions is what nearly every other server speaks.
        wire_api: table.wire_api.unwrap_or(WireApiSetting::Chat),
        api_key_env: table.api_key_env.filter(|variable| !variable.is_empty()),
        headers: table.headers,
        request_max_retries: table.request_max_retries,
        stream_idle_timeout_ms: table.stream_idle_timeout_ms,
        context_window: table.context_window.filter(|tokens| *tokens > 0),
        images: table.images,
    })
}
