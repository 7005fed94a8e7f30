//! The orchestrator as an ACP client of the daemon (like the TUI): role sessions are
//! ordinary daemon sessions. The connection is made again when the daemon goes away
//! (a new daemon is started); what each session's watcher hears is routed by session id.
//! Permission requests are never answered here: they are a person's (`needs-input`).

use crate::SwarmError;
use kestrel_platform::Endpoint;
use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::{Connection, Incoming};
use kestrel_protocol::swarm::SwarmSessionTag;
use kestrel_protocol::{Mode, SessionId};
use kestrel_store::KestrelHome;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long to wait for a daemon this process started to listen.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a session's record may stay held by a worker of a killed daemon.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// What a session's watcher hears while its turn runs.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionSignal {
    /// The worker asks a person to allow a tool call.
    PermissionAsked { tool_call_id: String, title: String },
    /// A tool call moved on (running, done or refused): a permission asked for it is
    /// no longer waiting.
    ToolCallMoved { tool_call_id: String },
    /// `_kestrel/session/turn` with `running: false`.
    TurnEnded,
    /// A model request is retried after a rate limit (a notice said so).
    RateLimited { message: String },
    /// The connection to the daemon is gone.
    Disconnected,
}

/// How a prompt ended, as far as this connection knows.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptEnd {
    /// The worker answered with this ACP stop reason (`end_turn`, `cancelled`, ...).
    Stopped(String),
    /// The turn failed with this message.
    Failed(String),
    /// The connection died before the answer.
    Lost,
}

type Watchers = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<SessionSignal>>>>;

/// The daemon of one `$KESTREL_HOME`, connected on demand.
pub struct Daemon {
    home: KestrelHome,
    program: PathBuf,
    link: tokio::sync::Mutex<Option<Connection>>,
    watchers: Watchers,
}

impl Daemon {
    /// `program` is the `kestrel` binary, started as `program daemon` when none listens.
    pub fn new(home: KestrelHome, program: PathBuf) -> Daemon {
        Daemon {
            home,
            program,
            link: tokio::sync::Mutex::new(None),
            watchers: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The live connection, made (and the daemon started) when there is none.
    pub async fn connection(&self) -> Result<Connection, SwarmError> {
        let mut link = self.link.lock().await;
        if let Some(connection) = link.as_ref()
            && !connection.is_closed()
        {
            return Ok(connection.clone());
        }
        let endpoint = Endpoint::new(&self.home.run_dir());
        let mut command = std::process::Command::new(&self.program);
        command.arg("daemon").env("KESTREL_HOME", self.home.root()).current_dir("/");
        command.env_remove("KESTREL_MODE").env_remove("KESTREL_MODEL");
        let stream = kestrel_platform::connect_or_start(&endpoint, command, START_TIMEOUT)
            .await
            .map_err(|error| SwarmError::Daemon(error.to_string()))?;
        let (read, write) = stream.into_split();
        let (connection, incoming) = Connection::start(read, write);
        tokio::spawn(dispatch(incoming, self.watchers.clone()));
        connection
            .request("initialize", initialize_params())
            .await
            .map_err(|error| SwarmError::Daemon(format!("initialize: {}", error.message)))?;
        *link = Some(connection.clone());
        Ok(connection)
    }

    /// Routes what the daemon says about `session` to the returned receiver (replacing
    /// an earlier watcher of it).
    pub fn watch(&self, session: &SessionId) -> mpsc::UnboundedReceiver<SessionSignal> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session.to_string(), sender);
        receiver
    }

    pub fn unwatch(&self, session: &SessionId) {
        self.watchers.lock().unwrap_or_else(PoisonError::into_inner).remove(session.as_str());
    }

    /// A new role session in `cwd` on `model` (`provider/model`) in `mode`.
    pub async fn new_session(
        &self,
        cwd: &Path,
        tag: &SwarmSessionTag,
        model: &str,
        mode: Mode,
    ) -> Result<SessionId, SwarmError> {
        let connection = self.connection().await?;
        let params = json!({
            "cwd": cwd,
            "mcpServers": [],
            "_meta": {"kestrel": {"swarm": tag, "model": model, "mode": mode.as_str()}},
        });
        let answer = connection.request("session/new", params).await.map_err(|error| {
            let message = format!(
                "cannot start the {} session of `{}`: {}",
                tag.role.as_str(),
                tag.task,
                error.message
            );
            // Sessions run in the daemon, with the environment of the client that
            // started it: a key set since is not there.
            if error.message.contains("no API key") {
                SwarmError::Usage(format!(
                    "{message} (the daemon has the environment it was started with: \
                     `kestrel daemon stop`, then run again with the variable set)"
                ))
            } else {
                SwarmError::Daemon(message)
            }
        })?;
        let response: acp::NewSessionResponse = serde_json::from_value(answer)
            .map_err(|error| SwarmError::Daemon(format!("bad session/new answer: {error}")))?;
        Ok(SessionId::from_string(response.session_id.0.to_string()))
    }

