//! What slash commands and picker choices do.

use crate::app::{App, SessionState};
use crate::cell::{Cell, InfoBody, NoticeLevel};
use crate::client;
use crate::commands::{self, Builtin, SlashCommand};
use crate::event::{AppEvent, SessionEntry, SessionsPurpose};
use crate::picker::{Picker, PickerItem, PickerKind};
use crate::status::{LinkState, compact};
use crate::theme;
use kestrel_protocol::Mode;
use ratatui::text::{Line, Span};

/// The starter AGENTS.md `/init` writes.
const AGENTS_TEMPLATE: &str = "# AGENTS.md

Instructions for coding agents working in this repository.

## Project

- What this project is and how it is laid out (main directories, entry points).

## Build and test

- Build: `...`
- Test: `...`
- Lint and format: `...`

## Conventions

- Code style, naming, error handling, and anything a newcomer gets wrong.

## Boundaries

- Files or directories not to touch, commands not to run.
";

impl App {
    /// Runs `/name args`. Returns false when `text` is not a known command.
    pub(crate) fn run_slash(&mut self, text: &str) -> bool {
        let Some((command, args)) = commands::parse(text, &self.custom_commands) else {
            return false;
        };
        match command {
            SlashCommand::Custom(index) => {
                if let Some(custom) = self.custom_commands.get(index) {
                    let prompt = commands::expand(&custom.template, &args);
                    self.send_prompt(crate::composer::Prompt::text(prompt));
                }
            }
            SlashCommand::Builtin(builtin) => self.run_builtin(builtin, &args),
        }
        true
    }

    fn run_builtin(&mut self, builtin: Builtin, args: &str) {
        match builtin {
            Builtin::Help => self.show_help(),
            Builtin::Model => {
                if args.is_empty() {
                    self.open_picker(PickerKind::Model);
                } else {
                    self.choose(PickerKind::Model, args.to_owned());
                }
            }
            Builtin::Mode => {
                if args.is_empty() {
                    self.open_picker(PickerKind::Mode);
                } else {
                    self.choose(PickerKind::Mode, args.to_owned());
                }
            }
            Builtin::New => self.new_session(),
            Builtin::Resume => self.list_sessions(SessionsPurpose::Resume),
            Builtin::Sessions => self.list_sessions(SessionsPurpose::Browse),
            Builtin::Compact => self.compact(),
            Builtin::Undo => self.undo(args),
            Builtin::Diff => self.show_diff(),
            Builtin::Status => self.show_status(),
            Builtin::Cost => self.show_cost(),
            Builtin::Init => self.write_agents_md(),
            Builtin::Swarm => self.open_swarm(),
            Builtin::Quit => self.should_quit = true,
        }
    }

    /// `/undo [N] [--force] [--dry-run]`: puts back the files of the last N turns
    /// (`_kestrel/session/undo`), between turns.
    fn undo(&mut self, args: &str) {
        let mut params = serde_json::json!({});
        for word in args.split_whitespace() {
            match (word, word.parse::<u64>()) {
                (_, Ok(turns)) if turns > 0 => params["turns"] = turns.into(),
                ("--force" | "force", _) => params["force"] = true.into(),
                ("--dry-run" | "dry-run", _) => params["dryRun"] = true.into(),
                _ => {
                    let message = format!("/undo {args}: usage is /undo [N] [--force] [--dry-run]");
                    return self.notice(NoticeLevel::Error, message);
                }
            }
        }
        let (Some(connection), Some(id)) = (&self.connection, self.session_id()) else {
            return self.notice(NoticeLevel::Info, "nothing to undo: no session yet");
        };
        if self.turn.is_some() {
            return self
                .notice(NoticeLevel::Warning, "undo after the turn ends (esc interrupts it)");
        }
        params["sessionId"] = id.into();
        let (connection, events, session_id) =
            (connection.clone(), self.events.clone(), id.to_owned());
        tokio::spawn(async move {
            let method = kestrel_protocol::acp::kestrel::SESSION_UNDO;
            let result = match connection.request(method, params).await {
                Ok(answer) => serde_json::from_value(answer)
                    .map_err(|error| format!("bad undo answer: {error}")),
                Err(error) => Err(error.message),
            };
            let _ = events.send(AppEvent::Undone { session_id, result }).await;
        });
    }

