//! What a first run with no model configured can use: the providers whose API key is in
//! the environment, and OpenAI-compatible servers answering on this machine at their
//! default ports (Ollama, LM Studio, llama.cpp, vLLM), each with a sensible default
//! model: the catalog's newest of a provider's main line, or the first model a local
//! server lists at `GET /v1/models`. Only loopback addresses are probed, briefly.

use crate::catalog::{Catalog, list_provider_models};
use crate::types::{ProviderConfig, WireApi};
use kestrel_store::{Config, ProviderSettings, WireApiSetting};
use std::time::Duration;

/// How long a local server has to answer its model list.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// For tests only: `name=port,...` moves the probed local servers to other loopback
/// ports (the real ones may be in use on the machine that runs the tests).
pub const PROBE_PORTS_VAR: &str = "KESTREL_PROBE_PORTS";

/// Built-in providers whose key a user may have in the environment.
pub const KEYED_PROVIDERS: [&str; 3] = ["anthropic", "openai", "openrouter"];

/// Built-in local servers: provider, what people call it.
pub const LOCAL_SERVERS: [(&str, &str); 4] =
    [("ollama", "Ollama"), ("lmstudio", "LM Studio"), ("llamacpp", "llama.cpp"), ("vllm", "vLLM")];

/// A model the environment offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// `provider/model`, as `model = "..."` in config.toml takes it.
    pub model_ref: String,
    /// Why it is offered: `ANTHROPIC_API_KEY is set`, `LM Studio answers at URL`.
    pub reason: String,
}

/// What a local server's probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalServer {
    pub provider: String,
    /// `Ollama`, `LM Studio`, ...
    pub label: String,
    pub base_url: String,
    /// Its models (`Ok(empty)`: it answers but serves none), or why it did not answer.
    pub models: Result<Vec<String>, String>,
}

/// The provider as a client is configured for it, its key read from the environment.
pub fn provider_config(name: &str, settings: &ProviderSettings) -> ProviderConfig {
    let api_key = settings
        .api_key_env
        .as_ref()
        .and_then(|variable| std::env::var(variable).ok())
        .filter(|key| !key.trim().is_empty());
    ProviderConfig {
        name: name.to_owned(),
        base_url: settings.base_url.clone(),
        wire_api: match settings.wire_api {
            WireApiSetting::Chat => WireApi::Chat,
            WireApiSetting::Responses => WireApi::Responses,
            WireApiSetting::Anthropic => WireApi::Anthropic,
        },
        api_key,
        api_key_env: settings.api_key_env.clone(),
        headers: settings.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    }
}

/// The keyed providers whose key variable is set (never read further than that), each
/// with its default model from `catalog`.
pub fn keyed_candidates(config: &Config, catalog: &Catalog) -> Vec<Candidate> {
    KEYED_PROVIDERS
        .iter()
        .filter_map(|name| {
            let variable = config.providers.get(*name)?.api_key_env.clone()?;
            let set = std::env::var(&variable).is_ok_and(|key| !key.trim().is_empty());
            let model = default_model(catalog, name)?;
            set.then(|| Candidate {
                model_ref: format!("{name}/{model}"),
                reason: format!("{variable} is set"),
            })
        })
        .collect()
}

/// Probes the built-in local servers at once (loopback addresses only, each within
/// [`PROBE_TIMEOUT`]).
pub async fn probe_local_servers(config: &Config) -> Vec<LocalServer> {
    let ports = std::env::var(PROBE_PORTS_VAR).unwrap_or_default();
    let probes = LOCAL_SERVERS.iter().filter_map(|(name, label)| {
        let settings = config.providers.get(*name)?;
        let mut provider = provider_config(name, settings);
        if let Some(port) = moved_port(&ports, name) {
            provider.base_url = format!("http://127.0.0.1:{port}/v1");
        }
        if !is_loopback(&provider.base_url) {
            return None;
        }
        Some(async move {
            let listed = list_provider_models(&provider, None, PROBE_TIMEOUT).await;
            LocalServer {
                provider: (*name).to_owned(),
                label: (*label).to_owned(),
                base_url: provider.base_url.clone(),
                models: listed
                    .map(|models| models.into_iter().map(|model| model.id).collect())
                    .map_err(|error| error.to_string()),
            }
        })
    });
    futures_util::future::join_all(probes).await
}

