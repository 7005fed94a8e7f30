//! The streamable HTTP transport (MCP 2025-03-26 and later), client side: every message
//! is POSTed to the server's URL; the answer comes back as JSON or as an SSE stream that
//! may carry the server's own requests and notifications first. The session id the
//! server gives at `initialize` and the negotiated protocol version go with every later
//! request; a GET stream carries what the server sends unasked (where it offers one);
//! the session is DELETEd when the connection closes. Our reqwest client (rustls with
//! ring) does the HTTP.

use crate::mcp::client::Client;
use futures_util::StreamExt;
use kestrel_protocol::jsonrpc::{Message, RpcError};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// The largest SSE event or JSON body accepted from a server.
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of an error answer read, for the start shown in the error.
const ERROR_PREVIEW_BYTES: usize = 4 * 1024;
/// How long the closing DELETE may take.
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);

/// Sends a connection's messages to one server URL.
pub(crate) struct HttpSink {
    http: reqwest::Client,
    url: String,
    /// Configured headers (e.g. `Authorization`) and, once known, the session's.
    headers: Arc<Mutex<HeaderMap>>,
    closed: CancellationToken,
}

impl HttpSink {
    /// Fails when a configured header is not valid HTTP or no client can be made.
    pub(crate) fn new(url: &str, headers: &BTreeMap<String, String>) -> Result<Self, String> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("`{name}` is not a valid HTTP header name"))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| format!("the value of header `{name}` is not valid in HTTP"))?;
            map.insert(header, value);
        }
        Ok(Self {
            http: http_client()?,
            url: url.to_string(),
            headers: Arc::new(Mutex::new(map)),
            closed: CancellationToken::new(),
        })
    }

    pub(crate) fn set_protocol_version(&self, version: &str) {
        if let (Ok(mut headers), Ok(value)) = (self.headers.lock(), HeaderValue::from_str(version))
        {
            headers.insert(VERSION_HEADER, value);
        }
    }

    fn headers(&self) -> HeaderMap {
        self.headers.lock().map(|headers| headers.clone()).unwrap_or_default()
    }

    /// POSTs `message` on a task of its own; what comes back is dispatched to `client`.
    /// A request that fails at the HTTP level fails with the status and the body's start.
    pub(crate) fn post(&self, message: Message, client: Client) -> JoinHandle<()> {
        let request = self
            .http
            .post(&self.url)
            .headers(self.headers())
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(message.to_line());
        let session = self.headers.clone();
        let closed = self.closed.clone();
        let url = self.url.clone();
        tokio::spawn(async move {
            let exchange = async {
                let response = request.send().await.map_err(|e| format!("{url}: {e}"))?;
                if let Some(id) = response.headers().get(SESSION_HEADER).cloned()
                    && let Ok(mut headers) = session.lock()
                {
                    headers.insert(SESSION_HEADER, id);
                }
                receive(response, &client, &url).await
            };
            let failure = tokio::select! {
                result = exchange => result.err(),
                () = closed.cancelled() => None,
            };
            if let (Some(failure), Message::Request(request)) = (failure, message) {
                let result = Err(RpcError::internal(failure));
                client.dispatch(Message::Response { id: request.id, result }).await;
            }
        })
    }

    /// Opens the GET stream for messages the server sends unasked, if it offers one.
    pub(crate) fn listen(&self, client: Client) {
        let request =
            self.http.get(&self.url).headers(self.headers()).header(ACCEPT, "text/event-stream");
        let closed = self.closed.clone();
        let url = self.url.clone();
        tokio::spawn(async move {
            let listen = async {
                // 405: the server has no such stream; anything else ends it quietly too.
                if let Ok(response) = request.send().await
                    && response.status().is_success()
                {
                    let _ = receive(response, &client, &url).await;
                }
            };
            tokio::select! {
                () = listen => {}
                () = closed.cancelled() => {}
            }
        });
    }

    /// Stops every exchange and ends the server's session (best effort, bounded).
    pub(crate) fn close(&self) {
        if self.closed.is_cancelled() {
            return;
        }
        self.closed.cancel();
        let headers = self.headers();
        if !headers.contains_key(SESSION_HEADER) {
            return;
        }
        let delete = self.http.delete(&self.url).headers(headers).timeout(DELETE_TIMEOUT).send();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = delete.await;
            });
        }
    }
}

/// Reads one HTTP answer: 202 (nothing), a JSON message (or batch), or an SSE stream of
/// messages. `Err` says what went wrong, for the request that is waiting.
async fn receive(response: reqwest::Response, client: &Client, url: &str) -> Result<(), String> {
    let status = response.status();
    if status == reqwest::StatusCode::ACCEPTED {
        return Ok(());
    }
    if !status.is_success() {
        // Only the start is shown: an error page is read no further than that.
        let body = read_body(response, ERROR_PREVIEW_BYTES).await.unwrap_or_default();
        let body = String::from_utf8_lossy(&body);
        let start: String = body.chars().take(300).collect();
        let hint = if status == reqwest::StatusCode::NOT_FOUND {
            " (the server no longer knows this session)"
        } else {
            ""
        };
        return Err(format!("{url} answered HTTP {status}{hint}: {}", start.trim()));
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if content_type.starts_with("text/event-stream") {
        return read_events(response, client).await;
    }
    let body = match read_body(response, MAX_MESSAGE_BYTES).await {
        Ok(body) if body.len() > MAX_MESSAGE_BYTES => {
            return Err(format!("{url} sent a message larger than {MAX_MESSAGE_BYTES} bytes"));
        }
        Ok(body) => body,
        Err(error) => return Err(format!("{url}: {error}")),
    };
    let text = String::from_utf8_lossy(&body);
    client.dispatch_text(text.trim()).await
}

/// The body read in chunks, stopping once it holds more than `limit` bytes (so a
/// server cannot make the client buffer without bound; the caller sees the excess).
async fn read_body(response: reqwest::Response, limit: usize) -> Result<Vec<u8>, reqwest::Error> {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        body.extend_from_slice(&chunk?);
        if body.len() > limit {
            break;
        }
    }
    Ok(body)
}

/// An SSE stream: each event's `data` is one message. Ends with the stream.
async fn read_events(response: reqwest::Response, client: &Client) -> Result<(), String> {
    let mut stream = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    let mut data = String::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("the event stream broke: {e}"))?;
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|&byte| byte == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                let event = std::mem::take(&mut data);
                // A message that does not parse is skipped, as the spec says of events.
                let _ = client.dispatch_text(event.trim()).await;
            } else if let Some(value) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
            // `event:`, `id:`, `retry:` and comments: nothing to do for this client.
        }
        if buffer.len() + data.len() > MAX_MESSAGE_BYTES {
            return Err(format!("an event larger than {MAX_MESSAGE_BYTES} bytes"));
        }
    }
    let _ = client.dispatch_text(data.trim()).await;
    Ok(())
}

/// Our reqwest client: no idle pooling (a half-read SSE body must not stall the next
/// POST), only same-origin 307/308 redirects, which keep the body.
fn http_client() -> Result<reqwest::Client, String> {
    // reqwest panics without a rustls provider; the binary installs ring at start,
    // but a library must not rely on that.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let redirects = reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if keeps_body && same_origin && attempt.previous().len() <= 5 {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(redirects)
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("kestrel/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| format!("could not set up the HTTP client: {error}"))
}