    /// Shows what `/undo` put back, or why it did nothing.
    pub(crate) fn undone(
        &mut self,
        result: Result<kestrel_protocol::acp::kestrel::UndoSessionResponse, String>,
    ) {
        use kestrel_protocol::acp::kestrel::UndoAction;
        let response = match result {
            Ok(response) => response,
            Err(message) => {
                let message = message.replace("rerun with --force", "/undo --force");
                return self.notice(NoticeLevel::Error, message);
            }
        };
        let cwd = self.session_cwd.clone();
        let shown =
            |path: &std::path::Path| path.strip_prefix(&cwd).unwrap_or(path).display().to_string();
        let turns: Vec<String> = response.turns.iter().map(u64::to_string).collect();
        let mut text = format!(
            "{} turn{} {}:",
            if response.dry_run { "/undo would undo" } else { "undid" },
            if turns.len() == 1 { "" } else { "s" },
            turns.join(", ")
        );
        for file in &response.files {
            let action = match (file.action, response.dry_run) {
                (UndoAction::Restored, false) => "restored",
                (UndoAction::Restored, true) => "would restore",
                (UndoAction::Removed, false) => "removed",
                (UndoAction::Removed, true) => "would remove",
            };
            text.push_str(&format!("\n  {action} {}", shown(&file.path)));
        }
        for skipped in &response.skipped {
            text.push_str(&format!(
                "\n  not restored {}: {}",
                shown(&skipped.path),
                skipped.reason
            ));
        }
        let level =
            if response.skipped.is_empty() { NoticeLevel::Info } else { NoticeLevel::Warning };
        self.notice(level, text);
    }

    fn show_help(&mut self) {
        let mut lines = Vec::new();
        for item in commands::all(&self.custom_commands) {
            lines.push(Line::from(vec![
                Span::styled(format!("/{:<10}", item.name), theme::accent()),
                Span::raw(" "),
                Span::styled(item.description, theme::dim()),
            ]));
        }
        lines.push(Line::default());
        for (keys, what) in [
            ("enter", "send (queued while a turn runs)"),
            ("tab", "while a turn runs: interrupt it and send now"),
            ("ctrl+j, shift/alt+enter", "new line"),
            ("↑ ↓", "earlier prompts"),
            ("esc", "interrupt the turn"),
            ("esc esc", "edit an earlier message (forks the session)"),
            ("@", "mention a file; paste an image's path to attach it"),
            ("pgup pgdn", "scroll the conversation"),
            ("ctrl+o", "expand tool output and reasoning"),
            ("ctrl+l", "redraw"),
            ("ctrl+c twice", "quit"),
        ] {
            lines.push(Line::from(vec![
                Span::styled(format!("{keys:<24}"), theme::bold()),
                Span::styled(what, theme::dim()),
            ]));
        }
        self.transcript
            .push(Cell::Info { title: Some("Commands".into()), body: InfoBody::Lines(lines) });
        self.transcript.scroll_to_bottom();
    }

