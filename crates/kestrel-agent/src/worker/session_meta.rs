//! What a client may ask for in `session/new`'s `_meta.kestrel` (docs/protocol.md):
//! `parentSessionId` (a subagent), `swarm` (a swarm role session), `model` and `mode`.
//! A field of the wrong shape is refused by name rather than ignored: the orchestrator
//! must not get a session that silently plays no role or runs in the wrong mode.

use kestrel_protocol::jsonrpc::RpcError;
use kestrel_protocol::swarm::SwarmSessionTag;
use kestrel_protocol::{Mode, SessionId, acp};
use serde_json::Value;

/// The `_meta.kestrel` fields of a `session/new`, checked.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct SessionMeta {
    /// `parentSessionId`: the session that started this one as a subagent.
    pub(crate) parent: Option<SessionId>,
    pub(crate) swarm: Option<SwarmSessionTag>,
    /// `provider/model`.
    pub(crate) model: Option<String>,
    pub(crate) mode: Option<Mode>,
}

const SWARM_SHAPE: &str = "expected {\"run\": \"<run id>\", \"task\": \"<task id>\", \"role\": \
\"planner\" | \"implementer\" | \"reviewer\", \"attempt\": <number>}";

/// Reads `request`'s `_meta.kestrel`; an error (invalid params) names the bad field.
pub(crate) fn session_meta(request: &acp::NewSessionRequest) -> Result<SessionMeta, RpcError> {
    let Some(kestrel) = request.meta.as_ref().and_then(|meta| meta.get("kestrel")) else {
        return Ok(SessionMeta::default());
    };
    let parent = kestrel
        .get("parentSessionId")
        .and_then(Value::as_str)
        .filter(|parent| !parent.is_empty())
        .map(SessionId::from_string);
    let swarm = match kestrel.get("swarm") {
        None | Some(Value::Null) => None,
        Some(value) => Some(swarm_tag(value)?),
    };
    if swarm.is_some() && parent.is_some() {
        return Err(RpcError::invalid_params(
            "_meta.kestrel.swarm and _meta.kestrel.parentSessionId were both given: a swarm \
             role session is not a subagent; send only one of them",
        ));
    }
    let model = match kestrel.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(model)) => {
            kestrel_store::split_model_ref(model).map_err(|error| {
                RpcError::invalid_params(format!("_meta.kestrel.model: {error}"))
            })?;
            Some(model.clone())
        }
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "_meta.kestrel.model must be a string like \"provider/model\", got {other}"
            )));
        }
    };
    let mode =
        match kestrel.get("mode") {
            None | Some(Value::Null) => None,
            Some(Value::String(mode)) => Some(mode.parse::<Mode>().map_err(|error| {
                RpcError::invalid_params(format!("_meta.kestrel.mode: {error}"))
            })?),
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "_meta.kestrel.mode must be one of \"read-only\", \"ask\", \"auto\", \"yolo\", \
                 got {other}"
                )));
            }
        };
    Ok(SessionMeta { parent, swarm, model, mode })
}

fn swarm_tag(value: &Value) -> Result<SwarmSessionTag, RpcError> {
    let tag: SwarmSessionTag = serde_json::from_value(value.clone()).map_err(|error| {
        RpcError::invalid_params(format!(
            "_meta.kestrel.swarm is not valid: {error} ({SWARM_SHAPE}, got {value})"
        ))
    })?;
    for (field, text) in [("run", &tag.run), ("task", &tag.task)] {
        if text.trim().is_empty() {
            return Err(RpcError::invalid_params(format!(
                "_meta.kestrel.swarm.{field} is empty ({SWARM_SHAPE})"
            )));
        }
    }
    Ok(tag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_protocol::swarm::SwarmRole;
    use serde_json::json;

    fn meta(kestrel: Value) -> Result<SessionMeta, RpcError> {
        let request: acp::NewSessionRequest = serde_json::from_value(json!({
            "cwd": "/w", "mcpServers": [], "_meta": {"kestrel": kestrel}
        }))
        .unwrap();
        session_meta(&request)
    }

    fn refusal(kestrel: Value) -> String {
        let error = meta(kestrel).unwrap_err();
        assert_eq!(error.code, RpcError::INVALID_PARAMS);
        error.message
    }

    #[test]
    fn a_swarm_session_brings_its_tag_model_and_mode() {
        let read = meta(json!({
            "swarm": {"run": "r1", "task": "parse", "role": "reviewer", "attempt": 2},
            "model": "anthropic/claude", "mode": "read-only"
        }))
        .unwrap();
        let tag = read.swarm.unwrap();
        assert_eq!((tag.run.as_str(), tag.role, tag.attempt), ("r1", SwarmRole::Reviewer, 2));
        assert_eq!(read.model.as_deref(), Some("anthropic/claude"));
        assert_eq!(read.mode, Some(Mode::ReadOnly));
        assert_eq!(read.parent, None);
    }

    #[test]
    fn no_meta_is_an_ordinary_session() {
        assert_eq!(meta(json!({})).unwrap(), SessionMeta::default());
    }

    #[test]
    fn bad_fields_are_refused_by_name() {
        let message = refusal(json!({"swarm": {"run": "r1", "task": "t", "role": "boss"}}));
        assert!(message.starts_with("_meta.kestrel.swarm is not valid"), "{message}");
        assert!(message.contains("\"role\": \"planner\""), "{message}");
        let message = refusal(json!({"swarm": "r1/t"}));
        assert!(message.starts_with("_meta.kestrel.swarm is not valid"), "{message}");
        let message =
            refusal(json!({"swarm": {"run": "", "task": "t", "role": "planner", "attempt": 1}}));
        assert!(message.starts_with("_meta.kestrel.swarm.run is empty"), "{message}");
        let message = refusal(json!({"mode": "careful"}));
        assert!(message.starts_with("_meta.kestrel.mode: unknown mode `careful`"), "{message}");
        let message = refusal(json!({"mode": 3}));
        assert!(message.starts_with("_meta.kestrel.mode must be one of"), "{message}");
        let message = refusal(json!({"model": "no-slash"}));
        assert!(message.starts_with("_meta.kestrel.model:"), "{message}");
        let message = refusal(json!({
            "parentSessionId": "p",
            "swarm": {"run": "r", "task": "t", "role": "planner", "attempt": 1}
        }));
        assert!(message.contains("not a subagent"), "{message}");
    }
}
