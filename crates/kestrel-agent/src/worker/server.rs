//! The worker's side of ACP (docs/protocol.md): one session per process, opened by
//! `session/new` or `session/load`, its turns run on a task of their own so that
//! `session/cancel`, mode and model switches, permission answers and history requests
//! are handled while a turn runs. Every answer leaves through the outbox, in order with
//! the session's updates.

use crate::control::SessionControl;
use crate::session::{EventSink, Session};
use crate::setup::{
    Launch, choose_model, open_child_session, open_session, open_swarm_session, resume_session,
};
use crate::subagent::ClientHost;
use crate::worker::WorkerOptions;
use crate::worker::choices::{self, MODEL_OPTION, ModelChoices};
use crate::worker::outbox::Outbox;
use crate::worker::permission::ClientApprover;
use crate::worker::prompt::content_parts;
use crate::worker::session_meta::session_meta;
use crate::worker::updates::{UpdateMapper, user_chunk};
use crate::{AgentError, AgentEvent, TurnResult};
use futures_util::future::BoxFuture;
use kestrel_model::{ClientOptions, ReasoningEffort};
use kestrel_protocol::jsonrpc::{Connection, Incoming, Notification, Request, RequestId, RpcError};
use kestrel_protocol::{Mode, RecordEntry, SessionId, StopReason, acp};
use kestrel_store::{Config, SessionIndex, StoreError, list_sessions_response};
use kestrel_tools::checkpoint::UndoError;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A finished turn: the session comes back, and the prompt gets its answer.
pub(crate) struct TurnDone {
    session: Box<Session>,
    request: RequestId,
    result: Result<Value, RpcError>,
}

/// Answered now, or later by whoever took the request over.
enum Reply {
    Now(Result<Value, RpcError>),
    Later,
}

enum Turn {
    Idle(Box<Session>),
    Running { cancel: CancellationToken },
}

/// The one session of this worker.
struct Live {
    id: acp::SessionId,
    launch: Launch,
    control: SessionControl,
    /// The model the client sees selected (`provider/model`) and the models offered: the
    /// configured one, every one this session used, the catalog's and the provider's.
    models: Arc<Mutex<ModelChoices>>,
    mapper: Arc<Mutex<UpdateMapper>>,
    turn: Turn,
}

impl Live {
    fn current_model(&self) -> String {
        self.models.lock().map(|models| models.current.clone()).unwrap_or_default()
    }

    fn model_options(&self) -> Vec<acp::SessionConfigOption> {
        self.models.lock().map(|models| models.options()).unwrap_or_default()
    }
}

pub(crate) struct Server {
    options: WorkerOptions,
    connection: Connection,
    outbox: Outbox,
    finished: mpsc::Sender<TurnDone>,
    initialized: bool,
    /// The client shows `notice` updates.
    notices: bool,
    live: Option<Live>,
}

impl Server {
    pub(crate) fn new(
        options: WorkerOptions,
        connection: Connection,
        outbox: Outbox,
        finished: mpsc::Sender<TurnDone>,
    ) -> Self {
        Self {
            options,
            connection,
            outbox,
            finished,
            initialized: false,
            notices: false,
            live: None,
        }
    }

    pub(crate) async fn handle(&mut self, incoming: Incoming) {
        match incoming {
            Incoming::Request(request) => {
                let id = request.id.clone();
                if let Reply::Now(result) = self.request(request).await {
                    self.outbox.respond(id, result).await;
                }
            }
            Incoming::Notification(notification) => self.notification(notification),
        }
    }

    /// Takes the session back from its turn and answers the prompt.
    pub(crate) async fn turn_finished(&mut self, mut done: TurnDone) {
        if let Err(error) = done.session.record_mode() {
            self.log(&format!("the mode switch could not be recorded: {error}"));
        }
        if let Some(live) = self.live.as_mut() {
            live.turn = Turn::Idle(done.session);
        }
        if let Err(error) = &done.result {
            self.log(&format!("turn failed: {}", error.message));
        }
        self.outbox.respond(done.request, done.result).await;
    }

    /// Cancels the running turn, if any; true when there was one.
    pub(crate) fn cancel_turn(&self) -> bool {
        match self.live.as_ref().map(|live| &live.turn) {
            Some(Turn::Running { cancel }) => {
                cancel.cancel();
                true
            }
            Some(Turn::Idle(_)) | None => false,
        }
    }

