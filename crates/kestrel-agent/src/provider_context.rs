//! Context lengths that providers report in their own `GET /models` lists (LM Studio,
//! vLLM, llama.cpp, OpenRouter), for models the catalog does not know: cached in
//! `$KESTREL_HOME/cache/provider-models.json`, refreshed in the background when a
//! session opens such a model, and never waited for (a session opened before the first
//! fetch lands uses the default window). The cache is best effort: unreadable means
//! empty, and concurrent writers may drop each other's entries until the next refresh.

use kestrel_model::{ProviderConfig, list_provider_models};
use kestrel_store::KestrelHome;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a background list request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The cache's file name under `cache/`.
const CACHE_FILE: &str = "provider-models.json";
/// Models kept per provider (a local server lists a few; a gateway a few hundred).
const MAX_CACHED_MODELS: usize = 2_000;

/// The cache file: per provider name, what its list said and when.
#[derive(Debug, Default, Serialize, Deserialize)]
struct ProviderModelsCache {
    #[serde(default)]
    providers: BTreeMap<String, ProviderModels>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ProviderModels {
    /// The list is only trusted for the server it came from.
    base_url: String,
    /// Unix seconds.
    fetched_at: u64,
    /// Context length by model id (models that reported one).
    models: BTreeMap<String, u64>,
}

fn cache_path(home: &KestrelHome) -> PathBuf {
    home.cache_dir().join(CACHE_FILE)
}

fn read_cache(path: &Path) -> ProviderModelsCache {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs())
}

/// The context length `provider`'s own list reported for `model_id`, from the cache.
pub(crate) fn reported_context(
    home: &KestrelHome,
    provider: &ProviderConfig,
    model_id: &str,
) -> Option<u64> {
    let cache = read_cache(&cache_path(home));
    let entry = cache.providers.get(&provider.name)?;
    (entry.base_url == provider.base_url).then(|| entry.models.get(model_id).copied())?
}

/// Starts a fetch of `provider`'s list in the background when the cache has none for it
/// or an older one than `ttl`; returns at once. Does nothing outside a tokio runtime, or
/// while another fetch of the same provider runs in this process.
pub(crate) fn refresh_in_background(
    home: &KestrelHome,
    provider: &ProviderConfig,
    ca_bundle: Option<PathBuf>,
    ttl: Duration,
) {
    static RUNNING: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let path = cache_path(home);
    let fresh = read_cache(&path).providers.get(&provider.name).is_some_and(|entry| {
        entry.base_url == provider.base_url
            && unix_now().saturating_sub(entry.fetched_at) < ttl.as_secs()
    });
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    if fresh {
        return;
    }
    {
        let mut running = RUNNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if running.contains(&provider.name) {
            return;
        }
        running.push(provider.name.clone());
    }
    let provider = provider.clone();
    runtime.spawn(async move {
        if let Ok(listed) =
            list_provider_models(&provider, ca_bundle.as_deref(), FETCH_TIMEOUT).await
        {
            // A hostile or broken server's list must not grow the cache without bound.
            let models = listed
                .into_iter()
                .filter_map(|model| Some((model.id, model.context_window?)))
                .take(MAX_CACHED_MODELS)
                .collect();
            let entry = ProviderModels {
                base_url: provider.base_url.clone(),
                fetched_at: unix_now(),
                models,
            };
            // Small and rare: written in place of the runtime's blocking pool.
            let _ = write_entry(&path, &provider.name, entry);
        }
        let mut running = RUNNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        running.retain(|name| *name != provider.name);
    });
}

/// Puts `entry` in the cache file, replaced whole (a temporary file renamed over it, so
/// a reader never sees half a file).
fn write_entry(path: &Path, provider: &str, entry: ProviderModels) -> std::io::Result<()> {
    let mut cache = read_cache(path);
    cache.providers.insert(provider.to_owned(), entry);
    let text = serde_json::to_vec_pretty(&cache).map_err(std::io::Error::other)?;
    let Some(dir) = path.parent() else { return Ok(()) };
    std::fs::create_dir_all(dir)?;
    // Unique per write: two providers' fetches in one process may write at once.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let serial = WRITES.fetch_add(1, Ordering::Relaxed);
    let temporary = dir.join(format!(".{CACHE_FILE}.{}.{serial}", std::process::id()));
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_model::WireApi;

    fn provider(base_url: &str) -> ProviderConfig {
        ProviderConfig {
            name: "lm".into(),
            base_url: base_url.into(),
            wire_api: WireApi::Chat,
            api_key: None,
            api_key_env: None,
            headers: Vec::new(),
        }
    }

    #[test]
    fn a_cached_length_counts_only_for_the_server_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let home = KestrelHome::at(dir.path());
        let entry = ProviderModels {
            base_url: "http://127.0.0.1:1/v1".into(),
            fetched_at: unix_now(),
            models: BTreeMap::from([("qwen".to_string(), 4096)]),
        };
        write_entry(&cache_path(&home), "lm", entry).unwrap();
        let here = provider("http://127.0.0.1:1/v1");
        assert_eq!(reported_context(&home, &here, "qwen"), Some(4096));
        assert_eq!(reported_context(&home, &here, "other"), None);
        assert_eq!(reported_context(&home, &provider("http://127.0.0.1:2/v1"), "qwen"), None);
        // A damaged cache is an empty one.
        std::fs::write(cache_path(&home), "{not json").unwrap();
        assert_eq!(reported_context(&home, &here, "qwen"), None);
    }
}