    fn show_status(&mut self) {
        let session = match &self.session {
            SessionState::Open(id) => id.clone(),
            SessionState::Opening(_) => "opening…".into(),
            SessionState::None => "none yet (starts with the first prompt)".into(),
        };
        let (link, _) = self.status.link_text();
        let daemon = match &self.status.link {
            LinkState::Lost(reason) => format!("unreachable: {reason}"),
            LinkState::Connecting => "connecting".into(),
            LinkState::Connected | LinkState::Opening | LinkState::Ready | LinkState::Working => {
                "connected".into()
            }
        };
        let rows = [
            ("session", session),
            ("directory", self.session_cwd.display().to_string()),
            ("model", self.status.model.clone().unwrap_or_else(|| "config default".into())),
            ("mode", self.status.mode.clone().unwrap_or_else(|| "ask".into())),
            (
                "context",
                match self.status.context_size {
                    0 => "no model request yet".into(),
                    size => {
                        format!("{} of {} tokens", compact(self.status.context_used), compact(size))
                    }
                },
            ),
            ("sandbox", sandbox_text(self.network)),
            ("daemon", daemon),
            (
                "worker",
                format!(
                    "{} (restarts: {})",
                    link.trim_start_matches(['●', '○', '◐', '✗', ' ']),
                    self.status.restarts
                ),
            ),
            ("home", self.home.root().display().to_string()),
        ];
        let lines = rows
            .into_iter()
            .map(|(name, value)| {
                Line::from(vec![
                    Span::styled(format!("{name:<10}"), theme::bold()),
                    Span::raw(value),
                ])
            })
            .collect();
        self.transcript
            .push(Cell::Info { title: Some("Status".into()), body: InfoBody::Lines(lines) });
        self.transcript.scroll_to_bottom();
    }

    fn show_cost(&mut self) {
        let cost = self.status.cost.map_or("unknown".to_owned(), |cost| format!("${cost:.4}"));
        let lines = vec![
            Line::from(vec![
                Span::styled("tokens    ", theme::bold()),
                Span::raw(format!(
                    "{} (the session's model requests)",
                    compact(self.status.tokens)
                )),
            ]),
            Line::from(vec![Span::styled("cost      ", theme::bold()), Span::raw(cost)]),
        ];
        self.transcript
            .push(Cell::Info { title: Some("Cost".into()), body: InfoBody::Lines(lines) });
        self.transcript.scroll_to_bottom();
    }

    fn show_diff(&mut self) {
        let cwd = self.session_cwd.clone();
        let events = self.events.clone();
        tokio::spawn(async move {
            let disabled = repository_filters(&cwd).await;
            let output = diff_command(&cwd, &disabled).output().await;
            let event = match output {
                Ok(output) if output.status.success() => {
                    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
                    text.push_str(&untracked_patch(&cwd).await);
                    if text.trim().is_empty() {
                        AppEvent::LocalOutput {
                            title: "Diff".into(),
                            text: "No uncommitted changes.".into(),
                            is_patch: false,
                            is_error: false,
                        }
                    } else {
                        AppEvent::LocalOutput {
                            title: "Diff".into(),
                            text,
                            is_patch: true,
                            is_error: false,
                        }
                    }
                }
                Ok(output) => AppEvent::LocalOutput {
                    title: "/diff".into(),
                    text: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
                    is_patch: false,
                    is_error: true,
                },
                Err(error) => AppEvent::LocalOutput {
                    title: "/diff".into(),
                    text: format!("cannot run git: {error}"),
                    is_patch: false,
                    is_error: true,
                },
            };
            let _ = events.send(event).await;
        });
    }

