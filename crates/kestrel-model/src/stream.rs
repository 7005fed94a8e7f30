//! `ResponseStream`: the body of a successful response, read chunk by chunk through the
//! SSE parser and the wire's decoder. It watches the idle timeout and the cancel token,
//! and insists on the wire's terminal event: a body that ends before it broke off.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::anthropic::AnthropicDecoder;
use crate::chat::ChatDecoder;
use crate::provider_error::WireError;
use crate::responses::ResponsesDecoder;
use crate::sse::{SseEvent, SseParser};
use crate::types::{ModelError, StreamEvent, WireApi};

type Body = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

/// The wire-specific half of a stream.
#[derive(Debug)]
pub(crate) enum Decoder {
    Chat(ChatDecoder),
    Responses(ResponsesDecoder),
    Anthropic(AnthropicDecoder),
}

impl Decoder {
    pub fn new(wire_api: WireApi) -> Self {
        match wire_api {
            WireApi::Chat => Decoder::Chat(ChatDecoder::new()),
            WireApi::Responses => Decoder::Responses(ResponsesDecoder::new()),
            WireApi::Anthropic => Decoder::Anthropic(AnthropicDecoder::new()),
        }
    }

    pub fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), WireError> {
        match self {
            Decoder::Chat(decoder) => decoder.on_event(event, out),
            Decoder::Responses(decoder) => decoder.on_event(event, out),
            Decoder::Anthropic(decoder) => decoder.on_event(event, out),
        }
    }

    /// The body ended. Chat servers that send a finish reason but no `[DONE]` (several
    /// local servers do) have still finished; the other APIs always send their end event.
    pub fn on_end(&mut self, out: &mut Vec<StreamEvent>) {
        match self {
            Decoder::Chat(decoder) => decoder.on_end(out),
            Decoder::Responses(_) | Decoder::Anthropic(_) => {}
        }
    }
}

/// Why reading a stream stopped early, before it is given its final `ModelError` form.
#[derive(Debug)]
pub(crate) enum PullError {
    /// The connection broke, went idle, or ended before the terminal event.
    Transport(String),
    Wire(WireError),
    Cancelled,
}

/// Where the error context of a stream comes from, to build `ModelError`s.
#[derive(Debug, Clone)]
pub(crate) struct StreamContext {
    pub url: String,
    pub attempts: u32,
    pub api_key_env: Option<String>,
    pub idle_timeout: Duration,
}

/// The events of one model response, in order. Ends (`None`) after
/// `StreamEvent::Completed`, or after the first error.
pub struct ResponseStream {
    body: Body,
    parser: SseParser,
    decoder: Decoder,
    pending: VecDeque<StreamEvent>,
    /// An error met while decoding a chunk, held back until the events before it are out.
    failure: Option<PullError>,
    terminal_seen: bool,
    finished: bool,
    context: StreamContext,
    cancel: CancellationToken,
}

impl std::fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseStream")
            .field("url", &self.context.url)
            .field("pending", &self.pending.len())
            .field("finished", &self.finished)
            .finish()
    }
}

