//! The ACP messages the daemon writes itself (everything else it relays as it came):
//! its `initialize` answer, `session/list`, restart notices and the Kestrel extension
//! notifications. Built from the pinned schema's types (`kestrel_protocol::acp`), so
//! they have the shapes the schema says; tests also check them against its JSON schema.

use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::RpcError;
use kestrel_store::{SessionSummary, list_sessions_response};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// `_kestrel/session/turn` (daemon → clients).
pub const SESSION_TURN: &str = acp::kestrel::SESSION_TURN;
/// `_kestrel/worker/restarted` (daemon → clients).
pub const WORKER_RESTARTED: &str = acp::kestrel::WORKER_RESTARTED;
/// `_kestrel/session/detach` (client → daemon).
pub const SESSION_DETACH: &str = acp::kestrel::SESSION_DETACH;
/// `_kestrel/session/history` (daemon → worker).
pub const SESSION_HISTORY: &str = acp::kestrel::SESSION_HISTORY;
/// `_kestrel/session/spawn` (worker → daemon).
pub const SESSION_SPAWN: &str = acp::kestrel::SESSION_SPAWN;
/// `_kestrel/daemon/status` (client → daemon): sessions, worker pids, clients.
pub const DAEMON_STATUS: &str = "_kestrel/daemon/status";
/// `_kestrel/daemon/stop` (client → daemon): stop every worker and exit.
pub const DAEMON_STOP: &str = "_kestrel/daemon/stop";

/// A schema type as JSON. Serialising these types cannot fail (string keys only).
fn to_value(message: impl Serialize) -> Value {
    serde_json::to_value(message).unwrap_or(Value::Null)
}

/// The daemon's answer to `initialize`: the capabilities every worker advertises
/// (docs/protocol.md), so clients need not wait for a worker to learn them.
pub(crate) fn initialize_response() -> Value {
    to_value(acp::kestrel::initialize_response())
}

/// Whether a client's `initialize` advertised `session.notices`, the opt-in to notices
/// and Kestrel's extension notifications. Fails when the params are not an `initialize`
/// request.
pub(crate) fn client_takes_extensions(params: &Value) -> Result<bool, String> {
    let request: acp::InitializeRequest = serde_json::from_value(params.clone())
        .map_err(|error| format!("invalid initialize params: {error}"))?;
    Ok(request
        .client_capabilities
        .session
        .as_ref()
        .is_some_and(|session| session.notices.is_some()))
}

/// The `initialize` the daemon sends a worker: no client file system or terminal (the
/// worker uses its own tools) and notices, which the daemon passes on as each client
/// asked ([`notice_for_plain_client`]).
pub(crate) fn initialize_worker_request() -> Value {
    let info = acp::Implementation::new("kestrel-daemon", env!("CARGO_PKG_VERSION"));
    let session = acp::ClientSessionCapabilities::new().notices(acp::NoticeCapabilities::new());
    to_value(
        acp::InitializeRequest::new(acp::ProtocolVersion::V1)
            .client_capabilities(acp::ClientCapabilities::new().session(session))
            .client_info(info),
    )
}

/// Whether `update` (a `session/update`'s `update`) is a `notice`.
pub(crate) fn is_notice(update: &Value) -> bool {
    update.get("sessionUpdate").and_then(Value::as_str) == Some("notice")
}

/// A worker's live `notice` update as a plain client (one that did not advertise
/// `session.notices`) gets it: warnings and errors only, each as an agent message of its
/// own, as [`daemon_notice`] says them. `None` for any other update and for info notices
/// (mode and model switches, compactions: such a client learns the state from the
/// session, and lines in its transcript would run into the answers).
pub(crate) fn notice_for_plain_client(session_id: &str, update: &Value) -> Option<Value> {
    let severity = update.get("severity").and_then(Value::as_str);
    if !is_notice(update) || !matches!(severity, Some("warning" | "error")) {
        return None;
    }
    let title = update.get("title").and_then(Value::as_str).unwrap_or("notice");
    let text = match update.get("description").and_then(Value::as_str) {
        Some(description) => format!("{title}: {description}"),
        None => title.to_owned(),
    };
    Some(plain_message(session_id, &text))
}

