//! Subagents: the `task` tool runs a prompt in a child session (a worker process of its
//! own, started through the session's [`SubagentHost`]) and returns the child's final
//! answer with a usage line. The child's record names its parent (`parent_id`); what the
//! child did and spent is read from that record, whichever host started it.
//!
//! Hosts: [`ProcessHost`] (`kestrel exec`: spawns `kestrel worker` itself and speaks ACP
//! to it) and the worker's client host (`_kestrel/session/spawn` to the daemon).

mod child_record;
mod client_host;
mod process_host;

pub(crate) use client_host::ClientHost;
pub use process_host::ProcessHost;

use crate::AgentEvent;
use crate::session::EventSink;
use futures_util::future::BoxFuture;
use kestrel_model::{ToolCall, ToolSpec};
use kestrel_protocol::{Mode, SessionId, StopReason, Usage};
use kestrel_tools::ToolOutput;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The model-facing name of the tool (ARCHITECTURE §6).
pub const TASK_TOOL: &str = "task";

/// How long a child may take to start (its worker up, its session created, its turn
/// begun) before the call fails.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// After a cancel, how long a child gets to end its turn before it is given up on
/// (and, where the host owns its process, killed).
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// What a child session is started with.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildRequest {
    pub parent_id: SessionId,
    pub cwd: PathBuf,
    /// The child's first (and only) prompt.
    pub prompt: String,
    /// `provider/model`.
    pub model: String,
    /// Never more than the parent's mode.
    pub mode: Mode,
}

/// How a child's turn ended, read from its record.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildOutcome {
    pub session_id: SessionId,
    pub stop_reason: StopReason,
    /// The child's last message with text.
    pub final_text: String,
    pub error: Option<String>,
    /// What the turn's model requests spent.
    pub usage: Usage,
    /// How many model requests reported usage.
    pub requests: u32,
}

/// A started child session whose first turn is running.
pub trait ChildSession: Send {
    fn id(&self) -> &SessionId;

    /// Waits for the child's turn to end and reads how it went from its record. When
    /// `cancel` fires the child is cancelled (`session/cancel`), given a short grace,
    /// then given up on (killed where the host owns its process). Fails, with a message
    /// for the model, when the child cannot be followed (its record is unreadable, it
    /// never started its turn).
    fn finish(
        self: Box<Self>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ChildOutcome, String>>;
}

/// Starts child sessions for a session's `task` calls.
pub trait SubagentHost: Send + Sync {
    /// Starts a child session running `request.prompt`. Fails, with a message for the
    /// model, when the child cannot be started.
    fn spawn(&self, request: ChildRequest) -> BoxFuture<'_, Result<Box<dyn ChildSession>, String>>;
}

/// The parent's side of a `task` call.
pub(crate) struct Parent {
    pub(crate) id: SessionId,
    pub(crate) cwd: PathBuf,
    /// `provider/model`, the child's default.
    pub(crate) model: String,
    pub(crate) mode: Mode,
}

/// The tool's definition, offered when the session has a host.
pub(crate) fn task_spec() -> ToolSpec {
    ToolSpec {
        name: TASK_TOOL.to_string(),
        description: "Runs a subagent: a fresh session with no memory of this conversation \
            that works on `prompt` on its own (reading files, searching, running read-only \
            commands) and returns its final answer. Use it for self-contained research or \
            exploration whose details would crowd this conversation; several task calls in \
            one response run in parallel. Write `prompt` as a complete brief: the subagent \
            sees nothing else. It runs read-only unless `mode` asks for more (never more \
            than this session's mode)."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "description": {
                    "type": "string",
                    "description": "A short (3-7 word) label for the task, shown to the user."
                },
                "prompt": {"type": "string", "description": "The complete brief for the subagent."},
                "model": {
                    "type": "string",
                    "description": "`provider/model` to run it on; this session's model when absent."
                },
                "mode": {
                    "type": "string",
                    "enum": ["read-only", "ask", "auto", "yolo"],
                    "description": "What the subagent may do; read-only when absent."
                }
            },
            "required": ["description", "prompt"],
            "additionalProperties": false
        }),
    }
}

