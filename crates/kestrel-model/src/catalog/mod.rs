//! The model catalog: providers → models with context and output limits, capabilities
//! and prices, in the shape of models.dev's `api.json`. It is fetched at runtime (a new
//! model needs no new release), cached under `$KESTREL_HOME/cache/`, and falls back to a
//! small snapshot bundled in the binary ([`Catalog::snapshot`]), parsed only when needed.
//!
//! Lookups go from Kestrel's provider name (`openai`, `anthropic`, `openrouter` are also
//! the catalog's ids; a custom provider is tried under its own name) and a model id to a
//! [`ModelProfile`]: limits and prices, or defaults and zero cost for a model nobody lists.

mod fetch;
mod parse;
mod pricing;
mod store;

use crate::ProviderConfig;
use std::collections::BTreeMap;
use std::sync::OnceLock;

pub use fetch::{ListedModel, list_provider_models};
pub use pricing::{
    CACHE_WRITE_FACTOR, DEFAULT_CONTEXT_WINDOW, LOCAL_DEFAULT_CONTEXT_WINDOW, ModelProfile,
    PriceTier, Pricing, ProfileOrigin, is_local_url,
};
pub use store::{
    BACKGROUND_FETCH_TIMEOUT, CatalogSettings, CatalogSource, CatalogStore, DEFAULT_CATALOG_TTL,
    FOREGROUND_FETCH_TIMEOUT, LoadedCatalog,
};

/// The catalog bundled in the binary: a few dozen current models of the built-in
/// providers, checked against models.dev and the providers' pricing pages on 2026-11-29.
const SNAPSHOT: &str = include_str!("snapshot.json");

/// Why a catalog (or a provider's model list) could not be had. Never fatal to a
/// session: the catalog falls back to the cache, then to the bundled snapshot.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// Fetching is turned off (`catalog_url = "off"`).
    #[error("fetching the model catalog is turned off (catalog_url = \"off\")")]
    Disabled,
    /// No connection, or the server broke off.
    #[error("cannot fetch {url}: {message}")]
    Network { url: String, message: String },
    /// Nothing (complete) arrived in time.
    #[error("cannot fetch {url}: no complete answer within {after}")]
    Timeout { url: String, after: String },
    /// The server answered with an error status.
    #[error("cannot fetch {url}: HTTP {status}{}", if message.is_empty() { String::new() } else { format!(": {message}") })]
    Status { url: String, status: u16, message: String },
    /// The body is not a catalog (or not a model list): not JSON, not the expected
    /// shape, or no usable model at all.
    #[error("{url} is not a model catalog: {reason}")]
    NotACatalog { url: String, reason: String },
    /// The URL or the TLS settings cannot work.
    #[error("cannot fetch {url}: {message}")]
    InvalidConfig { url: String, message: String },
    /// The fetched catalog could not be cached (it is still used).
    #[error(transparent)]
    Cache(#[from] kestrel_store::CatalogCacheError),
}

/// A model catalog: providers by id, each with its models by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    providers: BTreeMap<String, CatalogProvider>,
}

/// One provider of the catalog.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogProvider {
    /// The catalog's id for it (`openai`, `anthropic`, `openrouter`, `deepseek`...).
    pub id: String,
    pub name: Option<String>,
    /// The provider's API root, when the catalog gives one.
    pub api: Option<String>,
    /// Environment variables its SDKs read the key from.
    pub env: Vec<String>,
    pub models: BTreeMap<String, CatalogModel>,
}

/// One model as the catalog describes it; anything it leaves out is `None` or empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogModel {
    /// The id sent to the provider.
    pub id: String,
    pub name: Option<String>,
    pub reasoning: Option<bool>,
    pub tool_call: Option<bool>,
    /// Whether it accepts attachments (images, files).
    pub attachment: Option<bool>,
    pub input_modalities: Vec<String>,
    pub output_modalities: Vec<String>,
    /// USD per million tokens; `None` when the catalog gives no price.
    pub pricing: Option<Pricing>,
    /// Tokens of context (input and output together).
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u64>,
}

