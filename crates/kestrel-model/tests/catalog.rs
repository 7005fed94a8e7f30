//! The model catalog over real HTTP: fetched from a loopback server, cached, used offline
//! from the cache and from the bundled snapshot; stale, corrupt and foreign caches; bad
//! answers and timeouts falling back with a reason; the background refresh; providers'
//! own model lists from the scripted server.

// Test support: a failed set-up should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kestrel_model::{
    CatalogSettings, CatalogSource, CatalogStore, ModelProfile, ProfileOrigin, ProviderConfig,
    TokenUsage, WireApi, list_provider_models,
};
use kestrel_store::{CachedCatalog, CatalogCache, KestrelHome};
use kestrel_testkit::{Script, ScriptedServer};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Every fetch in these tests is bounded by this.
const FETCH: Duration = Duration::from_secs(10);

/// A catalog in the models.dev shape with one priced model of a `scripted` provider.
const CATALOG: &str = r#"{
  "scripted": {"id": "scripted", "name": "Scripted", "env": [], "models": {
    "test-model": {"id": "test-model", "name": "Test Model", "tool_call": true,
                   "cost": {"input": 2.0, "output": 8.0, "cache_read": 0.5},
                   "limit": {"context": 64000, "output": 4096}, "some_future_field": {"x": 1}}
  }},
  "openai": {"models": {"gpt-new": {"id": "gpt-new", "limit": {"context": 999000, "output": 1000}}}}
}"#;

/// What the test server answers every request with.
#[derive(Clone)]
enum Answer {
    Ok(String),
    Status(u16, String),
    /// Accept, read the request, never answer.
    Silence,
}

/// A loopback HTTP server that answers every GET the same way and counts requests.
/// Dropping it closes the port: the server is "gone".
struct CatalogServer {
    url: String,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    address: std::net::SocketAddr,
}

impl CatalogServer {
    fn start(answer: Answer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_hits, thread_stop) = (hits.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                if thread_stop.load(Ordering::Acquire) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|read| read > 0) && line != "\r\n" {
                    line.clear();
                }
                thread_hits.fetch_add(1, Ordering::AcqRel);
                let (status, body) = match &answer {
                    Answer::Ok(body) => (200, body.clone()),
                    Answer::Status(status, body) => (*status, body.clone()),
                    Answer::Silence => {
                        held.push(stream);
                        continue;
                    }
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Self { url: format!("http://{address}/api.json"), hits, stop, address }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::Acquire)
    }
}

impl Drop for CatalogServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag and closes the listener.
        let _ = TcpStream::connect(self.address);
    }
}

/// A URL on which nothing listens.
fn gone_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api.json", listener.local_addr().unwrap());
    drop(listener);
    url
}

fn store(home: &KestrelHome, url: &str) -> CatalogStore {
    CatalogStore::new(home, CatalogSettings::resolve(url, None, None))
}

fn scripted_provider(base_url: &str, wire_api: WireApi) -> ProviderConfig {
    ProviderConfig {
        name: "scripted".into(),
        base_url: base_url.into(),
        wire_api,
        api_key: Some("sk-catalog-test".into()),
        api_key_env: Some("CATALOG_TEST_KEY".into()),
        headers: Vec::new(),
    }
}

fn home() -> (tempfile::TempDir, KestrelHome) {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path().join("home"));
    (dir, home)
}

/// Writes a cache of `url` fetched `age` ago.
fn write_cache(home: &KestrelHome, url: &str, age: Duration) {
    let catalog = kestrel_model::Catalog::from_json("test", CATALOG).unwrap();
    let mut entry = CachedCatalog::fetched_now(url, catalog);
    entry.fetched_at -= age.as_secs();
    CatalogCache::new(home).write(&entry).unwrap();
}

#[tokio::test]
async fn fetched_from_a_server_cached_and_then_used_offline() {
    let (_dir, home) = home();
    let server = CatalogServer::start(Answer::Ok(CATALOG.into()));
    let url = server.url.clone();

    let loaded = store(&home, &url).load(false, FETCH).await;
    assert_eq!(loaded.source, CatalogSource::Fetched { url: url.clone() });
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert!(loaded.catalog.find("scripted", "test-model").is_some());
    assert!(CatalogCache::new(&home).path().is_file());
    assert_eq!(server.hits(), 1);

    // Fresh: the next load reads the cache without asking the server.
    let again = store(&home, &url).load(false, FETCH).await;
    assert!(
        matches!(again.source, CatalogSource::Cache { stale: false, .. }),
        "{:?}",
        again.source
    );
    assert_eq!(server.hits(), 1);

    // Offline, with the server gone: the cache still answers.
    drop(server);
    let offline = store(&home, &url).load(false, FETCH).await;
    assert!(matches!(offline.source, CatalogSource::Cache { stale: false, .. }));
    let model = offline.catalog.find("scripted", "test-model").unwrap().model;
    assert_eq!(model.context_window, Some(64_000));
    assert_eq!(model.tool_call, Some(true));
}

