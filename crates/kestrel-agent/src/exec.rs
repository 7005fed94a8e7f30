//! The exec host: runs one prompt headless (`kestrel exec`). With `--json`, stdout is the
//! event stream of ARCHITECTURE §3 and nothing else; without it, stdout gets only the
//! final answer. Progress goes to stderr either way, unless `--quiet`.

mod progress;

use crate::AgentError;
use crate::approval::Unattended;
use crate::event::AgentEvent;
use crate::session::EventSink;
use crate::setup::{Launch, open_session, open_swarm_session};
use crate::subagent::ProcessHost;
use futures_util::future::BoxFuture;
use kestrel_protocol::{
    EXEC_EVENT_VERSION, ExecError, ExecEvent, ExecItem, ExecItemKind, ExecPlanStep, SessionId,
    StopReason,
};
use kestrel_store::SessionIndex;
use kestrel_tools::PlanStepStatus;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Which session `exec resume` continues.
#[derive(Debug, Clone, PartialEq)]
pub enum ResumeTarget {
    /// The newest session started in this cwd.
    Last,
    /// An id or a unique prefix of one.
    Id(String),
}

/// What `kestrel exec` was asked to do.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    pub prompt: String,
    pub json: bool,
    pub output_last_message: Option<PathBuf>,
    pub resume: Option<ResumeTarget>,
    /// Show progress on stderr (tool calls and their outcomes); `--quiet` turns it off.
    pub progress: bool,
    /// `--cd` was given: a resumed session runs there, not in its recorded cwd.
    pub cwd_given: bool,
    /// A new session plays this swarm role (a swarm job on a cluster node, ARCHITECTURE
    /// §10); a resumed one keeps the role its record names.
    pub swarm: Option<kestrel_protocol::swarm::SwarmSessionTag>,
}

/// Where exec writes; the binary passes its stdout and stderr.
pub struct ExecOutput {
    pub stdout: Box<dyn Write + Send>,
    pub stderr: Box<dyn Write + Send>,
}

/// Runs the prompt and returns the process exit code: 0 when the turn ended normally,
/// 1 when it failed, was cancelled or ran out of turns.
pub async fn run_exec(
    launch: Launch,
    options: ExecOptions,
    output: ExecOutput,
    cancel: CancellationToken,
) -> Result<u8, AgentError> {
    let mut launch = launch;
    let resume_id = match &options.resume {
        None => None,
        Some(ResumeTarget::Last) => Some(SessionIndex::latest(&launch.home, Some(&launch.cwd))?.id),
        Some(ResumeTarget::Id(id)) => {
            let summary = SessionIndex::find(&launch.home, id)?;
            // A session resumed by id works where it was started (unless --cd says
            // otherwise), not wherever this command happens to run.
            let recorded = PathBuf::from(&summary.cwd);
            if !options.cwd_given && recorded.is_dir() {
                launch.cwd = recorded;
            }
            Some(summary.id)
        }
    };
    let mut session = match (&options.swarm, &resume_id) {
        (Some(tag), None) => open_swarm_session(&launch, tag.clone(), Arc::new(Unattended))?,
        _ => open_session(&launch, resume_id.as_ref(), Arc::new(Unattended))?,
    };
    // Subagents run as `kestrel worker` processes of this host (ARCHITECTURE §2); a
    // subagent session never starts its own.
    if session.parent_id().is_none()
        && let Ok(program) = std::env::current_exe()
    {
        session.set_subagent_host(Arc::new(ProcessHost::new(launch.home.clone(), program)));
    }
    let printer = Printer::new(output, options.json, options.progress);
    if options.json {
        printer.event(&ExecEvent::SessionStarted {
            version: EXEC_EVENT_VERSION,
            session_id: session.id().clone(),
            model: session.settings().model.clone(),
            cwd: session.settings().cwd.display().to_string(),
        });
    }
    // No one can wait for a server to come up later: the first request has every tool.
    tokio::select! {
        () = session.wait_for_tools() => {}
        () = cancel.cancelled() => {}
    }
    let result = session.run_turn(&options.prompt, &printer, &cancel).await?;
    let code = match result.stop_reason {
        StopReason::EndTurn => 0,
        StopReason::Cancelled
        | StopReason::Interrupted
        | StopReason::Failed
        | StopReason::MaxTurns => 1,
    };
    // The answer is printed before anything else can fail: the turn is paid for.
    printer.finish(&result.final_text, result.error.as_deref(), result.stop_reason, session.id());
    if let Some(path) = &options.output_last_message {
        std::fs::write(path, &result.final_text)
            .map_err(|source| AgentError::Output { path: path.display().to_string(), source })?;
    }
    Ok(code)
}

