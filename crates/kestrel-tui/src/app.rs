//! The UI's state and what the daemon's messages do to it: the session's lifecycle
//! (connect, open lazily on the first prompt, load for resume), streamed updates into
//! the transcript, permission requests, turn ends, worker restarts. Key handling is in
//! `keys`, slash commands in `actions`.

use crate::approval::Approval;
use crate::cell::{Cell, InfoBody, NoticeLevel};
use crate::client::{self, Events};
use crate::composer::{Composer, Prompt};
use crate::event::{AppEvent, ConfigSummary, CustomCommand, OpenedSession};
use crate::picker::{Picker, PickerKind};
use crate::run::{ResumeTarget, StartOptions};
use crate::status::{LinkState, Status};
use crate::theme;
use crate::transcript::Transcript;
use crate::turn::Turn;
use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::Connection;
use kestrel_store::KestrelHome;
use ratatui::text::{Line, Span};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Instant;

/// Re-attaching to the session after losing the daemon: how often, how far apart.
const REATTACH_ATTEMPTS: u32 = 20;
const REATTACH_DELAY: std::time::Duration = std::time::Duration::from_millis(250);
/// Test hook: `task` makes a background task panic shortly after start-up.
const PANIC_HOOK_ENV: &str = "KESTREL_TUI_TEST_PANIC";
/// Attempts to reach the daemon again after one fails, and the wait before the first
/// (growing with each).
const CONNECT_RETRIES: u32 = 3;
const CONNECT_RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(200);
/// Lost connections in a row (without a session opening between them) before giving up.
const MAX_RECONNECTS: u32 = 5;

/// Where the session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionState {
    /// None yet: one is created when first needed.
    None,
    /// `session/new` (no id) or `session/load` (its id) is on its way.
    Opening(Option<String>),
    Open(String),
}

/// Something only the run loop can do to the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TerminalRequest {
    /// Repaint everything (ctrl+l).
    Clear,
    /// Stop the process (ctrl+z) and restore the terminal until it continues.
    Suspend,
}

