//! From what a session does to ACP `session/update`s: live events of a turn
//! ([`UpdateMapper::event`]) and a record replayed on load ([`UpdateMapper::replay`]).
//! The mapper remembers what later updates depend on: which items already streamed and
//! the session's running cost.

use crate::AgentEvent;
use crate::worker::tool_view;
use kestrel_protocol::{Notice, NoticeKind, RecordEntry, RecordItem, Usage, acp};
use kestrel_tools::{FileChange, PlanStep, PlanStepStatus};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

/// The context window reported in `usage_update` until the session's model is known.
pub(crate) const DEFAULT_CONTEXT_WINDOW: u64 = kestrel_model::DEFAULT_CONTEXT_WINDOW;

/// Maps one session's events and record items to updates.
pub(crate) struct UpdateMapper {
    cwd: PathBuf,
    /// Items of the current turn that streamed deltas (their `completed` adds nothing).
    streamed: HashSet<String>,
    /// The session's cost so far, in USD, previous processes included.
    cost: f64,
    /// The model's context window (`usage_update.size`).
    context_window: u64,
    /// Whether the client shows `notice` updates (`clientCapabilities.session.notices`).
    notices: bool,
    /// The context the last request filled (`usage_update.used`).
    used: u64,
    /// The child session of each `task` call that started one, by call id.
    children: HashMap<String, String>,
}

impl UpdateMapper {
    pub(crate) fn new(cwd: PathBuf, notices: bool) -> Self {
        Self {
            cwd,
            streamed: HashSet::new(),
            cost: 0.0,
            context_window: DEFAULT_CONTEXT_WINDOW,
            notices,
            used: 0,
            children: HashMap::new(),
        }
    }

    /// The context window of the model in use, from the catalog.
    pub(crate) fn set_context_window(&mut self, tokens: u64) {
        self.context_window = tokens;
    }

