//! `ModelClient`: one provider, one HTTP client. Sends a `ModelRequest` in the
//! provider's wire format and hands back the event stream, retrying transient failures
//! (with backoff) only until the response has produced its first event.

use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::provider_error::{ProviderError, WireError};
use crate::retry::{self, Backoff};
use crate::stream::{
    PullError, ResponseStream, StreamContext, describe_duration, error_chain, transport_error,
};
use crate::tls;
use crate::types::{
    ClientOptions, ModelError, ModelRequest, ProviderConfig, RetryNotice, StreamEvent, TokenUsage,
    WireApi,
};
use crate::{anthropic, chat, responses};

/// The Anthropic API version we speak.
const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Error bodies longer than this are cut: the message is at the start.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A client for one provider. Cheap to share by reference; one per session.
pub struct ModelClient {
    provider: ProviderConfig,
    options: ClientOptions,
    http: reqwest::Client,
    url: String,
    /// `url` without credentials or query, for messages and logs.
    shown_url: String,
    headers: HeaderMap,
}

impl std::fmt::Debug for ModelClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelClient")
            .field("provider", &self.provider)
            .field("url", &self.shown_url)
            .field("options", &self.options)
            .finish()
    }
}

/// How one try went wrong.
enum AttemptFailure {
    /// Retrying cannot help; this is the answer.
    Fatal(ModelError),
    /// The provider answered with an error (status or an error event before output).
    Provider { error: ProviderError, retry_after: Option<Duration> },
    /// No connection, or no response in time.
    Network(String),
    /// The response broke off before its first event.
    Interrupted(String),
}

impl ModelClient {
    /// Builds the client for `provider`.
    ///
    /// Fails with `MissingApiKey` if `provider.api_key_env` is set but `api_key` is
    /// `None` or empty, and with `InvalidConfig` if `base_url` is not an http(s) URL, a
    /// header is invalid or `options.ca_bundle` cannot be read.
    pub fn new(provider: ProviderConfig, options: ClientOptions) -> Result<Self, ModelError> {
        let key = provider.api_key.as_deref().filter(|key| !key.is_empty());
        if let Some(variable) = &provider.api_key_env
            && key.is_none()
        {
            return Err(ModelError::MissingApiKey {
                provider: provider.name.clone(),
                variable: variable.clone(),
            });
        }
        let invalid = |message: String| ModelError::InvalidConfig {
            provider: provider.name.clone(),
            message,
        };
        let url = endpoint(&provider.base_url, provider.wire_api).map_err(invalid)?;
        let headers = default_headers(&provider, key).map_err(invalid)?;
        tls::install_crypto_provider();
        let extra_roots = match &options.ca_bundle {
            Some(path) => tls::read_ca_bundle(path).map_err(invalid)?,
            None => Vec::new(),
        };
        let http = build_http(&options, extra_roots).map_err(invalid)?;
        let shown_url = shown_url(&url);
        Ok(Self { provider, options, http, url, shown_url, headers })
    }

    /// The URL requests go to (`{base_url}/chat/completions`, `/responses` or
    /// `/messages`), without any credentials or query it holds: safe to show.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    /// The provider this client talks to.
    pub fn provider(&self) -> &ProviderConfig {
        &self.provider
    }

