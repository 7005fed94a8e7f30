//! One session: its record, its conversation and the turn loop
//! (model → tool calls → results → model, until a final answer).
//! Every item is written to the record as it happens, so a crash loses nothing written.
//! Before each model request the context is measured; past the threshold the older part
//! of the conversation is compacted into a summary (`compact`).

mod compact;
mod dispatch;
mod response;

pub use compact::CompactionReport;

use crate::approval::Approver;
use crate::context::{ContextGauge, text_tokens};
use crate::control::{ModelChoice, SessionControl};
use crate::history::History;
pub(crate) use crate::images::NO_IMAGES_NOTE;
use crate::images::{
    drop_over_budget, drop_refused_images, dropped_notice, is_image_refusal, refused_notice,
    without_image_parts,
};
use crate::subagent::{SubagentHost, task_spec};
use crate::{AgentError, AgentEvent};
use futures_util::future::BoxFuture;
use kestrel_model::{
    ContentPart, FinishReason, Message, ModelClient, ModelError, ModelRequest, ReasoningEffort,
    ToolSpec,
};
use kestrel_protocol::{
    Mode, Notice, NoticeKind, RecordEntry, RecordItem, SessionId, StopReason, Usage,
    WorkspaceRepository, swarm::SwarmSessionTag,
};
use kestrel_store::{KestrelHome, PermissionSettings, SessionRecord};
use kestrel_tools::ToolRegistry;
use kestrel_tools::checkpoint::{Checkpointer, UndoError, UndoOptions, UndoReport};
use kestrel_tools::permission::{AllowList, PermissionPolicy, SandboxStatus};
use kestrel_tools::workspace::WorkspacePin;
use response::{Response, Step};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The most output tokens asked for per request, whatever the model allows.
const MAX_OUTPUT_TOKENS_CAP: u64 = 32_000;

/// Receives a session's events as they happen. The turn waits for each `emit`, so a
/// sink that forwards to a slow reader slows the turn down instead of buffering.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()>;
}

impl<F: Fn(AgentEvent) + Send + Sync> EventSink for F {
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
        self(event);
        Box::pin(std::future::ready(()))
    }
}

/// What a session runs with.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    pub cwd: PathBuf,
    /// The root the file tools are confined to.
    pub workspace: PathBuf,
    /// The mode the session starts in; [`Session::mode`] is the mode now.
    pub mode: Mode,
    pub network: bool,
    /// The model id sent to the provider.
    pub model: String,
    pub reasoning: Option<ReasoningEffort>,
    /// The model's limits and prices from the catalog: what a request costs.
    pub profile: kestrel_model::ModelProfile,
    /// Model requests per turn before it stops with `max_turns`.
    pub max_turns: Option<u32>,
    pub system_prompt: String,
    /// `$KESTREL_HOME`: checkpoints are kept there, and "always" answers saved to its config.
    pub home: KestrelHome,
    /// The user's `[permissions]`: what `ask` runs without asking.
    pub permissions: PermissionSettings,
    /// The share of the context window past which the conversation is compacted before
    /// the next request (`[agent] compact_at`).
    pub compact_at: f64,
    /// How many `task` calls of one response run at once (`[agent] max_subagents`).
    pub max_subagents: usize,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnResult {
    pub stop_reason: StopReason,
    /// The assistant's last message (possibly partial when the turn failed).
    pub final_text: String,
    pub error: Option<String>,
    /// Tokens and cost of this turn.
    pub usage: Usage,
}

/// A live session that owns (and holds the lock on) its record.
pub struct Session {
    record: SessionRecord,
    history: History,
    client: ModelClient,
    tools: ToolRegistry,
    settings: SessionSettings,
    approver: Arc<dyn Approver>,
    control: SessionControl,
    /// What runs, asks or is refused; holds the "always" answers of this session.
    policy: PermissionPolicy,
    /// Saves what calls change, for undo.
    checkpoints: Checkpointer,
    total_usage: Usage,
    next_item: u64,
    /// Starts child sessions for `task` calls; `None`: the tool is not offered.
    subagents: Option<Arc<dyn SubagentHost>>,
    /// How full the context is.
    gauge: ContextGauge,
    /// The mode the record says is in force (the launch mode until a switch is recorded).
    recorded_mode: Mode,
    /// Images the budget replaced by notes in this turn: the user is told at its end.
    images_dropped_in_turn: usize,
    /// The workspace directory as the session found it: the file tools write beneath
    /// its path only while it names that directory.
    workspace_pin: Option<WorkspacePin>,
}

