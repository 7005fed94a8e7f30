//! Where a catalog comes from: the network, the cache, or the bundled snapshot. Opening
//! a session never touches the network ([`CatalogStore::load_offline`]); a stale cache is
//! refreshed in the background ([`CatalogStore::refresh_in_background`]), never waited
//! for. `kestrel models` fetches in the foreground with a short timeout when the cache is
//! stale ([`CatalogStore::load`]). Every failure falls back (cache, then snapshot) and
//! says why in [`LoadedCatalog::warnings`].

use super::fetch::fetch_catalog;
use super::{Catalog, CatalogError, ModelProfile};
use crate::ProviderConfig;
use kestrel_store::{CachedCatalog, CatalogCache, CatalogCacheError, Config, KestrelHome};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A cached catalog older than this is refreshed.
pub const DEFAULT_CATALOG_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long `kestrel models` waits for a fetch before falling back.
pub const FOREGROUND_FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a background refresh may take in all.
pub const BACKGROUND_FETCH_TIMEOUT: Duration = Duration::from_secs(60);
/// The `catalog_url` / `KESTREL_CATALOG_URL` value that turns fetching off.
const OFF: &str = "off";
/// The environment variable that overrides `catalog_url`.
const URL_VARIABLE: &str = "KESTREL_CATALOG_URL";

/// Set while this process refreshes in the background, so a burst of sessions or model
/// switches starts one fetch, not many.
static REFRESHING: AtomicBool = AtomicBool::new(false);

/// Where the catalog is fetched from and how long a fetched one stays fresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogSettings {
    /// `None` when fetching is turned off: the cache, then the snapshot, are used.
    pub url: Option<String>,
    pub ttl: Duration,
    /// Extra trusted roots (config `ca_bundle`), as for provider requests.
    pub ca_bundle: Option<PathBuf>,
}

impl CatalogSettings {
    /// `KESTREL_CATALOG_URL` (when set and not empty) over config `catalog_url`; the
    /// value `off` turns fetching off.
    pub fn from_config(config: &Config) -> Self {
        let environment = std::env::var(URL_VARIABLE).ok();
        Self::resolve(&config.catalog_url, environment.as_deref(), config.ca_bundle.clone())
    }

    /// [`CatalogSettings::from_config`] with the environment's value passed in.
    pub fn resolve(
        configured: &str,
        environment: Option<&str>,
        ca_bundle: Option<PathBuf>,
    ) -> Self {
        let chosen = environment.map(str::trim).filter(|url| !url.is_empty()).unwrap_or(configured);
        let chosen = chosen.trim();
        let url =
            (!chosen.is_empty() && !chosen.eq_ignore_ascii_case(OFF)).then(|| chosen.to_owned());
        Self { url, ttl: DEFAULT_CATALOG_TTL, ca_bundle }
    }
}

/// Which catalog a load ended up with.
#[derive(Debug, Clone, PartialEq)]
pub enum CatalogSource {
    /// Fetched just now.
    Fetched { url: String },
    /// Read from the cache; `stale` when it is older than the TTL or of another URL.
    Cache { url: String, age: Duration, stale: bool },
    /// The snapshot bundled in the binary.
    Snapshot,
}

impl fmt::Display for CatalogSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatalogSource::Fetched { url } => write!(f, "fetched from {url}"),
            CatalogSource::Cache { url, age, stale } => {
                let staleness = if *stale { ", stale" } else { "" };
                write!(f, "cache (fetched {} ago from {url}{staleness})", describe_age(*age))
            }
            CatalogSource::Snapshot => {
                write!(f, "the snapshot bundled with kestrel {}", env!("CARGO_PKG_VERSION"))
            }
        }
    }
}

/// A catalog and how it was had.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedCatalog {
    pub catalog: Catalog,
    pub source: CatalogSource,
    /// What went wrong on the way (a failed fetch, a corrupt cache), for people.
    pub warnings: Vec<String>,
    /// Whether a refresh is due: fetching is on and there is no fresh cache.
    pub stale: bool,
}

/// The catalog of one home: its cache and the settings to refresh it.
#[derive(Debug, Clone)]
pub struct CatalogStore {
    cache: CatalogCache,
    settings: CatalogSettings,
}

impl CatalogStore {
    pub fn new(home: &KestrelHome, settings: CatalogSettings) -> Self {
        Self { cache: CatalogCache::new(home), settings }
    }

    pub fn settings(&self) -> &CatalogSettings {
        &self.settings
    }

    /// The cached catalog (of any age), else the snapshot. Never uses the network.
    pub fn load_offline(&self) -> LoadedCatalog {
        let fetching = self.settings.url.is_some();
        match self.cache.read::<Catalog>() {
            Ok(Some(cached)) => {
                let stale = fetching && self.is_stale(&cached);
                let source =
                    CatalogSource::Cache { url: cached.url.clone(), age: cached.age(), stale };
                LoadedCatalog { catalog: cached.catalog, source, warnings: Vec::new(), stale }
            }
            Ok(None) => snapshot(Vec::new(), fetching),
            Err(error) => snapshot(vec![error.to_string()], fetching),
        }
    }