    /// Sends `text` as a prompt and waits for its answer.
    pub async fn prompt(&self, session: &SessionId, text: &str) -> PromptEnd {
        let connection = match self.connection().await {
            Ok(connection) => connection,
            Err(_) => return PromptEnd::Lost,
        };
        let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        match connection.request("session/prompt", params).await {
            Ok(answer) => match answer.get("stopReason").and_then(Value::as_str) {
                Some(reason) => PromptEnd::Stopped(reason.to_string()),
                None => PromptEnd::Failed(format!("bad session/prompt answer: {answer}")),
            },
            Err(_) if connection.is_closed() => PromptEnd::Lost,
            Err(error) => PromptEnd::Failed(error.message),
        }
    }

    /// Attaches to `session` (`session/load`: starts its worker when it has none, which
    /// records an unfinished turn as interrupted); whether a turn of it runs now.
    /// A worker of a daemon that was killed may hold the session's record for a moment
    /// (it ends a command first): the load is tried again for [`LOCK_WAIT`].
    pub async fn attach(&self, session: &SessionId, cwd: &Path) -> Result<bool, SwarmError> {
        let params = json!({"sessionId": session, "cwd": cwd, "mcpServers": []});
        let deadline = tokio::time::Instant::now() + LOCK_WAIT;
        let answer = loop {
            let connection = self.connection().await?;
            match connection.request("session/load", params.clone()).await {
                Ok(answer) => break answer,
                Err(error)
                    if error.message.contains("another process")
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(error) => {
                    return Err(SwarmError::Daemon(format!(
                        "cannot load session {session}: {}",
                        error.message
                    )));
                }
            }
        };
        Ok(answer
            .pointer(&format!("/_meta/kestrel/{}", acp::kestrel::TURN_RUNNING_META))
            .and_then(Value::as_bool)
            .unwrap_or(false))
    }

    /// `session/cancel`: the session's running turn stops.
    pub async fn cancel(&self, session: &SessionId) {
        if let Ok(connection) = self.connection().await {
            let _ = connection.notify("session/cancel", json!({"sessionId": session})).await;
        }
    }

    /// Waits until the daemon has handled what this client sent before (it handles a
    /// client's messages in order): a notification is only queued when `notify` returns.
    pub async fn flush(&self) {
        let connection = self.link.lock().await.clone();
        if let Some(connection) = connection {
            let _ = connection.request("session/list", json!({})).await;
        }
    }

    /// Stops receiving the session's updates (it keeps running).
    pub async fn detach(&self, session: &SessionId) {
        self.unwatch(session);
        let connection = self.link.lock().await.clone();
        if let Some(connection) = connection {
            let params = json!({"sessionId": session});
            let _ = connection.request(acp::kestrel::SESSION_DETACH, params).await;
        }
    }
}

fn initialize_params() -> Value {
    json!({
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": false, "writeTextFile": false},
            "terminal": false,
            "session": {"notices": {}}
        },
        "clientInfo": {"name": "kestrel-swarm", "title": "Kestrel swarm", "version": env!("CARGO_PKG_VERSION")}
    })
}

/// Reads everything the daemon sends and tells each session's watcher what concerns it.
async fn dispatch(mut incoming: mpsc::Receiver<Incoming>, watchers: Watchers) {
    while let Some(message) = incoming.recv().await {
        let (session, signal) = match &message {
            Incoming::Request(request) if request.method == "session/request_permission" => {
                let params = &request.params;
                let call = params.get("toolCall");
                let text = |key: &str| {
                    call.and_then(|call| call.get(key)).and_then(Value::as_str).unwrap_or("")
                };
                let signal = SessionSignal::PermissionAsked {
                    tool_call_id: text("toolCallId").to_string(),
                    title: text("title").to_string(),
                };
                (session_of(params), Some(signal))
            }
            Incoming::Request(_) => (None, None),
            Incoming::Notification(notification) => {
                let params = &notification.params;
                let signal = match notification.method.as_str() {
                    "session/update" => update_signal(params.get("update").unwrap_or(&Value::Null)),
                    acp::kestrel::SESSION_TURN => (params.get("running").and_then(Value::as_bool)
                        == Some(false))
                    .then_some(SessionSignal::TurnEnded),
                    _ => None,
                };
                (session_of(params), signal)
            }
        };
        if let (Some(session), Some(signal)) = (session, signal) {
            let watchers = watchers.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(watcher) = watchers.get(&session) {
                let _ = watcher.send(signal);
            }
        }
    }
    let watchers = watchers.lock().unwrap_or_else(PoisonError::into_inner);
    for watcher in watchers.values() {
        let _ = watcher.send(SessionSignal::Disconnected);
    }
}

fn session_of(params: &Value) -> Option<String> {
    params.get("sessionId").and_then(Value::as_str).map(str::to_string)
}

fn update_signal(update: &Value) -> Option<SessionSignal> {
    let kind = update.get("sessionUpdate").and_then(Value::as_str)?;
    match kind {
        "tool_call_update" => {
            let status = update.get("status").and_then(Value::as_str)?;
            matches!(status, "in_progress" | "completed" | "failed").then(|| {
                SessionSignal::ToolCallMoved {
                    tool_call_id: update
                        .get("toolCallId")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                }
            })
        }
        "notice" => {
            let text = update.to_string();
            let rate_limited = text.contains("429") || text.contains("rate limit");
            rate_limited.then(|| SessionSignal::RateLimited {
                message: update.get("title").and_then(Value::as_str).unwrap_or("").to_string(),
            })
        }
        _ => None,
    }
}