impl Session {
    pub fn new(
        record: SessionRecord,
        history: History,
        client: ModelClient,
        tools: ToolRegistry,
        settings: SessionSettings,
        approver: Arc<dyn Approver>,
    ) -> Self {
        let mut allowed =
            AllowList::from_config(&settings.permissions.allow, &settings.permissions.allow_write);
        // Saved "always" answers apply to the project they were given in, and below it.
        for project in &settings.permissions.projects {
            if settings.workspace.starts_with(&project.path) {
                allowed.extend_from_config(
                    &project.allow,
                    &project.allow_write,
                    &project.allow_tools,
                );
            }
        }
        let sandbox = SandboxStatus::detect(settings.network);
        // The repository its line began with, as the record keeps it (none in records
        // older than that: then no git command is let out by a rule).
        let repository = record.header().repository.clone().unwrap_or(WorkspaceRepository::None);
        let policy = PermissionPolicy::new(settings.cwd.clone(), sandbox, allowed)
            .with_repository(&repository);
        let checkpoints = Checkpointer::new(&settings.home, record.id().as_str());
        let workspace_pin = WorkspacePin::of(&settings.workspace).ok();
        Self {
            record,
            history,
            client,
            tools,
            control: SessionControl::new(settings.mode),
            recorded_mode: settings.mode,
            settings,
            approver,
            policy,
            checkpoints,
            total_usage: Usage::default(),
            next_item: 0,
            subagents: None,
            gauge: ContextGauge::default(),
            images_dropped_in_turn: 0,
            workspace_pin,
        }
    }

    /// Lets the model start subagents through `host` (the `task` tool is offered from
    /// the next request on). Hosts give one to top-level sessions only: a subagent does
    /// not start subagents of its own.
    /// A swarm role session gets none: its costs roll up by run, and a child's would
    /// escape it.
    pub fn set_subagent_host(&mut self, host: Arc<dyn SubagentHost>) {
        if self.swarm().is_none() {
            self.subagents = Some(host);
        }
    }

    /// A resumed session's context as its record left it: `tokens` filled by the whole
    /// conversation replayed.
    pub(crate) fn resumed_with(&mut self, tokens: u64) {
        self.gauge.reported(tokens, self.history.len());
    }

    /// The session that started this one as a subagent, if any.
    pub fn parent_id(&self) -> Option<&SessionId> {
        self.record.header().parent_id.as_ref()
    }

    /// The swarm role this session plays, from its record header.
    pub fn swarm(&self) -> Option<&SwarmSessionTag> {
        self.record.header().swarm.as_ref()
    }

    pub fn id(&self) -> &SessionId {
        self.record.id()
    }

    pub fn history(&self) -> &History {
        &self.history
    }

    pub fn settings(&self) -> &SessionSettings {
        &self.settings
    }

    /// Waits until the MCP servers have come up or given up (each within its start-up
    /// limit). A headless run does this before its first request so that request has
    /// every tool; the interactive hosts never wait.
    pub async fn wait_for_tools(&self) {
        self.tools.settle_all().await;
    }

    /// Tokens and cost of every turn this process ran.
    pub fn total_usage(&self) -> Usage {
        self.total_usage
    }

    /// Puts back the files the last turns changed (see `kestrel_tools::checkpoint::undo`)
    /// and records the undo. For `kestrel undo` and `_kestrel/session/undo`.
    pub fn undo(&mut self, options: &UndoOptions) -> Result<UndoReport, UndoError> {
        kestrel_tools::checkpoint::undo(&self.settings.home, &mut self.record, options)
    }