    /// The updates one event of a running turn produces (often none or one).
    pub(crate) fn event(&mut self, event: AgentEvent) -> Vec<acp::SessionUpdate> {
        match event {
            AgentEvent::TurnStarted => {
                self.streamed.clear();
                Vec::new()
            }
            AgentEvent::TextDelta { item_id, delta } => {
                self.streamed.insert(item_id);
                vec![message_chunk(delta)]
            }
            AgentEvent::ReasoningDelta { item_id, delta } => {
                self.streamed.insert(item_id);
                vec![thought_chunk(delta)]
            }
            // A provider that sends a whole message without deltas still shows it.
            AgentEvent::TextCompleted { item_id, text } => {
                if self.streamed.contains(&item_id) {
                    Vec::new()
                } else {
                    vec![message_chunk(text)]
                }
            }
            AgentEvent::ReasoningCompleted { item_id, text } => {
                if self.streamed.contains(&item_id) {
                    Vec::new()
                } else {
                    vec![thought_chunk(text)]
                }
            }
            AgentEvent::ToolCallStarted { call_id, name, arguments } => {
                let call = tool_view::tool_call(&call_id, &name, &arguments, &self.cwd);
                vec![acp::SessionUpdate::ToolCall(call)]
            }
            AgentEvent::ToolCallRunning { call_id } => {
                let fields =
                    acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::InProgress);
                vec![acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id, fields))]
            }
            AgentEvent::ToolCallCompleted { call_id, output, is_error, changes, .. } => {
                let child = self.children.get(&call_id).cloned();
                vec![with_child(tool_result(&call_id, output, is_error, &changes), child)]
            }
            AgentEvent::SubagentStarted { call_id, session_id } => {
                self.children.insert(call_id.clone(), session_id.to_string());
                let fields =
                    acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::InProgress);
                let update =
                    acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id, fields));
                vec![with_child(update, Some(session_id.to_string()))]
            }
            // The session's cost includes its subagents'; the context is this session's.
            AgentEvent::SubagentFinished { usage, .. } => {
                self.cost += usage.cost;
                vec![self.usage_update()]
            }
            AgentEvent::Compacted { tokens_after, .. } => {
                self.used = tokens_after;
                vec![self.usage_update()]
            }
            AgentEvent::Plan(steps) => vec![plan(&steps)],
            AgentEvent::Usage(usage) => vec![self.usage(&usage)],
            AgentEvent::Notice(notice) if self.notices => vec![notice_update(&notice)],
            AgentEvent::Notice(_)
            | AgentEvent::Retrying { .. }
            | AgentEvent::TurnCompleted { .. }
            | AgentEvent::TurnFailed { .. } => Vec::new(),
        }
    }

    /// A record as updates: messages, thoughts, tool calls with their final status and
    /// output, plans, notices (for clients that show them) and the latest usage. The
    /// record has no usage of its subagents: `child_cost` gives each child's (by id).
    pub(crate) fn replay(
        &mut self,
        entries: &[RecordEntry],
        child_cost: &dyn Fn(&str) -> f64,
    ) -> Vec<acp::SessionUpdate> {
        let mut updates = Vec::new();
        let mut calls: HashMap<&str, (&str, &str)> = HashMap::new();
        let mut last_usage = None;
        for entry in entries {
            match &entry.item {
                RecordItem::UserMessage { text } => {
                    updates.push(acp::SessionUpdate::UserMessageChunk(chunk(text.clone())))
                }
                RecordItem::AssistantMessage { text, reasoning, .. } => {
                    if let Some(reasoning) = reasoning.as_ref().filter(|r| !r.is_empty()) {
                        updates.push(thought_chunk(reasoning.clone()));
                    }
                    if !text.is_empty() {
                        updates.push(message_chunk(text.clone()));
                    }
                }
                RecordItem::ToolCall { id, name, arguments } => {
                    calls.insert(id, (name, arguments));
                    let call = tool_view::tool_call(id, name, arguments, &self.cwd);
                    updates.push(acp::SessionUpdate::ToolCall(call));
                }
                RecordItem::ToolResult { id, output, is_error, .. } => {
                    let name = calls.get(id.as_str()).map(|(name, _)| *name);
                    let child = (name == Some(crate::subagent::TASK_TOOL))
                        .then(|| crate::subagent::child_in_output(output).map(str::to_string))
                        .flatten();
                    if let Some(child) = &child {
                        self.cost += child_cost(child);
                    }
                    updates
                        .push(with_child(tool_result(id, output.clone(), *is_error, &[]), child));
                    if let Some((name, arguments)) = calls.get(id.as_str())
                        && *name == "update_plan"
                        && !is_error
                        && let Some(steps) = plan_arguments(arguments)
                    {
                        updates.push(plan(&steps));
                    }
                }
                RecordItem::Usage { usage } => {
                    self.cost += usage.cost;
                    self.used = usage.input_tokens.saturating_add(usage.output_tokens);
                    last_usage = Some(*usage);
                }
                RecordItem::Notice { notice } => {
                    if self.notices {
                        updates.push(notice_update(notice));
                    }
                }
                RecordItem::TurnStarted {}
                | RecordItem::TurnCompleted { .. }
                | RecordItem::Compaction { .. }
                | RecordItem::Checkpoint { .. } => {}
            }
        }
        if last_usage.is_some() {
            updates.push(self.usage_update());
        }
        updates
    }

    fn usage(&mut self, usage: &Usage) -> acp::SessionUpdate {
        self.cost += usage.cost;
        self.used = usage.input_tokens.saturating_add(usage.output_tokens);
        self.usage_update()
    }

    /// `used` is the context the last request filled (its input and output), or the
    /// estimate after a compaction.
    fn usage_update(&self) -> acp::SessionUpdate {
        let update = acp::UsageUpdate::new(self.used, self.context_window)
            .cost(acp::Cost::new(self.cost, "USD"));
        acp::SessionUpdate::UsageUpdate(update)
    }
}