/// Where a lookup found a model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CatalogMatch<'a> {
    /// The catalog provider whose entry was used.
    pub provider_id: &'a str,
    pub model: &'a CatalogModel,
    /// True when found under the provider asked for; false when another provider
    /// lists the same model (its limits are right, its prices an estimate).
    pub exact: bool,
}

impl Catalog {
    /// Parses a catalog in the models.dev `api.json` shape, leniently: only the map of
    /// providers, each provider's `models` map and each model's `id` are required;
    /// unknown fields are ignored, and a provider or model that does not fit (or a field
    /// of the wrong type) is left out rather than failing the whole catalog.
    ///
    /// Fails with [`CatalogError::NotACatalog`] (naming `source`) when the text is not
    /// JSON, not an object, or yields no model at all.
    pub fn from_json(source: &str, text: &str) -> Result<Catalog, CatalogError> {
        let not_a_catalog =
            |reason: String| CatalogError::NotACatalog { url: source.to_owned(), reason };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|error| not_a_catalog(error.to_string()))?;
        parse::catalog(&value).map_err(not_a_catalog)
    }

    /// The snapshot bundled in the binary, parsed on first use.
    pub fn snapshot() -> Catalog {
        static PARSED: OnceLock<Catalog> = OnceLock::new();
        PARSED
            .get_or_init(|| {
                // Checked by a test; an empty catalog (defaults everywhere) is the fallback.
                Catalog::from_json("the bundled snapshot", SNAPSHOT).unwrap_or_default()
            })
            .clone()
    }

    /// The catalog's providers, by id.
    pub fn providers(&self) -> impl Iterator<Item = &CatalogProvider> {
        self.providers.values()
    }

    /// The provider with this catalog id.
    pub fn provider(&self, id: &str) -> Option<&CatalogProvider> {
        self.providers.get(id)
    }

    /// How many models the catalog lists, over all providers.
    pub fn model_count(&self) -> usize {
        self.providers.values().map(|provider| provider.models.len()).sum()
    }

    /// Adds a provider (replacing one with the same id).
    pub fn insert(&mut self, provider: CatalogProvider) {
        self.providers.insert(provider.id.clone(), provider);
    }

    /// Finds `model_id` for Kestrel's provider `provider`: under the catalog provider of
    /// the same name; else, for an id like `vendor/model`, under `vendor`; else under any
    /// provider listing exactly that id (the first by provider id, so the answer is
    /// stable). `None` when no provider lists it.
    pub fn find(&self, provider: &str, model_id: &str) -> Option<CatalogMatch<'_>> {
        let under = |provider_id: &str, id: &str, exact: bool| {
            let (provider_id, entry) = self.providers.get_key_value(provider_id)?;
            let model = entry.models.get(id)?;
            Some(CatalogMatch { provider_id, model, exact })
        };
        if let Some(found) = under(provider, model_id, true) {
            return Some(found);
        }
        if let Some((vendor, id)) = model_id.split_once('/')
            && let Some(found) = under(vendor, id, false)
        {
            return Some(found);
        }
        self.providers.iter().find_map(|(provider_id, entry)| {
            let model = entry.models.get(model_id)?;
            Some(CatalogMatch { provider_id, model, exact: false })
        })
    }

    /// What a session needs to know about `model_id` on `provider`: its limits and
    /// prices, or [`ModelProfile::unknown`] ([`ModelProfile::unknown_local`] on a server
    /// on this machine). A model found only under another provider keeps that provider's
    /// prices, except on a server on this machine (loopback), which costs nothing.
    pub fn profile(&self, provider: &ProviderConfig, model_id: &str) -> ModelProfile {
        let Some(found) = self.find(&provider.name, model_id) else {
            return if is_local_url(&provider.base_url) {
                ModelProfile::unknown_local()
            } else {
                ModelProfile::unknown()
            };
        };
        let profile = ModelProfile::from_match(&found);
        if !found.exact && is_local_url(&provider.base_url) {
            profile.without_prices()
        } else {
            profile
        }
    }

    /// The catalog in the models.dev shape (the fields this crate reads), for the cache.
    pub fn to_json(&self) -> serde_json::Value {
        parse::to_value(self)
    }
}