impl ResponseStream {
    pub(crate) fn new(
        body: Body,
        wire_api: WireApi,
        context: StreamContext,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            body,
            parser: SseParser::new(),
            decoder: Decoder::new(wire_api),
            pending: VecDeque::new(),
            failure: None,
            terminal_seen: false,
            finished: false,
            context,
            cancel,
        }
    }

    /// The next event; `None` once the response is complete or an error was returned.
    ///
    /// Fails with `StreamInterrupted` when the connection breaks, stays silent past the
    /// idle timeout or ends without the wire's final event; `Malformed` on an event
    /// that is not valid JSON; `Cancelled` as soon as the cancel token fires; and with
    /// the mapped provider error when the provider sends an error event.
    pub async fn next(&mut self) -> Option<Result<StreamEvent, ModelError>> {
        if self.finished {
            return None;
        }
        if self.cancel.is_cancelled() {
            self.finished = true;
            return Some(Err(ModelError::Cancelled));
        }
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(Ok(event));
            }
            if let Some(failure) = self.failure.take() {
                self.finished = true;
                return Some(Err(self.model_error(failure)));
            }
            if self.terminal_seen {
                self.finished = true;
                return None;
            }
            if let Err(failure) = self.pull().await {
                self.failure = Some(failure);
            }
        }
    }

    /// Reads until the first event is decoded (or the response is over), so the
    /// caller can still retry a response that fails before it has said anything.
    pub(crate) async fn prime(&mut self) -> Result<(), PullError> {
        while self.pending.is_empty() && !self.terminal_seen {
            if let Some(failure) = self.failure.take() {
                return Err(failure);
            }
            if let Err(failure) = self.pull().await {
                if self.pending.is_empty() {
                    return Err(failure);
                }
                self.failure = Some(failure);
            }
        }
        Ok(())
    }

    /// Reads one chunk (or the end) and decodes what it completes.
    async fn pull(&mut self) -> Result<(), PullError> {
        let idle = self.context.idle_timeout;
        let chunk = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Err(PullError::Cancelled),
            chunk = tokio::time::timeout(idle, self.body.next()) => chunk,
        };
        match chunk {
            Err(_elapsed) => Err(PullError::Transport(format!(
                "no data for {} (idle timeout)",
                describe_duration(idle)
            ))),
            Ok(Some(Err(error))) => Err(PullError::Transport(transport_error(&error))),
            Ok(Some(Ok(bytes))) => {
                let events = self.parser.feed(&bytes);
                self.decode(&events)
            }
            Ok(None) => {
                let last: Vec<SseEvent> = self.parser.finish().into_iter().collect();
                self.decode(&last)?;
                if !self.terminal_seen {
                    let mut out = Vec::new();
                    self.decoder.on_end(&mut out);
                    for event in out {
                        self.terminal_seen |= matches!(event, StreamEvent::Completed { .. });
                        self.pending.push_back(event);
                    }
                }
                if self.terminal_seen {
                    Ok(())
                } else {
                    Err(PullError::Transport(
                        "the stream ended before the response was complete".into(),
                    ))
                }
            }
        }
    }

    fn decode(&mut self, events: &[SseEvent]) -> Result<(), PullError> {
        let mut out = Vec::new();
        for event in events {
            if self.terminal_seen {
                break;
            }
            let decoded = self.decoder.on_event(event, &mut out);
            for event in out.drain(..) {
                if matches!(event, StreamEvent::Completed { .. }) {
                    self.terminal_seen = true;
                }
                self.pending.push_back(event);
            }
            decoded.map_err(PullError::Wire)?;
        }
        Ok(())
    }

    fn model_error(&self, failure: PullError) -> ModelError {
        let url = self.context.url.clone();
        match failure {
            PullError::Transport(message) => ModelError::StreamInterrupted { url, message },
            PullError::Wire(WireError::Malformed(message)) => {
                ModelError::Malformed { url, message }
            }
            PullError::Wire(WireError::Provider(error)) => error.into_model_error(
                &url,
                self.context.attempts,
                self.context.api_key_env.as_deref(),
            ),
            PullError::Cancelled => ModelError::Cancelled,
        }
    }
}

/// An error with its causes, `a: b: c`, which is where reqwest keeps the useful part
/// (connection refused, certificate unknown, ...).
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// What went wrong on the wire, without reqwest's "error sending request for url (...)"
/// wrapper (the URL is already in every `ModelError`), with a hint for untrusted
/// certificates.
pub(crate) fn transport_error(error: &reqwest::Error) -> String {
    let mut message = match std::error::Error::source(error) {
        Some(cause) => error_chain(cause),
        None => error_chain(error),
    };
    if message.contains("certificate") {
        message.push_str(
            " (the server's certificate is not trusted; behind a proxy or server with its own CA, \
             point SSL_CERT_FILE at a PEM bundle that includes it)",
        );
    }
    message
}

pub(crate) fn describe_duration(duration: Duration) -> String {
    if duration.as_secs() >= 1 && duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Runs canned byte streams through the real parser and decoders.

    use super::*;

    /// Decodes `chunks` as one response of `wire_api`: every event in order, then the
    /// error if one ended it.
    pub fn decode_chunks(
        wire_api: WireApi,
        chunks: &[&[u8]],
    ) -> (Vec<StreamEvent>, Option<ModelError>) {
        let owned: Vec<Result<Bytes, reqwest::Error>> =
            chunks.iter().map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        let body: Body = Box::pin(futures_util::stream::iter(owned));
        let context = StreamContext {
            url: "http://127.0.0.1:1/v1/test".into(),
            attempts: 1,
            api_key_env: None,
            idle_timeout: Duration::from_secs(5),
        };
        let mut stream = ResponseStream::new(body, wire_api, context, CancellationToken::new());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            let mut events = Vec::new();
            while let Some(item) = stream.next().await {
                match item {
                    Ok(event) => events.push(event),
                    Err(error) => return (events, Some(error)),
                }
            }
            (events, None)
        })
    }

    /// Decodes a whole response given as text, split into 7-byte chunks so events are
    /// cut at arbitrary places.
    pub fn decode_text(wire_api: WireApi, text: &str) -> (Vec<StreamEvent>, Option<ModelError>) {
        let chunks: Vec<&[u8]> = text.as_bytes().chunks(7).collect();
        decode_chunks(wire_api, &chunks)
    }
}