/// A `task` call's update with `_meta.kestrel.childSessionId` naming its child session.
fn with_child(update: acp::SessionUpdate, child: Option<String>) -> acp::SessionUpdate {
    let (acp::SessionUpdate::ToolCallUpdate(update), Some(child)) = (&update, child) else {
        return update;
    };
    let mut kestrel = serde_json::Map::new();
    kestrel.insert(acp::kestrel::CHILD_SESSION_META.into(), child.into());
    let mut meta = update.meta.clone().unwrap_or_default();
    meta.insert("kestrel".into(), serde_json::Value::Object(kestrel));
    acp::SessionUpdate::ToolCallUpdate(update.clone().meta(meta))
}

/// The user's prompt as it appears in history.
pub(crate) fn user_chunk(block: acp::ContentBlock) -> acp::SessionUpdate {
    acp::SessionUpdate::UserMessageChunk(acp::ContentChunk::new(block))
}

fn chunk(text: String) -> acp::ContentChunk {
    acp::ContentChunk::new(acp::ContentBlock::from(text))
}

fn message_chunk(text: String) -> acp::SessionUpdate {
    acp::SessionUpdate::AgentMessageChunk(chunk(text))
}

fn thought_chunk(text: String) -> acp::SessionUpdate {
    acp::SessionUpdate::AgentThoughtChunk(chunk(text))
}

/// The final `tool_call_update`: status, file diffs, then the output the model read.
fn tool_result(
    call_id: &str,
    output: String,
    is_error: bool,
    changes: &[FileChange],
) -> acp::SessionUpdate {
    let status =
        if is_error { acp::ToolCallStatus::Failed } else { acp::ToolCallStatus::Completed };
    let mut content: Vec<acp::ToolCallContent> = changes
        .iter()
        .filter_map(|change| {
            let text = change.text.as_ref()?;
            let diff = acp::Diff::new(&change.path, text.after.clone().unwrap_or_default())
                .old_text(text.before.clone());
            Some(acp::ToolCallContent::from(diff))
        })
        .collect();
    if !output.is_empty() {
        content.push(acp::ToolCallContent::from(acp::ContentBlock::from(output)));
    }
    let mut fields = acp::ToolCallUpdateFields::new().status(status).content(content);
    if !changes.is_empty() {
        let locations: Vec<acp::ToolCallLocation> =
            changes.iter().map(|change| acp::ToolCallLocation::new(&change.path)).collect();
        fields = fields.locations(locations);
    }
    acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id.to_string(), fields))
}

fn plan(steps: &[PlanStep]) -> acp::SessionUpdate {
    let entries = steps
        .iter()
        .map(|step| {
            let status = match step.status {
                PlanStepStatus::Pending => acp::PlanEntryStatus::Pending,
                PlanStepStatus::InProgress => acp::PlanEntryStatus::InProgress,
                PlanStepStatus::Completed => acp::PlanEntryStatus::Completed,
            };
            acp::PlanEntry::new(step.step.clone(), acp::PlanEntryPriority::Medium, status)
        })
        .collect();
    acp::SessionUpdate::Plan(acp::Plan::new(entries))
}

/// The steps of an `update_plan` call as recorded, when they parse.
fn plan_arguments(arguments: &str) -> Option<Vec<PlanStep>> {
    #[derive(serde::Deserialize)]
    struct Arguments {
        plan: Vec<PlanStep>,
    }
    serde_json::from_str::<Arguments>(arguments).ok().map(|arguments| arguments.plan)
}