/// The whole UI state.
pub(crate) struct App {
    pub(crate) home: KestrelHome,
    pub(crate) program: PathBuf,
    pub(crate) cwd: PathBuf,
    pub(crate) events: Events,
    pub(crate) transcript: Transcript,
    pub(crate) composer: Composer,
    pub(crate) status: Status,
    pub(crate) connection: Option<Connection>,
    pub(crate) session: SessionState,
    pub(crate) turn: Option<Turn>,
    /// Prompts waiting for the session to open or the running turn to end.
    pub(crate) queue: VecDeque<Prompt>,
    pub(crate) approvals: VecDeque<Approval>,
    pub(crate) picker: Option<Picker>,
    /// The `/swarm` view, while open.
    pub(crate) swarm: Option<crate::swarm_view::SwarmView>,
    /// A picker to open once the session is open (/model before the first prompt).
    pub(crate) picker_after_open: Option<PickerKind>,
    pub(crate) modes: Option<acp::SessionModeState>,
    pub(crate) config_options: Vec<acp::SessionConfigOption>,
    /// A mode or model chosen before the session existed (or from KESTREL_MODE/MODEL).
    pub(crate) pending_mode: Option<String>,
    pub(crate) pending_model: Option<String>,
    /// `[sandbox] network` of the config (for /status).
    pub(crate) network: bool,
    /// --mode/--model, else KESTREL_MODE/KESTREL_MODEL: applied to every new session,
    /// not just the first (a read-only start must stay read-only after /new).
    env_mode: Option<String>,
    env_model: Option<String>,
    pub(crate) custom_commands: Vec<CustomCommand>,
    pub(crate) menu_selected: usize,
    /// The composer text for which the slash or mention menu was dismissed with Esc.
    pub(crate) menu_dismissed: Option<String>,
    pub(crate) files: Option<Vec<String>>,
    /// Which directory `files` lists, and when.
    pub(crate) files_listed: Option<(PathBuf, Instant)>,
    pub(crate) listing_files: bool,
    pub(crate) resume: Option<ResumeTarget>,
    /// The session to load once connected (resume).
    pub(crate) resume_target: Option<(String, PathBuf)>,
    pub(crate) quit_armed: Option<Instant>,
    /// When Esc was last pressed on an idle, empty composer (Esc Esc edits a message).
    pub(crate) last_esc: Option<Instant>,
    pub(crate) should_quit: bool,
    pub(crate) terminal_request: Option<TerminalRequest>,
    /// Ring the bell at the next draw (a permission is waiting).
    pub(crate) bell: bool,
    /// Draw at the next chance rather than at the streaming frame rate: the first text
    /// of an answer, a turn's end, a permission prompt (latency the user waits on).
    pub(crate) urgent: bool,
    /// The last update was a user message chunk (replayed chunks of one message join).
    pub(crate) last_update_was_user: bool,
    /// The worker restarted during the running turn.
    pub(crate) restarted_in_turn: bool,
    pub(crate) config: ConfigSummary,
    /// The open session's directory (a resumed one may differ from ours).
    pub(crate) session_cwd: PathBuf,
    /// Re-attaching after the daemon was lost: the session, its cwd, attempts so far.
    reattach: Option<(String, PathBuf, u32)>,
    /// Connections lost since a session last opened.
    reconnects: u32,
    /// Failed attempts to connect since the last success.
    connect_failures: u32,
    /// Notices of permission prompts withdrawn unanswered since the last turn started,
    /// said again after re-attaching (which replays the history over the screen).
    withdrawn: Vec<String>,
    /// Subagent sessions shown under their `task` call: child id → call id.
    pub(crate) children: std::collections::HashMap<String, String>,
    /// `/compact` is running.
    pub(crate) compacting: bool,
    /// A `_kestrel/session/turn` of the session being loaded, newer than the load's
    /// answer (it may be handled before that answer): running or not.
    pub(crate) turn_seen_while_opening: Option<bool>,
    /// The daemon's latest word on the open session's turn (whoever runs it): running.
    pub(crate) turn_running_remotely: bool,
    /// Refusals in a row of this UI's prompt because a turn ran ("already running").
    pub(crate) busy_refusals: u8,
    /// The worker sent a notice while compacting (it says what was done).
    pub(crate) compaction_noticed: bool,
}

impl App {
    pub(crate) fn new(options: StartOptions, home: KestrelHome, events: Events) -> Self {
        let mut app = Self {
            home,
            program: options.program,
            cwd: options.cwd.clone(),
            events,
            transcript: Transcript::new(options.cwd.clone()),
            composer: Composer::new(),
            status: Status::new(),
            connection: None,
            session: SessionState::None,
            turn: None,
            queue: VecDeque::new(),
            approvals: VecDeque::new(),
            picker: None,
            swarm: None,
            picker_after_open: None,
            modes: None,
            config_options: Vec::new(),
            pending_mode: None,
            pending_model: None,
            network: false,
            env_mode: options.mode.clone(),
            env_model: options.model.clone(),
            custom_commands: Vec::new(),
            menu_selected: 0,
            menu_dismissed: None,
            files: None,
            files_listed: None,
            listing_files: false,
            resume: options.resume,
            resume_target: None,
            quit_armed: None,
            last_esc: None,
            should_quit: false,
            terminal_request: None,
            bell: false,
            urgent: false,
            last_update_was_user: false,
            restarted_in_turn: false,
            config: ConfigSummary::default(),
            session_cwd: options.cwd.clone(),
            reattach: None,
            reconnects: 0,
            connect_failures: 0,
            withdrawn: Vec::new(),
            children: std::collections::HashMap::new(),
            compacting: false,
            turn_seen_while_opening: None,
            turn_running_remotely: false,
            busy_refusals: 0,
            compaction_noticed: false,
        };
        if app.resume.is_none() {
            app.push_welcome();
        }
        app
    }

