//! The TUI as an ACP client of the daemon: connect (starting the daemon when none
//! listens), `initialize`, and the session requests, each run as a task that reports
//! its answer to the UI loop as an [`AppEvent`]. Nothing here blocks the UI.

use crate::event::{AppEvent, OpenedSession, SessionEntry, SessionsPurpose};
use kestrel_platform::Endpoint;
use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::{Connection, Incoming, RequestId, RpcError};
use kestrel_store::KestrelHome;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long to wait for a daemon we started to listen.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the UI loop's events go.
pub(crate) type Events = mpsc::Sender<AppEvent>;

/// The `initialize` params: no client file system or terminal (the worker has its own
/// tools), and notices shown as notices.
pub(crate) fn initialize_params() -> Value {
    json!({
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": false, "writeTextFile": false},
            "terminal": false,
            "session": {"notices": {}}
        },
        "clientInfo": {"name": "kestrel-tui", "title": "Kestrel", "version": env!("CARGO_PKG_VERSION")}
    })
}

/// Connects to `home`'s daemon (starting `program daemon` when none listens) and
/// initializes, in the background.
pub(crate) fn connect(home: KestrelHome, program: PathBuf, events: Events) {
    tokio::spawn(async move {
        let event = match open(&home, &program).await {
            Ok((connection, incoming)) => AppEvent::Connected { connection, incoming },
            Err(message) => AppEvent::ConnectFailed(message),
        };
        let _ = events.send(event).await;
    });
}

async fn open(
    home: &KestrelHome,
    program: &Path,
) -> Result<(Connection, mpsc::Receiver<Incoming>), String> {
    let endpoint = Endpoint::new(&home.run_dir());
    let mut command = std::process::Command::new(program);
    command.arg("daemon").env("KESTREL_HOME", home.root()).current_dir("/");
    // This UI's mode and model go in its session/new: in the daemon's environment they
    // would become the default of every later UI's sessions (workers read them).
    command.env_remove("KESTREL_MODE").env_remove("KESTREL_MODEL");
    let stream = kestrel_platform::connect_or_start(&endpoint, command, START_TIMEOUT)
        .await
        .map_err(|error| error.to_string())?;
    let (read, write) = stream.into_split();
    let (connection, incoming) = Connection::start(read, write);
    connection
        .request("initialize", initialize_params())
        .await
        .map_err(|error| format!("the daemon refused initialize: {}", error.message))?;
    Ok((connection, incoming))
}

/// Forwards what the daemon sends to the UI loop; reports the end of the connection.
pub(crate) fn forward(mut incoming: mpsc::Receiver<Incoming>, events: Events) {
    tokio::spawn(async move {
        while let Some(message) = incoming.recv().await {
            if events.send(AppEvent::Incoming(message)).await.is_err() {
                return;
            }
        }
        let _ = events.send(AppEvent::Disconnected).await;
    });
}

/// `session/new` in `cwd`.
pub(crate) fn new_session(connection: &Connection, cwd: PathBuf, events: Events) {
    let connection = connection.clone();
    tokio::spawn(async move {
        let params = json!({"cwd": cwd, "mcpServers": []});
        let event = match connection.request("session/new", params).await {
            Ok(answer) => match serde_json::from_value::<acp::NewSessionResponse>(answer) {
                Ok(response) => AppEvent::SessionOpened(OpenedSession {
                    session_id: response.session_id.0.to_string(),
                    cwd,
                    modes: response.modes,
                    config_options: response.config_options.unwrap_or_default(),
                    loaded: false,
                    turn_running: false,
                }),
                Err(error) => AppEvent::SessionFailed(format!("bad session/new answer: {error}")),
            },
            Err(error) => AppEvent::SessionFailed(error.message),
        };
        let _ = events.send(event).await;
    });
}

/// `session/load` (attaching when it is live elsewhere); its history arrives as
/// updates before the answer.
pub(crate) fn load_session(
    connection: &Connection,
    session_id: String,
    cwd: PathBuf,
    events: Events,
) {
    let connection = connection.clone();
    tokio::spawn(async move {
        let params = json!({"sessionId": session_id, "cwd": cwd, "mcpServers": []});
        let event = match connection.request("session/load", params).await {
            Ok(answer) => match serde_json::from_value::<acp::LoadSessionResponse>(answer) {
                Ok(response) => AppEvent::SessionOpened(OpenedSession {
                    session_id,
                    cwd,
                    turn_running: turn_running(response.meta.as_ref()),
                    modes: response.modes,
                    config_options: response.config_options.unwrap_or_default(),
                    loaded: true,
                }),
                Err(error) => AppEvent::SessionFailed(format!("bad session/load answer: {error}")),
            },
            Err(error) => AppEvent::SessionFailed(error.message),
        };
        let _ = events.send(event).await;
    });
}

