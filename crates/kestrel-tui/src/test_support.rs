//! Builds an [`App`] for unit tests: no daemon, a temp home, prompts made by hand.

use crate::app::App;
use crate::approval::Approval;
use crate::event::AppEvent;
use crate::run::StartOptions;
use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::RequestId;
use kestrel_store::KestrelHome;
use serde_json::json;
use std::path::Path;
use tokio::sync::mpsc;

/// An app with no connection (and the temp dir holding its home), and the receiver of
/// its events.
pub(crate) fn app() -> (App, tempfile::TempDir, mpsc::Receiver<AppEvent>) {
    let dir = tempfile::tempdir().unwrap();
    let (events, receiver) = mpsc::channel(64);
    let options = StartOptions {
        program: "kestrel".into(),
        cwd: dir.path().to_path_buf(),
        resume: None,
        mode: None,
        model: None,
    };
    let app = App::new(options, KestrelHome::at(dir.path().join("home")), events);
    (app, dir, receiver)
}

/// A permission request of session `session` for a shell call (allow once, always,
/// reject), not yet drawn.
pub(crate) fn approval(session: &str) -> Approval {
    let request: acp::RequestPermissionRequest = serde_json::from_value(json!({
        "sessionId": session,
        "toolCall": {"toolCallId": "c1", "title": "shell: rm -rf build", "name": "shell",
                     "rawInput": {"command": "rm -rf build"}},
        "options": [
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow_always", "name": "Always allow shell", "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"}
        ]
    }))
    .unwrap();
    Approval::new(RequestId::Number(7), request, Path::new("/w"))
}

pub(crate) fn key(code: KeyCode) -> Event {
    Event::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub(crate) fn ctrl(ch: char) -> Event {
    Event::Key(KeyEvent::new(KeyCode::Char(ch), KeyModifiers::CONTROL))
}

/// Types `text` key by key.
pub(crate) fn type_text(app: &mut App, text: &str) {
    for ch in text.chars() {
        app.handle_terminal_event(key(KeyCode::Char(ch)));
    }
}

/// The screen a 100x30 terminal would show.
pub(crate) fn screen(app: &mut App) -> String {
    let backend = ratatui::backend::TestBackend::new(100, 30);
    let mut terminal = ratatui::Terminal::new(backend).unwrap();
    terminal.draw(|frame| crate::ui::draw(frame, app)).unwrap();
    let buffer = terminal.backend().buffer();
    let mut text = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            text.push_str(buffer[(x, y)].symbol());
        }
        text.push('\n');
    }
    text
}

/// A connection to a fake daemon, and the lines the app sends it.
pub(crate) fn connect(
    app: &mut App,
) -> (tokio::task::JoinHandle<()>, mpsc::UnboundedReceiver<serde_json::Value>) {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(ours);
    let (connection, _incoming) = kestrel_protocol::jsonrpc::Connection::start(read, write);
    app.connection = Some(connection);
    let (sent, received) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(theirs).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Ok(value) = serde_json::from_str(&line) {
                let _ = sent.send(value);
            }
        }
    });
    (task, received)
}
