//! What a role turn left in its session's record: whether it ended and how, what it
//! cost, and the role tool's result (the reviewer's verdict, the planner's plan). The
//! record, not the connection, is the truth: a resumed orchestrator reads the same.

use crate::SwarmError;
use kestrel_protocol::swarm::{
    EXPERIMENTS_TOOL, ExperimentSpec, PLAN_TOOL, REVIEW_TOOL, SwarmExperiments, SwarmPlan,
    SwarmReview, TaskSpec, TurnUsage,
};
use kestrel_protocol::{RecordItem, SessionId, StopReason};
use kestrel_store::{KestrelHome, SessionIndex, read_record};

/// A role turn as its record tells it, from the first prompt that starts with the turn's
/// prompt line (a re-sent prompt of the same attempt counts as the same turn).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordedTurn {
    /// Whether the record has the prompt at all.
    pub prompted: bool,
    /// How the last turn after the prompt ended; `None` while it runs (or its worker
    /// died and no one has loaded the record since).
    pub ended: Option<StopReason>,
    /// The error of a failed turn.
    pub error: Option<String>,
    pub usage: TurnUsage,
    /// The last `swarm_review` call: approve and findings.
    pub verdict: Option<(bool, Vec<String>)>,
    /// The last accepted `swarm_plan` call.
    pub plan: Option<Vec<TaskSpec>>,
    /// The last refusal of a `swarm_plan` call (its reasons).
    pub plan_refusal: Option<String>,
    /// The last accepted `swarm_experiments` call (a climb's planner).
    pub experiments: Option<Vec<ExperimentSpec>>,
}

/// Reads the turn of `session` that began with the prompt line `line`.
pub fn recorded_turn(
    home: &KestrelHome,
    session: &SessionId,
    line: &str,
) -> Result<RecordedTurn, SwarmError> {
    let summary = SessionIndex::find(home, session.as_str())?;
    let replay = read_record(&summary.path)?;
    let entries = &replay.entries;
    let Some(start) = entries.iter().position(
        |entry| matches!(&entry.item, RecordItem::UserMessage { text } if text.starts_with(line)),
    ) else {
        return Ok(RecordedTurn::default());
    };
    let mut turn = RecordedTurn { prompted: true, ..RecordedTurn::default() };
    let mut calls: Vec<(&str, &str, &str)> = Vec::new();
    for entry in &entries[start..] {
        match &entry.item {
            RecordItem::UserMessage { .. } | RecordItem::TurnStarted {} => turn.ended = None,
            RecordItem::TurnCompleted { stop_reason, error } => {
                turn.ended = Some(*stop_reason);
                turn.error = error.clone();
            }
            RecordItem::Usage { usage } => {
                turn.usage.input_tokens += usage.input_tokens;
                turn.usage.output_tokens += usage.output_tokens;
                turn.usage.cost_usd += usage.cost;
            }
            RecordItem::ToolCall { id, name, arguments } => {
                calls.push((id.as_str(), name.as_str(), arguments.as_str()));
            }
            RecordItem::ToolResult { id, output, is_error, .. } => {
                let Some((_, name, arguments)) = calls.iter().find(|(call, ..)| call == id) else {
                    continue;
                };
                // Only calls the tool accepted count: the last one wins.
                if *name == REVIEW_TOOL && !is_error {
                    turn.verdict = serde_json::from_str::<SwarmReview>(arguments)
                        .ok()
                        .map(|review| (review.approve, review.findings));
                } else if *name == PLAN_TOOL && !is_error {
                    turn.plan =
                        serde_json::from_str::<SwarmPlan>(arguments).ok().map(|plan| plan.tasks);
                } else if *name == PLAN_TOOL {
                    turn.plan_refusal = Some(output.clone());
                } else if *name == EXPERIMENTS_TOOL && !is_error {
                    turn.experiments = serde_json::from_str::<SwarmExperiments>(arguments)
                        .ok()
                        .map(|proposal| proposal.experiments);
                }
            }
            RecordItem::AssistantMessage { .. }
            | RecordItem::Compaction { .. }
            | RecordItem::Notice { .. }
            | RecordItem::Checkpoint { .. } => {}
        }
    }
    Ok(turn)
}