    fn log(&self, message: &str) {
        (self.options.log)(message);
    }

    async fn request(&mut self, request: Request) -> Reply {
        let Request { id, method, params } = request;
        if !self.initialized && method != acp::AGENT_METHOD_NAMES.initialize {
            let message =
                format!("`{method}` before `initialize`: initialize the connection first");
            return Reply::Now(Err(RpcError::new(RpcError::INVALID_REQUEST, message)));
        }
        if method == acp::kestrel::SESSION_HISTORY {
            return self.history(id, params).await;
        }
        if method == acp::kestrel::SESSION_COMPACT {
            return self.compact(id, params);
        }
        if method == acp::kestrel::SESSION_UNDO {
            return self.undo(id, params);
        }
        if method.starts_with('_') {
            return Reply::Now(Err(RpcError::method_not_found(&method)));
        }
        let parsed = match acp::ClientRequest::from_method_and_params(&method, &params) {
            Ok(parsed) => parsed,
            Err(acp::MethodDispatchError::UnknownMethod { .. }) => {
                return Reply::Now(Err(RpcError::method_not_found(&method)));
            }
            Err(error) => return Reply::Now(Err(RpcError::invalid_params(error.to_string()))),
        };
        match parsed {
            acp::ClientRequest::InitializeRequest(request) => Reply::Now(self.initialize(request)),
            acp::ClientRequest::NewSessionRequest(request) => {
                Reply::Now(self.new_session(request).await)
            }
            acp::ClientRequest::LoadSessionRequest(request) => {
                Reply::Now(self.load_session(request).await)
            }
            acp::ClientRequest::ListSessionsRequest(request) => {
                Reply::Now(self.list_sessions(request))
            }
            acp::ClientRequest::PromptRequest(request) => self.prompt(id, request).await,
            acp::ClientRequest::SetSessionModeRequest(request) => {
                Reply::Now(self.set_mode(request).await)
            }
            acp::ClientRequest::SetSessionConfigOptionRequest(request) => {
                Reply::Now(self.set_config_option(request).await)
            }
            _ => Reply::Now(Err(RpcError::method_not_found(&method))),
        }
    }

    fn notification(&mut self, notification: Notification) {
        let method = notification.method.as_str();
        match acp::ClientNotification::from_method_and_params(method, &notification.params) {
            Ok(acp::ClientNotification::CancelNotification(cancel)) => match self.live.as_ref() {
                Some(live) if live.id == cancel.session_id => {
                    if !self.cancel_turn() {
                        self.log("session/cancel with no turn running: nothing to cancel");
                    }
                }
                Some(_) | None => self.log(&format!(
                    "session/cancel for session {}, which this worker does not run",
                    cancel.session_id
                )),
            },
            Ok(_) => {}
            Err(error) => self.log(&format!("ignoring notification `{method}`: {error}")),
        }
    }

    fn initialize(&mut self, request: acp::InitializeRequest) -> Result<Value, RpcError> {
        self.initialized = true;
        self.notices = request
            .client_capabilities
            .session
            .as_ref()
            .is_some_and(|session| session.notices.is_some());
        json(acp::kestrel::initialize_response())
    }

    async fn new_session(&mut self, request: acp::NewSessionRequest) -> Result<Value, RpcError> {
        self.refuse_second_session(None)?;
        let meta = session_meta(&request)?;
        let cwd = working_dir(&request.cwd)?;
        let mut config = load_config(&self.options, &cwd)?;
        self.add_mcp_servers(&mut config, &request.mcp_servers);
        let configured = self.options.model.clone().or_else(|| config.model.clone());
        // The client's choice for this one session wins over KESTREL_MODEL and config.
        let model = meta.model.clone().or_else(|| configured.clone());
        let mut launch = self.launch(config, cwd, model);
        if let (Some(tag), None) = (&meta.swarm, self.options.mode) {
            launch.mode = tag.role.default_mode();
        }
        let approver = self.approver(&launch.cwd);
        // A subagent's session names its parent (`_kestrel/session/spawn`, the exec host).
        let mut session = match (meta.parent, meta.swarm) {
            (Some(parent), _) => open_child_session(&launch, &parent, approver.clone()),
            (None, Some(tag)) => open_swarm_session(&launch, tag, approver.clone()),
            (None, None) => open_session(&launch, None, approver.clone()),
        }
        .map_err(agent_error)?;
        // Recorded as a switch, so that the mode asked for outlives a worker restart.
        if let Some(mode) = meta.mode
            && mode != session.mode()
        {
            session.control().set_mode(mode);
            session.record_mode().map_err(agent_error)?;
        }
        let live = self.open(launch, session, configured, &approver, &request.mcp_servers);
        let response = acp::NewSessionResponse::new(live.id.clone())
            .modes(choices::modes(live.control.mode()))
            .config_options(live.model_options());
        json(response)
    }