    /// Sends the request (retrying per `options.retry` before any event is yielded),
    /// and returns the event stream.
    ///
    /// Fails with `Auth` (401/403), `RateLimited` (429 after the retries),
    /// `ContextWindowExceeded`, `BadRequest` (other 4xx), `Server` (5xx after the
    /// retries), `Network` (no connection after the retries, naming the URL),
    /// `StreamInterrupted` / `Malformed` (a broken response), or `Cancelled`.
    pub async fn stream(
        &self,
        request: &ModelRequest,
        cancel: &CancellationToken,
    ) -> Result<ResponseStream, ModelError> {
        // A temporary: the body's description is gone before the first await.
        let body = match self.provider.wire_api {
            WireApi::Chat => chat::body(request),
            WireApi::Responses => responses::body(request),
            WireApi::Anthropic => anthropic::body(request),
        }
        .to_bytes()
        .map_err(|error| ModelError::InvalidConfig {
            provider: self.provider.name.clone(),
            message: format!("the request cannot be written as JSON: {error}"),
        })?;
        let body = bytes::Bytes::from(body);
        let mut backoff = Backoff::new(self.options.retry.clone());
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let failure = match self.attempt(body.clone(), cancel, attempt).await {
                Ok(stream) => return Ok(stream),
                Err(failure) => failure,
            };
            let (retryable, retry_after, reason) = match &failure {
                AttemptFailure::Fatal(_) => (false, None, String::new()),
                AttemptFailure::Provider { error, retry_after } => (
                    error.is_retryable(),
                    *retry_after,
                    format!("HTTP {}: {}", error.status, error.message),
                ),
                AttemptFailure::Network(message) => (true, None, message.clone()),
                AttemptFailure::Interrupted(message) => {
                    (true, None, format!("the response broke off: {message}"))
                }
            };
            let delay = if retryable {
                backoff.next_delay(attempt, retry_after, started.elapsed())
            } else {
                None
            };
            let Some(delay) = delay else {
                let error = self.final_error(failure, attempt);
                return Err(match retry_after {
                    Some(wait) if retryable && attempt < backoff.max_attempts() => {
                        beyond_budget(error, wait, self.options.retry.budget)
                    }
                    Some(_) | None => error,
                });
            };
            if let Some(on_retry) = &self.options.on_retry {
                on_retry(&RetryNotice {
                    url: self.shown_url.clone(),
                    attempt: attempt + 1,
                    max_attempts: backoff.max_attempts(),
                    delay,
                    reason,
                });
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// A one-shot request that is not the conversation (titles, summaries): sent
    /// without tools, its text collected. Fails as [`ModelClient::stream`] does.
    pub async fn complete_text(
        &self,
        request: &ModelRequest,
        cancel: &CancellationToken,
    ) -> Result<(String, TokenUsage), ModelError> {
        let mut request = request.clone();
        request.tools.clear();
        let mut stream = self.stream(&request, cancel).await?;
        let mut text = String::new();
        let mut usage = TokenUsage::default();
        while let Some(event) = stream.next().await {
            match event? {
                StreamEvent::TextDelta(delta) => text.push_str(&delta),
                StreamEvent::Usage(reported) => usage = reported,
                StreamEvent::Completed { .. } => break,
                StreamEvent::ReasoningDelta(_)
                | StreamEvent::ReasoningCompleted(_)
                | StreamEvent::ToolCallStarted { .. }
                | StreamEvent::ToolCallArgumentsDelta { .. }
                | StreamEvent::ToolCallCompleted { .. } => {}
            }
        }
        Ok((text, usage))
    }

    /// One try: send, check the status, and read up to the first event.
    async fn attempt(
        &self,
        body: bytes::Bytes,
        cancel: &CancellationToken,
        attempt: u32,
    ) -> Result<ResponseStream, AttemptFailure> {
        let idle = self.options.idle_timeout;
        let send = self.http.post(&self.url).headers(self.headers.clone()).body(body).send();
        let response = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(AttemptFailure::Fatal(ModelError::Cancelled)),
            response = tokio::time::timeout(idle, send) => response,
        };
        let response = match response {
            Err(_elapsed) => {
                let message = format!("no response within {}", describe_duration(idle));
                return Err(AttemptFailure::Network(message));
            }
            Ok(Err(error)) => return Err(AttemptFailure::Network(transport_error(&error))),
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        if !response.status().is_success() {
            let retry_after = retry::retry_after(response.headers());
            let text = read_error_body(response, idle, cancel).await?;
            let error = ProviderError::from_body(status, &text);
            return Err(AttemptFailure::Provider { error, retry_after });
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if content_type.starts_with("text/html") {
            return Err(AttemptFailure::Fatal(ModelError::Malformed {
                url: self.shown_url.clone(),
                message: "expected an event stream, got an HTML page: check that base_url \
                          points at the API (with its version prefix, e.g. /v1)"
                    .into(),
            }));
        }
        let is_json = content_type.starts_with("application/json");
        if is_json {
            // A server that ignored `stream: true`, or a proxy reporting an error as 200.
            let text = read_error_body(response, idle, cancel).await?;
            let parsed = serde_json::from_str::<serde_json::Value>(&text).ok();
            if let Some(error) =
                parsed.as_ref().and_then(|v| v.get("error")).filter(|e| e.is_object())
            {
                let error = ProviderError::from_stream_error(error);
                return Err(AttemptFailure::Provider { error, retry_after: None });
            }
            return Err(AttemptFailure::Fatal(ModelError::Malformed {
                url: self.shown_url.clone(),
                message: format!(
                    "expected an event stream, got JSON: {}",
                    crate::provider_error::clip(&text)
                ),
            }));
        }
        let context = StreamContext {
            url: self.shown_url.clone(),
            attempts: attempt,
            api_key_env: self.provider.api_key_env.clone(),
            idle_timeout: idle,
        };
        let body = Box::pin(response.bytes_stream());
        let mut stream = ResponseStream::new(body, self.provider.wire_api, context, cancel.clone());
        match stream.prime().await {
            Ok(()) => Ok(stream),
            Err(PullError::Cancelled) => Err(AttemptFailure::Fatal(ModelError::Cancelled)),
            Err(PullError::Transport(message)) => Err(AttemptFailure::Interrupted(message)),
            Err(PullError::Wire(WireError::Malformed(message))) => {
                Err(AttemptFailure::Fatal(ModelError::Malformed {
                    url: self.shown_url.clone(),
                    message,
                }))
            }
            Err(PullError::Wire(WireError::Provider(error))) => {
                Err(AttemptFailure::Provider { error, retry_after: None })
            }
        }
    }

    fn final_error(&self, failure: AttemptFailure, attempts: u32) -> ModelError {
        let url = self.shown_url.clone();
        match failure {
            AttemptFailure::Fatal(error) => error,
            AttemptFailure::Provider { error, .. } => {
                error.into_model_error(&url, attempts, self.provider.api_key_env.as_deref())
            }
            AttemptFailure::Network(message) => ModelError::Network { url, attempts, message },
            AttemptFailure::Interrupted(message) => ModelError::StreamInterrupted { url, message },
        }
    }
}

/// Reads (the start of) an error body, bounded by the idle timeout and the token.
async fn read_error_body(
    mut response: reqwest::Response,
    idle: Duration,
    cancel: &CancellationToken,
) -> Result<String, AttemptFailure> {
    let mut body = Vec::new();
    loop {
        let chunk = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(AttemptFailure::Fatal(ModelError::Cancelled)),
            chunk = tokio::time::timeout(idle, response.chunk()) => chunk,
        };
        match chunk {
            Ok(Ok(Some(bytes))) => {
                body.extend_from_slice(&bytes);
                if body.len() >= MAX_ERROR_BODY {
                    break;
                }
            }
            // What arrived is enough to report; the status already says it failed.
            Ok(Ok(None)) | Ok(Err(_)) | Err(_) => break,
        }
    }
    body.truncate(MAX_ERROR_BODY);
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Says why no retry came although one was allowed: the provider asked for a wait
/// longer than the retry budget.
fn beyond_budget(error: ModelError, wait: Duration, budget: Duration) -> ModelError {
    let note = format!(
        " (the provider asked to wait {}s before retrying, beyond the {}s retry budget)",
        wait.as_secs(),
        budget.as_secs()
    );
    match error {
        ModelError::RateLimited { url, attempts, message } => {
            ModelError::RateLimited { url, attempts, message: message + &note }
        }
        ModelError::Server { url, status, attempts, message } => {
            ModelError::Server { url, status, attempts, message: message + &note }
        }
        other => other,
    }
}

/// `url` without user, password or query: those can hold secrets.
fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.to_string()
        }
        Err(_) => url.to_string(),
    }
}