/// The local servers that answered with at least one model, as candidates (the first
/// model each lists).
pub fn local_candidates(servers: &[LocalServer]) -> Vec<Candidate> {
    servers
        .iter()
        .filter_map(|server| {
            let models = server.models.as_ref().ok()?;
            let first = models.first()?;
            Some(Candidate {
                model_ref: format!("{}/{first}", server.provider),
                reason: format!(
                    "{} answers at {} ({} model{})",
                    server.label,
                    server.base_url,
                    models.len(),
                    if models.len() == 1 { "" } else { "s" }
                ),
            })
        })
        .collect()
}

/// How long a remote provider has to answer its model list in [`check_providers`].
const REMOTE_TIMEOUT: Duration = Duration::from_secs(3);

/// Whether each configured provider answers its model list, by name: a local server as
/// its probe found it (in `servers`), a keyed one only when its key is set (the key is
/// never said). For `kestrel doctor`.
pub async fn check_providers(config: &Config, servers: &[LocalServer]) -> Vec<(String, String)> {
    let checks = config.providers.iter().map(|(name, settings)| async move {
        if let Some(server) = servers.iter().find(|server| server.provider == *name) {
            let said = match &server.models {
                Ok(models) => format!("{} answers ({} models)", server.base_url, models.len()),
                Err(_) => format!("{} not answering", server.base_url),
            };
            return (name.clone(), said);
        }
        let provider = provider_config(name, settings);
        if let (Some(variable), None) = (&provider.api_key_env, &provider.api_key) {
            return (name.clone(), format!("{} (no key: {variable} not set)", provider.base_url));
        }
        let timeout = if is_loopback(&provider.base_url) { PROBE_TIMEOUT } else { REMOTE_TIMEOUT };
        let said = match list_provider_models(&provider, None, timeout).await {
            Ok(models) => format!("{} answers ({} models)", provider.base_url, models.len()),
            Err(error) => format!("{} unreachable: {error}", provider.base_url),
        };
        (name.clone(), said)
    });
    futures_util::future::join_all(checks).await
}

/// A keyed provider's default: the newest of its main line in the catalog (Claude
/// Sonnet; GPT-N; Claude Sonnet through OpenRouter).
pub fn default_model(catalog: &Catalog, provider: &str) -> Option<String> {
    let main_line = |id: &str| match provider {
        "anthropic" => id.starts_with("claude-sonnet-"),
        "openrouter" => id.starts_with("anthropic/claude-sonnet-"),
        "openai" => id.strip_prefix("gpt-").is_some_and(|rest| {
            !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == '.')
        }),
        _ => false,
    };
    let listed = catalog.provider(provider)?;
    listed.models.keys().filter(|id| main_line(id)).max_by_key(|id| version(id)).cloned()
}

/// The numbers in a model id, in order: `claude-sonnet-4-5` is (4, 5).
fn version(id: &str) -> Vec<u64> {
    id.split(|c: char| !c.is_ascii_digit()).filter_map(|part| part.parse().ok()).collect()
}

fn moved_port(ports: &str, name: &str) -> Option<u16> {
    ports.split(',').find_map(|pair| {
        let (key, port) = pair.split_once('=')?;
        (key.trim() == name).then(|| port.trim().parse().ok()).flatten()
    })
}

fn is_loopback(url: &str) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url) else { return false };
    let Some(host) = parsed.host_str() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_newest_of_each_main_line() {
        let catalog = Catalog::snapshot();
        let anthropic = default_model(&catalog, "anthropic").unwrap_or_default();
        assert!(anthropic.starts_with("claude-sonnet-"), "{anthropic}");
        let openai = default_model(&catalog, "openai").unwrap_or_default();
        assert!(openai.starts_with("gpt-") && !openai.contains("mini"), "{openai}");
        assert_eq!(version("claude-sonnet-4-5"), vec![4, 5]);
        assert!(version("gpt-5.10") > version("gpt-5.9"));
    }

    #[test]
    fn only_loopback_is_probed_and_ports_move_by_name() {
        assert!(is_loopback("http://127.0.0.1:11434/v1"));
        assert!(is_loopback("http://localhost:1234/v1"));
        assert!(!is_loopback("http://10.0.0.2:8000/v1"));
        assert_eq!(moved_port("ollama=4000, vllm=4001", "vllm"), Some(4001));
        assert_eq!(moved_port("ollama=4000", "lmstudio"), None);
    }
}