/// Runs one `task` call to its end: the tool output for the model and, when a child
/// ran, how it went. Events tell hosts the child's id as soon as it exists and its
/// usage once it is done.
pub(crate) async fn run_task(
    host: Arc<dyn SubagentHost>,
    call: &ToolCall,
    parent: Parent,
    sink: &dyn EventSink,
    cancel: &CancellationToken,
) -> (ToolOutput, Option<ChildOutcome>) {
    let request = match child_request(&call.arguments, parent) {
        Ok(request) => request,
        Err(message) => return (ToolOutput::error(message), None),
    };
    let mode = request.mode;
    if cancel.is_cancelled() {
        let message = "the turn was cancelled before the subagent started";
        return (ToolOutput::error(message), None);
    }
    // Raced against the cancel, but not abandoned: a host may start the child whether
    // or not its answer is awaited (the daemon prompts it, then answers), and a child
    // nobody follows would run its whole turn. So a start the cancel overtakes goes on
    // in the background, which cancels the child once it exists.
    let mut spawning = tokio::spawn(async move { host.spawn(request).await });
    let child = tokio::select! {
        joined = &mut spawning => joined.map_err(|error| error.to_string()).and_then(|child| child),
        () = cancel.cancelled() => {
            cancel_when_started(spawning, cancel.clone());
            let message = "the turn was cancelled while the subagent was starting";
            return (ToolOutput::error(message), None);
        }
    };
    let child = match child {
        Ok(child) => child,
        Err(message) => {
            return (ToolOutput::error(format!("the subagent could not start: {message}")), None);
        }
    };
    let session_id = child.id().clone();
    sink.emit(AgentEvent::SubagentStarted {
        call_id: call.id.clone(),
        session_id: session_id.clone(),
    })
    .await;
    let outcome = match child.finish(cancel.clone()).await {
        Ok(outcome) => outcome,
        Err(message) => {
            let text = format!("subagent {session_id} could not be followed: {message}");
            return (ToolOutput::error(text), None);
        }
    };
    sink.emit(AgentEvent::SubagentFinished {
        call_id: call.id.clone(),
        session_id,
        usage: outcome.usage,
    })
    .await;
    (task_output(&outcome, mode), Some(outcome))
}

/// Cancels the child a start given up on produces, if it produces one (hosts bound
/// their starts): `finish` with a fired token cancels it and gives it a short grace.
fn cancel_when_started(
    spawning: JoinHandle<Result<Box<dyn ChildSession>, String>>,
    cancel: CancellationToken,
) {
    tokio::spawn(async move {
        if let Ok(Ok(child)) = spawning.await {
            let _ = child.finish(cancel).await;
        }
    });
}

/// The child to start for `arguments`. Fails with a message for the model on missing
/// or malformed arguments.
fn child_request(arguments: &str, parent: Parent) -> Result<ChildRequest, String> {
    let text = if arguments.trim().is_empty() { "{}" } else { arguments };
    let value: Value = serde_json::from_str(text)
        .map_err(|error| format!("arguments of `task` are not valid JSON ({error})"))?;
    let text_field = |name: &str| -> Result<Option<String>, String> {
        match value.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(format!("`{name}` of `task` must be a string, got {other}")),
        }
    };
    let _description = text_field("description")?
        .filter(|text| !text.trim().is_empty())
        .ok_or("`task` needs `description`: a short label for the task")?;
    let prompt = text_field("prompt")?
        .filter(|text| !text.trim().is_empty())
        .ok_or("`task` needs `prompt`: the complete brief for the subagent")?;
    let model = match text_field("model")?.filter(|text| !text.trim().is_empty()) {
        Some(model) => {
            kestrel_store::split_model_ref(&model)
                .map_err(|error| format!("`model` of `task`: {error}"))?;
            model
        }
        None => parent.model,
    };
    let asked = match text_field("mode")? {
        Some(mode) => mode.parse::<Mode>().map_err(|error| format!("`mode` of `task`: {error}"))?,
        None => Mode::ReadOnly,
    };
    Ok(ChildRequest {
        parent_id: parent.id,
        cwd: parent.cwd,
        prompt,
        model,
        mode: at_most(asked, parent.mode),
    })
}

/// The lesser of two modes: a child never gets more than its parent.
fn at_most(asked: Mode, limit: Mode) -> Mode {
    if rank(asked) <= rank(limit) { asked } else { limit }
}

fn rank(mode: Mode) -> u8 {
    match mode {
        Mode::ReadOnly => 0,
        Mode::Ask => 1,
        Mode::Auto => 2,
        Mode::Yolo => 3,
    }
}