/// The id of the plan's item.
const PLAN_ITEM: &str = "plan";

/// Turns agent events into exec output.
struct Printer {
    output: Mutex<ExecOutput>,
    json: bool,
    /// `None` with `--quiet`.
    progress: Option<progress::Progress>,
    started: Mutex<HashSet<String>>,
    /// The child session of each `task` call that started one.
    children: Mutex<HashMap<String, SessionId>>,
    /// The plan as last shown: its item is started by the first, updated by the next
    /// and completed when the turn ends.
    plan: Mutex<Option<Vec<ExecPlanStep>>>,
}

impl Printer {
    fn new(output: ExecOutput, json: bool, progress: bool) -> Self {
        Self {
            output: Mutex::new(output),
            json,
            progress: progress.then(progress::Progress::default),
            started: Mutex::new(HashSet::new()),
            children: Mutex::new(HashMap::new()),
            plan: Mutex::new(None),
        }
    }

    fn child_of(&self, call_id: &str) -> Option<SessionId> {
        self.children.lock().ok().and_then(|children| children.get(call_id).cloned())
    }

    fn event(&self, event: &ExecEvent) {
        let Ok(line) = serde_json::to_string(event) else { return };
        if let Ok(mut output) = self.output.lock() {
            // A closed stdout (e.g. `| head`) must not fail the turn: the record has it all.
            let _ = writeln!(output.stdout, "{line}");
            let _ = output.stdout.flush();
        }
    }

    fn note(&self, text: &str) {
        if let Ok(mut output) = self.output.lock() {
            let _ = writeln!(output.stderr, "{text}");
        }
    }

    /// True the first time an item id is seen.
    fn first(&self, item_id: &str) -> bool {
        self.started.lock().map(|mut started| started.insert(item_id.to_string())).unwrap_or(false)
    }

    fn finish(
        &self,
        final_text: &str,
        error: Option<&str>,
        stop: StopReason,
        id: &kestrel_protocol::SessionId,
    ) {
        if let Some(error) = error {
            self.note(&format!("kestrel: {error}"));
        } else if stop == StopReason::Cancelled {
            self.note("kestrel: cancelled");
        }
        if self.progress.is_some() {
            self.note(&format!("session {id}"));
        }
        if !self.json
            && stop == StopReason::EndTurn
            && let Ok(mut output) = self.output.lock()
        {
            let _ = writeln!(output.stdout, "{}", final_text.trim_end());
            let _ = output.stdout.flush();
        }
    }