    fn write_agents_md(&mut self) {
        let path = self.session_cwd.join("AGENTS.md");
        let events = self.events.clone();
        tokio::task::spawn_blocking(move || {
            let result =
                std::fs::OpenOptions::new().write(true).create_new(true).open(&path).and_then(
                    |mut file| std::io::Write::write_all(&mut file, AGENTS_TEMPLATE.as_bytes()),
                );
            let event = match result {
                Ok(()) => AppEvent::LocalOutput {
                    title: "Init".into(),
                    text: format!(
                        "Wrote a starter `{}`: fill in how to build and test, or ask me to.",
                        path.display()
                    ),
                    is_patch: false,
                    is_error: false,
                },
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    AppEvent::LocalOutput {
                        title: "/init".into(),
                        text: format!("{} already exists; left as it is", path.display()),
                        is_patch: false,
                        is_error: true,
                    }
                }
                Err(error) => AppEvent::LocalOutput {
                    title: "/init".into(),
                    text: format!("cannot write {}: {error}", path.display()),
                    is_patch: false,
                    is_error: true,
                },
            };
            let _ = events.blocking_send(event);
        });
    }

    /// Leaves the current session (it keeps running in the daemon) for a new one,
    /// started with the next prompt.
    pub(crate) fn new_session(&mut self) {
        // The model the session used (a /model choice included) carries over.
        let model = self.status.model.clone();
        let left = self.leave_session();
        if self.pending_model.is_none() {
            self.pending_model = model;
        }
        self.set_session_cwd(self.cwd.clone());
        self.transcript.clear();
        self.push_welcome();
        if let Some(text) = left {
            self.notice(NoticeLevel::Info, text);
        }
    }

    /// Leaves the current session for `id` (loaded, or attached when it is live).
    pub(crate) fn switch_to_session(&mut self, id: String, cwd: std::path::PathBuf) {
        let left = self.leave_session();
        self.transcript.clear();
        if let Some(text) = left {
            self.notice(NoticeLevel::Info, text);
        }
        self.set_session_cwd(cwd.clone());
        self.resume_target = Some((id, cwd));
        self.open_session_if_needed();
    }

    /// Detaches from the session and its subagents: a running turn goes on in the daemon
    /// (a waiting approval is shown to the next client); prompts queued here go back to
    /// the composer. Returns what to tell the user when the left session still runs.
    fn leave_session(&mut self) -> Option<String> {
        let mut left = None;
        if let (Some(connection), SessionState::Open(id)) = (&self.connection, &self.session) {
            client::detach(connection, id);
            // Their prompts would pop up in the next session otherwise.
            for child in self.children.keys() {
                client::detach(connection, child);
            }
            if self.turn.is_some() || !self.approvals.is_empty() {
                left = Some(format!("session {id} keeps running; /resume to answer its prompts"));
            }
        }
        self.children.clear();
        self.session = SessionState::None;
        self.turn = None;
        self.requeue_into_composer();
        self.approvals.clear();
        self.modes = None;
        self.config_options.clear();
        self.status.reset_usage();
        if self.connection.is_some() {
            self.status.link = LinkState::Connected;
        }
        left
    }

    fn list_sessions(&mut self, purpose: SessionsPurpose) {
        match &self.connection {
            Some(connection) => client::list_sessions(connection, purpose, self.events.clone()),
            None => self.notice(NoticeLevel::Warning, "not connected to the daemon yet"),
        }
    }

    pub(crate) fn sessions_listed(
        &mut self,
        purpose: SessionsPurpose,
        result: Result<Vec<SessionEntry>, String>,
    ) {
        let sessions = match result {
            Ok(sessions) => sessions,
            Err(message) => {
                self.notice(NoticeLevel::Error, format!("cannot list sessions: {message}"));
                return;
            }
        };
        let current = self.session_id().map(str::to_owned);
        let item = |entry: &SessionEntry, depth: usize| PickerItem {
            label: entry
                .title
                .clone()
                .map(|title| title.lines().next().unwrap_or_default().to_owned())
                .unwrap_or_else(|| "(no prompt yet)".into()),
            detail: format!(
                "{} · {}{}",
                entry.updated_at.as_deref().map(short_date).unwrap_or_default(),
                entry.cwd.display(),
                if entry.live { " · live" } else { "" }
            ),
            value: format!("{}\n{}", entry.session_id, entry.cwd.display()),
            depth,
        };
        let items: Vec<PickerItem> = match purpose {
            SessionsPurpose::Resume => sessions
                .iter()
                .filter(|entry| {
                    entry.parent.is_none() && Some(&entry.session_id) != current.as_ref()
                })
                .map(|entry| item(entry, 0))
                .collect(),
            SessionsPurpose::Browse => {
                let mut items = Vec::new();
                for top in sessions.iter().filter(|entry| entry.parent.is_none()) {
                    items.push(item(top, 0));
                    nest(&sessions, &top.session_id, 1, &mut items, &item);
                }
                items
            }
        };
        let (kind, title) = match purpose {
            SessionsPurpose::Resume => (PickerKind::Resume, "Resume a session"),
            SessionsPurpose::Browse => (PickerKind::Sessions, "Sessions"),
        };
        self.picker =
            Some(Picker::new(kind, title, items, None).with_empty_text("no other sessions yet"));
    }

    /// Opens a picker; the model picker needs the worker's choices, so it waits for the
    /// session to open.
    pub(crate) fn open_picker(&mut self, kind: PickerKind) {
        match kind {
            PickerKind::Model => match self.model_choices() {
                Some((current, choices)) => {
                    let items = choices
                        .into_iter()
                        .map(|(value, name)| PickerItem {
                            detail: if name == value { String::new() } else { value.clone() },
                            label: name,
                            value,
                            depth: 0,
                        })
                        .collect();
                    let picker = Picker::new(kind, "Model", items, Some(current));
                    self.picker = Some(picker.with_free_text());
                }
                None => {
                    self.picker_after_open = Some(kind);
                    self.open_session_if_needed();
                    if self.connection.is_none() {
                        self.notice(
                            NoticeLevel::Info,
                            "the model list comes once the daemon is up…",
                        );
                    }
                }
            },
            PickerKind::Mode => {
                let items = match &self.modes {
                    Some(modes) => modes
                        .available_modes
                        .iter()
                        .map(|mode| PickerItem {
                            label: mode.id.0.to_string(),
                            detail: mode.description.clone().unwrap_or_default(),
                            value: mode.id.0.to_string(),
                            depth: 0,
                        })
                        .collect(),
                    None => Mode::ALL
                        .iter()
                        .map(|mode| PickerItem {
                            label: mode.as_str().to_owned(),
                            detail: mode_description(*mode).to_owned(),
                            value: mode.as_str().to_owned(),
                            depth: 0,
                        })
                        .collect(),
                };
                let current = self.status.mode.clone().or_else(|| Some("ask".into()));
                self.picker = Some(Picker::new(kind, "Mode", items, current));
            }
            PickerKind::Resume => self.list_sessions(SessionsPurpose::Resume),
            PickerKind::Sessions => self.list_sessions(SessionsPurpose::Browse),
            PickerKind::Rewind => self.start_rewind(),
            PickerKind::FirstModel => self.open_picker(PickerKind::Model),
        }
    }

    /// A picker of the models the environment offers (nothing when none was found: the
    /// empty screen already says how to configure one).
    pub(crate) fn offer_models(&mut self, offered: Vec<crate::first_run::OfferedModel>) {
        if offered.is_empty() || self.status.model.is_some() {
            return;
        }
        let items = offered
            .into_iter()
            .map(|offer| PickerItem {
                label: offer.model.clone(),
                detail: offer.reason,
                value: offer.model,
                depth: 0,
            })
            .collect();
        let title = "No model configured: choose one (saved to config.toml)";
        self.picker = Some(Picker::new(PickerKind::FirstModel, title, items, None));
    }

    /// Applies a picker's choice.
    pub(crate) fn choose(&mut self, kind: PickerKind, value: String) {
        match kind {
            PickerKind::FirstModel => {
                match crate::first_run::save_model(&self.home, &value) {
                    Ok(path) => self.notice(
                        NoticeLevel::Info,
                        format!("model = \"{value}\" saved to {}", path.display()),
                    ),
                    Err(message) => self.notice(NoticeLevel::Error, message),
                }
                self.choose(PickerKind::Model, value);
            }
            PickerKind::Model => match (&self.connection, self.session_id()) {
                (Some(connection), Some(id)) => {
                    client::set_model(connection, id, value, self.events.clone())
                }
                _ => {
                    self.status.model = Some(value.clone());
                    self.pending_model = Some(value);
                }
            },
            PickerKind::Mode => {
                if value.parse::<Mode>().is_err() {
                    self.notice(
                        NoticeLevel::Error,
                        format!("unknown mode `{value}`: read-only, ask, auto or yolo"),
                    );
                    return;
                }
                match (&self.connection, self.session_id()) {
                    (Some(connection), Some(id)) => {
                        client::set_mode(connection, id, value, self.events.clone())
                    }
                    _ => {
                        self.status.mode = Some(value.clone());
                        self.pending_mode = Some(value);
                    }
                }
            }
            PickerKind::Resume | PickerKind::Sessions => {
                let Some((id, cwd)) = value.split_once('\n') else { return };
                self.switch_to_session(id.to_owned(), cwd.into());
            }
            PickerKind::Rewind => self.rewind_to(&value),
        }
    }
}