impl serde::Serialize for Catalog {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Catalog {
    /// As leniently as [`Catalog::from_json`].
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        parse::catalog(&value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WireApi;

    fn provider(name: &str, base_url: &str) -> ProviderConfig {
        ProviderConfig {
            name: name.into(),
            base_url: base_url.into(),
            wire_api: WireApi::Chat,
            api_key: None,
            api_key_env: None,
            headers: Vec::new(),
        }
    }

    #[test]
    fn the_snapshot_parses_and_covers_the_built_in_providers() {
        let snapshot = Catalog::snapshot();
        for id in ["openai", "anthropic", "openrouter"] {
            let listed = snapshot.provider(id).map_or(0, |provider| provider.models.len());
            assert!(listed >= 5, "{id}: {listed} models");
        }
        let strict: serde_json::Value = serde_json::from_str(SNAPSHOT).unwrap();
        let models =
            strict.as_object().unwrap().values().map(|p| p["models"].as_object().unwrap().len());
        assert_eq!(snapshot.model_count(), models.sum::<usize>(), "every entry parses");
        let sonnet = snapshot.find("anthropic", "claude-sonnet-4-5").unwrap();
        assert_eq!(sonnet.model.context_window, Some(200_000));
        assert_eq!(sonnet.model.pricing.as_ref().unwrap().input, 3.0);
    }

    #[test]
    fn lookups_try_the_provider_then_the_vendor_then_anyone() {
        let snapshot = Catalog::snapshot();
        let exact = snapshot.find("openai", "gpt-5").unwrap();
        assert_eq!((exact.provider_id, exact.exact), ("openai", true));
        let vendor = snapshot.find("my-proxy", "anthropic/claude-haiku-4-5").unwrap();
        assert_eq!((vendor.provider_id, vendor.exact), ("anthropic", false));
        let anyone = snapshot.find("my-proxy", "gpt-5-mini").unwrap();
        assert_eq!((anyone.provider_id, anyone.model.id.as_str()), ("openai", "gpt-5-mini"));
        assert!(snapshot.find("openai", "no-such-model").is_none());
    }

    #[test]
    fn a_local_server_pays_nothing_for_a_model_listed_elsewhere() {
        let snapshot = Catalog::snapshot();
        let remote = snapshot.profile(&provider("proxy", "https://proxy.example/v1"), "gpt-5");
        assert!(remote.pricing.is_some());
        assert_eq!(remote.context_window, 400_000);
        assert!(remote.accepts_images, "gpt-5 takes images (modalities.input)");
        let local = snapshot.profile(&provider("vllm", "http://127.0.0.1:8000/v1"), "gpt-5");
        assert!(local.pricing.is_none());
        assert_eq!(local.context_window, 400_000, "limits still apply");
        let unknown = snapshot.profile(&provider("openai", "https://api.openai.com/v1"), "x");
        assert_eq!(unknown, ModelProfile::unknown());
        let unknown =
            snapshot.profile(&provider("ollama", "http://127.0.0.1:11434/v1"), "qwen3:8b");
        assert_eq!(unknown.context_window, LOCAL_DEFAULT_CONTEXT_WINDOW);
        assert_eq!((unknown.pricing, unknown.origin), (None, ProfileOrigin::Unknown));
    }

    #[test]
    fn a_catalog_round_trips_through_its_cache_form() {
        let snapshot = Catalog::snapshot();
        let text = serde_json::to_string(&snapshot).unwrap();
        let back: Catalog = serde_json::from_str(&text).unwrap();
        assert_eq!(back, snapshot);
    }
}