fn notice_update(notice: &Notice) -> acp::SessionUpdate {
    let severity = match notice.kind {
        NoticeKind::Error => acp::NoticeSeverity::Error,
        NoticeKind::WorkerRestarted | NoticeKind::Retry => acp::NoticeSeverity::Warning,
        NoticeKind::ModelSwitch | NoticeKind::ModeSwitch | NoticeKind::Info => {
            acp::NoticeSeverity::Info
        }
    };
    let title = if notice.message.is_empty() { "notice" } else { notice.message.as_str() };
    let mut update = acp::Notice::new(severity, title);
    if matches!(notice.kind, NoticeKind::ModelSwitch | NoticeKind::ModeSwitch) {
        // Clients learn the mode and model from the session's state; the daemon does not
        // turn these into agent messages for clients that take no notices.
        let mut meta = acp::Meta::new();
        meta.insert("kestrel".into(), serde_json::json!({ "switch": true }));
        update = update.meta(meta);
    }
    acp::SessionUpdate::Notice(update)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_protocol::Timestamp;
    use kestrel_tools::ChangeText;
    use serde_json::{Value, json};

    fn values(updates: Vec<acp::SessionUpdate>) -> Vec<Value> {
        updates.into_iter().map(|update| serde_json::to_value(update).unwrap()).collect()
    }

    #[test]
    fn a_streamed_message_is_not_repeated_when_it_completes() {
        let mut mapper = UpdateMapper::new("/w".into(), false);
        let delta = AgentEvent::TextDelta { item_id: "m1".into(), delta: "Hi".into() };
        let done = AgentEvent::TextCompleted { item_id: "m1".into(), text: "Hi".into() };
        assert_eq!(values(mapper.event(delta))[0]["sessionUpdate"], "agent_message_chunk");
        assert!(mapper.event(done).is_empty());
        let whole = AgentEvent::ReasoningCompleted { item_id: "r2".into(), text: "hmm".into() };
        assert_eq!(
            values(mapper.event(whole)),
            [
                json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}})
            ]
        );
    }

    #[test]
    fn a_file_edit_completes_with_its_diff_and_output() {
        let mut mapper = UpdateMapper::new("/w".into(), false);
        let change = FileChange {
            path: "/w/a.txt".into(),
            diff: None,
            text: Some(ChangeText { before: None, after: Some("new\n".into()) }),
        };
        let event = AgentEvent::ToolCallCompleted {
            call_id: "c1".into(),
            name: "write_file".into(),
            arguments: "{}".into(),
            output: "Created a.txt".into(),
            is_error: false,
            changes: vec![change],
        };
        let update = &values(mapper.event(event))[0];
        assert_eq!(update["sessionUpdate"], "tool_call_update");
        assert_eq!(update["status"], "completed");
        assert_eq!(
            update["content"],
            json!([
                {"type": "diff", "path": "/w/a.txt", "newText": "new\n"},
                {"type": "content", "content": {"type": "text", "text": "Created a.txt"}}
            ])
        );
    }

    #[test]
    fn replay_rebuilds_messages_calls_plans_and_usage() {
        let entry = |item| RecordEntry { ts: Timestamp { millis: 0 }, item };
        let plan = r#"{"plan":[{"step":"look","status":"completed"}]}"#;
        let entries = [
            entry(RecordItem::UserMessage { text: "do it".into() }),
            entry(RecordItem::ToolCall {
                id: "p".into(),
                name: "update_plan".into(),
                arguments: plan.into(),
            }),
            entry(RecordItem::ToolResult {
                id: "p".into(),
                output: "ok".into(),
                is_error: false,
                duration_ms: 1,
            }),
            entry(RecordItem::Usage {
                usage: Usage { input_tokens: 10, output_tokens: 5, cost: 0.5, ..Usage::default() },
            }),
            entry(RecordItem::AssistantMessage {
                text: "done".into(),
                reasoning: Some("why".into()),
                reasoning_opaque: None,
            }),
        ];
        let mut mapper = UpdateMapper::new("/w".into(), false);
        let kinds: Vec<Value> = values(mapper.replay(&entries, &|_| 0.0))
            .iter()
            .map(|u| u["sessionUpdate"].clone())
            .collect();
        assert_eq!(
            kinds,
            [
                "user_message_chunk",
                "tool_call",
                "tool_call_update",
                "plan",
                "agent_thought_chunk",
                "agent_message_chunk",
                "usage_update"
            ]
        );
        let usage = mapper.event(AgentEvent::Usage(Usage {
            input_tokens: 7,
            cost: 0.25,
            ..Usage::default()
        }));
        assert_eq!(
            values(usage)[0],
            json!({"sessionUpdate": "usage_update", "used": 7, "size": DEFAULT_CONTEXT_WINDOW,
                   "cost": {"amount": 0.75, "currency": "USD"}})
        );
    }
}