/// The sandbox backend commands run in here (probed once per process; the worker
/// probes the same machine) and the network setting.
fn sandbox_text(network: bool) -> String {
    let shown = if network { "network on" } else { "network off" };
    match kestrel_platform::Sandbox::detect(network) {
        Ok(sandbox) => format!("{}, {shown}", sandbox.describe()),
        Err(unavailable) => format!("none ({}); {shown}", unavailable.reason),
    }
}

/// What a mode allows, as the worker describes it (shown before a session exists).
fn mode_description(mode: Mode) -> &'static str {
    match mode {
        Mode::ReadOnly => "Reads and searches; changes nothing",
        Mode::Ask => "Asks before file writes and commands",
        Mode::Auto => "Writes inside the workspace and runs sandboxed commands without asking",
        Mode::Yolo => "No checks at all",
    }
}

fn nest(
    sessions: &[SessionEntry],
    parent: &str,
    depth: usize,
    items: &mut Vec<PickerItem>,
    item: &dyn Fn(&SessionEntry, usize) -> PickerItem,
) {
    if depth > 8 {
        return;
    }
    for child in sessions.iter().filter(|entry| entry.parent.as_deref() == Some(parent)) {
        items.push(item(child, depth));
        nest(sessions, &child.session_id, depth + 1, items, item);
    }
}