    /// A handle to change the mode or the model while a turn runs.
    pub fn control(&self) -> SessionControl {
        self.control.clone()
    }

    /// The mode tool calls run in now.
    pub fn mode(&self) -> Mode {
        self.control.mode()
    }

    /// Records the mode in force when it is not the one last recorded (a `mode_switch`
    /// notice, so a restarted or resumed session keeps it). Fails only when the record
    /// cannot be written.
    pub fn record_mode(&mut self) -> Result<(), AgentError> {
        let mode = self.mode();
        if mode == self.recorded_mode {
            return Ok(());
        }
        self.write(RecordItem::Notice {
            notice: Notice {
                kind: NoticeKind::ModeSwitch,
                message: format!("mode switched to {}", mode.as_str()),
                model: None,
                mode: Some(mode),
            },
        })?;
        self.recorded_mode = mode;
        Ok(())
    }

    /// Tells the user something about the session that is not conversation (an image of a
    /// prompt that was left out, images a request left out): recorded as an info `notice`
    /// and emitted to `sink`. Fails only when the record cannot be written.
    pub async fn note(&mut self, message: String, sink: &dyn EventSink) -> Result<(), AgentError> {
        let notice = Notice { kind: NoticeKind::Info, message, model: None, mode: None };
        self.write(RecordItem::Notice { notice: notice.clone() })?;
        sink.emit(AgentEvent::Notice(notice)).await;
        Ok(())
    }

    /// The model in use, as `provider/model`.
    pub fn model_ref(&self) -> String {
        format!("{}/{}", self.client.provider().name, self.settings.model)
    }

    /// Switches the model now and records the switch (a `model_switch` notice naming
    /// the new model, so a resumed session continues with it). Fails only when the
    /// record cannot be written.
    pub fn switch_model(&mut self, choice: ModelChoice) -> Result<(), AgentError> {
        let previous = self.model_ref();
        self.client = choice.client;
        self.settings.model = choice.model_id;
        self.settings.profile = choice.profile;
        self.write(RecordItem::Notice {
            notice: Notice {
                kind: NoticeKind::ModelSwitch,
                message: format!("model switched from {previous} to {}", choice.model_ref),
                model: Some(choice.model_ref),
                mode: None,
            },
        })
    }

