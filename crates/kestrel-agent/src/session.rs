//! One session: its record, its conversation and the turn loop
//! (model → tool calls → results → model, until a final answer).
//! Every item is written to the record as it happens, so a crash loses nothing written.

use crate::approval::{ApprovalDecision, ApprovalRequest, Approver};
use crate::control::{ModelChoice, SessionControl};
use crate::history::History;
use crate::{AgentError, AgentEvent};
use futures_util::future::{BoxFuture, join_all};
use kestrel_model::{
    ContentPart, FinishReason, Message, ModelClient, ModelError, ModelRequest, ReasoningEffort,
    StreamEvent, ToolCall, ToolSpec,
};
use kestrel_protocol::{
    Mode, Notice, NoticeKind, RecordEntry, RecordItem, SessionId, StopReason, Usage,
};
use kestrel_store::{KestrelHome, PermissionSettings, SessionRecord};
use kestrel_tools::checkpoint::{Checkpointer, UndoError, UndoOptions, UndoReport};
use kestrel_tools::permission::{
    AllowList, Assessment, PermissionPolicy, SandboxStatus, save_rules,
};
use kestrel_tools::{ToolContext, ToolImage, ToolOutput, ToolRegistry};
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
        let allowed =
            AllowList::from_config(&settings.permissions.allow, &settings.permissions.allow_write);
        let sandbox = SandboxStatus::detect(settings.network);
        let policy = PermissionPolicy::new(settings.cwd.clone(), sandbox, allowed);
        let checkpoints = Checkpointer::new(&settings.home, record.id().as_str());
        Self {
            record,
            history,
            client,
            tools,
            control: SessionControl::new(settings.mode),
            settings,
            approver,
            policy,
            checkpoints,
            total_usage: Usage::default(),
            next_item: 0,
        }
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
        self.write(RecordItem::TurnStarted {})?;
        sink.emit(AgentEvent::TurnStarted).await;
        self.write(RecordItem::UserMessage { text: record_text(&prompt) })?;
        self.history.push(Message::User { content: prompt });
        let mut usage = Usage::default();
        let (stop_reason, final_text, error) = self.turn_loop(sink, cancel, &mut usage).await?;
        self.answer_open_calls(stop_reason)?;
        self.report_tool_problems(sink).await?;
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
        loop {
            if let Some(max) = self.settings.max_turns
                && requests >= max
            {
                let message = format!("stopped after {max} model requests (--max-turns {max})");
                return Ok((StopReason::MaxTurns, String::new(), Some(message)));
            }
            requests += 1;
            let step = self.model_step(sink, cancel, usage).await?;
            match step {
                Step::Answer(text) => return Ok((StopReason::EndTurn, text, None)),
                Step::Stopped { reason, text, error } => return Ok((reason, text, error)),
                Step::ToolCalls(calls) => {
                    self.run_tool_calls(calls, sink, cancel).await?;
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
                Some(Err(error)) => break Some((StopReason::Failed, Some(error.to_string()))),
                None => break None,
            }
        };
        // Whatever arrived is kept, even when the stream failed.
        self.record_response(&response, sink, usage).await?;
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

    fn request(&self) -> ModelRequest {
        let tools = self
            .tools
            .definitions()
            .into_iter()
            .map(|d| ToolSpec {
                name: d.name,
                description: d.description,
                parameters: d.parameters,
            })
            .collect();
        ModelRequest {
            model: self.settings.model.clone(),
            system: self.settings.system_prompt.clone(),
            messages: self.history.messages().to_vec(),
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

    async fn record_response(
        &mut self,
        response: &Response,
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
            self.write(RecordItem::Usage { usage: request_usage })?;
            sink.emit(AgentEvent::Usage(request_usage)).await;
        }
        Ok(())
    }

    /// Runs the calls of one step: consecutive read-only calls together, the others one
    /// by one, each result recorded as soon as it is known.
    async fn run_tool_calls(
        &mut self,
        calls: Vec<ToolCall>,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<(), AgentError> {
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
            };
            let read_only = self.tools.is_read_only(&calls[index].name);
            let end = if read_only {
                index
                    + calls[index..].iter().take_while(|c| self.tools.is_read_only(&c.name)).count()
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
            let outputs: Vec<(ToolOutput, u64)> = if read_only {
                for call in batch {
                    sink.emit(AgentEvent::ToolCallRunning { call_id: call.id.clone() }).await;
                }
                let tools = &self.tools;
                let context = &context;
                join_all(
                    batch
                        .iter()
                        .map(|call| timed(tools.call(&call.name, &call.arguments, context))),
                )
                .await
            } else {
                let call = &batch[0];
                let started = Instant::now();
                let output = match self.permission(call, context.mode, cancel).await {
                    Ok(run_as) => {
                        sink.emit(AgentEvent::ToolCallRunning { call_id: call.id.clone() }).await;
                        let context = ToolContext { mode: run_as, ..context.clone() };
                        self.checked_call(call, &context).await?
                    }
                    Err(refusal) => ToolOutput::error(refusal),
                };
                vec![(output, elapsed_ms(started))]
            };
            for (call, (output, duration_ms)) in batch.iter().zip(outputs) {
                images.extend(output.images.iter().map(|image| (call.id.clone(), image.clone())));
                self.finish_call(call, output, duration_ms, sink).await?;
            }
            index = end;
        }
        // Tool results are text on every wire; the images they returned follow them as
        // one user message (the record keeps their `[image: TYPE]` placeholders).
        if let Some(message) = images_message(images) {
            self.history.push(message);
        }
        Ok(())
    }

    /// Shows and records what the tool sources report (an MCP server that failed to start
    /// or died). Called before every model request and at the end of a turn.
    async fn report_tool_problems(&mut self, sink: &dyn EventSink) -> Result<(), AgentError> {
        for message in self.tools.take_reports() {
            let notice = Notice { kind: NoticeKind::Error, message, model: None };
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
        let output = self.tools.call(&call.name, &call.arguments, context).await;
        if let Some(item) = self.checkpoints.after_call(capture, &call.id).await {
            self.write(item)?;
        }
        Ok(output)
    }

    /// Decides whether a call that may change things runs (kestrel_tools::permission),
    /// asking the approver when the policy says so, and in which mode it then runs. `Err`
    /// is the refusal for the model. A cancelled turn stops waiting for an answer at once.
    async fn permission(
        &mut self,
        call: &ToolCall,
        mode: Mode,
        cancel: &CancellationToken,
    ) -> Result<Mode, String> {
        let read_only = self.tools.is_read_only(&call.name);
        let (summary, always, run_as) =
            match self.policy.assess(mode, &call.name, &call.arguments, read_only) {
                Assessment::Allow { run_as } => return Ok(run_as),
                Assessment::Deny { reason } => return Err(reason),
                Assessment::Ask { summary, always, run_as } => (summary, always, run_as),
            };
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
            ApprovalDecision::AllowOnce => Ok(run_as),
            ApprovalDecision::AllowAlways => {
                self.policy.remember(&always);
                Ok(run_as)
            }
            ApprovalDecision::AllowAlwaysAndSave => {
                self.policy.remember(&always);
                if let Err(error) = save_rules(&self.settings.home.config_file(), &always) {
                    let message = format!("the permission was not saved: {error}");
                    let notice = Notice { kind: NoticeKind::Error, message, model: None };
                    let _ = self.write(RecordItem::Notice { notice });
                }
                Ok(run_as)
            }
            ApprovalDecision::Deny { reason } => Err(match reason {
                Some(reason) => format!("the user denied `{}`: {reason}", call.name),
                None => format!("the user denied `{}`", call.name),
            }),
        }
    }

    fn write(&mut self, item: RecordItem) -> Result<(), AgentError> {
        self.record.append(&RecordEntry::now(item)).map_err(AgentError::Record)
    }

    fn item_id(&mut self, kind: &str) -> String {
        self.next_item += 1;
        format!("{kind}_{}", self.next_item)
    }
}

enum Step {
    Answer(String),
    ToolCalls(Vec<ToolCall>),
    Stopped { reason: StopReason, text: String, error: Option<String> },
}

impl Step {
    fn stopped(reason: StopReason, error: Option<String>) -> Self {
        Step::Stopped { reason, text: String::new(), error }
    }
}

/// A response as it streams in.
struct Response {
    text_item: String,
    reasoning_item: String,
    text: String,
    reasoning: String,
    reasoning_parts: Vec<serde_json::Value>,
    calls: Vec<ToolCall>,
    usage: Option<kestrel_model::TokenUsage>,
    finish: Option<FinishReason>,
}

impl Response {
    fn new(text_item: String, reasoning_item: String) -> Self {
        Self {
            text_item,
            reasoning_item,
            text: String::new(),
            reasoning: String::new(),
            reasoning_parts: Vec::new(),
            calls: Vec::new(),
            usage: None,
            finish: None,
        }
    }

    /// One part as it came; several as an array (the model clients accept both).
    fn reasoning_opaque(&self) -> Option<serde_json::Value> {
        match self.reasoning_parts.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            many => Some(serde_json::Value::Array(many.to_vec())),
        }
    }

    async fn absorb(&mut self, event: StreamEvent, sink: &dyn EventSink) -> Option<FinishReason> {
        match event {
            StreamEvent::TextDelta(delta) => {
                self.text.push_str(&delta);
                sink.emit(AgentEvent::TextDelta { item_id: self.text_item.clone(), delta }).await;
            }
            StreamEvent::ReasoningDelta(delta) => {
                self.reasoning.push_str(&delta);
                sink.emit(AgentEvent::ReasoningDelta {
                    item_id: self.reasoning_item.clone(),
                    delta,
                })
                .await;
            }
            StreamEvent::ReasoningCompleted(reasoning) => {
                if self.reasoning.is_empty() {
                    self.reasoning = reasoning.text;
                }
                // A response may carry several reasoning parts (interleaved thinking,
                // several Responses reasoning items): all go back, in order.
                if let Some(opaque) = reasoning.opaque {
                    self.reasoning_parts.push(opaque);
                }
            }
            StreamEvent::ToolCallStarted { .. } | StreamEvent::ToolCallArgumentsDelta { .. } => {}
            StreamEvent::ToolCallCompleted { call, .. } => self.calls.push(call),
            StreamEvent::Usage(usage) => self.usage = Some(usage),
            StreamEvent::Completed { finish_reason } => return Some(finish_reason),
        }
        None
    }
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

async fn timed(future: impl std::future::Future<Output = ToolOutput>) -> (ToolOutput, u64) {
    let started = Instant::now();
    let output = future.await;
    (output, elapsed_ms(started))
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
