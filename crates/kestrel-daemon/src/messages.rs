//! The ACP messages the daemon writes itself (everything else it relays as it came):
//! its `initialize` answer, `session/list`, restart notices and the Kestrel extension
//! notifications. Shapes follow the pinned ACP schema; tests check them against it.

use kestrel_store::SessionSummary;
use serde_json::{Value, json};

/// The ACP protocol version the daemon speaks.
pub(crate) const PROTOCOL_VERSION: u16 = 1;

/// `_kestrel/worker/restarted` (daemon → clients).
pub const WORKER_RESTARTED: &str = "_kestrel/worker/restarted";
/// `_kestrel/session/detach` (client → daemon).
pub const SESSION_DETACH: &str = "_kestrel/session/detach";
/// `_kestrel/session/history` (daemon → worker).
pub const SESSION_HISTORY: &str = "_kestrel/session/history";
/// `_kestrel/session/spawn` (worker → daemon).
pub const SESSION_SPAWN: &str = "_kestrel/session/spawn";
/// `_kestrel/daemon/status` (client → daemon): sessions, worker pids, clients.
pub const DAEMON_STATUS: &str = "_kestrel/daemon/status";
/// `_kestrel/daemon/stop` (client → daemon): stop every worker and exit.
pub const DAEMON_STOP: &str = "_kestrel/daemon/stop";

/// The daemon's answer to `initialize`: the capabilities every worker has
/// (docs/protocol.md), so clients need not wait for a worker to learn them.
pub(crate) fn initialize_response() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": false, "sse": false},
            "sessionCapabilities": {"list": {}}
        },
        "authMethods": [],
        "agentInfo": {"name": "kestrel", "title": "Kestrel", "version": env!("CARGO_PKG_VERSION")}
    })
}

/// The `initialize` the daemon sends a worker: it asks for no client file system or
/// terminal (the worker uses its own tools), and advertises notices.
pub(crate) fn initialize_worker_request() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
        "clientInfo": {"name": "kestrel-daemon", "version": env!("CARGO_PKG_VERSION")}
    })
}

/// `session/list`'s answer: every session of the store (filtered by `cwd` when the
/// client gave one), with Kestrel's extras under `_meta.kestrel`.
pub(crate) fn list_response(
    sessions: &[SessionSummary],
    cwd: Option<&str>,
    live: &dyn Fn(&str) -> bool,
) -> Value {
    let sessions: Vec<Value> = sessions
        .iter()
        .filter(|summary| cwd.is_none_or(|cwd| summary.cwd == cwd))
        .map(|summary| {
            let mut info = json!({
                "sessionId": summary.id.as_str(),
                "cwd": summary.cwd,
                "updatedAt": summary.created_at.to_string(),
                "_meta": {"kestrel": {
                    "live": live(summary.id.as_str()),
                    "model": format!("{}/{}", summary.provider, summary.model),
                    "parentSessionId": summary.parent_id.as_ref().map(|id| id.as_str()),
                }}
            });
            if let (Some(title), Value::Object(map)) = (&summary.first_prompt, &mut info) {
                map.insert("title".into(), Value::String(title.clone()));
            }
            info
        })
        .collect();
    json!({"sessions": sessions})
}

/// A `session/update` telling people that the worker restarted: an ACP `notice` for
/// clients that advertised `session.notices`, an agent message otherwise.
pub(crate) fn restart_notice(session_id: &str, text: &str, as_notice: bool) -> Value {
    let update = if as_notice {
        json!({"sessionUpdate": "notice", "severity": "warning", "title": text})
    } else {
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": format!("\n[kestrel] {text}\n")}})
    };
    json!({"sessionId": session_id, "update": update})
}

/// The `_kestrel/worker/restarted` params.
pub(crate) fn restarted(session_id: &str, reason: &str, restarts: u32) -> Value {
    json!({"sessionId": session_id, "reason": reason, "restarts": restarts})
}

/// A session/update carrying one update of a history reply.
pub(crate) fn session_update(session_id: &str, update: Value) -> Value {
    json!({"sessionId": session_id, "update": update})
}

/// The answer to a `session/request_permission` that nobody will give (the turn was
/// cancelled).
pub(crate) fn permission_cancelled() -> Value {
    json!({"outcome": {"outcome": "cancelled"}})
}

/// The answer to a prompt whose worker died mid-turn.
pub(crate) fn prompt_cancelled() -> Value {
    json!({"stopReason": "cancelled"})
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
