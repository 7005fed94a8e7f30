//! Running the tool calls of one model response. Calls that cannot change anything
//! (read-only tools) and `task` calls (subagents, each in its own session) run together,
//! `task` calls at most `max_subagents` at a time; every other call runs alone, after
//! the permission policy (and maybe the user) allowed it, with a checkpoint around it.

use super::{Session, elapsed_ms};
use crate::approval::{ApprovalDecision, ApprovalRequest};
use crate::session::EventSink;
use crate::subagent::{self, ChildOutcome, Parent, TASK_TOOL};
use crate::{AgentError, AgentEvent};
use futures_util::future::join_all;
use kestrel_model::{ContentPart, Message, ToolCall};
use kestrel_protocol::{Mode, Notice, NoticeKind, RecordItem, StopReason, Usage};
use kestrel_tools::permission::{Assessment, PermissionPolicy, save_rules};
use kestrel_tools::{ToolContext, ToolImage, ToolOutput, Unconfined};
use std::path::PathBuf;
use std::time::Instant;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// A finished call: its output, how long it took, and the child session that ran a
/// `task` call.
struct CallResult {
    output: ToolOutput,
    duration_ms: u64,
    child: Option<ChildOutcome>,
}

impl Session {
    /// Runs the calls of one step: consecutive calls that may run together as one batch,
    /// the others one by one, each result recorded as soon as it is known. What
    /// subagents spent is added to `usage` (their own records hold their usage items).
    pub(super) async fn run_tool_calls(
        &mut self,
        calls: Vec<ToolCall>,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
        usage: &mut Usage,
    ) -> Result<(), AgentError> {
        // A call to a tool whose MCP server is still starting waits for it here, so that
        // whether the tool is read-only is known before it is allowed or refused.
        for call in &calls {
            tokio::select! {
                () = self.tools.settle(&call.name) => {}
                () = cancel.cancelled() => break,
            }
        }
        let mut images = Vec::new();
        let mut index = 0;
        while index < calls.len() {
            // After a cancel nothing more starts; the calls left get "cancelled" results.
            if cancel.is_cancelled() {
                break;
            }
            // Read per batch: a mode switch applies from the next call on.
            let context = ToolContext {
                cwd: self.settings.cwd.clone(),
                workspace: self.settings.workspace.clone(),
                mode: self.control.mode(),
                network: self.settings.network,
                cancel: cancel.clone(),
                granted_writes: Vec::new(),
                unconfined: Unconfined::No,
                workspace_pin: self.workspace_pin,
            };
            let together = self.runs_together(&calls[index].name);
            let end = if together {
                index + calls[index..].iter().take_while(|c| self.runs_together(&c.name)).count()
            } else {
                index + 1
            };
            let batch = &calls[index..end];
            for call in batch {
                sink.emit(AgentEvent::ToolCallStarted {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                })
                .await;
            }
            let results = if together {
                for call in batch {
                    sink.emit(AgentEvent::ToolCallRunning { call_id: call.id.clone() }).await;
                }
                self.run_batch(batch, &context, sink, cancel).await
            } else {
                let call = &batch[0];
                let started = Instant::now();
                let output = if self.tools.get(&call.name).is_none() {
                    // A tool that does not exist can change nothing: no approval, no
                    // snapshot (a git run per call); the model hears which tools exist.
                    self.tools.call(&call.name, &call.arguments, &context).await
                } else {
                    match self.permission(call, context.mode, cancel).await {
                        Ok((run_as, granted_writes, unconfined)) => {
                            sink.emit(AgentEvent::ToolCallRunning { call_id: call.id.clone() })
                                .await;
                            let context = ToolContext {
                                mode: run_as,
                                granted_writes,
                                unconfined,
                                ..context.clone()
                            };
                            let mut output = self.checked_call(call, &context).await?;
                            // Auto ran it sandboxed though a rule covers part or all of
                            // it: say which part kept it there, or what was lifted.
                            let note = || match &context.unconfined {
                                Unconfined::Lifted(lift) => {
                                    Some(PermissionPolicy::lifted_note(lift))
                                }
                                _ => self.policy.sandbox_note(&call.arguments),
                            };
                            if output.is_error
                                && call.name == "shell"
                                && context.mode == Mode::Auto
                                && let Some(note) = note()
                            {
                                output.content.push('\n');
                                output.content.push_str(&note);
                            }
                            output
                        }
                        Err(refusal) => ToolOutput::error(refusal),
                    }
                };
                vec![CallResult { output, duration_ms: elapsed_ms(started), child: None }]
            };
            for (call, result) in batch.iter().zip(results) {
                if let Some(child) = &result.child {
                    usage.add(&child.usage);
                }
                let output = if self.settings.profile.accepts_images {
                    result.output
                } else {
                    without_images(result.output)
                };
                images.extend(output.images.iter().map(|image| (call.id.clone(), image.clone())));
                self.finish_call(call, output, result.duration_ms, sink).await?;
            }
            index = end;
        }
        // A cancel left calls unrun: they are answered now, before the images message,
        // since every wire wants all of a step's tool results before the next user
        // message (Anthropic: the results open it; Chat: they follow the call).
        if index < calls.len() {
            self.answer_open_calls(StopReason::Cancelled)?;
        }
        // Tool results are text on every wire; the images they returned follow them as
        // one user message (the record keeps their `[image: TYPE]` placeholders).
        if let Some(message) = images_message(images) {
            self.history.push(message);
        }
        Ok(())
    }