    /// The empty screen's help.
    pub(crate) fn push_welcome(&mut self) {
        let cwd = self.cwd.display().to_string();
        let lines = vec![
            Line::from(vec![
                Span::styled("Kestrel", theme::bold().fg(ratatui::style::Color::Cyan)),
                Span::styled(format!(" v{}", env!("CARGO_PKG_VERSION")), theme::dim()),
                Span::styled(format!("  {cwd}"), theme::dim()),
            ]),
            Line::from(Span::styled(
                "Type a request and press Enter. /help for commands, @ to mention a file,",
                theme::dim(),
            )),
            Line::from(Span::styled(
                "Esc to interrupt, ctrl+j for a new line, ctrl+c twice to quit.",
                theme::dim(),
            )),
        ];
        self.transcript.push(Cell::Info { title: None, body: InfoBody::Lines(lines) });
    }

    /// Starts the work that must not delay the first frame: connecting to the daemon,
    /// reading the config and custom commands, finding the session to resume.
    pub(crate) fn start(&mut self) {
        client::connect(self.home.clone(), self.program.clone(), self.events.clone());
        let home = self.home.clone();
        let cwd = self.cwd.clone();
        let events = self.events.clone();
        tokio::task::spawn_blocking(move || {
            let config = crate::lookup::load_config(&home, &cwd);
            let commands = crate::commands::load_custom(&home.commands_dir(), &cwd);
            let _ = events.blocking_send(AppEvent::ConfigLoaded(config));
            let _ = events.blocking_send(AppEvent::CustomCommands(commands));
        });
        if let Some(target) = self.resume.clone() {
            let home = self.home.clone();
            let cwd = self.cwd.clone();
            let events = self.events.clone();
            tokio::task::spawn_blocking(move || {
                let found = match &target {
                    ResumeTarget::Id(id) => crate::lookup::find_session(&home, id),
                    ResumeTarget::Last => kestrel_store::SessionIndex::latest(&home, Some(&cwd)),
                };
                let result = found
                    .map(|summary| (summary.id.as_str().to_owned(), PathBuf::from(summary.cwd)))
                    .map_err(|error| error.to_string());
                let _ = events.blocking_send(AppEvent::ResumeResolved(result));
            });
        }
        if std::env::var_os(PANIC_HOOK_ENV).is_some_and(|value| value == "task") {
            // Test hook (docs/tui.md): a bug in a background task must not leave the UI
            // running on a restored terminal, nor a dead UI on a raw one.
            tokio::spawn(async {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                panic!("{PANIC_HOOK_ENV}=task: a panic in a background task");
            });
        }
        // --mode and --model (already set) come before the environment.
        if self.env_mode.is_none() {
            self.env_mode = std::env::var("KESTREL_MODE").ok().filter(|mode| !mode.is_empty());
        }
        if self.env_model.is_none() {
            self.env_model = std::env::var("KESTREL_MODEL").ok().filter(|model| !model.is_empty());
        }
        self.pending_mode = self.env_mode.clone();
        self.pending_model = self.env_model.clone();
    }

    pub(crate) fn notice(&mut self, level: NoticeLevel, text: impl Into<String>) {
        self.transcript.push(Cell::Notice { level, text: text.into() });
        self.transcript.scroll_to_bottom();
    }

    pub(crate) fn session_id(&self) -> Option<&str> {
        match &self.session {
            SessionState::Open(id) => Some(id),
            SessionState::None | SessionState::Opening(_) => None,
        }
    }

    /// The session this UI shows or is loading: a permission request the daemon re-sends
    /// while `session/load` runs is this session's, not a stranger's.
    pub(crate) fn shown_session_id(&self) -> Option<&str> {
        match &self.session {
            SessionState::Open(id) | SessionState::Opening(Some(id)) => Some(id),
            SessionState::None | SessionState::Opening(None) => None,
        }
    }

