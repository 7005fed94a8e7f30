//! `kestrel models` end to end: the catalog fetched from a loopback server (stderr says
//! so), cached, then listed from the cache and from the bundled snapshot with the server
//! gone; the provider's own `/models` merged in; bad arguments. A session on a model the
//! catalog does not know gets the context length the provider's list reports, once a
//! background fetch has cached it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog_support;
mod common;
mod worker_support;

use catalog_support::{CATALOG, CatalogServer};
use common::{TestEnv, Wire, stderr, stdout};
use kestrel_testkit::Script;
use serde_json::Value;
use std::process::Output;

fn models(env: &TestEnv, url: &str, args: &[&str]) -> Output {
    let mut all = vec!["models"];
    all.extend_from_slice(args);
    env.command(&all).env("KESTREL_CATALOG_URL", url).output().expect("kestrel runs")
}

fn json_lines(output: &Output) -> Vec<Value> {
    stdout(output).lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn row<'a>(rows: &'a [Value], model: &str) -> &'a Value {
    rows.iter().find(|row| row["model"] == model).unwrap_or_else(|| panic!("{model} in {rows:?}"))
}

#[test]
fn models_fetches_caches_and_falls_back_to_cache_then_snapshot() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    let server = CatalogServer::start(CATALOG);
    let url = server.url.clone();

    let fetched = models(&env, &url, &["scripted", "--json"]);
    assert!(fetched.status.success(), "{}", stderr(&fetched));
    assert!(
        stderr(&fetched).contains(&format!("model catalog: fetched from {url}")),
        "{}",
        stderr(&fetched)
    );
    let rows = json_lines(&fetched);
    let priced = row(&rows, "test-model");
    assert_eq!(priced["provider"], "scripted");
    assert_eq!(priced["context_window"], 64_000);
    assert_eq!(priced["max_output_tokens"], 4_096);
    assert_eq!(priced["pricing"]["input"], 2.0);
    assert_eq!(priced["pricing"]["cache_read"], 0.5);
    assert_eq!(
        (priced["in_catalog"].as_bool(), priced["listed_by_provider"].as_bool()),
        (Some(true), Some(false))
    );
    // The scripted server's own list adds a model the catalog lacks: unknown limits.
    let listed = row(&rows, "scripted-model");
    assert_eq!(
        (listed["in_catalog"].as_bool(), listed["listed_by_provider"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(listed["context_window"], Value::Null);
    assert_eq!(listed["pricing"], Value::Null);
    assert!(
        env.requests()
            .iter()
            .any(|request| request.method == "GET" && request.path == "/v1/models")
    );
    assert!(env.home.path().join("cache/catalog.json").is_file());
    assert_eq!(server.hits(), 1);

    // The server gone, the fresh cache answers; the table shows the limits and prices.
    drop(server);
    let cached = models(&env, &url, &["scripted"]);
    assert!(cached.status.success(), "{}", stderr(&cached));
    assert!(stderr(&cached).contains("model catalog: cache (fetched"), "{}", stderr(&cached));
    let table = stdout(&cached);
    let line = table.lines().find(|line| line.starts_with("scripted/test-model")).unwrap();
    let columns: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(columns, ["scripted/test-model", "64k", "4.1k", "2.00", "0.50", "8.00"], "{table}");
    assert!(table.lines().next().unwrap().starts_with("MODEL"), "{table}");

    // Forced, the refresh fails and the cache is still used, saying why.
    let forced = models(&env, &url, &["scripted", "--refresh"]);
    assert!(forced.status.success());
    assert!(stderr(&forced).contains("model catalog: cache"), "{}", stderr(&forced));
    assert!(
        stderr(&forced).contains(&format!("warning: cannot fetch {url}")),
        "{}",
        stderr(&forced)
    );

    // No cache and no server: the bundled snapshot.
    std::fs::remove_file(env.home.path().join("cache/catalog.json")).unwrap();
    let snapshot = models(&env, &url, &["--json"]);
    assert!(snapshot.status.success(), "{}", stderr(&snapshot));
    assert!(
        stderr(&snapshot).contains("model catalog: the snapshot bundled with kestrel"),
        "{}",
        stderr(&snapshot)
    );
    let rows = json_lines(&snapshot);
    let sonnet = rows
        .iter()
        .find(|row| row["provider"] == "anthropic" && row["model"] == "claude-sonnet-4-5")
        .unwrap();
    assert_eq!(sonnet["context_window"], 200_000);
    assert_eq!(sonnet["pricing"]["input"], 3.0);
}

#[test]
fn an_unknown_provider_is_a_usage_error_naming_the_known_ones() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    let output = models(&env, "off", &["nonesuch"]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(text.contains("unknown provider `nonesuch`") && text.contains("scripted"), "{text}");
}

#[test]
fn with_fetching_off_the_cache_or_snapshot_is_listed_without_the_network() {
    let env = TestEnv::new(Wire::Anthropic, Script::default());
    let output = models(&env, "off", &["scripted", "--refresh"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stderr(&output);
    assert!(text.contains("snapshot") && text.contains("turned off"), "{text}");
    // `off` is no network at all: not even the provider's own list.
    assert!(text.contains("--ask-providers"), "{text}");
    assert!(env.requests().is_empty(), "{:?}", env.requests());
    assert!(!stdout(&output).contains("scripted/scripted-model"));

    // Asked for, the provider's own list is fetched (Anthropic's shape, with the key).
    let output = models(&env, "off", &["scripted", "--ask-providers"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stderr(&output).contains("--ask-providers"), "{}", stderr(&output));
    let request = env.requests().into_iter().find(|request| request.method == "GET").unwrap();
    assert_eq!(request.path, "/v1/models?limit=1000");
    assert!(stdout(&output).contains("scripted/scripted-model"));
}

#[test]
fn context_lengths_come_from_the_config_then_the_catalog_then_the_providers_list() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    let server = CatalogServer::start(
        r#"{"object": "list", "data": [
            {"id": "qwen-loaded", "loaded_context_length": 4096, "max_context_length": 131072},
            {"id": "vllm-model", "max_model_len": 16384},
            {"id": "bare-model", "object": "model"}]}"#,
    );
    let base = server.url.trim_end_matches("/api.json").to_string();
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    let local = format!("\n[providers.lm]\nbase_url = \"{base}/v1\"\n");
    env.write_config(&format!("{config}{local}"));
    let output = models(&env, "off", &["lm", "--json", "--ask-providers"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let rows = json_lines(&output);
    assert_eq!(row(&rows, "qwen-loaded")["context_window"], 4096);
    assert_eq!(row(&rows, "vllm-model")["context_window"], 16384);
    assert_eq!(row(&rows, "bare-model")["context_window"], Value::Null);

    env.write_config(&format!("{config}{local}context_window = 2048\n"));
    let rows = json_lines(&models(&env, "off", &["lm", "--json", "--ask-providers"]));
    assert!(rows.iter().all(|row| row["context_window"] == 2048), "{rows:?}");

    // A context_window that is not a number is a config error naming it.
    env.write_config(&format!("{config}{local}context_window = \"big\"\n"));
    let output = models(&env, "off", &["lm"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("context_window"), "{}", stderr(&output));
}

/// A loopback OpenAI-compatible server like LM Studio: `GET /v1/models` reports
/// `qwen-local` with a loaded context of 4096 tokens; every `POST` streams the answer
/// "ok" with usage. Returns its base URL (`.../v1`).
fn local_server() -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                let _ = reader.read_line(&mut request_line);
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let mut stream = stream;
                let (kind, body) = if request_line.starts_with("GET") {
                    let list = r#"{"object": "list", "data": [{"id": "qwen-local", "object": "model", "loaded_context_length": 4096}]}"#;
                    ("application/json", list.to_string())
                } else {
                    let chunk = |delta: &str, finish: &str, usage: &str| {
                        format!(
                            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"qwen-local\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]{usage}}}\n\n"
                        )
                    };
                    let usage =
                        r#","usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}"#;
                    let events = chunk(r#"{"role":"assistant","content":"ok"}"#, "null", "")
                        + &chunk("{}", r#""stop""#, usage)
                        + "data: [DONE]\n\n";
                    ("text/event-stream", events)
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(body.as_bytes());
            });
        }
    });
    base
}

#[tokio::test]
async fn a_model_the_catalog_does_not_know_gets_the_context_length_its_provider_reports() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    let base = local_server();
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    let config = config.replace("model = \"scripted/test-model\"", "model = \"lm/qwen-local\"");
    env.write_config(&format!("{config}\n[providers.lm]\nbase_url = \"{base}\"\n"));
    // Catalog fetching on (a catalog that does not know the model): the provider's list
    // is fetched in the background.
    let catalog = CatalogServer::start(CATALOG);
    let mut worker =
        worker_support::Worker::spawn_with(&env, &[("KESTREL_CATALOG_URL", catalog.url.as_str())]);
    // The first session opens before the list is known: the default for a local server.
    let first = worker.start_session(&env.work_path()).await;
    let turn = worker.prompt(&first, "one", &[]).await;
    assert_eq!(turn.of_kind("usage_update").pop().unwrap()["size"], 32_768);

    let cache = env.home.path().join("cache/provider-models.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !std::fs::read_to_string(&cache).is_ok_and(|text| text.contains("qwen-local")) {
        assert!(std::time::Instant::now() < deadline, "the provider's list was never cached");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    worker.close().await;
    let mut worker =
        worker_support::Worker::spawn_with(&env, &[("KESTREL_CATALOG_URL", catalog.url.as_str())]);
    let second = worker.start_session(&env.work_path()).await;
    let turn = worker.prompt(&second, "two", &[]).await;
    assert_eq!(turn.of_kind("usage_update").pop().unwrap()["size"], 4096);
    worker.close().await;
}
