//! ACP v1 message types (agentclientprotocol.com), taken from the pinned
//! `agent-client-protocol-schema` crate so there is one source of message shapes, plus
//! Kestrel's extension methods of docs/protocol.md in [`kestrel`].
//!
//! Parse incoming payloads by method with `ClientRequest::from_method_and_params` (or the
//! payload struct itself), never through an aggregate enum's untagged `Deserialize`.

pub use agent_client_protocol_schema::v1::*;
pub use agent_client_protocol_schema::{
    IntoMaybeUndefined, IntoOption, MaybeUndefined, MethodDispatchError, ProtocolVersion,
};

impl From<crate::SessionId> for SessionId {
    fn from(id: crate::SessionId) -> Self {
        SessionId::new(id.as_str())
    }
}

impl From<&crate::SessionId> for SessionId {
    fn from(id: &crate::SessionId) -> Self {
        SessionId::new(id.as_str())
    }
}

/// Kestrel-only methods (a leading underscore, as ACP extensions must have) and their
/// params and results. Field names are camelCase on the wire, like ACP's own.
pub mod kestrel {
    use super::{
        AgentCapabilities, Implementation, InitializeResponse, McpCapabilities, McpServer,
        PromptCapabilities, ProtocolVersion, SessionCapabilities, SessionId,
        SessionListCapabilities, SessionUpdate, StopReason,
    };
    use crate::Mode;
    use crate::jsonrpc::RpcError;
    use serde::{Deserialize, Serialize};
    use std::path::PathBuf;

    /// Client → daemon: stop receiving a session's updates; the session keeps running.
    pub const SESSION_DETACH: &str = "_kestrel/session/detach";
    /// Daemon → worker: the session's history as updates, the turn in progress included.
    pub const SESSION_HISTORY: &str = "_kestrel/session/history";
    /// Worker → daemon (or exec host): start a child session in its own worker.
    pub const SESSION_SPAWN: &str = "_kestrel/session/spawn";
    /// Daemon → clients (notification): a session's worker died and was restarted.
    pub const WORKER_RESTARTED: &str = "_kestrel/worker/restarted";
    /// Client → worker (through the daemon): compact the session's conversation now.
    pub const SESSION_COMPACT: &str = "_kestrel/session/compact";
    /// Client → worker (through the daemon): put back the files of the last turns.
    pub const SESSION_UNDO: &str = "_kestrel/session/undo";
    /// Error code of [`SESSION_UNDO`] when files changed since refuse it (nothing is
    /// changed); `data` is an [`UndoRefusal`].
    pub const UNDO_REFUSED: i64 = -32010;
    /// Error code of [`SESSION_UNDO`] when there is nothing to undo.
    pub const NOTHING_TO_UNDO: i64 = -32011;
    /// The key under `_meta.kestrel` of a `task` tool call's updates that names the
    /// child session running it.
    pub const CHILD_SESSION_META: &str = "childSessionId";
    /// Daemon → clients (notification): a turn of an attached session started or ended
    /// (whoever prompted it); params are a [`SessionTurnNotification`].
    pub const SESSION_TURN: &str = "_kestrel/session/turn";
    /// The key under `_meta.kestrel` of the daemon's attach answer (`session/load` of a
    /// live session) that says whether a turn of the session is running.
    pub const TURN_RUNNING_META: &str = "turnRunning";
    /// `data.reason` of the `-32600` error that refuses a `session/prompt` because a turn
    /// of the session is running (the refused prompt starts and ends nothing). Clients
    /// match on it, never on the message's words.
    pub const TURN_RUNNING_REASON: &str = "turn_running";

    /// The refusal of a prompt while a turn of the session runs: `-32600` with
    /// `data: {"reason": "turn_running"}` ([`TURN_RUNNING_REASON`]).
    pub fn turn_running_error(message: impl Into<String>) -> RpcError {
        let mut error = RpcError::new(RpcError::INVALID_REQUEST, message);
        error.data = Some(serde_json::json!({ "reason": TURN_RUNNING_REASON }));
        error
    }

    /// Whether `error` refused a prompt because a turn of the session was running.
    pub fn is_turn_running_error(error: &RpcError) -> bool {
        error.code == RpcError::INVALID_REQUEST
            && error.data.as_ref().and_then(|data| data.get("reason")).and_then(|r| r.as_str())
                == Some(TURN_RUNNING_REASON)
    }

    /// Kestrel's answer to `initialize`, the same from a worker and from the daemon:
    /// sessions can be loaded and listed, prompts may carry images and embedded
    /// context, MCP servers may be HTTP.
    pub fn initialize_response() -> InitializeResponse {
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
            .mcp_capabilities(McpCapabilities::new().http(true))
            .session_capabilities(SessionCapabilities::new().list(SessionListCapabilities::new()));
        let info =
            Implementation::new("kestrel", env!("CARGO_PKG_VERSION")).title("Kestrel".to_owned());
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .agent_info(info)
    }