    /// Runs one user prompt to its end. Errors that end the turn are in the result
    /// (`failed`, with the message); `Err` means the record itself could not be written.
    pub async fn run_turn(
        &mut self,
        prompt: &str,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnResult, AgentError> {
        self.run_prompt(vec![ContentPart::Text(prompt.to_string())], sink, cancel).await
    }

    /// Like [`Session::run_turn`], for a prompt of text and images. The record keeps the
    /// text (an image as a `[image: TYPE]` placeholder).
    pub async fn run_prompt(
        &mut self,
        prompt: Vec<ContentPart>,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnResult, AgentError> {
        self.run_prompt_with_notices(prompt, Vec::new(), sink, cancel).await
    }

    /// Like [`Session::run_prompt`], telling the user `notices` about the prompt (an
    /// image left out of it) as info notices in the turn, after its prompt.
    pub async fn run_prompt_with_notices(
        &mut self,
        prompt: Vec<ContentPart>,
        notices: Vec<String>,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnResult, AgentError> {
        self.write(RecordItem::TurnStarted {})?;
        self.images_dropped_in_turn = 0;
        sink.emit(AgentEvent::TurnStarted).await;
        self.write(RecordItem::UserMessage { text: record_text(&prompt) })?;
        self.history.push(Message::User { content: prompt });
        for message in notices {
            self.note(message, sink).await?;
        }
        let mut usage = Usage::default();
        let (stop_reason, final_text, error) = self.turn_loop(sink, cancel, &mut usage).await?;
        self.answer_open_calls(stop_reason)?;
        self.report_tool_problems(sink).await?;
        if self.images_dropped_in_turn > 0 {
            self.note(dropped_notice(self.images_dropped_in_turn), sink).await?;
        }
        self.write(RecordItem::TurnCompleted { stop_reason, error: error.clone() })?;
        // A switch made during the last request is recorded now, not at the next turn.
        self.take_model_switch()?;
        self.total_usage.add(&usage);
        let event = match &error {
            Some(message) if stop_reason == StopReason::Failed => {
                AgentEvent::TurnFailed { error: message.clone(), usage }
            }
            Some(_) | None => {
                AgentEvent::TurnCompleted { stop_reason, final_text: final_text.clone(), usage }
            }
        };
        sink.emit(event).await;
        Ok(TurnResult { stop_reason, final_text, error, usage })
    }

    /// Every recorded tool call gets a result before the turn ends, even one the turn
    /// never ran (a stream cut after it, a cancel, an output limit): every API refuses a
    /// conversation with an unanswered call, so the session could not go on otherwise.
    fn answer_open_calls(&mut self, stop_reason: StopReason) -> Result<(), AgentError> {
        let why = match stop_reason {
            StopReason::Cancelled => "the user cancelled the turn before this call ran",
            StopReason::EndTurn
            | StopReason::Interrupted
            | StopReason::Failed
            | StopReason::MaxTurns => "the turn ended before this call ran",
        };
        for call in self.history.unanswered_calls() {
            let item = RecordItem::ToolResult {
                id: call.id,
                output: why.to_string(),
                is_error: true,
                duration_ms: 0,
            };
            self.history.apply(&item);
            self.write(item)?;
        }
        Ok(())
    }

    fn take_model_switch(&mut self) -> Result<(), AgentError> {
        match self.control.take_model() {
            Some(choice) => self.switch_model(choice),
            None => Ok(()),
        }
    }

    async fn turn_loop(
        &mut self,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
        usage: &mut Usage,
    ) -> Result<(StopReason, String, Option<String>), AgentError> {
        let mut requests = 0u32;
        // A request the provider refused as too long is retried once, after a compaction.
        let mut retrying = false;
        // A request whose image the provider could not process is retried once without it.
        let mut images_refused = false;
        loop {
            if let Some(max) = self.settings.max_turns
                && requests >= max
            {
                let message = format!("stopped after {max} model requests (--max-turns {max})");
                return Ok((StopReason::MaxTurns, String::new(), Some(message)));
            }
            if !retrying && self.context_is_full() {
                // A compaction that cannot be done is reported; the request goes anyway.
                self.compact_history(sink, cancel, usage).await?;
                if cancel.is_cancelled() {
                    return Ok((StopReason::Cancelled, String::new(), None));
                }
            }
            requests += 1;
            let step = self.model_step(sink, cancel, usage).await?;
            match step {
                Step::ContextExceeded(message) if !retrying => {
                    let report = self.compact_history(sink, cancel, usage).await?;
                    if cancel.is_cancelled() {
                        return Ok((StopReason::Cancelled, String::new(), None));
                    }
                    if !report.compacted {
                        return Ok((StopReason::Failed, String::new(), Some(message)));
                    }
                    retrying = true;
                    requests -= 1;
                }
                Step::ContextExceeded(message) => {
                    return Ok((StopReason::Failed, String::new(), Some(message)));
                }
                Step::ImageRefused(message) if !images_refused => {
                    let wire = self.client.provider().wire_api;
                    let refused =
                        kestrel_model::refused_image(wire, self.history.messages(), &message);
                    let dropped =
                        drop_refused_images(self.history.messages_mut(), refused, &message);
                    if dropped == 0 {
                        return Ok((StopReason::Failed, String::new(), Some(message)));
                    }
                    self.note(refused_notice(dropped, &message), sink).await?;
                    images_refused = true;
                    requests -= 1;
                }
                Step::ImageRefused(message) => {
                    return Ok((StopReason::Failed, String::new(), Some(message)));
                }
                Step::Answer(text) => return Ok((StopReason::EndTurn, text, None)),
                Step::Stopped { reason, text, error } => return Ok((reason, text, error)),
                Step::ToolCalls(calls) => {
                    retrying = false;
                    self.run_tool_calls(calls, sink, cancel, usage).await?;
                    if cancel.is_cancelled() {
                        return Ok((StopReason::Cancelled, String::new(), None));
                    }
                }
            }
        }
    }

    /// One model request and its streamed response, recorded.
    async fn model_step(
        &mut self,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
        usage: &mut Usage,
    ) -> Result<Step, AgentError> {
        self.take_model_switch()?;
        self.report_tool_problems(sink).await?;
        let request = self.request();
        let mut stream = match self.client.stream(&request, cancel).await {
            Ok(stream) => stream,
            Err(ModelError::Cancelled) => return Ok(Step::stopped(StopReason::Cancelled, None)),
            Err(error @ ModelError::ContextWindowExceeded { .. }) => {
                return Ok(Step::ContextExceeded(error.to_string()));
            }
            Err(ModelError::BadRequest { message, .. }) if is_image_refusal(&message) => {
                return Ok(Step::ImageRefused(message));
            }
            Err(error) => return Ok(Step::stopped(StopReason::Failed, Some(error.to_string()))),
        };
        let mut response = Response::new(self.item_id("msg"), self.item_id("reasoning"));
        let failure = loop {
            let next = tokio::select! {
                next = stream.next() => next,
                () = cancel.cancelled() => break Some((StopReason::Cancelled, None)),
            };
            match next {
                Some(Ok(event)) => {
                    if let Some(finish) = response.absorb(event, sink).await {
                        response.finish = Some(finish);
                    }
                }
                Some(Err(ModelError::Cancelled)) => break Some((StopReason::Cancelled, None)),
                // Refused in the stream (the Responses API) before anything came.
                Some(Err(error @ ModelError::ContextWindowExceeded { .. }))
                    if response.is_empty() =>
                {
                    return Ok(Step::ContextExceeded(error.to_string()));
                }
                Some(Err(ModelError::BadRequest { message, .. }))
                    if response.is_empty() && is_image_refusal(&message) =>
                {
                    return Ok(Step::ImageRefused(message));
                }
                Some(Err(error)) => break Some((StopReason::Failed, Some(error.to_string()))),
                None => break None,
            }
        };
        // Whatever arrived is kept, even when the stream failed.
        self.record_response(&response, request.messages.len(), sink, usage).await?;
        if let Some((reason, error)) = failure {
            return Ok(Step::Stopped { reason, text: response.text, error });
        }
        if response.finish == Some(FinishReason::Length) {
            let error = "the model hit its output token limit before finishing its response \
                         (the answer or a tool call's arguments are cut off)"
                .to_string();
            return Ok(Step::Stopped {
                reason: StopReason::Failed,
                text: response.text,
                error: Some(error),
            });
        }
        if response.finish.is_none() {
            let error = "the model's response ended without a finish event".to_string();
            return Ok(Step::Stopped {
                reason: StopReason::Failed,
                text: response.text,
                error: Some(error),
            });
        }
        if response.calls.is_empty() {
            Ok(Step::Answer(response.text))
        } else {
            Ok(Step::ToolCalls(response.calls))
        }
    }

    /// The tools offered now: the registry's (MCP servers' as they are up), and `task`
    /// when this session can start subagents.
    fn tool_specs(&self) -> Vec<ToolSpec> {
        let mut tools: Vec<ToolSpec> = self
            .tools
            .definitions()
            .into_iter()
            .map(|d| ToolSpec {
                name: d.name,
                description: d.description,
                parameters: d.parameters,
            })
            .collect();
        if self.subagents.is_some() {
            tools.push(task_spec());
        }
        tools
    }

    /// The next request. Images over the providers' limits are replaced by notes in the
    /// history first (see `crate::images`), and counted for the end of the turn.
    fn request(&mut self) -> ModelRequest {
        let tools = self.tool_specs();
        let messages = if self.settings.profile.accepts_images {
            self.images_dropped_in_turn += drop_over_budget(self.history.messages_mut());
            self.history.messages().to_vec()
        } else {
            without_image_parts(self.history.messages())
        };
        ModelRequest {
            model: self.settings.model.clone(),
            system: self.settings.system_prompt.clone(),
            messages,
            tools,
            reasoning: self.settings.reasoning,
            // The catalog's limit where known, capped: some APIs count max_tokens against
            // the context window, and a huge reservation would crowd out the conversation.
            max_output_tokens: self
                .settings
                .profile
                .max_output_tokens
                .map(|limit| limit.min(MAX_OUTPUT_TOKENS_CAP))
                .and_then(|limit| u32::try_from(limit).ok()),
            cache_key: Some(self.record.id().to_string()),
        }
    }

    /// Records what arrived of a response to a request that carried `messages_sent`
    /// messages of the history.
    async fn record_response(
        &mut self,
        response: &Response,
        messages_sent: usize,
        sink: &dyn EventSink,
        usage: &mut Usage,
    ) -> Result<(), AgentError> {
        let reasoning_text = (!response.reasoning.is_empty()).then(|| response.reasoning.clone());
        if !response.reasoning.is_empty() {
            sink.emit(AgentEvent::ReasoningCompleted {
                item_id: response.reasoning_item.clone(),
                text: response.reasoning.clone(),
            })
            .await;
        }
        if !response.text.is_empty() {
            sink.emit(AgentEvent::TextCompleted {
                item_id: response.text_item.clone(),
                text: response.text.clone(),
            })
            .await;
        }
        if !response.text.is_empty()
            || reasoning_text.is_some()
            || !response.reasoning_parts.is_empty()
        {
            let item = RecordItem::AssistantMessage {
                text: response.text.clone(),
                reasoning: reasoning_text,
                reasoning_opaque: response.reasoning_opaque(),
            };
            self.history.apply(&item);
            self.write(item)?;
        }
        for call in &response.calls {
            let item = RecordItem::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            };
            self.history.apply(&item);
            self.write(item)?;
        }
        if let Some(tokens) = response.usage {
            let request_usage = Usage {
                input_tokens: tokens.input_tokens,
                cached_input_tokens: tokens.cached_input_tokens,
                output_tokens: tokens.output_tokens,
                reasoning_tokens: tokens.reasoning_tokens,
                // The catalog's prices; a model it does not know costs 0.
                cost: self.settings.profile.cost(&tokens),
            };
            usage.add(&request_usage);
            self.gauge.reported(tokens.input_tokens, messages_sent);
            self.write(RecordItem::Usage { usage: request_usage })?;
            sink.emit(AgentEvent::Usage(request_usage)).await;
        }
        Ok(())
    }

    /// Estimated tokens the next request would fill: the last request's reported input
    /// plus what the conversation gained since (4 characters a token).
    pub fn context_tokens(&self) -> u64 {
        let fixed = || {
            let tools: u64 = self
                .tool_specs()
                .iter()
                .map(|tool| {
                    text_tokens(&tool.description) + text_tokens(&tool.parameters.to_string())
                })
                .sum();
            text_tokens(&self.settings.system_prompt) + tools
        };
        self.gauge.estimate(fixed, self.history.messages())
    }

    /// Whether the context passed `compact_at` of the model's window and grew since the
    /// last compaction.
    fn context_is_full(&self) -> bool {
        let window = self.settings.profile.context_window as f64;
        let limit = (window * self.settings.compact_at) as u64;
        self.gauge.grew_since_compaction(self.history.len()) && self.context_tokens() >= limit
    }

    fn write(&mut self, item: RecordItem) -> Result<(), AgentError> {
        self.record.append(&RecordEntry::now(item)).map_err(AgentError::Record)
    }

    fn item_id(&mut self, kind: &str) -> String {
        self.next_item += 1;
        format!("{kind}_{}", self.next_item)
    }
}

/// The text a prompt is recorded as: its text parts, an image as a placeholder.
fn record_text(prompt: &[ContentPart]) -> String {
    let pieces: Vec<String> = prompt
        .iter()
        .map(|part| match part {
            ContentPart::Text(text) => text.clone(),
            ContentPart::Image { media_type, .. } => format!("[image: {media_type}]"),
        })
        .collect();
    pieces.join("\n")
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