/// `session/list`'s answer: every session of the store (filtered by `cwd` when the
/// client gave one), most recently active first, with whether each is `live` here.
pub(crate) fn list_response(
    sessions: &[SessionSummary],
    cwd: Option<&str>,
    live: &dyn Fn(&str) -> bool,
) -> Value {
    to_value(list_sessions_response(sessions, cwd.map(Path::new), Some(live)))
}

/// A `session/update` telling people what happened to the worker (a warning or an
/// error): an ACP `notice` for clients that advertised `session.notices`, an agent
/// message of its own ([`plain_message`]) otherwise.
pub(crate) fn daemon_notice(
    session_id: &str,
    severity: acp::NoticeSeverity,
    text: &str,
    as_notice: bool,
) -> Value {
    if !as_notice {
        return plain_message(session_id, text);
    }
    let update = acp::SessionUpdate::Notice(acp::Notice::new(severity, text));
    to_value(acp::SessionNotification::new(session_id.to_owned(), update))
}

/// `text` for a plain client: an agent message chunk with a `messageId` of its own, so
/// it is a message apart from the model's reply around it (ACP: a change of `messageId`
/// starts a new message); set on lines of its own for clients that ignore the id.
fn plain_message(session_id: &str, text: &str) -> Value {
    static NOTICES: AtomicU64 = AtomicU64::new(1);
    let number = NOTICES.fetch_add(1, Ordering::Relaxed);
    let id = format!("kestrel-notice-{}-{number}", std::process::id());
    let chunk = acp::ContentChunk::new(format!("\n[kestrel] {text}\n").into())
        .message_id(acp::MessageId::from(id));
    to_value(acp::SessionNotification::new(
        session_id.to_owned(),
        acp::SessionUpdate::AgentMessageChunk(chunk),
    ))
}

/// The `_kestrel/worker/restarted` params.
pub(crate) fn restarted(session_id: &str, reason: &str, restarts: u32) -> Value {
    to_value(acp::kestrel::WorkerRestartedNotification {
        session_id: session_id.to_owned().into(),
        reason: reason.to_owned(),
        restarts,
    })
}

/// The `_kestrel/session/turn` params: a turn of `session_id` started (`end` is `None`)
/// or ended with the prompt's answer: its stop reason, or its error's message.
pub(crate) fn session_turn(session_id: &str, end: Option<&Result<Value, RpcError>>) -> Value {
    let stop_reason = end
        .and_then(|end| end.as_ref().ok())
        .and_then(|answer| answer.get("stopReason"))
        .and_then(|reason| serde_json::from_value::<acp::StopReason>(reason.clone()).ok());
    let error = end.and_then(|end| end.as_ref().err()).map(|error| error.message.clone());
    to_value(acp::kestrel::SessionTurnNotification {
        session_id: session_id.to_owned().into(),
        running: end.is_none(),
        stop_reason,
        error,
    })
}

/// The attach answer: the session's snapshot plus `_meta.kestrel.turnRunning`.
pub(crate) fn attach_response(snapshot: &Value, turn_running: bool) -> Value {
    let mut answer = snapshot.clone();
    if let Value::Object(map) = &mut answer {
        let meta = json!({"kestrel": {acp::kestrel::TURN_RUNNING_META: turn_running}});
        map.insert("_meta".into(), meta);
    }
    answer
}

/// A session/update carrying one update of a history reply.
pub(crate) fn session_update(session_id: &str, update: Value) -> Value {
    json!({"sessionId": session_id, "update": update})
}

/// The answer to a `session/request_permission` that nobody will give (the turn was
/// cancelled).
pub(crate) fn permission_cancelled() -> Value {
    to_value(acp::RequestPermissionResponse::new(acp::RequestPermissionOutcome::Cancelled))
}

/// The answer to a prompt whose worker died mid-turn.
pub(crate) fn prompt_cancelled() -> Value {
    to_value(acp::PromptResponse::new(acp::StopReason::Cancelled))
}

/// Keeps the attach snapshot (`modes`, `configOptions`) current with the worker's
/// mode and config updates.
pub(crate) fn apply_to_snapshot(snapshot: &mut Value, update: &Value) {
    match update.get("sessionUpdate").and_then(Value::as_str) {
        Some("current_mode_update") => {
            if let (Some(mode), Some(modes)) =
                (update.get("currentModeId"), snapshot.get_mut("modes"))
                && let Value::Object(modes) = modes
            {
                modes.insert("currentModeId".into(), mode.clone());
            }
        }
        Some("config_option_update") => {
            if let (Some(options), Value::Object(map)) =
                (update.get("configOptions"), &mut *snapshot)
            {
                map.insert("configOptions".into(), options.clone());
            }
        }
        _ => {}
    }
}