    async fn load_session(&mut self, request: acp::LoadSessionRequest) -> Result<Value, RpcError> {
        self.refuse_second_session(Some(&request.session_id))?;
        let cwd = working_dir(&request.cwd)?;
        let mut config = load_config(&self.options, &cwd)?;
        self.add_mcp_servers(&mut config, &request.mcp_servers);
        let configured = self.options.model.clone().or_else(|| config.model.clone());
        // The record's model (or the last switch) unless KESTREL_MODEL names one.
        let launch = self.launch(config, cwd, self.options.model.clone());
        let approver = self.approver(&launch.cwd);
        let id = SessionId::from_string(request.session_id.0.to_string());
        let (session, entries) = resume_when_unlocked(&launch, &id, &approver).await?;
        // KESTREL_MODE (a subagent's limit) wins over the mode the record switched to and
        // over a swarm role's mode.
        if let Some(mode) = self.options.mode {
            session.control().set_mode(mode);
        }
        let live = self.open(launch, session, configured, &approver, &request.mcp_servers);
        let (session_id, mapper) = (live.id.clone(), live.mapper.clone());
        let response = acp::LoadSessionResponse::new()
            .modes(choices::modes(live.control.mode()))
            .config_options(live.model_options());
        let updates = match mapper.lock() {
            Ok(mut mapper) => {
                mapper.replay(&entries, &crate::subagent::child_costs(&self.options.home))
            }
            Err(_) => Vec::new(),
        };
        for update in updates {
            self.outbox.update(&session_id, update).await;
        }
        json(response)
    }

    fn list_sessions(&self, request: acp::ListSessionsRequest) -> Result<Value, RpcError> {
        let summaries = SessionIndex::list(&self.options.home)
            .map_err(|error| RpcError::internal(format!("cannot list sessions: {error}")))?;
        // Which sessions have workers is the daemon's to say: `live` is left out here.
        json(list_sessions_response(&summaries, request.cwd.as_deref(), None))
    }

    async fn prompt(&mut self, id: RequestId, request: acp::PromptRequest) -> Reply {
        let live = match live_session(&mut self.live, &request.session_id) {
            Ok(live) => live,
            Err(error) => return Reply::Now(Err(error)),
        };
        if let Turn::Running { .. } = live.turn {
            let message = format!(
                "a prompt is already running in session {}: wait for it or send session/cancel",
                live.id
            );
            return Reply::Now(Err(acp::kestrel::turn_running_error(message)));
        }
        let prompt = match content_parts(&request.prompt) {
            Ok(prompt) => prompt,
            Err(message) => return Reply::Now(Err(RpcError::invalid_params(message))),
        };
        let cancel = CancellationToken::new();
        let Turn::Idle(mut session) =
            std::mem::replace(&mut live.turn, Turn::Running { cancel: cancel.clone() })
        else {
            return Reply::Now(Err(RpcError::internal("the session is busy")));
        };
        for block in request.prompt {
            self.outbox.remember(&live.id, user_chunk(block)).await;
        }
        let sink = WorkerSink {
            outbox: self.outbox.clone(),
            session_id: live.id.clone(),
            mapper: live.mapper.clone(),
            log: self.options.log.clone(),
        };
        let finished = self.finished.clone();
        tokio::spawn(async move {
            // Images left out of the prompt are told in the turn, after its prompt.
            let notices = prompt.notices();
            let result =
                session.run_prompt_with_notices(prompt.parts, notices, &sink, &cancel).await;
            let result = prompt_result(result);
            let _ = finished.send(TurnDone { session, request: id, result }).await;
        });
        Reply::Later
    }

