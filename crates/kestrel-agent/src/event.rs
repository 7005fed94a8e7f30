//! What a session reports while a turn runs. Hosts map these to their own surface:
//! the exec host to `exec --json` lines or stderr progress, the worker to ACP updates.

use kestrel_protocol::{Notice, SessionId, StopReason, Usage};
use kestrel_tools::{FileChange, PlanStep};

/// One thing that happened in a turn, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    TurnStarted,
    /// A piece of the assistant's answer; `item_id` is stable for the message.
    TextDelta {
        item_id: String,
        delta: String,
    },
    /// The assistant's message of one model request, whole.
    TextCompleted {
        item_id: String,
        text: String,
    },
    ReasoningDelta {
        item_id: String,
        delta: String,
    },
    ReasoningCompleted {
        item_id: String,
        text: String,
    },
    /// A call the model made; it runs once approved (`ToolCallRunning`) or ends refused.
    ToolCallStarted {
        call_id: String,
        name: String,
        arguments: String,
    },
    /// The call was allowed and is running now.
    ToolCallRunning {
        call_id: String,
    },
    ToolCallCompleted {
        call_id: String,
        name: String,
        arguments: String,
        output: String,
        is_error: bool,
        changes: Vec<FileChange>,
    },
    Plan(Vec<PlanStep>),
    /// A `task` call's child session exists (its record names this session as parent).
    SubagentStarted {
        call_id: String,
        session_id: SessionId,
    },
    /// A `task` call's child session ended its turn; `usage` is what it spent, which the
    /// turn's totals include (the parent's record has no `usage` item for it).
    SubagentFinished {
        call_id: String,
        session_id: SessionId,
        usage: Usage,
    },
    /// Tokens and cost of one model request.
    Usage(Usage),
    /// The conversation was compacted (a `notice` says so too); estimated context tokens.
    Compacted {
        tokens_before: u64,
        tokens_after: u64,
    },
    /// A model request is being retried (the URL and why).
    Retrying {
        message: String,
    },
    /// Something to tell the user that is not conversation (an MCP server that failed
    /// to start or died); the record has it as a `notice` item.
    Notice(Notice),
    TurnCompleted {
        stop_reason: StopReason,
        final_text: String,
        usage: Usage,
    },
    TurnFailed {
        error: String,
        usage: Usage,
    },
}