    /// The directory `@` mentions, /diff and /init work in: the open session's. The
    /// `@` list of another directory is dropped.
    pub(crate) fn set_session_cwd(&mut self, cwd: PathBuf) {
        if self.files_listed.as_ref().is_some_and(|(listed, _)| *listed != cwd) {
            self.files = None;
            self.files_listed = None;
        }
        self.session_cwd = cwd;
    }

    /// Whether periodic redraws are needed (the working indicator moves).
    pub(crate) fn animating(&self) -> bool {
        let working = (self.turn.is_some() || self.compacting) && self.approvals.is_empty();
        working || matches!(self.status.link, LinkState::Connecting | LinkState::Opening)
    }

    pub(crate) fn handle_event(&mut self, event: AppEvent) {
        match event {
            AppEvent::Connected { connection, incoming } => {
                self.connect_failures = 0;
                client::forward(incoming, self.events.clone());
                self.connection = Some(connection);
                self.status.link = LinkState::Connected;
                self.open_session_if_needed();
            }
            AppEvent::ConnectFailed(message) => {
                // A daemon that was stopping, or lost a race to start, closes at once:
                // try again a few times before saying it cannot be reached.
                if self.connect_failures < CONNECT_RETRIES {
                    self.connect_failures += 1;
                    let delay = CONNECT_RETRY_DELAY * self.connect_failures;
                    let (home, program, events) =
                        (self.home.clone(), self.program.clone(), self.events.clone());
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        client::connect(home, program, events);
                    });
                    return;
                }
                self.connect_failures = 0;
                self.status.link = LinkState::Lost(message.clone());
                self.notice(
                    NoticeLevel::Error,
                    format!("cannot reach the Kestrel daemon: {message}"),
                );
            }
            AppEvent::Incoming(message) => self.incoming(message),
            AppEvent::Disconnected => {
                self.connection = None;
                let was_working = self.turn.take().is_some();
                // A waiting prompt cannot be answered any more: say so, plainly.
                self.withdraw_approvals(
                    "the connection to the daemon was lost before it was answered; the turn was stopped here (a session that still runs that call asks again)",
                );
                if was_working {
                    self.transcript.fail_unfinished_tools();
                }
                self.status.link = LinkState::Lost("the daemon closed the connection".into());
                self.reconnects += 1;
                if self.reconnects > MAX_RECONNECTS {
                    self.notice(
                        NoticeLevel::Error,
                        "the daemon keeps closing the connection; giving up (see $KESTREL_HOME/logs/daemon.log)",
                    );
                    return;
                }
                self.notice(
                    NoticeLevel::Error,
                    "lost the connection to the daemon (see $KESTREL_HOME/logs/daemon.log); reconnecting…",
                );
                // Reconnect and attach to the same session again.
                if let SessionState::Open(id) = &self.session {
                    self.reattach = Some((id.clone(), self.session_cwd.clone(), 0));
                    self.resume_target = Some((id.clone(), self.session_cwd.clone()));
                    self.session = SessionState::None;
                }
                client::connect(self.home.clone(), self.program.clone(), self.events.clone());
            }
            AppEvent::SessionOpened(opened) => self.session_opened(opened),
            AppEvent::SessionFailed(message) => {
                self.session = SessionState::None;
                self.status.link = LinkState::Connected;
                // The worker of the lost daemon may still hold the record for a moment.
                if let Some((id, cwd, attempts)) = self.reattach.take()
                    && attempts < REATTACH_ATTEMPTS
                {
                    self.reattach = Some((id, cwd, attempts + 1));
                    let events = self.events.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(REATTACH_DELAY).await;
                        let _ = events.send(AppEvent::Reattach).await;
                    });
                    return;
                }
                self.requeue_into_composer();
                self.notice(NoticeLevel::Error, format!("could not open the session: {message}"));
            }
            AppEvent::Compacted { session_id, result } => {
                if self.session_id() == Some(session_id.as_str()) {
                    self.compacted(result);
                }
            }
            AppEvent::Undone { session_id, result } => {
                if self.session_id() == Some(session_id.as_str()) {
                    self.undone(result);
                }
            }
            AppEvent::ChildFailed { session_id, message } => {
                let short = crate::tool_cell::short_id(&session_id);
                self.notice(
                    NoticeLevel::Warning,
                    format!("cannot follow subagent {short}: {message}"),
                );
            }
            AppEvent::AnswerLost { title } => self.notice(
                NoticeLevel::Warning,
                format!(
                    "your answer to `{title}` did not reach the daemon (the connection was lost), so nothing ran; if the session still runs that call, it asks again once reconnected"
                ),
            ),
            AppEvent::Reattach => {
                if let Some((id, cwd, _)) = &self.reattach {
                    self.resume_target = Some((id.clone(), cwd.clone()));
                    self.open_session_if_needed();
                }
            }
            AppEvent::PromptFinished { session_id, result } => {
                if self.session_id() == Some(session_id.as_str()) {
                    self.busy_refusals = 0;
                    self.turn_finished(result);
                }
            }
            AppEvent::PromptRefusedBusy { session_id, message } => {
                if self.session_id() == Some(session_id.as_str()) {
                    self.prompt_refused_busy(message);
                }
            }
            AppEvent::Sessions { purpose, result } => self.sessions_listed(purpose, result),
            AppEvent::ModeChanged(result) => match result {
                Ok(mode) => self.status.mode = Some(mode),
                Err(message) => {
                    self.notice(NoticeLevel::Error, format!("mode not changed: {message}"))
                }
            },
            AppEvent::ModelChanged(result) => match result {
                Ok(options) => self.set_config_options(options),
                Err(message) => {
                    self.notice(NoticeLevel::Error, format!("model not changed: {message}"))
                }
            },
            AppEvent::ConfigLoaded(config) => {
                self.network = config.network;
                if self.status.model.is_none() {
                    self.status.model = self.pending_model.clone().or(config.model.clone());
                }
                if self.status.mode.is_none() {
                    self.status.mode = self.pending_mode.clone().or(config.mode.clone());
                }
                if let Some(error) = &config.error {
                    self.notice(NoticeLevel::Error, error.clone());
                } else if !config.exists {
                    self.notice(
                        NoticeLevel::Warning,
                        format!(
                            "no config yet: create {} with a model, e.g. model = \"anthropic/claude-sonnet-4-5\"",
                            self.home.config_file().display()
                        ),
                    );
                }
                // Nothing chosen anywhere: look for keys and local servers (never
                // before the first frame: this runs after the config was read).
                if config.model.is_none() && self.pending_model.is_none() && config.error.is_none()
                {
                    crate::first_run::look_for_models(self.program.clone(), self.events.clone());
                }
                self.config = config;
            }
            AppEvent::ModelsOffered(offered) => self.offer_models(offered),
            AppEvent::CustomCommands(commands) => self.custom_commands = commands,
            AppEvent::FilesListed { cwd, files } => {
                self.listing_files = false;
                if cwd == self.session_cwd {
                    self.files = Some(files);
                    self.files_listed = Some((cwd, Instant::now()));
                } else {
                    // Listed for a directory the UI has left: list the current one.
                    self.list_files();
                }
            }
            AppEvent::SessionTotals { session_id, tokens, cost } => {
                // What the session used before this UI attached, under what it saw since.
                if self.session_id() == Some(session_id.as_str()) {
                    self.status.tokens = self.status.tokens.saturating_add(tokens);
                    if self.status.cost.is_none() && cost > 0.0 {
                        self.status.cost = Some(cost);
                    }
                }
            }
            AppEvent::ResumeResolved(result) => match result {
                Ok(target) => {
                    self.resume_target = Some(target);
                    self.open_session_if_needed();
                }
                Err(message) => {
                    self.resume = None;
                    self.notice(NoticeLevel::Error, format!("cannot resume: {message}"));
                    self.push_welcome();
                }
            },
            AppEvent::LocalOutput { title, text, is_patch, is_error } => {
                if is_error {
                    self.notice(NoticeLevel::Error, format!("{title}: {text}"));
                } else {
                    let body =
                        if is_patch { InfoBody::Patch(text) } else { InfoBody::Markdown(text) };
                    self.transcript.push(Cell::Info { title: Some(title), body });
                    self.transcript.scroll_to_bottom();
                }
            }
            AppEvent::EditableMessages(result) => self.editable_messages_listed(result),
            AppEvent::Forked(result) => self.forked(result),
            AppEvent::Swarm(update) => self.swarm_update(update),
            AppEvent::Redraw => {}
        }
    }

    /// Opens a session when something waits for one: a resume target, a queued prompt,
    /// a picker that needs the worker's choices.
    pub(crate) fn open_session_if_needed(&mut self) {
        let Some(connection) = &self.connection else { return };
        if self.session != SessionState::None {
            return;
        }
        if let Some((id, cwd)) = self.resume_target.take() {
            self.session = SessionState::Opening(Some(id.clone()));
            self.status.link = LinkState::Opening;
            self.turn_seen_while_opening = None;
            // The history is replayed in full: what is on screen would show twice.
            self.transcript.clear();
            self.transcript.set_cwd(cwd.clone());
            client::load_session(connection, id, cwd, self.events.clone());
            return;
        }
        if self.resume.is_some() {
            // Waiting for the store to say which session.
            return;
        }
        if !self.queue.is_empty() || self.picker_after_open.is_some() {
            // A choice made before it opened (/mode, /model) wins over the environment.
            if self.pending_mode.is_none() {
                self.pending_mode = self.env_mode.clone();
            }
            if self.pending_model.is_none() {
                self.pending_model = self.env_model.clone();
            }
            self.session = SessionState::Opening(None);
            self.status.link = LinkState::Opening;
            client::new_session(connection, self.cwd.clone(), self.events.clone());
        }
    }

    fn session_opened(&mut self, opened: OpenedSession) {
        self.reconnects = 0;
        self.session = SessionState::Open(opened.session_id.clone());
        self.set_session_cwd(opened.cwd.clone());
        let reattached = self.reattach.take().is_some();
        self.status.link = LinkState::Ready;
        self.observe_turn_on_open(opened.turn_running);
        self.resume = None;
        self.last_update_was_user = false;
        if let Some(modes) = &opened.modes {
            self.status.mode = Some(modes.current_mode_id.0.to_string());
        }
        self.modes = opened.modes;
        self.set_config_options(opened.config_options);
        if reattached {
            self.notice(NoticeLevel::Info, "reconnected to the daemon; the session carries on");
            for text in self.withdrawn.clone() {
                self.notice(NoticeLevel::Warning, text);
            }
        } else if opened.loaded {
            crate::lookup::read_session_totals(&self.home, &opened.session_id, &self.events);
            for prompt in self.transcript.user_prompts() {
                self.composer.remember(&prompt);
            }
            self.notice(
                NoticeLevel::Info,
                format!("resumed the session in {}", opened.cwd.display()),
            );
        }
        if let Some(connection) = &self.connection {
            if let Some(mode) = self.pending_mode.take()
                && self.status.mode.as_deref() != Some(mode.as_str())
            {
                client::set_mode(connection, &opened.session_id, mode, self.events.clone());
            }
            if let Some(model) = self.pending_model.take()
                && self.status.model.as_deref() != Some(model.as_str())
            {
                client::set_model(connection, &opened.session_id, model, self.events.clone());
            }
        }
        if let Some(kind) = self.picker_after_open.take() {
            self.open_picker(kind);
        }
        self.pump();
    }

    /// The model option's choices and current value.
    pub(crate) fn model_choices(&self) -> Option<(String, Vec<(String, String)>)> {
        let option = self.config_options.iter().find(|option| option.id.0.as_ref() == "model")?;
        let acp::SessionConfigKind::Select(select) = &option.kind else { return None };
        let choices = match &select.options {
            acp::SessionConfigSelectOptions::Ungrouped(options) => options
                .iter()
                .map(|choice| (choice.value.0.to_string(), choice.name.clone()))
                .collect(),
            acp::SessionConfigSelectOptions::Grouped(groups) => groups
                .iter()
                .flat_map(|group| group.options.iter())
                .map(|choice| (choice.value.0.to_string(), choice.name.clone()))
                .collect(),
            _ => Vec::new(),
        };
        Some((select.current_value.0.to_string(), choices))
    }

    pub(crate) fn set_config_options(&mut self, options: Vec<acp::SessionConfigOption>) {
        self.config_options = options;
        if let Some((current, _)) = self.model_choices() {
            self.status.model = Some(current);
        }
    }

    /// Sends the next queued prompt when the session is open and idle; opens the session
    /// when there is none.
    pub(crate) fn pump(&mut self) {
        if self.turn.is_some() || self.compacting || self.queue.is_empty() {
            return;
        }
        let (Some(connection), SessionState::Open(session_id)) = (&self.connection, &self.session)
        else {
            self.open_session_if_needed();
            return;
        };
        let Some(prompt) = self.queue.pop_front() else { return };
        let blocks = crate::mention::prompt_blocks(&prompt, &self.session_cwd);
        client::prompt(connection, session_id.clone(), blocks, self.events.clone());
        self.transcript.push(Cell::User(prompt.text.clone()));
        self.transcript.scroll_to_bottom();
        self.turn = Some(Turn::ours(prompt));
        self.restarted_in_turn = false;
        self.withdrawn.clear();
        self.status.link = LinkState::Working;
        self.last_update_was_user = false;
    }

    /// Queues a prompt (sent at once when the session is idle).
    pub(crate) fn send_prompt(&mut self, prompt: Prompt) {
        self.queue.push_back(prompt);
        self.pump();
    }

    /// Puts the prompts that were never sent back into the composer, before what it
    /// holds, so nothing typed is lost when they cannot go (a failed open, a left session).
    pub(crate) fn requeue_into_composer(&mut self) {
        let prompts: Vec<_> = self.queue.drain(..).map(|prompt| prompt.typed).collect();
        self.composer.put_back(prompts);
    }

    /// Sends `prompt` now: the running turn is interrupted and the prompt goes first.
    pub(crate) fn steer(&mut self, prompt: Prompt) {
        self.queue.push_front(prompt);
        if let Some(turn) = &mut self.turn {
            turn.steered = true;
        }
        self.interrupt();
        self.pump();
    }

    /// Drops the waiting permission prompts that can no longer be answered, saying so
    /// for each (nothing it asked about ran): a prompt must not just vanish.
    pub(crate) fn withdraw_approvals(&mut self, why: &str) {
        for approval in std::mem::take(&mut self.approvals) {
            let text =
                format!("the approval of `{}` was withdrawn, nothing ran: {why}", approval.title());
            self.withdrawn.push(text.clone());
            self.notice(NoticeLevel::Warning, text);
        }
    }

    /// Asks the running turn to stop (answering waiting permission requests as
    /// cancelled).
    pub(crate) fn interrupt(&mut self) {
        let Some(turn) = &mut self.turn else { return };
        turn.interrupted = true;
        if let Some(connection) = &self.connection {
            for approval in self.approvals.drain(..) {
                client::answer_permission(connection, approval.id, None, None);
            }
            if let SessionState::Open(id) = &self.session {
                client::cancel(connection, id);
            }
        }
    }

    pub(crate) fn turn_finished(&mut self, result: Result<acp::StopReason, String>) {
        self.urgent = true;
        let turn = self.turn.take();
        let interrupted = turn.as_ref().is_some_and(|turn| turn.interrupted);
        let steered = turn.as_ref().is_some_and(|turn| turn.steered);
        let why = match &result {
            Err(message) => format!("the turn ended before it was answered ({message})"),
            Ok(_) => "the turn ended before it was answered".to_owned(),
        };
        self.withdraw_approvals(&why);
        self.status.link = LinkState::Ready;
        match result {
            Ok(acp::StopReason::EndTurn) => {}
            Ok(acp::StopReason::Cancelled) => {
                self.transcript.fail_unfinished_tools();
                if self.restarted_in_turn {
                    self.notice(
                        NoticeLevel::Warning,
                        "the turn was interrupted when the worker stopped; it was not re-sent. Send it again to retry.",
                    );
                } else if steered {
                    self.notice(NoticeLevel::Info, "interrupted to send your new message");
                } else if interrupted {
                    self.notice(
                        NoticeLevel::Warning,
                        "interrupted — tell the agent what to do instead",
                    );
                } else {
                    self.notice(NoticeLevel::Warning, "the turn was cancelled");
                }
            }
            Ok(acp::StopReason::MaxTokens) => {
                self.notice(NoticeLevel::Warning, "the model stopped: it reached its output limit")
            }
            Ok(acp::StopReason::MaxTurnRequests) => self.notice(
                NoticeLevel::Warning,
                "stopped after the most model requests a turn may make (max_turns)",
            ),
            Ok(acp::StopReason::Refusal) => {
                self.notice(NoticeLevel::Warning, "the model refused to continue")
            }
            Ok(_) => {}
            Err(message) => {
                self.transcript.fail_unfinished_tools();
                self.notice(NoticeLevel::Error, format!("the turn failed: {message}"));
            }
        }
        self.restarted_in_turn = false;
        // The turn may have made or removed files: a mention list in use is refreshed.
        if self.files.is_some() {
            self.list_files();
        }
        self.pump();
    }

    /// `/compact`: summarise the older conversation now (between turns).
    pub(crate) fn compact(&mut self) {
        let (Some(connection), Some(id)) = (&self.connection, self.session_id()) else {
            self.notice(NoticeLevel::Info, "nothing to compact yet");
            return;
        };
        if self.turn.is_some() || self.compacting {
            self.notice(NoticeLevel::Warning, "compact after the turn ends (esc interrupts it)");
            return;
        }
        client::compact(connection, id.to_owned(), self.events.clone());
        self.compacting = true;
        self.compaction_noticed = false;
        self.status.link = LinkState::Working;
    }

    fn compacted(&mut self, result: Result<acp::kestrel::CompactSessionResponse, String>) {
        self.compacting = false;
        self.status.link = LinkState::Ready;
        match result {
            Ok(response) if response.compacted => {
                // Unless the worker's own notice said it already.
                if !self.compaction_noticed {
                    self.notice(
                        NoticeLevel::Info,
                        format!(
                            "the conversation was compacted: about {} → {} tokens of context",
                            crate::status::compact(response.tokens_before),
                            crate::status::compact(response.tokens_after)
                        ),
                    );
                }
            }
            Ok(response) => {
                let reason = response.reason.unwrap_or_else(|| "nothing to compact".into());
                self.notice(NoticeLevel::Info, format!("not compacted: {reason}"));
            }
            Err(message) => {
                self.notice(NoticeLevel::Error, format!("compaction failed: {message}"))
            }
        }
        self.pump();
    }
}

#[cfg(test)]
mod tests;