/// Whether an attach answer says a turn of the session runs
/// (`_meta.kestrel.turnRunning`; absent when the session was not live).
fn turn_running(meta: Option<&acp::Meta>) -> bool {
    meta.and_then(|meta| meta.get("kestrel"))
        .and_then(|kestrel| kestrel.get(acp::kestrel::TURN_RUNNING_META))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// `_kestrel/session/compact`: summarise the older part of the conversation now.
pub(crate) fn compact(connection: &Connection, session_id: String, events: Events) {
    let connection = connection.clone();
    tokio::spawn(async move {
        let params = json!({"sessionId": session_id});
        let result = match connection.request(acp::kestrel::SESSION_COMPACT, params).await {
            Ok(answer) => serde_json::from_value::<acp::kestrel::CompactSessionResponse>(answer)
                .map_err(|error| format!("bad compact answer: {error}")),
            Err(error) => Err(error.message),
        };
        let _ = events.send(AppEvent::Compacted { session_id, result }).await;
    });
}

/// Attaches to a subagent's session (`session/load` of a live session attaches) to show
/// its progress; only failures are reported.
pub(crate) fn attach_child(
    connection: &Connection,
    session_id: String,
    cwd: PathBuf,
    events: Events,
) {
    let connection = connection.clone();
    tokio::spawn(async move {
        let params = json!({"sessionId": session_id, "cwd": cwd, "mcpServers": []});
        if let Err(error) = connection.request("session/load", params).await {
            let _ = events.send(AppEvent::ChildFailed { session_id, message: error.message }).await;
        }
    });
}

/// `session/prompt`; the answer (stop reason) comes when the turn ends.
pub(crate) fn prompt(
    connection: &Connection,
    session_id: String,
    blocks: Vec<Value>,
    events: Events,
) {
    let connection = connection.clone();
    tokio::spawn(async move {
        let params = json!({"sessionId": session_id, "prompt": blocks});
        let result = match connection.request("session/prompt", params).await {
            Ok(answer) => serde_json::from_value::<acp::PromptResponse>(answer)
                .map(|response| response.stop_reason)
                .map_err(|error| format!("bad session/prompt answer: {error}")),
            Err(error) if is_busy_refusal(&error) => {
                let message = error.message;
                let _ = events.send(AppEvent::PromptRefusedBusy { session_id, message }).await;
                return;
            }
            Err(error) => Err(error.message),
        };
        let _ = events.send(AppEvent::PromptFinished { session_id, result }).await;
    });
}

/// The worker's refusal of a prompt while a turn of the session runs (another client's
/// prompt reached it first), known by its error data (`turn_running`).
fn is_busy_refusal(error: &RpcError) -> bool {
    acp::kestrel::is_turn_running_error(error)
}

/// `session/cancel` (a notification): the running turn stops.
pub(crate) fn cancel(connection: &Connection, session_id: &str) {
    let connection = connection.clone();
    let params = json!({"sessionId": session_id});
    tokio::spawn(async move {
        let _ = connection.notify("session/cancel", params).await;
    });
}

/// `_kestrel/session/detach`: stop receiving a session's updates (it keeps running).
pub(crate) fn detach(connection: &Connection, session_id: &str) {
    let connection = connection.clone();
    let params = json!({"sessionId": session_id});
    tokio::spawn(async move {
        let _ = connection.request(acp::kestrel::SESSION_DETACH, params).await;
    });
}

pub(crate) fn set_mode(connection: &Connection, session_id: &str, mode: String, events: Events) {
    let connection = connection.clone();
    let params = json!({"sessionId": session_id, "modeId": mode});
    tokio::spawn(async move {
        let result = match connection.request("session/set_mode", params).await {
            Ok(_) => Ok(mode),
            Err(error) => Err(error.message),
        };
        let _ = events.send(AppEvent::ModeChanged(result)).await;
    });
}

pub(crate) fn set_model(connection: &Connection, session_id: &str, model: String, events: Events) {
    let connection = connection.clone();
    let params = json!({"sessionId": session_id, "configId": "model", "value": model});
    tokio::spawn(async move {
        let result = match connection.request("session/set_config_option", params).await {
            Ok(answer) => serde_json::from_value::<acp::SetSessionConfigOptionResponse>(answer)
                .map(|response| response.config_options)
                .map_err(|error| format!("bad session/set_config_option answer: {error}")),
            Err(error) => Err(error.message),
        };
        let _ = events.send(AppEvent::ModelChanged(result)).await;
    });
}

/// `session/list`, all sessions the daemon knows.
pub(crate) fn list_sessions(connection: &Connection, purpose: SessionsPurpose, events: Events) {
    let connection = connection.clone();
    tokio::spawn(async move {
        let result = match connection.request("session/list", json!({})).await {
            Ok(answer) => parse_sessions(&answer),
            Err(error) => Err(error.message),
        };
        let _ = events.send(AppEvent::Sessions { purpose, result }).await;
    });
}

fn parse_sessions(answer: &Value) -> Result<Vec<SessionEntry>, String> {
    let response: acp::ListSessionsResponse = serde_json::from_value(answer.clone())
        .map_err(|error| format!("bad session/list answer: {error}"))?;
    Ok(response
        .sessions
        .into_iter()
        .map(|info| {
            let kestrel = info.meta.as_ref().and_then(|meta| meta.get("kestrel"));
            let parent = kestrel
                .and_then(|meta| meta.get("parentSessionId"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            let live = kestrel.and_then(|meta| meta.get("live")).and_then(Value::as_bool);
            SessionEntry {
                session_id: info.session_id.0.to_string(),
                cwd: info.cwd,
                title: info.title,
                updated_at: info.updated_at,
                parent,
                live: live.unwrap_or(false),
            }
        })
        .collect())
}

/// Answers a `session/request_permission` with the chosen option (and a reason for a
/// refusal, in `_meta.kestrel.reason`), or as cancelled. With `report` (the prompt's
/// title and the UI's events), an answer that cannot be written is reported as
/// [`AppEvent::AnswerLost`] rather than dropped.
pub(crate) fn answer_permission(
    connection: &Connection,
    id: RequestId,
    choice: Option<(String, Option<String>)>,
    report: Option<(String, Events)>,
) {
    let connection = connection.clone();
    let outcome = match choice {
        Some((option_id, reason)) => {
            let mut outcome = json!({"outcome": "selected", "optionId": option_id});
            if let (Some(reason), Value::Object(map)) = (reason, &mut outcome) {
                map.insert("_meta".into(), json!({"kestrel": {"reason": reason}}));
            }
            outcome
        }
        None => json!({"outcome": "cancelled"}),
    };
    tokio::spawn(async move {
        let sent = connection.respond(id, Ok(json!({"outcome": outcome}))).await;
        if sent.is_err()
            && let Some((title, events)) = report
        {
            let _ = events.send(AppEvent::AnswerLost { title }).await;
        }
    });
}

/// Refuses a request the TUI does not serve (it advertised no file system or terminal).
pub(crate) fn refuse(connection: &Connection, id: RequestId, method: &str) {
    let connection = connection.clone();
    let error = RpcError::method_not_found(method);
    tokio::spawn(async move {
        let _ = connection.respond(id, Err(error)).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_params_are_valid_acp() {
        let request: acp::InitializeRequest = serde_json::from_value(initialize_params()).unwrap();
        let session = request.client_capabilities.session.unwrap();
        assert!(session.notices.is_some());
        assert!(!request.client_capabilities.terminal);
    }

    #[test]
    fn a_busy_refusal_is_known_by_its_data_not_its_words() {
        let refusal = acp::kestrel::turn_running_error("anything at all");
        assert!(is_busy_refusal(&refusal));
        let worded = RpcError::new(RpcError::INVALID_REQUEST, "a prompt is already running");
        assert!(!is_busy_refusal(&worded));
    }

    #[test]
    fn session_lists_keep_kestrel_extras() {
        let answer = json!({"sessions": [{
            "sessionId": "s1", "cwd": "/w", "title": "fix it", "updatedAt": "2025-01-02T03:04:05Z",
            "_meta": {"kestrel": {"live": true, "parentSessionId": "p"}}
        }]});
        let sessions = parse_sessions(&answer).unwrap();
        assert_eq!(sessions[0].session_id, "s1");
        assert_eq!(sessions[0].parent.as_deref(), Some("p"));
        assert!(sessions[0].live);
        assert!(parse_sessions(&json!({"nope": 1})).is_err());
    }
}
