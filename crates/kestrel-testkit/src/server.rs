//! The scripted model server: a tokio runtime on its own thread, accepting on
//! 127.0.0.1, logging every request, and answering each model request with the first
//! step not yet consumed that is for it (`Step::when`; without one, the next step) in
//! the wire format its path asks for.
//!
//! Invariant: a step is consumed only when its reply is served (a `Status` fault
//! answers without consuming it until its `times` run out, counted per step); requests
//! that are not model calls, or that the real API would reject, never consume steps.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::http::{
    HttpRequest, ReadError, finish_chunked, read_request, start_chunked, write_chunk, write_full,
    write_truncated,
};
use crate::ids::IdGenerator;
use crate::logged_request::LoggedRequest;
use crate::script::{Fault, Script, Step};
use crate::server_thread::ServerThread;
use crate::sse::SseEvent;
use crate::wire::{RenderContext, WireApi, models_body, openai_error_body};

/// The message of the 500 answered once every step is consumed.
pub const SCRIPT_EXHAUSTED: &str = "scripted model: script exhausted";

/// A client that sends nothing for this long is dropped.
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// How to start a [`ScriptedServer`] beyond its script.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Appends every request as one JSON line (a [`LoggedRequest`]) to this file.
    pub request_log: Option<PathBuf>,
    /// Answers `GET .../models` with this status and an error body carrying this
    /// message, instead of the model list (a provider refusing a key, say).
    pub models_error: Option<(u16, String)>,
}

/// A fake model provider on 127.0.0.1 that plays a [`Script`]. Dropping it stops it.
pub struct ScriptedServer {
    address: SocketAddr,
    shared: Arc<Shared>,
    /// Stops the server when dropped.
    _thread: ServerThread,
}

impl ScriptedServer {
    /// Starts on 127.0.0.1 with its own thread + tokio runtime, so both sync tests
    /// (running the kestrel binary) and async tests can use it.
    ///
    /// Fails if the script is invalid (`InvalidInput`) or the socket or thread cannot
    /// be set up.
    pub fn start(script: Script) -> std::io::Result<ScriptedServer> {
        ScriptedServer::start_with(script, ServerOptions::default())
    }

    /// [`ScriptedServer::start`] on a chosen port and/or with a request log file.
    /// Also fails if the log file cannot be opened for appending.
    pub fn start_with(script: Script, options: ServerOptions) -> std::io::Result<ScriptedServer> {
        script
            .validate()
            .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidInput, error))?;
        let request_log = match &options.request_log {
            Some(path) => Some(Mutex::new(
                OpenOptions::new().create(true).append(true).open(path).map_err(|error| {
                    std::io::Error::new(
                        error.kind(),
                        format!("cannot open request log {}: {error}", path.display()),
                    )
                })?,
            )),
            None => None,
        };
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, options.port))?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                steps: script
                    .steps
                    .into_iter()
                    .map(|step| Queued { step, failures_served: 0 })
                    .collect(),
                requests: Vec::new(),
            }),
            request_log,
            ids: IdGenerator::default(),
            models_error: options.models_error,
        });
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let thread_shared = Arc::clone(&shared);
        let thread = ServerThread::start("scripted-model", listener, runtime, move |stream| {
            serve_connection(stream, Arc::clone(&thread_shared))
        })?;
        Ok(ScriptedServer { address, shared, _thread: thread })
    }

    /// "http://127.0.0.1:PORT/v1" — what goes into config `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// The socket address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Steps not yet consumed.
    pub fn remaining(&self) -> usize {
        self.shared.lock().steps.len()
    }
}

impl std::fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedServer")
            .field("address", &self.address)
            .field("remaining", &self.remaining())
            .finish()
    }
}

struct Shared {
    state: Mutex<State>,
    request_log: Option<Mutex<File>>,
    ids: IdGenerator,
    models_error: Option<(u16, String)>,
}

struct State {
    /// The steps not yet consumed, in script order.
    steps: Vec<Queued>,
    requests: Vec<LoggedRequest>,
}

struct Queued {
    step: Step,
    /// How many times its `Status` fault has been answered.
    failures_served: u32,
}