    async fn set_mode(&mut self, request: acp::SetSessionModeRequest) -> Result<Value, RpcError> {
        let live = live_session(&mut self.live, &request.session_id)?;
        let mode: Mode = request.mode_id.0.parse().map_err(RpcError::invalid_params)?;
        live.control.set_mode(mode);
        // A running turn's session records it when the turn is over.
        if let Turn::Idle(session) = &mut live.turn {
            session.record_mode().map_err(agent_error)?;
        }
        let update =
            acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(mode.as_str()));
        let session_id = live.id.clone();
        self.outbox.update(&session_id, update).await;
        json(acp::SetSessionModeResponse::new())
    }

    async fn set_config_option(
        &mut self,
        request: acp::SetSessionConfigOptionRequest,
    ) -> Result<Value, RpcError> {
        let live = live_session(&mut self.live, &request.session_id)?;
        if &*request.config_id.0 != MODEL_OPTION {
            return Err(RpcError::invalid_params(format!(
                "unknown config option `{}`: the only option is `{MODEL_OPTION}`",
                request.config_id
            )));
        }
        let Some(value) = request.value.as_value_id() else {
            return Err(RpcError::invalid_params(
                "the model option takes a value like \"provider/model\", not a boolean",
            ));
        };
        let model = value.0.to_string();
        if model != live.current_model() {
            let launch = &live.launch;
            let choice = choose_model(&launch.config, &launch.home, &model, &launch.client_options)
                .map_err(|error| RpcError::invalid_params(error.to_string()))?;
            if let Ok(mut mapper) = live.mapper.lock() {
                mapper.set_context_window(choice.profile.context_window);
            }
            match &mut live.turn {
                Turn::Idle(session) => session.switch_model(choice).map_err(agent_error)?,
                // The running turn takes it from its next model request on.
                Turn::Running { .. } => live.control.switch_model(choice),
            }
            if let Ok(mut models) = live.models.lock() {
                models.current = model.clone();
                choices::offer(&mut models.offered, &model);
            }
        }
        let options = live.model_options();
        let update =
            acp::SessionUpdate::ConfigOptionUpdate(acp::ConfigOptionUpdate::new(options.clone()));
        let session_id = live.id.clone();
        self.outbox.update(&session_id, update).await;
        json(acp::SetSessionConfigOptionResponse::new(options))
    }

    /// `_kestrel/session/compact`: compacts between turns, on the turn task (the summary
    /// is a model request, and a `session/cancel` stops it like a turn).
    fn compact(&mut self, id: RequestId, params: Value) -> Reply {
        let request: acp::kestrel::CompactSessionRequest = match serde_json::from_value(params) {
            Ok(request) => request,
            Err(error) => {
                let message =
                    format!("invalid params for {}: {error}", acp::kestrel::SESSION_COMPACT);
                return Reply::Now(Err(RpcError::invalid_params(message)));
            }
        };
        let live = match live_session(&mut self.live, &request.session_id) {
            Ok(live) => live,
            Err(error) => return Reply::Now(Err(error)),
        };
        let cancel = CancellationToken::new();
        let session =
            match std::mem::replace(&mut live.turn, Turn::Running { cancel: cancel.clone() }) {
                Turn::Idle(session) => session,
                running @ Turn::Running { .. } => {
                    live.turn = running;
                    let message = format!(
                        "a prompt is running in session {}: compact after it ends",
                        live.id
                    );
                    return Reply::Now(Err(RpcError::new(RpcError::INVALID_REQUEST, message)));
                }
            };
        let mut session = session;
        let sink = WorkerSink {
            outbox: self.outbox.clone(),
            session_id: live.id.clone(),
            mapper: live.mapper.clone(),
            log: self.options.log.clone(),
        };
        let finished = self.finished.clone();
        tokio::spawn(async move {
            let result = session.compact(&sink, &cancel).await;
            let result =
                result.map_err(|error| RpcError::internal(error.to_string())).and_then(|report| {
                    json(acp::kestrel::CompactSessionResponse {
                        compacted: report.compacted,
                        reason: report.reason,
                        tokens_before: report.tokens_before,
                        tokens_after: report.tokens_after,
                    })
                });
            let _ = finished.send(TurnDone { session, request: id, result }).await;
        });
        Reply::Later
    }

    /// `_kestrel/session/undo`: puts back the files of the last turns, between turns.
    /// The undo reads and writes files, so it runs on a blocking thread and the session
    /// comes back like a finished turn: the message loop keeps answering meanwhile.
    fn undo(&mut self, id: RequestId, params: Value) -> Reply {
        let request: acp::kestrel::UndoSessionRequest = match serde_json::from_value(params) {
            Ok(request) => request,
            Err(error) => {
                let method = acp::kestrel::SESSION_UNDO;
                let message = format!("invalid params for {method}: {error}");
                return Reply::Now(Err(RpcError::invalid_params(message)));
            }
        };
        let options = match kestrel_tools::checkpoint::undo_options(&request) {
            Ok(options) => options,
            Err(error) => return Reply::Now(Err(error)),
        };
        let live = match live_session(&mut self.live, &request.session_id) {
            Ok(live) => live,
            Err(error) => return Reply::Now(Err(error)),
        };
        let cancel = CancellationToken::new();
        let mut session = match std::mem::replace(&mut live.turn, Turn::Running { cancel }) {
            Turn::Idle(session) => session,
            running @ Turn::Running { .. } => {
                live.turn = running;
                let message =
                    format!("a prompt is running in session {}: undo after it ends", live.id);
                return Reply::Now(Err(RpcError::new(RpcError::INVALID_REQUEST, message)));
            }
        };
        let (finished, outbox) = (self.finished.clone(), self.outbox.clone());
        tokio::spawn(async move {
            let done = tokio::task::spawn_blocking(move || {
                let result = session.undo(&options);
                (session, result)
            })
            .await;
            let (session, result) = match done {
                Ok(done) => done,
                Err(error) => {
                    // The undo panicked and took the session with it: say so; the worker
                    // cannot run this session any more.
                    let message = format!("undo failed: {error}; restart the session");
                    outbox.respond(id, Err(RpcError::internal(message))).await;
                    return;
                }
            };
            let result =
                result.map_err(UndoError::into_rpc).and_then(|report| json(report.into_response()));
            let _ = finished.send(TurnDone { session, request: id, result }).await;
        });
        Reply::Later
    }

    async fn history(&mut self, id: RequestId, params: Value) -> Reply {
        let request: acp::kestrel::SessionHistoryRequest = match serde_json::from_value(params) {
            Ok(request) => request,
            Err(error) => {
                let message =
                    format!("invalid params for {}: {error}", acp::kestrel::SESSION_HISTORY);
                return Reply::Now(Err(RpcError::invalid_params(message)));
            }
        };
        if let Err(error) = live_session(&mut self.live, &request.session_id) {
            return Reply::Now(Err(error));
        }
        self.outbox.history(id).await;
        Reply::Later
    }

    fn refuse_second_session(&self, loading: Option<&acp::SessionId>) -> Result<(), RpcError> {
        let Some(live) = &self.live else { return Ok(()) };
        let message = match loading {
            Some(id) if *id == live.id => format!("session {id} is already open in this worker"),
            Some(_) | None => format!(
                "this worker already runs session {}: each session has a worker of its own",
                live.id
            ),
        };
        Err(RpcError::new(RpcError::INVALID_REQUEST, message))
    }

    /// The client's `mcpServers` join the configured ones for this session (theirs win
    /// on a name clash); ones Kestrel cannot run are logged.
    fn add_mcp_servers(&self, config: &mut Config, servers: &[acp::McpServer]) {
        let (usable, refused) = kestrel_tools::mcp::servers_from_acp(servers);
        for message in refused {
            self.log(&message);
        }
        config.mcp_servers.extend(usable);
    }

    fn launch(&self, config: Config, cwd: PathBuf, model: Option<String>) -> Launch {
        let mode = self.options.mode.or(config.mode).unwrap_or(Mode::Ask);
        let reasoning = config.reasoning_effort.map(|effort| match effort {
            kestrel_store::ReasoningEffort::Minimal => ReasoningEffort::Minimal,
            kestrel_store::ReasoningEffort::Low => ReasoningEffort::Low,
            kestrel_store::ReasoningEffort::Medium => ReasoningEffort::Medium,
            kestrel_store::ReasoningEffort::High => ReasoningEffort::High,
        });
        let client_options = ClientOptions {
            ca_bundle: config.ca_bundle.clone(),
            ..self.options.client_options.clone()
        };
        Launch {
            home: self.options.home.clone(),
            max_turns: config.max_turns,
            config,
            cwd,
            model,
            mode,
            reasoning,
            client_options,
        }
    }

    fn approver(&self, cwd: &Path) -> Arc<ClientApprover> {
        Arc::new(ClientApprover::new(
            self.connection.clone(),
            self.outbox.clone(),
            cwd.to_path_buf(),
        ))
    }

    /// Adds the models the provider lists itself to the model option, in the background
    /// (a network request must not hold up the session), announcing the longer list.
    fn offer_provider_models(
        &self,
        launch: &Launch,
        id: &acp::SessionId,
        models: &Arc<Mutex<ModelChoices>>,
    ) {
        let (launch, id, models) = (launch.clone(), id.clone(), models.clone());
        let outbox = self.outbox.clone();
        tokio::spawn(async move {
            let Some(current) = models.lock().ok().map(|models| models.current.clone()) else {
                return;
            };
            let listed = choices::provider_models(&launch, &current).await;
            let options = match models.lock() {
                Ok(mut models) => {
                    let before = models.offered.len();
                    for model in &listed {
                        choices::offer(&mut models.offered, model);
                    }
                    (models.offered.len() > before).then(|| models.options())
                }
                Err(_) => None,
            };
            if let Some(options) = options {
                let update =
                    acp::SessionUpdate::ConfigOptionUpdate(acp::ConfigOptionUpdate::new(options));
                outbox.update(&id, update).await;
            }
        });
    }

    fn open(
        &mut self,
        launch: Launch,
        session: Session,
        configured: Option<String>,
        approver: &ClientApprover,
        acp_servers: &[acp::McpServer],
    ) -> &mut Live {
        let id = acp::SessionId::from(session.id());
        approver.set_session(id.clone());
        let mut session = session;
        // Subagents start through the client (the daemon); a subagent starts none itself.
        if session.parent_id().is_none() {
            let host =
                ClientHost::new(self.connection.clone(), launch.home.clone(), acp_servers.to_vec());
            session.set_subagent_host(Arc::new(host));
        }
        let model = session.model_ref();
        let offered =
            choices::offered_models(&launch.home, &launch.config, configured.as_deref(), &model);
        let models = Arc::new(Mutex::new(ModelChoices { current: model, offered }));
        // A subagent's model is its parent's choice: no one picks one from its list.
        if session.parent_id().is_none() {
            self.offer_provider_models(&launch, &id, &models);
        }
        let mut mapper = UpdateMapper::new(launch.cwd.clone(), self.notices);
        mapper.set_context_window(session.settings().profile.context_window);
        self.log(&format!("session {id} open in {}", launch.cwd.display()));
        self.live.insert(Live {
            id,
            control: session.control(),
            launch,
            models,
            mapper: Arc::new(Mutex::new(mapper)),
            turn: Turn::Idle(Box::new(session)),
        })
    }
}