    /// Read-only tools and `task` (when this session can start subagents) never need
    /// approval and may run side by side.
    fn runs_together(&self, name: &str) -> bool {
        self.tools.is_read_only(name) || (name == TASK_TOOL && self.subagents.is_some())
    }

    async fn run_batch(
        &self,
        batch: &[ToolCall],
        context: &ToolContext,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Vec<CallResult> {
        let slots = Semaphore::new(self.settings.max_subagents.max(1));
        let slots = &slots;
        let runs = batch.iter().map(|call| async move {
            let started = Instant::now();
            let (output, child) = match (&self.subagents, call.name == TASK_TOOL) {
                (Some(host), true) => {
                    // The semaphore is never closed, so this only waits for a slot.
                    let _slot = slots.acquire().await.ok();
                    let parent = Parent {
                        id: self.id().clone(),
                        cwd: self.settings.cwd.clone(),
                        model: self.model_ref(),
                        mode: context.mode,
                    };
                    subagent::run_task(host.clone(), call, parent, sink, cancel).await
                }
                (Some(_) | None, _) => {
                    (self.tools.call(&call.name, &call.arguments, context).await, None)
                }
            };
            CallResult { output, duration_ms: elapsed_ms(started), child }
        });
        join_all(runs).await
    }

    /// Shows and records what the tool sources report (an MCP server that failed to start
    /// or died). Called before every model request and at the end of a turn.
    pub(super) async fn report_tool_problems(
        &mut self,
        sink: &dyn EventSink,
    ) -> Result<(), AgentError> {
        for message in self.tools.take_reports() {
            let notice = Notice { kind: NoticeKind::Error, message, model: None, mode: None };
            self.write(RecordItem::Notice { notice: notice.clone() })?;
            sink.emit(AgentEvent::Notice(notice)).await;
        }
        Ok(())
    }

    async fn finish_call(
        &mut self,
        call: &ToolCall,
        output: ToolOutput,
        duration_ms: u64,
        sink: &dyn EventSink,
    ) -> Result<(), AgentError> {
        let item = RecordItem::ToolResult {
            id: call.id.clone(),
            output: output.content.clone(),
            is_error: output.is_error,
            duration_ms,
        };
        self.history.apply(&item);
        self.write(item)?;
        if let Some(plan) = output.plan {
            sink.emit(AgentEvent::Plan(plan)).await;
        }
        sink.emit(AgentEvent::ToolCallCompleted {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            output: output.content,
            is_error: output.is_error,
            changes: output.changes,
        })
        .await;
        Ok(())
    }

    /// Runs a call that may change files with a checkpoint around it: what it may change
    /// is saved first (a call whose files cannot be saved does not run), and what it did
    /// change is recorded as a `checkpoint` item.
    async fn checked_call(
        &mut self,
        call: &ToolCall,
        context: &ToolContext,
    ) -> Result<ToolOutput, AgentError> {
        let capture = match self.checkpoints.before_call(&call.name, &call.arguments, context).await
        {
            Ok(capture) => capture,
            Err(error) => {
                return Ok(ToolOutput::error(format!(
                    "{error}; the call did not run, so nothing it would change is lost"
                )));
            }
        };
        let mut output = self.tools.call(&call.name, &call.arguments, context).await;
        if let Some(note) = capture.uncovered_note() {
            output.content = format!("{}\n{note}", output.content);
        }
        if let Some(item) = self.checkpoints.take_notice() {
            self.write(item)?;
        }
        if let Some(item) = self.checkpoints.after_call(capture, &call.id).await {
            self.write(item)?;
        }
        Ok(output)
    }

    /// Decides whether a call that may change things runs (kestrel_tools::permission),
    /// asking the approver when the policy says so, and in which mode it then runs. `Err`
    /// is the refusal for the model. A cancelled turn stops waiting for an answer at once.
    /// With the mode come the files outside the workspace the call may write, resolved
    /// when it was judged (before the question), so a symlink swapped in while the user
    /// reads it cannot send the write elsewhere; and whether `shell` may run it outside
    /// the sandbox (the rules cover it, or the user approved it), decided once here.
    async fn permission(
        &mut self,
        call: &ToolCall,
        mode: Mode,
        cancel: &CancellationToken,
    ) -> Result<(Mode, Vec<PathBuf>, Unconfined), String> {
        let read_only = self.tools.is_read_only(&call.name);
        let granted = self.policy.granted_writes(mode, &call.name, &call.arguments);
        let (assessment, covered) =
            self.policy.assess_confinement(mode, &call.name, &call.arguments, read_only);
        let (summary, always, run_as) = match assessment {
            Assessment::Allow { run_as } => return Ok((run_as, granted, covered)),
            Assessment::Deny { reason } => return Err(reason),
            Assessment::Ask { summary, always, run_as } => (summary, always, run_as),
        };
        if !self.approver.attended() {
            return Err(crate::approval::unattended_refusal(&summary, mode));
        }
        let request = ApprovalRequest {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
            summary,
            always: always.clone(),
        };
        let approver = self.approver.clone();
        let decision = tokio::select! {
            decision = approver.request(request) => decision,
            () = cancel.cancelled() => ApprovalDecision::Deny {
                reason: Some("the turn was cancelled before an answer came".to_string()),
            },
        };
        match decision {
            ApprovalDecision::AllowOnce => Ok((run_as, granted, Unconfined::Approved)),
            ApprovalDecision::AllowAlways => {
                self.policy.remember(&always);
                Ok((run_as, granted, Unconfined::Approved))
            }
            ApprovalDecision::AllowAlwaysAndSave => {
                self.policy.remember(&always);
                let config = self.settings.home.config_file();
                if let Err(error) = save_rules(&config, &self.settings.workspace, &always) {
                    let message = format!("the permission was not saved: {error}");
                    let notice =
                        Notice { kind: NoticeKind::Error, message, model: None, mode: None };
                    let _ = self.write(RecordItem::Notice { notice });
                }
                Ok((run_as, granted, Unconfined::Approved))
            }
            ApprovalDecision::Deny { reason } => Err(match reason {
                Some(reason) => format!("the user denied `{}`: {reason}", call.name),
                None => format!("the user denied `{}`", call.name),
            }),
        }
    }
}

/// A result for a model that takes no images: the images are dropped and the text says
/// so, next to their `[image: TYPE]` placeholders.
fn without_images(mut output: ToolOutput) -> ToolOutput {
    if !output.images.is_empty() {
        output.images.clear();
        output.content.push_str("\n\n");
        output.content.push_str(super::NO_IMAGES_NOTE);
    }
    output
}

/// The images of one step's tool results, each introduced by the call it came from.
fn images_message(images: Vec<(String, ToolImage)>) -> Option<Message> {
    if images.is_empty() {
        return None;
    }
    let mut content = Vec::new();
    for (call_id, image) in images {
        content.push(ContentPart::Text(format!(
            "Image ({}) returned by tool call {call_id}:",
            image.media_type
        )));
        content.push(ContentPart::Image { media_type: image.media_type, data: image.data });
    }
    Some(Message::User { content })
}
