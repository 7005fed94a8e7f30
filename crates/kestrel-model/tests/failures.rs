//! Failures over real HTTP, for each wire API: auth, rate limits and retries, server
//! errors, broken and malformed streams, unreachable servers, cancellation, idle
//! timeouts, and settings that cannot work.

mod common;

use std::time::Duration;

use common::{
    WIRES, client_for, collect, options, request, stream_error, text_of, unreachable_base_url,
};
use kestrel_model::{ClientOptions, ModelClient, ModelError, StreamEvent, WireApi};
use kestrel_testkit::{Fault, Script, ScriptedServer, Step};
use tokio_util::sync::CancellationToken;

fn status(status: u16, times: u32, message: Option<&str>) -> Fault {
    Fault::Status {
        status,
        retry_after_secs: None,
        message: message.map(str::to_owned),
        times: Some(times),
    }
}

#[tokio::test]
async fn unauthorized_is_an_auth_error_naming_the_key_variable_and_is_not_retried() {
    for wire in WIRES {
        let server =
            ScriptedServer::start(Script::new([Step::text("x").with_fault(status(401, 5, None))]))
                .unwrap();
        let (options, notices) = options(5);
        let client = client_for(&server.base_url(), wire, options);
        let error = stream_error(&client).await;
        match &error {
            ModelError::Auth { url, status: 401, message, api_key_env } => {
                assert_eq!(url, client.shown_url());
                assert!(message.contains("invalid API key"), "{message}");
                assert_eq!(api_key_env.as_deref(), Some("SCRIPTED_API_KEY"));
            }
            other => panic!("{wire:?}: {other:?}"),
        }
        assert!(error.to_string().contains("SCRIPTED_API_KEY"), "{error}");
        assert_eq!(server.requests().len(), 1, "{wire:?}");
        assert!(notices.lock().unwrap().is_empty());
    }
}

#[tokio::test]
async fn rate_limit_then_success_is_retried_and_reported() {
    for wire in WIRES {
        let fault =
            Fault::Status { status: 429, retry_after_secs: Some(0), message: None, times: Some(1) };
        let server =
            ScriptedServer::start(Script::new([Step::text("made it").with_fault(fault)])).unwrap();
        let (options, notices) = options(5);
        let client = client_for(&server.base_url(), wire, options);
        let mut stream = client.stream(&request(), &CancellationToken::new()).await.unwrap();
        let (events, error) = collect(&mut stream).await;
        assert!(error.is_none(), "{wire:?}: {error:?}");
        assert_eq!(text_of(&events), "made it");
        assert_eq!(server.requests().len(), 2, "{wire:?}");
        let notices = notices.lock().unwrap();
        assert_eq!(notices.len(), 1, "{wire:?}");
        assert_eq!(notices[0].url, client.shown_url());
        assert_eq!((notices[0].attempt, notices[0].max_attempts), (2, 5));
        assert_eq!(notices[0].delay, Duration::ZERO, "Retry-After: 0 is honoured");
        assert!(notices[0].reason.contains("429"), "{}", notices[0].reason);
    }
}