    fn json_event(&self, event: AgentEvent) {
        let item = |id: String, kind: ExecItemKind| ExecItem { id, kind };
        let events = match event {
            AgentEvent::TurnStarted => vec![ExecEvent::TurnStarted {}],
            AgentEvent::ToolCallRunning { .. } => Vec::new(),
            AgentEvent::TextDelta { item_id, delta } => {
                self.streamed(item_id, delta, |text| ExecItemKind::AgentMessage { text })
            }
            AgentEvent::ReasoningDelta { item_id, delta } => {
                self.streamed(item_id, delta, |text| ExecItemKind::Reasoning { text })
            }
            AgentEvent::TextCompleted { item_id, text } => {
                vec![ExecEvent::ItemCompleted {
                    item: item(item_id, ExecItemKind::AgentMessage { text }),
                }]
            }
            AgentEvent::ReasoningCompleted { item_id, text } => {
                vec![ExecEvent::ItemCompleted {
                    item: item(item_id, ExecItemKind::Reasoning { text }),
                }]
            }
            AgentEvent::ToolCallStarted { call_id, name, arguments } => {
                let kind = ExecItemKind::ToolCall {
                    call_id: call_id.clone(),
                    name,
                    arguments,
                    status: "in_progress".into(),
                    output: None,
                    session_id: None,
                };
                vec![ExecEvent::ItemStarted { item: item(call_id, kind) }]
            }
            AgentEvent::SubagentStarted { call_id, session_id } => {
                if let Ok(mut children) = self.children.lock() {
                    children.insert(call_id.clone(), session_id.clone());
                }
                let kind = ExecItemKind::ToolCall {
                    call_id: call_id.clone(),
                    name: crate::subagent::TASK_TOOL.into(),
                    arguments: String::new(),
                    status: "in_progress".into(),
                    output: None,
                    session_id: Some(session_id),
                };
                vec![ExecEvent::ItemUpdated { item: item(call_id, kind) }]
            }
            AgentEvent::SubagentFinished { session_id, usage, .. } => {
                vec![ExecEvent::Usage { usage: usage.into(), session_id: Some(session_id) }]
            }
            AgentEvent::Compacted { .. } => Vec::new(),
            AgentEvent::ToolCallCompleted {
                call_id,
                name,
                arguments,
                output,
                is_error,
                changes,
            } => {
                let status = if is_error { "failed" } else { "completed" };
                let kind = ExecItemKind::ToolCall {
                    call_id: call_id.clone(),
                    name,
                    arguments,
                    status: status.into(),
                    output: Some(output),
                    session_id: self.child_of(&call_id),
                };
                let mut events =
                    vec![ExecEvent::ItemCompleted { item: item(call_id.clone(), kind) }];
                if !changes.is_empty() {
                    let diff: String = changes.iter().filter_map(|c| c.diff.clone()).collect();
                    let paths = changes.iter().map(|c| c.path.display().to_string()).collect();
                    let kind = ExecItemKind::FileChange {
                        call_id: call_id.clone(),
                        paths,
                        diff: (!diff.is_empty()).then_some(diff),
                    };
                    events.push(ExecEvent::ItemCompleted {
                        item: item(format!("{call_id}_files"), kind),
                    });
                }
                events
            }
            AgentEvent::Plan(plan) => {
                let steps: Vec<ExecPlanStep> = plan
                    .into_iter()
                    .map(|step| ExecPlanStep {
                        step: step.step,
                        status: match step.status {
                            PlanStepStatus::Pending => "pending",
                            PlanStepStatus::InProgress => "in_progress",
                            PlanStepStatus::Completed => "completed",
                        }
                        .to_string(),
                    })
                    .collect();
                let shown = self.plan.lock().ok().and_then(|mut plan| plan.replace(steps.clone()));
                let item = item(PLAN_ITEM.into(), ExecItemKind::Plan { steps });
                match shown {
                    None => vec![ExecEvent::ItemStarted { item }],
                    Some(_) => vec![ExecEvent::ItemUpdated { item }],
                }
            }
            AgentEvent::Usage(usage) => {
                vec![ExecEvent::Usage { usage: usage.into(), session_id: None }]
            }
            // Shown on stderr by `emit`.
            AgentEvent::Retrying { .. } => Vec::new(),
            // Also shown on stderr by `emit`, in every output mode.
            AgentEvent::Notice(notice) => {
                vec![ExecEvent::Notice { kind: notice.kind, message: notice.message }]
            }
            AgentEvent::TurnCompleted { stop_reason, usage, .. } => {
                let mut events = self.plan_completed();
                events.push(ExecEvent::TurnCompleted { stop_reason, usage: usage.into() });
                events
            }
            AgentEvent::TurnFailed { error, usage } => {
                let mut events = self.plan_completed();
                events.push(ExecEvent::TurnFailed {
                    error: ExecError { message: error },
                    usage: usage.into(),
                });
                events
            }
        };
        for event in &events {
            self.event(event);
        }
    }

    /// The plan's `item.completed`, with its last state, if the turn showed one.
    fn plan_completed(&self) -> Vec<ExecEvent> {
        let Some(steps) = self.plan.lock().ok().and_then(|mut plan| plan.take()) else {
            return Vec::new();
        };
        let item = ExecItem { id: PLAN_ITEM.into(), kind: ExecItemKind::Plan { steps } };
        vec![ExecEvent::ItemCompleted { item }]
    }

    fn streamed(
        &self,
        item_id: String,
        delta: String,
        kind: impl Fn(String) -> ExecItemKind,
    ) -> Vec<ExecEvent> {
        let mut events = Vec::new();
        if self.first(&item_id) {
            events.push(ExecEvent::ItemStarted {
                item: ExecItem { id: item_id.clone(), kind: kind(String::new()) },
            });
        }
        events.push(ExecEvent::ItemUpdated { item: ExecItem { id: item_id, kind: kind(delta) } });
        events
    }
}

impl EventSink for Printer {
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
        if let AgentEvent::Notice(notice) = &event {
            self.note(&format!("kestrel: {}", notice.message));
        }
        // Retries are always said (ARCHITECTURE §7), quiet or not.
        if let AgentEvent::Retrying { message } = &event {
            self.note(message);
        }
        if let Some(line) = self.progress.as_ref().and_then(|progress| progress.line(&event)) {
            self.note(&line);
        }
        if self.json {
            self.json_event(event);
        }
        Box::pin(std::future::ready(()))
    }
}