#[tokio::test]
async fn a_stale_cache_is_used_when_the_server_is_gone() {
    let (_dir, home) = home();
    let url = gone_url();
    write_cache(&home, &url, Duration::from_secs(3 * 24 * 3600));
    let loaded = store(&home, &url).load(false, FETCH).await;
    assert!(
        matches!(loaded.source, CatalogSource::Cache { stale: true, .. }),
        "{:?}",
        loaded.source
    );
    assert!(loaded.catalog.find("scripted", "test-model").is_some());
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].contains(&url), "{:?}", loaded.warnings);
}

#[tokio::test]
async fn a_stale_cache_is_refreshed_when_the_server_answers() {
    let (_dir, home) = home();
    let server = CatalogServer::start(Answer::Ok(CATALOG.replace("64000", "65000")));
    write_cache(&home, &server.url, Duration::from_secs(2 * 24 * 3600));
    let loaded = store(&home, &server.url).load(false, FETCH).await;
    assert!(matches!(loaded.source, CatalogSource::Fetched { .. }));
    let cached: CachedCatalog<kestrel_model::Catalog> =
        CatalogCache::new(&home).read().unwrap().unwrap();
    assert!(cached.age() < Duration::from_secs(3600), "the cache was replaced");
    let model = cached.catalog.find("scripted", "test-model").unwrap().model;
    assert_eq!(model.context_window, Some(65_000));
}

#[tokio::test]
async fn no_cache_and_no_server_means_the_bundled_snapshot() {
    let (_dir, home) = home();
    let url = gone_url();
    let loaded = store(&home, &url).load(false, FETCH).await;
    assert_eq!(loaded.source, CatalogSource::Snapshot);
    assert!(loaded.warnings[0].contains(&url), "{:?}", loaded.warnings);
    assert!(loaded.catalog.find("anthropic", "claude-sonnet-4-5").is_some());
    assert!(!CatalogCache::new(&home).path().exists(), "nothing is cached from a failure");

    let offline = store(&home, &url).load_offline();
    assert_eq!(offline.source, CatalogSource::Snapshot);
    assert!(offline.stale, "a refresh is due");
}

#[tokio::test]
async fn a_cache_of_another_url_is_stale() {
    let (_dir, home) = home();
    let server = CatalogServer::start(Answer::Ok(CATALOG.into()));
    write_cache(&home, "http://127.0.0.1:1/old.json", Duration::ZERO);
    let offline = store(&home, &server.url).load_offline();
    assert!(offline.stale);
    let loaded = store(&home, &server.url).load(false, FETCH).await;
    assert_eq!(loaded.source, CatalogSource::Fetched { url: server.url.clone() });
}

#[tokio::test]
async fn a_corrupt_cache_falls_back_to_the_snapshot_with_a_warning_and_is_repaired() {
    let (_dir, home) = home();
    let cache = CatalogCache::new(&home);
    std::fs::create_dir_all(home.cache_dir()).unwrap();
    std::fs::write(cache.path(), "{\"url\": \"x\", \"fetched_at\": 1, \"catalog\": {\"p\": ")
        .unwrap();

    let offline = store(&home, &gone_url()).load_offline();
    assert_eq!(offline.source, CatalogSource::Snapshot);
    assert!(offline.warnings[0].contains("catalog.json"), "{:?}", offline.warnings);

    let server = CatalogServer::start(Answer::Ok(CATALOG.into()));
    let loaded = store(&home, &server.url).load(false, FETCH).await;
    assert!(matches!(loaded.source, CatalogSource::Fetched { .. }));
    assert!(cache.read::<kestrel_model::Catalog>().unwrap().is_some(), "repaired");
}