    /// Params of [`SESSION_DETACH`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DetachSessionRequest {
        pub session_id: SessionId,
    }

    /// Result of [`SESSION_DETACH`]: `{}`.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct DetachSessionResponse {}

    /// Params of [`SESSION_HISTORY`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct SessionHistoryRequest {
        pub session_id: SessionId,
    }

    /// Result of [`SESSION_HISTORY`]: every update a client needs to show the session as
    /// it stands, in order. It is produced in order with the worker's notifications: a
    /// client that applies these and then every later `session/update` misses nothing and
    /// sees nothing twice.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct SessionHistoryResponse {
        pub updates: Vec<SessionUpdate>,
    }

    /// Params of [`SESSION_SPAWN`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct SpawnSessionRequest {
        pub parent_session_id: SessionId,
        pub cwd: PathBuf,
        /// The child's first prompt.
        pub prompt: String,
        /// `provider/model`; the parent's when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub model: Option<String>,
        /// The child's mode; the host's default when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mode: Option<Mode>,
        /// MCP servers the parent got from its client (its `session/new` `mcpServers`),
        /// for the child's `session/new`: the child loads the configured ones itself.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub mcp_servers: Vec<McpServer>,
    }

    /// Result of [`SESSION_SPAWN`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct SpawnSessionResponse {
        pub session_id: SessionId,
    }

    /// Params of [`SESSION_COMPACT`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct CompactSessionRequest {
        pub session_id: SessionId,
    }

    /// Result of [`SESSION_COMPACT`]. `compacted: false` (with `reason`) when there was
    /// nothing to compact; token counts are the session's estimate of its context.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct CompactSessionResponse {
        pub compacted: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub reason: Option<String>,
        pub tokens_before: u64,
        pub tokens_after: u64,
    }

    /// Params of [`SESSION_UNDO`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct UndoSessionRequest {
        pub session_id: SessionId,
        /// How many of the latest turns that changed files (default 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub turns: Option<u64>,
        /// Overwrite files changed since (what they hold is saved first).
        #[serde(default)]
        pub force: bool,
        /// Only say what would be done.
        #[serde(default)]
        pub dry_run: bool,
    }

    /// Result of [`SESSION_UNDO`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct UndoSessionResponse {
        /// The turns undone (1-based, oldest first).
        pub turns: Vec<u64>,
        /// Each file put back (or, dry, that would be).
        pub files: Vec<UndoneFile>,
        /// Files changed since the turn that `force` overwrote.
        pub overwritten: Vec<PathBuf>,
        /// Files undo could not put back, and why.
        pub skipped: Vec<RefusedFile>,
        pub dry_run: bool,
    }

    /// One file an undo put back.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UndoneFile {
        pub path: PathBuf,
        pub action: UndoAction,
    }

    /// What undo did to a file.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum UndoAction {
        /// Its old content (or symlink) is back.
        Restored,
        /// It did not exist before the turn: removed.
        Removed,
    }

    /// A file undo refused or could not put back.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct RefusedFile {
        pub path: PathBuf,
        pub reason: String,
    }

    /// `data` of an [`UNDO_REFUSED`] error: every file that refused it.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UndoRefusal {
        pub turns: Vec<u64>,
        pub files: Vec<RefusedFile>,
    }

    /// Params of the [`WORKER_RESTARTED`] notification.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct WorkerRestartedNotification {
        pub session_id: SessionId,
        /// Why the worker stopped (exit status, signal), for people.
        pub reason: String,
        /// Restarts of this session so far.
        pub restarts: u32,
    }

    /// Params of the [`SESSION_TURN`] notification.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct SessionTurnNotification {
        pub session_id: SessionId,
        /// True when a turn started, false when the session's turn is over.
        pub running: bool,
        /// How the turn ended; absent when it started, or when it failed with an error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub stop_reason: Option<StopReason>,
        /// Why the turn failed (the prompt's error message) when it ended with an error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub error: Option<String>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_parse_by_method_and_updates_serialise_as_acp() {
        let params = json!({"cwd": "/w", "mcpServers": []});
        let request = ClientRequest::from_method_and_params("session/new", &params).unwrap();
        assert!(matches!(request, ClientRequest::NewSessionRequest(_)));
        let update = SessionUpdate::AgentMessageChunk(ContentChunk::new("hi".into()));
        let value = serde_json::to_value(SessionNotification::new("s1", update)).unwrap();
        assert_eq!(
            value,
            json!({"sessionId": "s1", "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "hi"}
            }})
        );
    }

    #[test]
    fn a_prompt_refused_because_a_turn_runs_is_known_by_its_data_not_its_words() {
        let refusal = kestrel::turn_running_error("busy");
        assert_eq!(refusal.data, Some(json!({"reason": "turn_running"})));
        assert!(kestrel::is_turn_running_error(&refusal));
        let worded = crate::jsonrpc::RpcError::new(-32600, "a prompt is already running");
        assert!(!kestrel::is_turn_running_error(&worded));
        let other_code = crate::jsonrpc::RpcError { code: -32603, ..refusal };
        assert!(!kestrel::is_turn_running_error(&other_code));
    }

    #[test]
    fn kestrel_extensions_use_camel_case() {
        let spawn = kestrel::SpawnSessionRequest {
            parent_session_id: "p".into(),
            cwd: "/w".into(),
            prompt: "go".into(),
            model: None,
            mode: Some(crate::Mode::ReadOnly),
            mcp_servers: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(&spawn).unwrap(),
            json!({"parentSessionId": "p", "cwd": "/w", "prompt": "go", "mode": "read-only"})
        );
        let history: kestrel::SessionHistoryResponse = serde_json::from_value(json!({
            "updates": [{"sessionUpdate": "user_message_chunk",
                         "content": {"type": "text", "text": "q"}}]
        }))
        .unwrap();
        assert_eq!(history.updates.len(), 1);
    }
}