    /// The catalog for a listing: fetched within `timeout` when the cache is stale (or
    /// always, with `force`), written to the cache, and on any failure the cache or the
    /// snapshot, with the reason in `warnings`.
    pub async fn load(&self, force: bool, timeout: Duration) -> LoadedCatalog {
        let mut offline = self.load_offline();
        if !(force || offline.stale) {
            return offline;
        }
        let Some(url) = self.settings.url.clone() else {
            offline.warnings.push(CatalogError::Disabled.to_string());
            return offline;
        };
        match self.fetch_and_cache(&url, timeout).await {
            Ok((catalog, cache_error)) => {
                let mut warnings = offline.warnings;
                warnings.extend(cache_error.map(|error| error.to_string()));
                LoadedCatalog {
                    catalog,
                    source: CatalogSource::Fetched { url },
                    warnings,
                    stale: false,
                }
            }
            Err(error) => {
                offline.warnings.push(error.to_string());
                offline
            }
        }
    }

    /// Fetches the catalog within `timeout` and caches it.
    ///
    /// Fails with [`CatalogError::Disabled`] when fetching is off, as the fetch fails
    /// (the cache is then untouched), or with [`CatalogError::Cache`] when the fetched
    /// catalog cannot be written.
    pub async fn refresh(&self, timeout: Duration) -> Result<Catalog, CatalogError> {
        let url = self.settings.url.clone().ok_or(CatalogError::Disabled)?;
        match self.fetch_and_cache(&url, timeout).await? {
            (catalog, None) => Ok(catalog),
            (_, Some(error)) => Err(CatalogError::Cache(error)),
        }
    }

    /// Starts [`CatalogStore::refresh`] on a thread of its own and returns at once; no
    /// one has to wait for it (a process that exits first simply drops it, and the cache
    /// is replaced atomically or not at all). `None` when fetching is off, the thread
    /// cannot start, or this process is already refreshing.
    pub fn refresh_in_background(
        &self,
    ) -> Option<std::thread::JoinHandle<Result<Catalog, CatalogError>>> {
        self.settings.url.as_ref()?;
        if REFRESHING.swap(true, Ordering::AcqRel) {
            return None;
        }
        let store = self.clone();
        let spawned = std::thread::Builder::new().name("catalog-refresh".into()).spawn(move || {
            let _done = ClearOnDrop(&REFRESHING);
            // A runtime of its own: the caller's may be shutting down (exec) or busy.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|error| CatalogError::InvalidConfig {
                    url: store.settings.url.clone().unwrap_or_default(),
                    message: format!("cannot start a runtime for the refresh: {error}"),
                })?;
            runtime.block_on(store.refresh(BACKGROUND_FETCH_TIMEOUT))
        });
        match spawned {
            Ok(handle) => Some(handle),
            Err(_) => {
                REFRESHING.store(false, Ordering::Release);
                None
            }
        }
    }

    /// What a session opening now should know about `model_id` on `provider`: from the
    /// cache or the snapshot, never the network; a due refresh is started in the
    /// background and not waited for.
    pub fn session_profile(&self, provider: &ProviderConfig, model_id: &str) -> ModelProfile {
        let loaded = self.load_offline();
        if loaded.stale {
            drop(self.refresh_in_background());
        }
        loaded.catalog.profile(provider, model_id)
    }

    fn is_stale(&self, cached: &CachedCatalog<Catalog>) -> bool {
        self.settings.url.as_deref() != Some(cached.url.as_str())
            || cached.age() >= self.settings.ttl
    }

    /// The fetched catalog, and the error if caching it failed (it is good either way).
    async fn fetch_and_cache(
        &self,
        url: &str,
        timeout: Duration,
    ) -> Result<(Catalog, Option<CatalogCacheError>), CatalogError> {
        let catalog = fetch_catalog(url, self.settings.ca_bundle.as_deref(), timeout).await?;
        let entry = CachedCatalog::fetched_now(url, catalog);
        // A blocking write of a few MB at most, and a bounded wait for the lock.
        let written = self.cache.write(&entry).err();
        Ok((entry.catalog, written))
    }
}

struct ClearOnDrop(&'static AtomicBool);

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

fn snapshot(warnings: Vec<String>, stale: bool) -> LoadedCatalog {
    LoadedCatalog { catalog: Catalog::snapshot(), source: CatalogSource::Snapshot, warnings, stale }
}

fn describe_age(age: Duration) -> String {
    let seconds = age.as_secs();
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3_600 => format!("{} min", seconds / 60),
        3_600..172_800 => format!("{} h", seconds / 3_600),
        _ => format!("{} days", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_overrides_config_and_off_turns_fetching_off() {
        let url = |configured: &str, environment: Option<&str>| {
            CatalogSettings::resolve(configured, environment, None).url
        };
        assert_eq!(url("https://a/api.json", None).as_deref(), Some("https://a/api.json"));
        assert_eq!(url("https://a/api.json", Some("http://b/")).as_deref(), Some("http://b/"));
        assert_eq!(url("https://a/api.json", Some("  ")).as_deref(), Some("https://a/api.json"));
        assert_eq!(url("https://a/api.json", Some("OFF")), None);
        assert_eq!(url("off", None), None);
        assert_eq!(url("", None), None);
    }

    #[test]
    fn sources_say_where_the_catalog_came_from() {
        let cache = CatalogSource::Cache {
            url: "http://x/api.json".into(),
            age: Duration::from_secs(3 * 3_600 + 5),
            stale: true,
        };
        assert_eq!(cache.to_string(), "cache (fetched 3 h ago from http://x/api.json, stale)");
        assert!(
            CatalogSource::Snapshot.to_string().starts_with("the snapshot bundled with kestrel")
        );
        assert_eq!(describe_age(Duration::from_secs(59)), "59 s");
        assert_eq!(describe_age(Duration::from_secs(3 * 86_400)), "3 days");
    }
}