/// Sends a turn's events to the client as updates.
struct WorkerSink {
    outbox: Outbox,
    session_id: acp::SessionId,
    mapper: Arc<Mutex<UpdateMapper>>,
    log: crate::worker::Logger,
}

impl EventSink for WorkerSink {
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let AgentEvent::Retrying { message }
            | AgentEvent::Notice(kestrel_protocol::Notice { message, .. }) = &event
            {
                (self.log)(message);
            }
            let updates = match self.mapper.lock() {
                Ok(mut mapper) => mapper.event(event),
                Err(_) => Vec::new(),
            };
            for update in updates {
                self.outbox.update(&self.session_id, update).await;
            }
        })
    }
}

/// The prompt's answer: a stop reason, or an error for a failed turn.
fn prompt_result(result: Result<TurnResult, AgentError>) -> Result<Value, RpcError> {
    let turn = result.map_err(|error| RpcError::internal(error.to_string()))?;
    let stop_reason = match turn.stop_reason {
        StopReason::EndTurn => acp::StopReason::EndTurn,
        StopReason::Cancelled | StopReason::Interrupted => acp::StopReason::Cancelled,
        StopReason::MaxTurns => acp::StopReason::MaxTurnRequests,
        StopReason::Failed => {
            let message = turn.error.unwrap_or_else(|| "the turn failed".to_string());
            return Err(RpcError::internal(message));
        }
    };
    json(acp::PromptResponse::new(stop_reason))
}