/// `2025-03-04T05:06:07Z` as `2025-03-04 05:06`.
fn short_date(text: &str) -> String {
    let text = text.replace('T', " ");
    text.chars().take(16).collect()
}

/// `git diff HEAD` for /diff. It runs unconfined in a repository a sandboxed command
/// may have created, so nothing of the repository's config that starts programs is
/// used: no fsmonitor, hooks, external diff or textconv, no status run in submodules,
/// and the filter commands named in `disabled` (config keys) set to nothing.
fn diff_command(cwd: &std::path::Path, disabled: &[String]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("git");
    command
        .args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"])
        .args(["diff", "--no-color", "--no-ext-diff", "--no-textconv"])
        .args(["--ignore-submodules=dirty", "HEAD"])
        .current_dir(cwd)
        .stdin(std::process::Stdio::null());
    // GIT_CONFIG_KEY_n: no quoting problem with any character a driver name may hold.
    command.env("GIT_CONFIG_COUNT", disabled.len().to_string());
    for (index, key) in disabled.iter().enumerate() {
        command.env(format!("GIT_CONFIG_KEY_{index}"), key);
        command.env(format!("GIT_CONFIG_VALUE_{index}"), "");
    }
    command
}

/// Untracked files (not ignored) beneath `cwd` as "new file" patches, after `git diff
/// HEAD`, which leaves them out. Written here from the bytes on disk: no filter or
/// textconv of the repository runs. At most [`UNTRACKED_FILES`] files, each cut at
/// [`UNTRACKED_BYTES`].
async fn untracked_patch(cwd: &std::path::Path) -> String {
    let output = tokio::process::Command::new("git")
        .args(["-c", "core.fsmonitor=false", "ls-files", "--others", "--exclude-standard", "-z"])
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .output()
        .await;
    let Ok(output) = output else { return String::new() };
    let listed = String::from_utf8_lossy(&output.stdout).into_owned();
    let names: Vec<&str> = listed.split('\0').filter(|name| !name.is_empty()).collect();
    let mut patch = String::new();
    for name in names.iter().take(UNTRACKED_FILES) {
        let Ok(bytes) = tokio::fs::read(cwd.join(name)).await else { continue };
        patch.push_str(&format!("diff --git a/{name} b/{name}\nnew file (untracked)\n"));
        if bytes.contains(&0) {
            patch.push_str(&format!("Binary files /dev/null and b/{name} differ\n"));
            continue;
        }
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(UNTRACKED_BYTES)]);
        let lines: Vec<&str> = text.lines().collect();
        patch.push_str(&format!("--- /dev/null\n+++ b/{name}\n@@ -0,0 +1,{} @@\n", lines.len()));
        for line in lines {
            patch.push('+');
            patch.push_str(line);
            patch.push('\n');
        }
        if bytes.len() > UNTRACKED_BYTES {
            patch.push_str(&format!("[{} more bytes not shown]\n", bytes.len() - UNTRACKED_BYTES));
        }
    }
    if names.len() > UNTRACKED_FILES {
        patch.push_str(&format!("[{} more untracked files]\n", names.len() - UNTRACKED_FILES));
    }
    patch
}

