//! HTTP for the catalog: the catalog itself (a plain GET of `catalog_url`) and a
//! provider's own model list (`GET {base_url}/models`, OpenAI's `{"data": [{"id"}]}`,
//! which Anthropic's `/v1/models` also has, with `display_name`). Every fetch is bounded
//! by one timeout for the whole exchange and by a size cap.

use super::{Catalog, CatalogError};
use crate::client::{build_http, default_headers};
use crate::stream::{describe_duration, transport_error};
use crate::{ClientOptions, ProviderConfig, WireApi, tls};
use reqwest::header::{ACCEPT, HeaderValue};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// Bodies larger than this are refused: models.dev's whole catalog is a few MB.
const MAX_BODY: usize = 64 * 1024 * 1024;
/// Error bodies are cut to this many characters in messages.
const MAX_ERROR_TEXT: usize = 200;

/// A model that a provider's `/models` endpoint lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedModel {
    pub id: String,
    /// A display name, when the provider gives one (Anthropic's `display_name`).
    pub name: Option<String>,
    /// The context length the server reports, when it does (see [`CONTEXT_FIELDS`]).
    pub context_window: Option<u64>,
}

/// Where servers put a model's context length in their `/models` entries, most specific
/// first: LM Studio (`loaded_context_length`), vLLM (`max_model_len`), OpenRouter
/// (`context_length`, `top_provider.context_length`), llama.cpp (`meta.n_ctx`). Not a
/// model's largest possible length (`max_context_length`, llama.cpp's training length
/// `n_ctx_train`): the server may run it with far less, and compaction would come late.
const CONTEXT_FIELDS: &[&str] = &[
    "/loaded_context_length",
    "/max_model_len",
    "/context_length",
    "/context_window",
    "/top_provider/context_length",
    "/meta/n_ctx",
];

/// Reported lengths outside this range are taken as nonsense (1 token would compact at
/// every step; 10^18 would never compact).
const SANE_CONTEXT: std::ops::RangeInclusive<u64> = 1_024..=10_000_000;

/// Fetches and parses the catalog at `url` within `timeout`.
pub(super) async fn fetch_catalog(
    url: &str,
    ca_bundle: Option<&Path>,
    timeout: Duration,
) -> Result<Catalog, CatalogError> {
    let http = http_client(url, ca_bundle, timeout)?;
    let request = http.get(url).header(ACCEPT, "application/json");
    let text = get_text(url, request, timeout).await?;
    Catalog::from_json(url, &text)
}

/// The models `provider` itself lists at `GET {base_url}/models` (with its key), within
/// `timeout`.
///
/// Fails with [`CatalogError::InvalidConfig`] when the key variable is named but unset
/// or the base URL is unusable, `Network`/`Timeout`/`Status` when the request fails,
/// and `NotACatalog` when the answer is not a `{"data": [{"id": ...}]}` list.
pub async fn list_provider_models(
    provider: &ProviderConfig,
    ca_bundle: Option<&Path>,
    timeout: Duration,
) -> Result<Vec<ListedModel>, CatalogError> {
    let base = provider.base_url.trim().trim_end_matches('/');
    let url = match provider.wire_api {
        // Anthropic pages its list 20 at a time unless asked for more.
        WireApi::Anthropic => format!("{base}/models?limit=1000"),
        WireApi::Chat | WireApi::Responses => format!("{base}/models"),
    };
    let invalid = |message: String| CatalogError::InvalidConfig { url: url.clone(), message };
    let key = provider.api_key.as_deref().filter(|key| !key.is_empty());
    if let Some(variable) = &provider.api_key_env
        && key.is_none()
    {
        return Err(invalid(format!("no API key: set {variable}")));
    }
    let mut headers = default_headers(provider, key).map_err(invalid)?;
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    headers.remove(reqwest::header::CONTENT_TYPE);
    let http = http_client(&url, ca_bundle, timeout)?;
    let text = get_text(&url, http.get(&url).headers(headers), timeout).await?;
    parse_model_list(&url, &text)
}