/// The parts of a `session/new` or `session/load` answer that an attaching client gets
/// in its `session/load` answer.
pub(crate) fn snapshot_of(response: &Value) -> Value {
    let mut snapshot = serde_json::Map::new();
    for key in ["modes", "configOptions", "models"] {
        if let Some(value) = response.get(key) {
            snapshot.insert(key.into(), value.clone());
        }
    }
    Value::Object(snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_own_messages_parse_as_the_schema_types() {
        let init: acp::InitializeResponse = serde_json::from_value(initialize_response()).unwrap();
        assert!(init.agent_capabilities.load_session);
        assert!(init.agent_capabilities.session_capabilities.list.is_some());
        let warning = acp::NoticeSeverity::Warning;
        let notice: acp::SessionNotification =
            serde_json::from_value(daemon_notice("s1", warning.clone(), "restarted", true))
                .unwrap();
        assert!(matches!(notice.update, acp::SessionUpdate::Notice(_)));
        let message = daemon_notice("s1", warning, "restarted", false);
        assert_eq!(message["update"]["sessionUpdate"], "agent_message_chunk");
        assert!(message["update"]["content"]["text"].as_str().unwrap().contains("restarted"));
        let restarted: acp::kestrel::WorkerRestartedNotification =
            serde_json::from_value(restarted("s1", "killed by signal 9", 2)).unwrap();
        assert_eq!(restarted.restarts, 2);
        assert_eq!(prompt_cancelled(), json!({"stopReason": "cancelled"}));
        assert_eq!(permission_cancelled(), json!({"outcome": {"outcome": "cancelled"}}));
    }

    #[test]
    fn plain_clients_get_warnings_and_errors_as_messages_of_their_own_and_nothing_else() {
        let notice = |severity: &str, meta: Value| json!({"sessionUpdate": "notice", "severity": severity, "title": "t", "_meta": meta});
        let warning = notice_for_plain_client("s1", &notice("warning", Value::Null)).unwrap();
        let error = notice_for_plain_client("s1", &notice("error", Value::Null)).unwrap();
        for plain in [&warning, &error] {
            assert_eq!(plain["update"]["sessionUpdate"], "agent_message_chunk");
            assert_eq!(plain["update"]["content"]["text"], "\n[kestrel] t\n");
            let _: acp::SessionNotification = serde_json::from_value(plain.clone()).unwrap();
        }
        let id = |plain: &Value| plain["update"]["messageId"].as_str().unwrap().to_owned();
        assert_ne!(id(&warning), id(&error), "each its own message");
        assert_eq!(notice_for_plain_client("s1", &notice("info", Value::Null)), None);
        let switch = notice("info", json!({"kestrel": {"switch": true}}));
        assert_eq!(notice_for_plain_client("s1", &switch), None);
        let chunk = json!({"sessionUpdate": "agent_message_chunk", "severity": "error"});
        assert_eq!(notice_for_plain_client("s1", &chunk), None);
    }

    #[test]
    fn notices_follow_the_clients_capability_and_bad_initialize_params_are_refused() {
        let with =
            json!({"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}});
        assert_eq!(client_takes_extensions(&with), Ok(true));
        assert_eq!(client_takes_extensions(&json!({"protocolVersion": 1})), Ok(false));
        let error = client_takes_extensions(&json!({"clientCapabilities": 3})).unwrap_err();
        assert!(error.contains("invalid initialize params"), "{error}");
    }

    #[test]
    fn snapshots_follow_mode_and_config_updates() {
        let mut snapshot = snapshot_of(&json!({
            "sessionId": "s", "modes": {"currentModeId": "ask", "availableModes": []},
            "configOptions": [{"id": "model"}]
        }));
        apply_to_snapshot(
            &mut snapshot,
            &json!({"sessionUpdate": "current_mode_update", "currentModeId": "yolo"}),
        );
        apply_to_snapshot(
            &mut snapshot,
            &json!({"sessionUpdate": "config_option_update", "configOptions": []}),
        );
        assert_eq!(
            snapshot,
            json!({"modes": {"currentModeId": "yolo", "availableModes": []}, "configOptions": []})
        );
    }
}