/// What to answer a model request with.
enum Decision {
    Serve(Step),
    Fail {
        status: u16,
        retry_after_secs: Option<u64>,
        message: String,
    },
    /// No step is left for the request: the message says why.
    Exhausted(String),
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not take the server down with it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn log(&self, request: &LoggedRequest) {
        self.lock().requests.push(request.clone());
        if let Some(file) = &self.request_log
            && let Ok(mut line) = serde_json::to_string(request)
        {
            line.push('\n');
            let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
            // A lost log line must not fail the request it describes.
            let _ = file.write_all(line.as_bytes());
        }
    }

    /// The first step not yet consumed that is for a request with this body.
    fn next_step(&self, body: &Value) -> Decision {
        let body_text = body.to_string();
        let mut state = self.lock();
        let Some(index) =
            state.steps.iter().position(|queued| queued.step.matches(body, &body_text))
        else {
            if state.steps.is_empty() {
                return Decision::Exhausted(SCRIPT_EXHAUSTED.to_string());
            }
            let model = body.get("model").and_then(Value::as_str).unwrap_or("(none)");
            return Decision::Exhausted(format!(
                "{SCRIPT_EXHAUSTED}: no step left matches this request for model `{model}` \
                 ({} steps left, each for other requests)",
                state.steps.len()
            ));
        };
        let queued = &mut state.steps[index];
        if let Some(Fault::Status { status, retry_after_secs, message, times }) = &queued.step.fault
            && queued.failures_served < times.unwrap_or(1)
        {
            queued.failures_served += 1;
            return Decision::Fail {
                status: *status,
                retry_after_secs: *retry_after_secs,
                message: message.clone().unwrap_or_else(|| default_message(*status)),
            };
        }
        Decision::Serve(state.steps.remove(index).step)
    }
}

