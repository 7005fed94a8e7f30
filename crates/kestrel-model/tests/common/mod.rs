//! Shared helpers for the HTTP-level tests: clients pointed at a scripted server,
//! fast retry policies, and bounded event collection (no test may hang).

// Test support: a failed set-up should stop the test loudly.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod tls_server;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kestrel_model::{
    ClientOptions, ContentPart, Message, ModelClient, ModelError, ModelRequest, ProviderConfig,
    ResponseStream, RetryNotice, RetryPolicy, StreamEvent, ToolSpec, WireApi,
};

pub const WIRES: [WireApi; 3] = [WireApi::Chat, WireApi::Responses, WireApi::Anthropic];

/// Every wait in these tests is bounded by this.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(20);

pub fn provider(base_url: &str, wire_api: WireApi) -> ProviderConfig {
    ProviderConfig {
        name: "scripted".into(),
        base_url: base_url.into(),
        wire_api,
        api_key: Some("sk-test-key".into()),
        api_key_env: Some("SCRIPTED_API_KEY".into()),
        headers: vec![],
    }
}

/// Retries that take milliseconds, so exhausting them is quick.
pub fn fast_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        budget: Duration::from_secs(10),
    }
}

/// Options with fast retries and a log of every retry notice.
pub fn options(max_attempts: u32) -> (ClientOptions, Arc<Mutex<Vec<RetryNotice>>>) {
    let notices = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&notices);
    let options = ClientOptions {
        retry: fast_retry(max_attempts),
        idle_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(5),
        on_retry: Some(Arc::new(move |notice: &RetryNotice| {
            sink.lock().unwrap().push(notice.clone());
        })),
        ..ClientOptions::default()
    };
    (options, notices)
}

pub fn client_for(base_url: &str, wire_api: WireApi, options: ClientOptions) -> ModelClient {
    kestrel_model::install_crypto_provider();
    ModelClient::new(provider(base_url, wire_api), options).unwrap()
}

pub fn request() -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
        system: "You are a test.".into(),
        messages: vec![Message::User { content: vec![ContentPart::Text("Hello".into())] }],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            }),
        }],
        reasoning: None,
        max_output_tokens: None,
        cache_key: Some("test-session".into()),
    }
}

/// Reads the stream to its end: the events, then the error that ended it, if any.
pub async fn collect(stream: &mut ResponseStream) -> (Vec<StreamEvent>, Option<ModelError>) {
    let mut events = Vec::new();
    loop {
        let next = tokio::time::timeout(TEST_TIMEOUT, stream.next()).await;
        match next.expect("the stream stalled past the test timeout") {
            Some(Ok(event)) => events.push(event),
            Some(Err(error)) => return (events, Some(error)),
            None => return (events, None),
        }
    }
}

/// The concatenated text deltas.
pub fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|event| {
            if let StreamEvent::TextDelta(text) = event { Some(text.as_str()) } else { None }
        })
        .collect()
}

/// A `http://127.0.0.1:PORT/v1` where nothing listens.
pub fn unreachable_base_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/v1")
}

/// The error `stream()` fails with; panics if it succeeds or stalls.
pub async fn stream_error(client: &ModelClient) -> ModelError {
    let result = tokio::time::timeout(
        TEST_TIMEOUT,
        client.stream(&request(), &tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("stream() stalled past the test timeout");
    match result {
        Ok(_) => panic!("expected an error"),
        Err(error) => error,
    }
}

/// A complete Chat Completions stream saying `text`, as a raw HTTP/1.1 response.
pub fn chat_sse_response(text: &str) -> Vec<u8> {
    let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]});
    let body = format!("data: {chunk}\n\ndata: [DONE]\n\n");
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one HTTP/1.1 request (head and `content-length` body) and returns its head.
pub async fn read_request_head<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
) -> std::io::Result<String> {
    use tokio::io::AsyncReadExt;
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let head_end = loop {
        let read = stream.read(&mut buffer).await?;
        if read == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "request cut short",
            ));
        }
        received.extend_from_slice(&buffer[..read]);
        if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&received[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while received.len() < head_end + length {
        let read = stream.read(&mut buffer).await?;
        if read == 0 {
            break;
        }
        received.extend_from_slice(&buffer[..read]);
    }
    Ok(head)
}

/// Accepts one connection, answers it with `response`, and reports the request head.
pub async fn serve_once(response: Vec<u8>) -> (u16, tokio::sync::oneshot::Receiver<String>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (heard, head) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        if let Ok(request_head) = read_request_head(&mut socket).await {
            use tokio::io::AsyncWriteExt;
            let _ = socket.write_all(&response).await;
            let _ = socket.shutdown().await;
            let _ = heard.send(request_head);
        }
    });
    (port, head)
}