/// The most untracked files /diff shows, and the bytes shown of each.
const UNTRACKED_FILES: usize = 100;
const UNTRACKED_BYTES: usize = 64 * 1024;

/// The config keys of every filter command (`filter.<driver>.clean|smudge|process`)
/// the repository at `cwd` sees; reading config runs nothing. Empty when git fails.
async fn repository_filters(cwd: &std::path::Path) -> Vec<String> {
    let output = tokio::process::Command::new("git")
        .args(["config", "--null", "--get-regexp", r"^filter\..*\.(clean|smudge|process)$"])
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .output()
        .await;
    let Ok(output) = output else { return Vec::new() };
    String::from_utf8_lossy(&output.stdout)
        .split('\0')
        .filter_map(|entry| entry.split('\n').next())
        .filter(|key| !key.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{diff_command, repository_filters};
    use std::process::Command;

    #[tokio::test]
    async fn the_diff_command_runs_no_fsmonitor_external_diff_or_filter_of_the_repository() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let status = Command::new("git").args(args).current_dir(dir.path()).status().unwrap();
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q", "."]);
        std::fs::write(dir.path().join("f.txt"), "a\n").unwrap();
        git(&["add", "f.txt"]);
        git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"]);
        std::fs::write(dir.path().join("f.txt"), "b\n").unwrap();
        git(&["config", "core.fsmonitor", "touch FSMONITOR-RAN; false"]);
        git(&["config", "diff.external", "sh -c 'touch EXTDIFF-RAN'"]);
        git(&["config", "filter.x.clean", "touch CLEAN-RAN; cat"]);
        git(&["config", "filter.x.process", "touch PROCESS-RAN"]);
        std::fs::write(dir.path().join(".git/info/attributes"), "* filter=x\n").unwrap();
        let output = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            let disabled = repository_filters(dir.path()).await;
            diff_command(dir.path(), &disabled).output().await
        })
        .await
        .unwrap()
        .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains("-a\n+b"), "{text}");
        assert!(!dir.path().join("FSMONITOR-RAN").exists());
        for ran in ["EXTDIFF-RAN", "CLEAN-RAN", "PROCESS-RAN"] {
            assert!(!dir.path().join(ran).exists(), "{ran}");
        }
    }
}