#[tokio::test]
async fn rate_limit_on_every_try_is_rate_limited_after_max_attempts() {
    let server =
        ScriptedServer::start(Script::new([Step::text("x").with_fault(status(429, 10, None))]))
            .unwrap();
    let client = client_for(&server.base_url(), WireApi::Chat, options(3).0);
    let error = stream_error(&client).await;
    assert!(matches!(error, ModelError::RateLimited { attempts: 3, .. }), "{error:?}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn server_error_on_every_try_fails_after_max_attempts() {
    for wire in WIRES {
        let server =
            ScriptedServer::start(Script::new([Step::text("x").with_fault(status(500, 10, None))]))
                .unwrap();
        let (options, notices) = options(3);
        let client = client_for(&server.base_url(), wire, options);
        let error = stream_error(&client).await;
        match &error {
            ModelError::Server { url, status: 500, attempts: 3, message } => {
                assert_eq!(url, client.shown_url());
                assert!(message.contains("internal server error"), "{message}");
            }
            other => panic!("{wire:?}: {other:?}"),
        }
        assert_eq!(server.requests().len(), 3, "{wire:?}");
        assert_eq!(notices.lock().unwrap().len(), 2, "{wire:?}");
    }
}

#[tokio::test]
async fn context_overflow_and_other_bad_requests_are_not_retried() {
    let cases = [
        (WireApi::Anthropic, "prompt is too long: 210000 tokens > 200000 maximum"),
        (
            WireApi::Chat,
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
        ),
        (WireApi::Responses, "Your input exceeds the context window of this model."),
    ];
    for (wire, message) in cases {
        let server = ScriptedServer::start(Script::new([Step::text("x").with_fault(status(
            400,
            5,
            Some(message),
        ))]))
        .unwrap();
        let client = client_for(&server.base_url(), wire, options(5).0);
        let error = stream_error(&client).await;
        assert!(
            matches!(&error, ModelError::ContextWindowExceeded { message: m } if m == message),
            "{wire:?}: {error:?}"
        );
        assert_eq!(server.requests().len(), 1);
    }
    for wire in WIRES {
        let message = "tools.0.name: String should match pattern";
        let server = ScriptedServer::start(Script::new([Step::text("x").with_fault(status(
            400,
            5,
            Some(message),
        ))]))
        .unwrap();
        let client = client_for(&server.base_url(), wire, options(5).0);
        let error = stream_error(&client).await;
        assert!(
            matches!(&error, ModelError::BadRequest { status: 400, message: m, .. } if m == message),
            "{wire:?}: {error:?}"
        );
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn a_stream_dropped_mid_response_is_interrupted_and_not_retried() {
    let long_text =
        "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen";
    for wire in WIRES {
        let step = Step::text(long_text).with_fault(Fault::DropAfter { events: 12 });
        let server = ScriptedServer::start(Script::new([step, Step::text("second")])).unwrap();
        let client = client_for(&server.base_url(), wire, options(5).0);
        let mut stream = client.stream(&request(), &CancellationToken::new()).await.unwrap();
        let (events, error) = collect(&mut stream).await;
        assert!(!text_of(&events).is_empty(), "{wire:?}: some text arrived first");
        assert!(!events.iter().any(|e| matches!(e, StreamEvent::Completed { .. })));
        match &error {
            Some(ModelError::StreamInterrupted { url, .. }) => assert_eq!(url, client.shown_url()),
            other => panic!("{wire:?}: {other:?}"),
        }
        assert_eq!(server.requests().len(), 1, "{wire:?}: never retried after events");
    }
}

#[tokio::test]
async fn a_stream_dropped_before_any_event_is_retried() {
    for wire in WIRES {
        let server = ScriptedServer::start(Script::new([
            Step::text("lost").with_fault(Fault::DropAfter { events: 1 }),
            Step::text("second try"),
        ]))
        .unwrap();
        let (options, notices) = options(3);
        let client = client_for(&server.base_url(), wire, options);
        let mut stream = client.stream(&request(), &CancellationToken::new()).await.unwrap();
        let (events, error) = collect(&mut stream).await;
        assert!(error.is_none(), "{wire:?}: {error:?}");
        assert_eq!(text_of(&events), "second try", "{wire:?}");
        assert_eq!(server.requests().len(), 2);
        assert_eq!(notices.lock().unwrap().len(), 1);
    }
}

#[tokio::test]
async fn malformed_json_is_a_malformed_error() {
    for wire in WIRES {
        // Mid-stream: the events before it arrive, then the error.
        let step = Step::text("alpha beta gamma delta epsilon zeta eta theta")
            .with_fault(Fault::MalformedJson { after_events: 6 });
        let server = ScriptedServer::start(Script::new([step])).unwrap();
        let client = client_for(&server.base_url(), wire, options(3).0);
        let mut stream = client.stream(&request(), &CancellationToken::new()).await.unwrap();
        let (events, error) = collect(&mut stream).await;
        assert!(!events.is_empty(), "{wire:?}");
        assert!(
            matches!(&error, Some(ModelError::Malformed { url, .. }) if url == client.shown_url()),
            "{wire:?}: {error:?}"
        );

        // First thing in the stream: not retried either (the server is broken, not busy).
        let step = Step::text("x").with_fault(Fault::MalformedJson { after_events: 0 });
        let server = ScriptedServer::start(Script::new([step, Step::text("y")])).unwrap();
        let client = client_for(&server.base_url(), wire, options(3).0);
        let error = stream_error(&client).await;
        assert!(matches!(error, ModelError::Malformed { .. }), "{wire:?}: {error:?}");
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn an_unreachable_server_is_a_network_error_naming_the_url() {
    let base_url = unreachable_base_url();
    for wire in WIRES {
        let (options, notices) = options(2);
        let client = client_for(&base_url, wire, options);
        let error = stream_error(&client).await;
        match &error {
            ModelError::Network { url, attempts: 2, .. } => assert_eq!(url, client.shown_url()),
            other => panic!("{wire:?}: {other:?}"),
        }
        assert!(error.to_string().contains(&base_url), "{error}");
        assert_eq!(notices.lock().unwrap()[0].url, client.shown_url());
    }
}

#[tokio::test]
async fn cancellation_stops_at_once_before_during_and_between_tries() {
    for wire in WIRES {
        // Before the request.
        let server = ScriptedServer::start(Script::new([Step::text("never")])).unwrap();
        let client = client_for(&server.base_url(), wire, options(3).0);
        let cancel = CancellationToken::new();
        cancel.cancel();
        let result = client.stream(&request(), &cancel).await;
        assert!(matches!(result, Err(ModelError::Cancelled)), "{wire:?}");

        // Mid-stream, while the next chunk is minutes away.
        let step =
            Step::text("slow words arrive here").with_fault(Fault::SlowChunks { delay_ms: 60_000 });
        let server = ScriptedServer::start(Script::new([step])).unwrap();
        let client = client_for(&server.base_url(), wire, options(3).0);
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            canceller.cancel();
        });
        let started =
            tokio::time::timeout(common::TEST_TIMEOUT, client.stream(&request(), &cancel))
                .await
                .expect("cancel did not stop the request");
        assert!(matches!(started, Err(ModelError::Cancelled)), "{wire:?}: {started:?}");

        // While waiting to retry.
        let fault =
            Fault::Status { status: 429, retry_after_secs: Some(5), message: None, times: Some(1) };
        let server =
            ScriptedServer::start(Script::new([Step::text("x").with_fault(fault)])).unwrap();
        let client = client_for(&server.base_url(), wire, options(3).0);
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            canceller.cancel();
        });
        let result = tokio::time::timeout(common::TEST_TIMEOUT, client.stream(&request(), &cancel))
            .await
            .expect("cancel did not stop the retry wait");
        assert!(matches!(result, Err(ModelError::Cancelled)), "{wire:?}");
    }
}

#[tokio::test]
async fn cancelling_an_open_stream_ends_it_with_cancelled() {
    for wire in WIRES {
        let step =
            Step::text("a b c d e f g h i j k l").with_fault(Fault::SlowChunks { delay_ms: 50 });
        let server = ScriptedServer::start(Script::new([step])).unwrap();
        let client = client_for(&server.base_url(), wire, options(3).0);
        let cancel = CancellationToken::new();
        let mut stream = client.stream(&request(), &cancel).await.unwrap();
        let first = stream.next().await;
        assert!(matches!(first, Some(Ok(_))), "{wire:?}: {first:?}");
        cancel.cancel();
        assert!(matches!(stream.next().await, Some(Err(ModelError::Cancelled))), "{wire:?}");
        assert!(stream.next().await.is_none());
    }
}

#[tokio::test]
async fn a_silent_stream_hits_the_idle_timeout() {
    for wire in WIRES {
        let step =
            Step::text("slow words arrive here").with_fault(Fault::SlowChunks { delay_ms: 30_000 });
        let server = ScriptedServer::start(Script::new([step])).unwrap();
        let (mut options, _) = options(1);
        options.idle_timeout = Duration::from_millis(300);
        let client = client_for(&server.base_url(), wire, options);
        let error = stream_error(&client).await;
        match &error {
            ModelError::StreamInterrupted { message, .. } => {
                assert!(message.contains("idle timeout"), "{message}")
            }
            other => panic!("{wire:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn settings_that_cannot_work_fail_before_any_request() {
    kestrel_model::install_crypto_provider();
    let mut provider = common::provider("http://127.0.0.1:1/v1", WireApi::Chat);
    provider.api_key = Some(String::new());
    let error = ModelClient::new(provider.clone(), ClientOptions::default()).unwrap_err();
    assert!(
        matches!(&error, ModelError::MissingApiKey { provider, variable } if provider == "scripted" && variable == "SCRIPTED_API_KEY"),
        "{error:?}"
    );
    provider.api_key = None;
    assert!(matches!(
        ModelClient::new(provider.clone(), ClientOptions::default()),
        Err(ModelError::MissingApiKey { .. })
    ));

    // No key variable configured (a local server): no key needed.
    provider.api_key_env = None;
    assert!(ModelClient::new(provider.clone(), ClientOptions::default()).is_ok());

    let mut bad_url = provider.clone();
    bad_url.base_url = "127.0.0.1:11434/v1".into();
    let error = ModelClient::new(bad_url, ClientOptions::default()).unwrap_err();
    assert!(
        matches!(&error, ModelError::InvalidConfig { message, .. } if message.contains("base_url")),
        "{error:?}"
    );

    let options = ClientOptions {
        ca_bundle: Some("/nonexistent/kestrel-ca.pem".into()),
        ..ClientOptions::default()
    };
    let error = ModelClient::new(provider, options).unwrap_err();
    assert!(
        matches!(&error, ModelError::InvalidConfig { message, .. } if message.contains("/nonexistent/kestrel-ca.pem")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_json_answer_instead_of_a_stream_is_malformed_or_the_error_it_carries() {
    let body = r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[]}"#;
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (port, _) = common::serve_once(response.into_bytes()).await;
    let client = client_for(&format!("http://127.0.0.1:{port}/v1"), WireApi::Chat, options(1).0);
    let error = stream_error(&client).await;
    assert!(
        matches!(&error, ModelError::Malformed { message, .. } if message.contains("expected an event stream")),
        "{error:?}"
    );

    let body = r#"{"error":{"message":"Invalid API key","type":"authentication_error"}}"#;
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (port, _) = common::serve_once(response.into_bytes()).await;
    let client =
        client_for(&format!("http://127.0.0.1:{port}/v1"), WireApi::Anthropic, options(1).0);
    let error = stream_error(&client).await;
    assert!(matches!(error, ModelError::Auth { status: 401, .. }), "{error:?}");
}