fn default_message(status: u16) -> String {
    match status {
        401 => "scripted model: invalid API key".into(),
        403 => "scripted model: permission denied".into(),
        404 => "scripted model: model not found".into(),
        429 => "scripted model: rate limit reached, please retry later".into(),
        529 => "scripted model: overloaded".into(),
        500..=599 => "scripted model: internal server error".into(),
        _ => format!("scripted model: request failed with HTTP {status}"),
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let (read_half, mut writer) = stream.into_split();
    let mut reader = BufReader::new(read_half);
    let read = tokio::time::timeout(REQUEST_READ_TIMEOUT, read_request(&mut reader, &mut writer));
    let request = match read.await {
        Ok(Ok(Some(request))) => request,
        Ok(Ok(None) | Err(ReadError::Io(_))) | Err(_) => return,
        Ok(Err(error @ (ReadError::Malformed(_) | ReadError::TooLarge(_)))) => {
            let status = if matches!(error, ReadError::TooLarge(_)) { 413 } else { 400 };
            let body = openai_error_body(status, &format!("scripted model: {error}"));
            let _ = write_json(&mut writer, status, Vec::new(), &body).await;
            return;
        }
    };
    // An error here means the client went away; nothing is left to tell it.
    let _ = respond(request, &mut writer, &shared).await;
    let _ = writer.shutdown().await;
}

async fn respond<W: AsyncWrite + Unpin>(
    request: HttpRequest,
    writer: &mut W,
    shared: &Shared,
) -> std::io::Result<()> {
    let path = request.path().to_owned();
    let logged = LoggedRequest {
        body: serde_json::from_slice(&request.body).unwrap_or(Value::Null),
        method: request.method,
        path: request.target,
        headers: request.headers,
    };
    shared.log(&logged);
    match (WireApi::from_path(&path), logged.method.as_str()) {
        (Some(api), "POST") => serve_model_request(api, &logged, writer, shared).await,
        (Some(api), method) => {
            let message = format!("scripted model: {method} {path} is not allowed, use POST");
            let body = api.error_body(405, &message);
            write_json(writer, 405, vec![("allow".into(), "POST".into())], &body).await
        }
        (None, "GET") if path.trim_end_matches('/').ends_with("/models") => {
            match &shared.models_error {
                Some((status, message)) => {
                    let body = openai_error_body(*status, message);
                    write_json(writer, *status, Vec::new(), &body).await
                }
                None => write_json(writer, 200, Vec::new(), &models_body(unix_now())).await,
            }
        }
        (None, method) => {
            let body = openai_error_body(404, &format!("Invalid URL ({method} {path})"));
            write_json(writer, 404, Vec::new(), &body).await
        }
    }
}

async fn serve_model_request<W: AsyncWrite + Unpin>(
    api: WireApi,
    request: &LoggedRequest,
    writer: &mut W,
    shared: &Shared,
) -> std::io::Result<()> {
    let mut headers = api.response_headers(&shared.ids);
    if request.body.is_null() {
        let body = api.error_body(400, "scripted model: the request body is not valid JSON");
        return write_json(writer, 400, headers, &body).await;
    }
    if let Err(message) = api.validate(&request.body, &request.headers) {
        return write_json(writer, 400, headers, &api.error_body(400, &message)).await;
    }
    let step = match shared.next_step(&request.body) {
        Decision::Serve(step) => step,
        Decision::Fail { status, retry_after_secs, message } => {
            if let Some(seconds) = retry_after_secs {
                headers.push(("retry-after".into(), seconds.to_string()));
            }
            return write_json(writer, status, headers, &api.error_body(status, &message)).await;
        }
        Decision::Exhausted(message) => {
            return write_json(writer, 500, headers, &api.error_body(500, &message)).await;
        }
    };
    let context = RenderContext { request: &request.body, created: unix_now(), ids: &shared.ids };
    let streaming = request.body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if streaming {
        let events = api.stream(&step.reply, &context);
        write_stream(writer, headers, events, step.fault.as_ref()).await
    } else {
        let body = api.complete(&step.reply, &context);
        write_complete(writer, headers, &body, step.fault.as_ref()).await
    }
}

async fn write_json<W: AsyncWrite + Unpin>(
    writer: &mut W,
    status: u16,
    mut headers: Vec<(String, String)>,
    body: &Value,
) -> std::io::Result<()> {
    headers.push(("content-type".into(), "application/json".into()));
    write_full(writer, status, &headers, body.to_string().as_bytes()).await
}

/// Streams `events` as one chunk each, misbehaving as `fault` says.
async fn write_stream<W: AsyncWrite + Unpin>(
    writer: &mut W,
    mut headers: Vec<(String, String)>,
    mut events: Vec<SseEvent>,
    fault: Option<&Fault>,
) -> std::io::Result<()> {
    let mut cut_after = None;
    let mut delay = None;
    match fault {
        Some(Fault::MalformedJson { after_events }) => {
            let at = (*after_events).min(events.len());
            if let Some(source) = events.get(at).or(events.last()) {
                let broken = source.malformed();
                events.insert(at, broken);
            }
        }
        Some(Fault::DropAfter { events }) => cut_after = Some(*events),
        Some(Fault::SlowChunks { delay_ms }) => delay = Some(Duration::from_millis(*delay_ms)),
        Some(Fault::Status { .. }) | None => {}
    }
    headers.push(("content-type".into(), "text/event-stream; charset=utf-8".into()));
    headers.push(("cache-control".into(), "no-cache".into()));
    start_chunked(writer, 200, &headers).await?;
    for (index, event) in events.iter().enumerate() {
        if cut_after == Some(index) {
            return Ok(()); // closing now leaves the chunked body unterminated
        }
        if let Some(delay) = delay
            && index > 0
        {
            tokio::time::sleep(delay).await;
        }
        write_chunk(writer, &event.encode()).await?;
    }
    if cut_after.is_some() {
        return Ok(());
    }
    finish_chunked(writer).await
}

/// Sends a non-streaming body, misbehaving as `fault` says.
async fn write_complete<W: AsyncWrite + Unpin>(
    writer: &mut W,
    mut headers: Vec<(String, String)>,
    body: &Value,
    fault: Option<&Fault>,
) -> std::io::Result<()> {
    headers.push(("content-type".into(), "application/json".into()));
    let bytes = body.to_string().into_bytes();
    match fault {
        Some(Fault::DropAfter { .. }) => {
            write_truncated(writer, 200, &headers, &bytes, bytes.len() / 2).await
        }
        Some(Fault::MalformedJson { .. }) => {
            write_full(writer, 200, &headers, &bytes[..bytes.len() / 2]).await
        }
        Some(Fault::SlowChunks { delay_ms }) => {
            tokio::time::sleep(Duration::from_millis(*delay_ms)).await;
            write_full(writer, 200, &headers, &bytes).await
        }
        Some(Fault::Status { .. }) | None => write_full(writer, 200, &headers, &bytes).await,
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_secs()).unwrap_or(0)
}
