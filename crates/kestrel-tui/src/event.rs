//! Everything that reaches the UI loop besides keys: the daemon connection's progress
//! and messages, answers to requests the UI made, and results of background work.

use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::{Connection, Incoming};
use std::path::PathBuf;

/// A session the daemon opened for us (new or loaded).
#[derive(Debug, Clone)]
pub(crate) struct OpenedSession {
    pub(crate) session_id: String,
    pub(crate) cwd: PathBuf,
    pub(crate) modes: Option<acp::SessionModeState>,
    pub(crate) config_options: Vec<acp::SessionConfigOption>,
    /// True for `session/load` (its history was replayed before the answer).
    pub(crate) loaded: bool,
    /// A turn of the session was running when it was attached (another client's, or
    /// one started before this UI): the daemon says when it ends.
    pub(crate) turn_running: bool,
}

/// One session as `session/list` describes it.
#[derive(Debug, Clone)]
pub(crate) struct SessionEntry {
    pub(crate) session_id: String,
    pub(crate) cwd: PathBuf,
    pub(crate) title: Option<String>,
    pub(crate) updated_at: Option<String>,
    pub(crate) parent: Option<String>,
    pub(crate) live: bool,
}

/// What the config says, for the status line before a session exists.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConfigSummary {
    pub(crate) model: Option<String>,
    pub(crate) mode: Option<String>,
    /// `[sandbox] network`.
    pub(crate) network: bool,
    pub(crate) exists: bool,
    pub(crate) error: Option<String>,
}

/// A slash command from a `.md` file.
#[derive(Debug, Clone)]
pub(crate) struct CustomCommand {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) template: String,
}

/// A message for the UI loop.
pub(crate) enum AppEvent {
    /// The daemon answered `initialize`.
    Connected {
        connection: Connection,
        incoming: tokio::sync::mpsc::Receiver<Incoming>,
    },
    /// The daemon could not be reached or started.
    ConnectFailed(String),
    /// A request or notification from the daemon.
    Incoming(Incoming),
    /// The daemon closed the connection.
    Disconnected,
    SessionOpened(OpenedSession),
    SessionFailed(String),
    /// A `session/prompt` finished (stop reason) or failed.
    PromptFinished {
        session_id: String,
        result: Result<acp::StopReason, String>,
    },
    /// A `session/prompt` was refused because a turn of the session runs (another
    /// client's): nothing was sent to the model.
    PromptRefusedBusy {
        session_id: String,
        message: String,
    },
    Sessions {
        purpose: SessionsPurpose,
        result: Result<Vec<SessionEntry>, String>,
    },
    ModeChanged(Result<String, String>),
    ModelChanged(Result<Vec<acp::SessionConfigOption>, String>),
    ConfigLoaded(ConfigSummary),
    /// What the environment offers with no model configured (`first_run`).
    ModelsOffered(Vec<crate::first_run::OfferedModel>),
    CustomCommands(Vec<CustomCommand>),
    FilesListed {
        cwd: std::path::PathBuf,
        files: Vec<String>,
    },
    /// `kestrel resume`: which session to load, or why none.
    ResumeResolved(Result<(String, PathBuf), String>),
    /// A resumed session's tokens and cost so far (from the session index).
    SessionTotals {
        session_id: String,
        tokens: u64,
        cost: f64,
    },
    /// Output of a local command (/diff, /init) for the transcript.
    LocalOutput {
        title: String,
        text: String,
        is_patch: bool,
        is_error: bool,
    },
    /// The session's messages, to pick one to edit (Esc Esc).
    EditableMessages(Result<Vec<crate::rewind::EditableMessage>, String>),
    /// The session was forked to edit a message.
    Forked(Result<crate::rewind::Fork, String>),
    /// `/compact` finished.
    Compacted {
        session_id: String,
        result: Result<acp::kestrel::CompactSessionResponse, String>,
    },
    /// `/undo` finished.
    Undone {
        session_id: String,
        result: Result<acp::kestrel::UndoSessionResponse, String>,
    },
    /// A subagent's session could not be followed.
    ChildFailed {
        session_id: String,
        message: String,
    },
    /// The answer to a permission prompt could not be sent (the connection was lost).
    AnswerLost {
        title: String,
    },
    /// Try again to attach to the session after losing the daemon.
    Reattach,
    /// A read or lookup of the `/swarm` view finished, or it is time to read again.
    Swarm(crate::swarm_view::SwarmUpdate),
    /// Syntax highlighting became available: redraw.
    Redraw,
}

/// Why sessions were listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionsPurpose {
    Resume,
    Browse,
}