/// What the model reads: the child's answer (or why there is none) and a usage line
/// naming the child session.
fn task_output(outcome: &ChildOutcome, mode: Mode) -> ToolOutput {
    let usage = usage_line(outcome);
    let partial = |text: &str| {
        if text.trim().is_empty() {
            String::new()
        } else {
            format!("\n\nIts last message:\n{text}")
        }
    };
    match outcome.stop_reason {
        StopReason::EndTurn => {
            ToolOutput::ok(format!("{}\n\n{usage}", outcome.final_text.trim_end()))
        }
        StopReason::Cancelled => ToolOutput::error(format!(
            "the subagent was cancelled before it finished.{}\n\n{usage}",
            partial(&outcome.final_text)
        )),
        StopReason::Interrupted => ToolOutput::error(format!(
            "the subagent's worker stopped before it finished.{}\n\n{usage}",
            partial(&outcome.final_text)
        )),
        StopReason::MaxTurns => ToolOutput::error(format!(
            "the subagent ran out of model requests (max_turns) before a final answer.{}\n\n{usage}",
            partial(&outcome.final_text)
        )),
        StopReason::Failed => {
            let error = outcome.error.as_deref().unwrap_or("no reason given");
            let hint = match mode {
                Mode::ReadOnly => " (it ran read-only)",
                Mode::Ask | Mode::Auto | Mode::Yolo => "",
            };
            ToolOutput::error(format!(
                "the subagent failed{hint}: {error}{}\n\n{usage}",
                partial(&outcome.final_text)
            ))
        }
    }
}

/// `[subagent 019a…: 3 requests, 1.2k tokens, $0.0040]`: the last line of a `task`
/// result, also how a replayed record finds the child again.
pub(crate) fn usage_line(outcome: &ChildOutcome) -> String {
    let usage = &outcome.usage;
    let tokens = usage.input_tokens + usage.output_tokens;
    let tokens = if tokens < 1_000 {
        format!("{tokens} tokens")
    } else if tokens < 1_000_000 {
        format!("{:.1}k tokens", tokens as f64 / 1e3)
    } else {
        format!("{:.1}M tokens", tokens as f64 / 1e6)
    };
    let requests = match outcome.requests {
        1 => "1 request".to_string(),
        n => format!("{n} requests"),
    };
    format!("[subagent {}: {requests}, {tokens}, ${:.4}]", outcome.session_id, usage.cost)
}

/// What each session of `home` and its descendants spent (USD), by session id, from the
/// session index: a replayed parent's cost includes its children's, which its own record
/// lacks. An unreadable index counts nothing.
pub(crate) fn child_costs(home: &kestrel_store::KestrelHome) -> impl Fn(&str) -> f64 + use<> {
    let costs: std::collections::HashMap<String, f64> = kestrel_store::SessionIndex::list(home)
        .unwrap_or_default()
        .into_iter()
        .map(|summary| (summary.id.to_string(), summary.total_usage.cost))
        .collect();
    move |id| costs.get(id).copied().unwrap_or(0.0)
}