fn live_session<'a>(
    live: &'a mut Option<Live>,
    id: &acp::SessionId,
) -> Result<&'a mut Live, RpcError> {
    match live {
        Some(live) if live.id != *id => Err(RpcError::new(
            RpcError::RESOURCE_NOT_FOUND,
            format!("this worker runs session {}, not {id}", live.id),
        )),
        Some(live) => Ok(live),
        None => Err(RpcError::new(
            RpcError::RESOURCE_NOT_FOUND,
            format!("session {id} is not open: send session/new or session/load first"),
        )),
    }
}

/// The session's directory: absolute, existing, a directory.
/// How long `session/load` waits for the record's lock: the worker of a daemon killed a
/// moment ago holds it until it has ended its running command (the shell tool's grace).
const RECORD_LOCK_WAIT: Duration = Duration::from_secs(10);
const RECORD_LOCK_RETRY: Duration = Duration::from_millis(50);

/// Resumes session `id` once no other process holds its record (waiting at most
/// [`RECORD_LOCK_WAIT`]; the error then says it waited).
async fn resume_when_unlocked(
    launch: &Launch,
    id: &SessionId,
    approver: &Arc<ClientApprover>,
) -> Result<(Session, Vec<RecordEntry>), RpcError> {
    let deadline = Instant::now() + RECORD_LOCK_WAIT;
    loop {
        match resume_session(launch, id, approver.clone()) {
            Err(AgentError::Store(StoreError::Locked { .. })) if Instant::now() < deadline => {
                tokio::time::sleep(RECORD_LOCK_RETRY).await;
            }
            Err(error @ AgentError::Store(StoreError::Locked { .. })) => {
                return Err(RpcError::internal(format!(
                    "{error} (still locked after waiting {}s for it to be released)",
                    RECORD_LOCK_WAIT.as_secs()
                )));
            }
            result => return result.map_err(agent_error),
        }
    }
}