#[tokio::test]
async fn bad_answers_fall_back_with_the_reason_and_leave_the_cache_alone() {
    for (answer, says) in [
        (Answer::Status(500, "{\"error\": \"boom\"}".into()), "HTTP 500"),
        (Answer::Ok("<html>maintenance</html>".into()), "not a model catalog"),
        (Answer::Ok("{\"error\": {\"message\": \"nope\"}}".into()), "lists no model"),
    ] {
        let (_dir, home) = home();
        let server = CatalogServer::start(answer);
        write_cache(&home, &server.url, Duration::from_secs(7 * 24 * 3600));
        let loaded = store(&home, &server.url).load(false, FETCH).await;
        assert!(matches!(loaded.source, CatalogSource::Cache { stale: true, .. }));
        assert!(
            loaded.warnings.iter().any(|w| w.contains(says) && w.contains(&server.url)),
            "{says}: {:?}",
            loaded.warnings
        );
        let cached: CachedCatalog<kestrel_model::Catalog> =
            CatalogCache::new(&home).read().unwrap().unwrap();
        assert!(cached.age() > Duration::from_secs(24 * 3600), "{says}: untouched");
    }
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_and_falls_back() {
    let (_dir, home) = home();
    let server = CatalogServer::start(Answer::Silence);
    let loaded = store(&home, &server.url).load(false, Duration::from_millis(300)).await;
    assert_eq!(loaded.source, CatalogSource::Snapshot);
    assert!(loaded.warnings[0].contains("within 300ms"), "{:?}", loaded.warnings);
}

#[tokio::test]
async fn refresh_is_forced_on_request_and_turned_off_by_off() {
    let (_dir, home) = home();
    let server = CatalogServer::start(Answer::Ok(CATALOG.into()));
    write_cache(&home, &server.url, Duration::ZERO);
    let loaded = store(&home, &server.url).load(true, FETCH).await;
    assert!(matches!(loaded.source, CatalogSource::Fetched { .. }));
    assert_eq!(server.hits(), 1);

    let off = store(&home, "off").load(true, FETCH).await;
    assert!(matches!(off.source, CatalogSource::Cache { stale: false, .. }), "{:?}", off.source);
    assert!(off.warnings[0].contains("turned off"), "{:?}", off.warnings);
    assert_eq!(server.hits(), 1, "no fetch when off");
}

#[test]
fn a_session_profile_comes_from_the_cache_and_a_background_refresh_updates_it() {
    let (_dir, home) = home();
    let server = CatalogServer::start(Answer::Ok(CATALOG.into()));
    let store = store(&home, &server.url);
    let provider = scripted_provider("http://127.0.0.1:9/v1", WireApi::Chat);

    // No cache yet: the snapshot does not know the model, and nothing waits for the network.
    // (The provider is on this machine: the local default window.)
    assert_eq!(
        store.load_offline().catalog.profile(&provider, "test-model"),
        ModelProfile::unknown_local()
    );
    let refresh = store.refresh_in_background().expect("a refresh starts");
    assert!(store.refresh_in_background().is_none(), "one refresh at a time per process");
    refresh.join().unwrap().unwrap();

    let profile = store.session_profile(&provider, "test-model");
    assert_eq!(profile.origin, ProfileOrigin::Catalog { provider_id: "scripted".into() });
    assert_eq!((profile.context_window, profile.max_output_tokens), (64_000, Some(4_096)));
    let usage = TokenUsage {
        input_tokens: 1_000_000,
        cached_input_tokens: 500_000,
        output_tokens: 100_000,
        reasoning_tokens: 40_000,
        cache_write_tokens: 0,
    };
    let cost = profile.cost(&usage);
    assert!((cost - (0.5 * 2.0 + 0.5 * 0.5 + 0.1 * 8.0)).abs() < 1e-9, "{cost}");
}

#[tokio::test]
async fn providers_list_their_own_models_with_their_key() {
    for wire in [WireApi::Chat, WireApi::Responses, WireApi::Anthropic] {
        let server = ScriptedServer::start(Script::default()).unwrap();
        let provider = scripted_provider(&server.base_url(), wire);
        let listed = list_provider_models(&provider, None, FETCH).await.unwrap();
        assert_eq!(listed.len(), 1, "{wire:?}");
        assert!(!listed[0].id.is_empty());
        let request = &server.requests()[0];
        assert_eq!(request.method, "GET");
        let header =
            |name: &str| request.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        match wire {
            WireApi::Anthropic => {
                assert_eq!(request.path, "/v1/models?limit=1000");
                assert_eq!(header("x-api-key").as_deref(), Some("sk-catalog-test"));
                assert!(header("anthropic-version").is_some());
            }
            WireApi::Chat | WireApi::Responses => {
                assert_eq!(request.path, "/v1/models");
                assert_eq!(header("authorization").as_deref(), Some("Bearer sk-catalog-test"));
            }
        }
    }
}

#[tokio::test]
async fn a_model_list_needs_the_key_and_a_reachable_server() {
    let mut provider = scripted_provider("http://127.0.0.1:9/v1", WireApi::Chat);
    provider.api_key = None;
    let error = list_provider_models(&provider, None, FETCH).await.unwrap_err();
    assert!(error.to_string().contains("CATALOG_TEST_KEY"), "{error}");

    let gone = gone_url().replace("/api.json", "/v1");
    let provider = scripted_provider(&gone, WireApi::Chat);
    let error = list_provider_models(&provider, None, FETCH).await.unwrap_err();
    assert!(error.to_string().contains(&gone), "{error}");
}