fn parse_model_list(url: &str, text: &str) -> Result<Vec<ListedModel>, CatalogError> {
    let not_a_list = || CatalogError::NotACatalog {
        url: url.to_owned(),
        reason: "expected a model list like {\"data\": [{\"id\": \"...\"}]}".to_owned(),
    };
    let value: Value = serde_json::from_str(text).map_err(|_| not_a_list())?;
    let Some(data) = value.get("data").and_then(Value::as_array) else {
        return Err(not_a_list());
    };
    let mut models: Vec<ListedModel> = data
        .iter()
        .filter_map(|entry| {
            let id = entry.get("id")?.as_str().filter(|id| !id.is_empty())?;
            let name = ["display_name", "name"]
                .iter()
                .find_map(|field| entry.get(*field).and_then(Value::as_str))
                .map(str::to_owned);
            let context_window = CONTEXT_FIELDS
                .iter()
                .find_map(|pointer| entry.pointer(pointer).and_then(Value::as_u64))
                .filter(|tokens| SANE_CONTEXT.contains(tokens));
            Some(ListedModel { id: id.to_owned(), name, context_window })
        })
        .collect();
    models.sort_by(|a, b| a.id.cmp(&b.id));
    models.dedup_by(|a, b| a.id == b.id);
    Ok(models)
}

fn http_client(
    url: &str,
    ca_bundle: Option<&Path>,
    timeout: Duration,
) -> Result<reqwest::Client, CatalogError> {
    let invalid = |message: String| CatalogError::InvalidConfig { url: url.to_owned(), message };
    let parsed =
        reqwest::Url::parse(url).map_err(|error| invalid(format!("not a URL: {error}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid("the URL must start with http:// or https://".to_owned()));
    }
    tls::install_crypto_provider();
    let extra_roots = match ca_bundle {
        Some(path) => tls::read_ca_bundle(path).map_err(invalid)?,
        None => Vec::new(),
    };
    let options = ClientOptions {
        connect_timeout: timeout,
        ca_bundle: ca_bundle.map(Path::to_path_buf),
        ..ClientOptions::default()
    };
    build_http(&options, extra_roots).map_err(invalid)
}

/// Sends the request and reads the whole body as text, all within `timeout`.
async fn get_text(
    url: &str,
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<String, CatalogError> {
    let exchange = async {
        let mut response = request.send().await.map_err(|error| CatalogError::Network {
            url: url.to_owned(),
            message: transport_error(&error),
        })?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| CatalogError::Network {
            url: url.to_owned(),
            message: transport_error(&error),
        })? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_BODY {
                return Err(CatalogError::NotACatalog {
                    url: url.to_owned(),
                    reason: format!("the answer is larger than {} MB", MAX_BODY / (1024 * 1024)),
                });
            }
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        if !status.is_success() {
            let message: String = text.trim().chars().take(MAX_ERROR_TEXT).collect();
            return Err(CatalogError::Status {
                url: url.to_owned(),
                status: status.as_u16(),
                message,
            });
        }
        Ok(text)
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_elapsed) => {
            Err(CatalogError::Timeout { url: url.to_owned(), after: describe_duration(timeout) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_lists_of_openai_and_anthropic_shape_are_read() {
        let openai = r#"{"object":"list","data":[{"id":"gpt-5","object":"model"},{"id":"gpt-5"},{"id":""},{"x":1}]}"#;
        let listed = parse_model_list("u", openai).unwrap();
        assert_eq!(listed, [ListedModel { id: "gpt-5".into(), name: None, context_window: None }]);
        let anthropic = r#"{"data":[{"type":"model","id":"claude-x","display_name":"Claude X"}],"has_more":false}"#;
        let listed = parse_model_list("u", anthropic).unwrap();
        assert_eq!(listed[0].name.as_deref(), Some("Claude X"));
        let servers = r#"{"data":[
            {"id":"vllm","max_model_len":32768},
            {"id":"openrouter","context_length":131072,"top_provider":{"context_length":65536}},
            {"id":"llama","meta":{"n_ctx":8192,"n_ctx_train":131072}},
            {"id":"llama-untold","meta":{"n_ctx_train":131072}},
            {"id":"lmstudio","max_context_length":131072,"loaded_context_length":4096},
            {"id":"lmstudio-unloaded","max_context_length":131072},
            {"id":"tiny","context_length":1},
            {"id":"endless","context_length":1000000000000000000},
            {"id":"ollama","object":"model","owned_by":"library"}]}"#;
        let listed = parse_model_list("u", servers).unwrap();
        let windows: Vec<(&str, Option<u64>)> =
            listed.iter().map(|model| (model.id.as_str(), model.context_window)).collect();
        assert_eq!(
            windows,
            [
                ("endless", None),
                ("llama", Some(8192)),
                ("llama-untold", None),
                ("lmstudio", Some(4096)),
                ("lmstudio-unloaded", None),
                ("ollama", None),
                ("openrouter", Some(131_072)),
                ("tiny", None),
                ("vllm", Some(32768))
            ]
        );
        for bad in ["<html>", "{\"models\": []}", "[]"] {
            let error = parse_model_list("http://x/v1/models", bad).unwrap_err();
            assert!(error.to_string().contains("http://x/v1/models"), "{error}");
        }
    }
}