/// The child session a recorded `task` result names in its usage line.
pub(crate) fn child_in_output(output: &str) -> Option<&str> {
    let line = output.lines().rev().find(|line| !line.trim().is_empty())?;
    let rest = line.trim().strip_prefix("[subagent ")?;
    let (id, _) = rest.split_once(':')?;
    (!id.is_empty() && !id.contains(' ')).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(mode: Mode) -> Parent {
        Parent {
            id: SessionId::from_string("p".to_string()),
            cwd: "/w".into(),
            model: "openai/gpt-5".into(),
            mode,
        }
    }

    /// A host whose start waits for `gate`, telling `asked` when it is called; its
    /// child tells `finished` whether it was given a fired cancel.
    struct GatedHost {
        gate: std::sync::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
        asked: tokio::sync::mpsc::UnboundedSender<()>,
        finished: tokio::sync::mpsc::UnboundedSender<bool>,
    }

    struct GatedChild {
        id: SessionId,
        finished: tokio::sync::mpsc::UnboundedSender<bool>,
    }

    impl SubagentHost for GatedHost {
        fn spawn(&self, _: ChildRequest) -> BoxFuture<'_, Result<Box<dyn ChildSession>, String>> {
            let gate = self.gate.lock().unwrap().take();
            let _ = self.asked.send(());
            let finished = self.finished.clone();
            Box::pin(async move {
                gate.ok_or("started twice")?.await.map_err(|error| error.to_string())?;
                let id = SessionId::from_string("child".to_string());
                Ok(Box::new(GatedChild { id, finished }) as Box<dyn ChildSession>)
            })
        }
    }

    impl ChildSession for GatedChild {
        fn id(&self) -> &SessionId {
            &self.id
        }

        fn finish(
            self: Box<Self>,
            cancel: CancellationToken,
        ) -> BoxFuture<'static, Result<ChildOutcome, String>> {
            let _ = self.finished.send(cancel.is_cancelled());
            Box::pin(async { Err("cancelled".to_string()) })
        }
    }

    #[tokio::test]
    async fn a_cancel_while_the_child_starts_ends_the_call_and_cancels_the_child_once_started() {
        let wait = Duration::from_secs(10);
        let (open, gate) = tokio::sync::oneshot::channel();
        let (asked, mut was_asked) = tokio::sync::mpsc::unbounded_channel();
        let (finished, mut was_finished) = tokio::sync::mpsc::unbounded_channel();
        let host = Arc::new(GatedHost { gate: std::sync::Mutex::new(Some(gate)), asked, finished });
        let cancel = CancellationToken::new();
        let call = ToolCall {
            id: "c1".into(),
            name: TASK_TOOL.into(),
            arguments: json!({"description": "d", "prompt": "p"}).to_string(),
        };
        let turn_cancel = cancel.clone();
        let task = tokio::spawn(async move {
            let sink = |_: AgentEvent| {};
            run_task(host, &call, parent(Mode::Auto), &sink, &turn_cancel).await
        });
        tokio::time::timeout(wait, was_asked.recv()).await.unwrap().unwrap();
        cancel.cancel();
        // The call ends while the start is still waiting.
        let (output, outcome) = tokio::time::timeout(wait, task).await.unwrap().unwrap();
        assert!(output.is_error, "{}", output.content);
        assert!(output.content.contains("cancelled while the subagent was starting"));
        assert!(outcome.is_none());
        // Once the child exists it is cancelled.
        open.send(()).unwrap();
        let cancelled = tokio::time::timeout(wait, was_finished.recv()).await.unwrap();
        assert_eq!(cancelled, Some(true));
    }

    #[test]
    fn children_run_read_only_unless_asked_and_never_above_the_parent() {
        let args = json!({"description": "look", "prompt": "find it"}).to_string();
        let request = child_request(&args, parent(Mode::Yolo)).unwrap();
        assert_eq!((request.mode, request.model.as_str()), (Mode::ReadOnly, "openai/gpt-5"));
        let args = json!({"description": "d", "prompt": "p", "mode": "yolo", "model": "a/b"});
        let request = child_request(&args.to_string(), parent(Mode::Auto)).unwrap();
        assert_eq!((request.mode, request.model.as_str()), (Mode::Auto, "a/b"));
        let args = json!({"description": "d", "prompt": "p", "mode": "ask"}).to_string();
        assert_eq!(child_request(&args, parent(Mode::Yolo)).unwrap().mode, Mode::Ask);
    }

    #[test]
    fn bad_arguments_are_clear_errors() {
        let cases = [
            ("{", "not valid JSON"),
            (r#"{"prompt": "p"}"#, "needs `description`"),
            (r#"{"description": "d", "prompt": "  "}"#, "needs `prompt`"),
            (r#"{"description": "d", "prompt": 3}"#, "must be a string"),
            (r#"{"description": "d", "prompt": "p", "mode": "root"}"#, "unknown mode `root`"),
            (r#"{"description": "d", "prompt": "p", "model": "gpt-5"}"#, "`model` of `task`"),
        ];
        for (arguments, expected) in cases {
            let error = child_request(arguments, parent(Mode::Auto)).unwrap_err();
            assert!(error.contains(expected), "{arguments}: {error}");
        }
    }

    #[test]
    fn outputs_carry_the_answer_and_a_usage_line_that_names_the_child() {
        let mut outcome = ChildOutcome {
            session_id: SessionId::from_string("child-1".to_string()),
            stop_reason: StopReason::EndTurn,
            final_text: "found it\n".into(),
            error: None,
            usage: Usage {
                input_tokens: 1_000,
                output_tokens: 234,
                cost: 0.004,
                ..Usage::default()
            },
            requests: 3,
        };
        let output = task_output(&outcome, Mode::ReadOnly);
        assert!(!output.is_error);
        assert_eq!(
            output.content,
            "found it\n\n[subagent child-1: 3 requests, 1.2k tokens, $0.0040]"
        );
        assert_eq!(child_in_output(&output.content), Some("child-1"));
        outcome.stop_reason = StopReason::Failed;
        outcome.error = Some("HTTP 500".into());
        let output = task_output(&outcome, Mode::ReadOnly);
        assert!(output.is_error && output.content.contains("failed (it ran read-only): HTTP 500"));
        assert_eq!(child_in_output("plain output"), None);
    }
}