/// `{base_url}/{path for the wire}`, after checking `base_url` is an http(s) URL.
fn endpoint(base_url: &str, wire_api: WireApi) -> Result<String, String> {
    let base = base_url.trim().trim_end_matches('/');
    let parsed = reqwest::Url::parse(base).map_err(|e| {
        format!(
            "base_url `{base_url}` is not a URL ({e}); write it like https://api.example.com/v1"
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("base_url `{base_url}` must start with http:// or https://"));
    }
    let path = match wire_api {
        WireApi::Chat => "chat/completions",
        WireApi::Responses => "responses",
        WireApi::Anthropic => "messages",
    };
    Ok(format!("{base}/{path}"))
}

/// Auth, content negotiation and the provider's own headers (which win).
pub(crate) fn default_headers(
    provider: &ProviderConfig,
    key: Option<&str>,
) -> Result<HeaderMap, String> {
    let mut headers = HeaderMap::new();
    headers.insert(reqwest::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(reqwest::header::ACCEPT, HeaderValue::from_static("text/event-stream"));
    let secret = |value: String| {
        let mut value = HeaderValue::from_str(&value)
            .map_err(|_| "the API key contains characters not allowed in a header".to_owned())?;
        value.set_sensitive(true);
        Ok::<_, String>(value)
    };
    match provider.wire_api {
        WireApi::Chat | WireApi::Responses => {
            if let Some(key) = key {
                headers.insert(reqwest::header::AUTHORIZATION, secret(format!("Bearer {key}"))?);
            }
        }
        WireApi::Anthropic => {
            if let Some(key) = key {
                headers.insert("x-api-key", secret(key.to_owned())?);
            }
            headers.insert("anthropic-version", HeaderValue::from_static(ANTHROPIC_VERSION));
        }
    }
    for (name, value) in &provider.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` is not a valid header name"))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| format!("the value of header `{name}` is not a valid header value"))?;
        headers.insert(name, value);
    }
    Ok(headers)
}

/// The HTTP client: connect timeout, user agent, and TLS whose roots are read on the
/// first TLS handshake (a plain-http client never reads them).
pub(crate) fn build_http(
    options: &ClientOptions,
    extra_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
) -> Result<reqwest::Client, String> {
    let tls = tls::client_config(extra_roots)?;
    reqwest::Client::builder()
        .connect_timeout(options.connect_timeout)
        .user_agent(concat!("kestrel/", env!("CARGO_PKG_VERSION")))
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|error| format!("cannot set up the HTTP client: {}", error_chain(&error)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn shown_urls_carry_no_credentials_or_query() {
        assert_eq!(
            super::shown_url("https://user:sekret@proxy.example/v1/messages?key=abc"),
            "https://proxy.example/v1/messages"
        );
        assert_eq!(
            super::shown_url("http://127.0.0.1:9/v1/responses"),
            "http://127.0.0.1:9/v1/responses"
        );
    }

    use super::*;

    #[test]
    fn endpoints_follow_the_wire_api() {
        assert_eq!(
            endpoint("https://api.openai.com/v1/", WireApi::Chat).unwrap(),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            endpoint("https://api.openai.com/v1", WireApi::Responses).unwrap(),
            "https://api.openai.com/v1/responses"
        );
        assert_eq!(
            endpoint("https://api.anthropic.com/v1", WireApi::Anthropic).unwrap(),
            "https://api.anthropic.com/v1/messages"
        );
        assert!(endpoint("localhost:11434/v1", WireApi::Chat).unwrap_err().contains("http://"));
        assert!(endpoint("not a url", WireApi::Chat).unwrap_err().contains("not a URL"));
    }

    fn provider(wire_api: WireApi, key: Option<&str>) -> ProviderConfig {
        ProviderConfig {
            name: "p".into(),
            base_url: "http://127.0.0.1:1/v1".into(),
            wire_api,
            api_key: key.map(str::to_owned),
            api_key_env: None,
            headers: vec![("anthropic-beta".into(), "x".into())],
        }
    }

    #[test]
    fn auth_headers_follow_the_wire_api() {
        let headers = default_headers(&provider(WireApi::Chat, Some("sk")), Some("sk")).unwrap();
        assert_eq!(headers["authorization"], "Bearer sk");
        assert!(headers["authorization"].is_sensitive());
        assert!(headers.get("x-api-key").is_none());

        let headers =
            default_headers(&provider(WireApi::Anthropic, Some("ak")), Some("ak")).unwrap();
        assert_eq!(headers["x-api-key"], "ak");
        assert_eq!(headers["anthropic-version"], "2023-06-01");
        assert_eq!(headers["anthropic-beta"], "x");
        assert!(headers.get("authorization").is_none());

        let headers = default_headers(&provider(WireApi::Responses, None), None).unwrap();
        assert!(headers.get("authorization").is_none());
    }

    #[test]
    fn invalid_headers_are_config_errors() {
        let mut bad = provider(WireApi::Chat, None);
        bad.headers = vec![("bad header".into(), "v".into())];
        assert!(default_headers(&bad, None).unwrap_err().contains("bad header"));
        assert!(default_headers(&provider(WireApi::Chat, None), Some("a\nb")).is_err());
    }
}
