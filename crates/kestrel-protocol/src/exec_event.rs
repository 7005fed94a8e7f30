//! The `kestrel exec --json` event stream (ARCHITECTURE §3): one JSON object per line
//! on stdout, nothing else. Stable and versioned: fields may be added, never renamed.
//! Documented in docs/exec-json.md.

use crate::{NoticeKind, SessionId, StopReason, Usage};
use serde::{Deserialize, Serialize};

/// The version in `session.started`; bumped only for incompatible changes.
pub const EXEC_EVENT_VERSION: u32 = 1;

/// One line of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ExecEvent {
    #[serde(rename = "session.started")]
    SessionStarted { version: u32, session_id: SessionId, model: String, cwd: String },
    #[serde(rename = "turn.started")]
    TurnStarted {},
    #[serde(rename = "item.started")]
    ItemStarted { item: ExecItem },
    /// For `agent_message` and `reasoning`, `text` is only the newly streamed piece
    /// (the whole text comes in `item.completed`); for other items, the new state.
    #[serde(rename = "item.updated")]
    ItemUpdated { item: ExecItem },
    #[serde(rename = "item.completed")]
    ItemCompleted { item: ExecItem },
    /// Tokens and cost of one model request, or (with `session_id`) of a subagent's
    /// whole run.
    #[serde(rename = "usage")]
    Usage {
        usage: ExecUsage,
        /// The subagent session this usage is of; absent for the session's own requests.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<SessionId>,
    },
    /// Something the user is told that is not conversation (an image left out of the
    /// prompt or the context, a compaction, a tool source that failed); also on stderr.
    #[serde(rename = "notice")]
    Notice { kind: NoticeKind, message: String },
    #[serde(rename = "turn.completed")]
    TurnCompleted { stop_reason: StopReason, usage: ExecUsage },
    #[serde(rename = "turn.failed")]
    TurnFailed { error: ExecError, usage: ExecUsage },
}

/// Token totals as reported in events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecUsage {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    pub cost: f64,
}

impl From<Usage> for ExecUsage {
    fn from(usage: Usage) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            cached_input_tokens: usage.cached_input_tokens,
            output_tokens: usage.output_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            cost: usage.cost,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecError {
    pub message: String,
}

/// An item of a turn: `id` is unique within the session's stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecItem {
    pub id: String,
    #[serde(flatten)]
    pub kind: ExecItemKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecItemKind {
    AgentMessage {
        text: String,
    },
    Reasoning {
        text: String,
    },
    ToolCall {
        call_id: String,
        name: String,
        arguments: String,
        /// `in_progress`, `completed` or `failed`.
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        /// For `task`: the child session running it, once it has started.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<SessionId>,
    },
    FileChange {
        call_id: String,
        /// Paths the tool call changed, relative to the session's cwd where possible.
        paths: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    /// The agent's plan, whole, each time it changes.
    Plan {
        steps: Vec<ExecPlanStep>,
    },
    Error {
        message: String,
    },
}

/// One step of a plan; `status` is `pending`, `in_progress` or `completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecPlanStep {
    pub step: String,
    pub status: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_dotted_types() {
        let event = ExecEvent::ItemUpdated {
            item: ExecItem {
                id: "i1".into(),
                kind: ExecItemKind::AgentMessage { text: "e".into() },
            },
        };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"type":"item.updated","item":{"id":"i1","type":"agent_message","text":"e"}}"#
        );
    }
}