fn working_dir(cwd: &Path) -> Result<PathBuf, RpcError> {
    if !cwd.is_absolute() {
        return Err(RpcError::invalid_params(format!(
            "cwd must be an absolute path, got `{}`",
            cwd.display()
        )));
    }
    match std::fs::metadata(cwd) {
        Ok(metadata) if metadata.is_dir() => Ok(cwd.to_path_buf()),
        Ok(_) => Err(RpcError::invalid_params(format!("cwd {} is not a directory", cwd.display()))),
        Err(error) => Err(RpcError::invalid_params(format!("cwd {}: {error}", cwd.display()))),
    }
}

fn load_config(options: &WorkerOptions, cwd: &Path) -> Result<Config, RpcError> {
    Config::load(&options.home, cwd).map_err(|error| RpcError::internal(error.to_string()))
}

fn agent_error(error: AgentError) -> RpcError {
    let code = match &error {
        AgentError::Store(store) => match store {
            StoreError::SessionNotFound { .. } => RpcError::RESOURCE_NOT_FOUND,
            StoreError::InvalidSessionId { .. } => RpcError::INVALID_PARAMS,
            StoreError::NoHome
            | StoreError::Io { .. }
            | StoreError::Locked { .. }
            | StoreError::SessionLive { .. }
            | StoreError::InvalidHeader { .. }
            | StoreError::SessionExists { .. }
            | StoreError::NoSessions { .. }
            | StoreError::AmbiguousSession { .. }
            | StoreError::ForkOutOfRange { .. }
            | StoreError::Encode { .. }
            // Swarm runs: a worker never opens one.
            | StoreError::InvalidRunId { .. }
            | StoreError::RunNotFound { .. }
            | StoreError::AmbiguousRun { .. }
            | StoreError::RunExists { .. }
            | StoreError::RunLocked { .. }
            | StoreError::Graph { .. }
            | StoreError::EncodeRun { .. } => RpcError::INTERNAL_ERROR,
        },
        AgentError::Config(_)
        | AgentError::Record(_)
        | AgentError::NoModel { .. }
        | AgentError::UnknownProvider { .. }
        | AgentError::MissingApiKey { .. }
        | AgentError::Model(_)
        | AgentError::Usage(_)
        | AgentError::Stdin(_)
        | AgentError::Output { .. } => RpcError::INTERNAL_ERROR,
    };
    RpcError::new(code, error.to_string())
}

fn json<T: Serialize>(value: T) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|error| RpcError::internal(error.to_string()))
}
