//! The entry point and the event loop. Order matters for start-up time: the terminal is
//! set up and the first frame drawn before anything touches the disk or the network (or
//! the async runtime is built), while the daemon is connected (started if needed) in the
//! background. Keys are read from right after raw mode, on a thread of their own that
//! starts while the first frame is built (never holding it back): keys typed before or
//! while it was drawn are drawn right after it, as soon as the runtime their handling
//! needs is built, before anything else. Frames are drawn after input at once and
//! otherwise at most every [`FRAME`], so a fast stream does not redraw per token.

use crate::app::{App, TerminalRequest};
use crate::error::TuiError;
use crate::event::AppEvent;
use crate::highlight;
use crate::terminal;
use crate::ui;
use kestrel_store::KestrelHome;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The shortest time between two frames caused by streamed output.
const FRAME: Duration = Duration::from_millis(16);
/// How often the working indicator moves.
const TICK: Duration = Duration::from_millis(120);
/// Events handled before a frame is drawn, so a burst does not starve drawing.
const BATCH: usize = 512;

/// Which session `kestrel resume` opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeTarget {
    /// A session id or a unique prefix of one.
    Id(String),
    /// The newest session in the current directory.
    Last,
}

/// How to start the TUI.
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// The `kestrel` binary, run as `kestrel daemon` when no daemon listens.
    pub program: PathBuf,
    /// The workspace of new sessions.
    pub cwd: PathBuf,
    pub resume: Option<ResumeTarget>,
    /// `--mode` for every session it creates (over KESTREL_MODE and the config).
    pub mode: Option<String>,
    /// `--model` as PROVIDER/MODEL for every session it creates (over KESTREL_MODEL).
    pub model: Option<String>,
}

/// How the TUI ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuiExit {
    /// The session that was open, to resume later.
    pub session_id: Option<String>,
    /// The signal that ended it (SIGTERM, SIGHUP), if one did.
    pub signal: Option<i32>,
}

/// Runs the interactive UI until the user quits or a signal ends it. The terminal is
/// restored on every way out, a panic included.
///
/// Fails when KESTREL_MODE (with no `--mode`) is not a mode, when stdin or stdout is not
/// a terminal, or when the terminal cannot be set up.
pub fn run(options: StartOptions) -> Result<TuiExit, TuiError> {
    if options.mode.is_none() {
        check_env_mode()?;
    }
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(TuiError::NotATerminal);
    }
    let home = KestrelHome::from_env()?;
    let result = paint_then_run(options, home);
    terminal::restore();
    result
}

/// A bad KESTREL_MODE is refused before the UI starts, like a bad `--mode`, instead of
/// failing every session it opens.
fn check_env_mode() -> Result<(), TuiError> {
    match std::env::var("KESTREL_MODE") {
        Ok(mode) if !mode.is_empty() => mode
            .parse::<kestrel_protocol::Mode>()
            .map(drop)
            .map_err(|message| TuiError::BadEnv { variable: "KESTREL_MODE", message }),
        Ok(_) | Err(_) => Ok(()),
    }
}

/// The first frame comes before anything else is built (the async runtime included);
/// the input thread starts first, so that its start-up overlaps the frame's.
fn paint_then_run(options: StartOptions, home: KestrelHome) -> Result<TuiExit, TuiError> {
    let mut screen = terminal::enter()?;
    let mut input = spawn_input_reader();
    let (events, receiver) = mpsc::channel::<AppEvent>(1024);
    let mut app = App::new(options, home, events.clone());
    screen.draw(|frame| ui::draw(frame, &mut app))?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let context = runtime.enter();
    app.start();
    // Keys typed before or during the first frame (handling a key may start a task).
    if take_typed(&mut app, &mut input) && !app.should_quit {
        screen.draw(|frame| ui::draw(frame, &mut app))?;
    }
    drop(context);
    let result = runtime.block_on(run_loop(screen, app, events, receiver, input));
    // Background tasks (a connect in progress) must not hold the exit.
    runtime.shutdown_background();
    result
}

/// Hands the keys read so far to the app, without waiting for more; true if there were
/// any. What they ask of the terminal or the loop (quit, suspend) is done by the loop.
/// Runs in the runtime's context.
fn take_typed(app: &mut App, input: &mut mpsc::Receiver<crossterm::event::Event>) -> bool {
    let mut any = false;
    while !app.should_quit
        && let Ok(event) = input.try_recv()
    {
        app.handle_terminal_event(event);
        any = true;
    }
    any
}

async fn run_loop(
    mut screen: terminal::Screen,
    mut app: App,
    events: mpsc::Sender<AppEvent>,
    mut receiver: mpsc::Receiver<AppEvent>,
    mut input: mpsc::Receiver<crossterm::event::Event>,
) -> Result<TuiExit, TuiError> {
    let redraw = events.clone();
    highlight::on_ready(move || {
        let _ = redraw.try_send(AppEvent::Redraw);
    });
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut last_frame = Instant::now();
    // The last frame that showed the daemon's updates: streamed output is drawn at most
    // every FRAME counted from it, so the first chunk after a keypress (the reply to
    // Enter) is drawn at once instead of waiting out the keypress's frame.
    let mut last_update_frame: Option<Instant> = None;
    let mut dirty = false;
    let mut exit_signal = None;
    // Set by the wait at the end of each turn of the loop; what keys typed during start-up
    // asked for (quit, suspend) is done at the top of the first.
    let mut draw_now = false;
    loop {
        if app.should_quit {
            break;
        }
        match app.terminal_request.take() {
            Some(TerminalRequest::Clear) => terminal::repaint(&mut screen)?,
            Some(TerminalRequest::Suspend) => terminal::suspend(&mut screen)?,
            None => {}
        }
        let update_due = last_update_frame.map_or(last_frame, |at| at + FRAME);
        let urgent = std::mem::take(&mut app.urgent);
        if std::mem::take(&mut draw_now) || (dirty && (urgent || Instant::now() >= update_due)) {
            if std::mem::take(&mut app.bell) {
                // Sent with the frame (ratatui flushes after drawing).
                let _ = screen.backend_mut().write_all(b"\x07");
            }
            screen.draw(|frame| ui::draw(frame, &mut app))?;
            app.frame_flushed();
            last_frame = Instant::now();
            if std::mem::take(&mut dirty) {
                last_update_frame = Some(last_frame);
            }
        }
        let update_due = last_update_frame.map_or(last_frame, |at| at + FRAME);
        let deadline = if dirty {
            update_due
        } else if app.animating() {
            last_frame + TICK
        } else {
            Instant::now() + Duration::from_secs(3600)
        };
        tokio::select! {
            biased;
            _ = terminate.recv() => { exit_signal = Some(libc::SIGTERM); break; }
            _ = hangup.recv() => { exit_signal = Some(libc::SIGHUP); break; }
            _ = interrupt.recv() => { exit_signal = Some(libc::SIGINT); break; }
            key = input.recv() => match key {
                Some(event) => {
                    app.handle_terminal_event(event);
                    // Keys that arrived together (fast typing, a paste without bracketed
                    // paste) are drawn in one frame.
                    for _ in 0..BATCH {
                        if app.should_quit {
                            break;
                        }
                        match input.try_recv() {
                            Ok(event) => app.handle_terminal_event(event),
                            Err(_) => break,
                        }
                    }
                    draw_now = true;
                }
                // The terminal is gone.
                None => break,
            },
            event = receiver.recv() => {
                if let Some(event) = event {
                    app.handle_event(event);
                    for _ in 0..BATCH {
                        match receiver.try_recv() {
                            Ok(event) => app.handle_event(event),
                            Err(_) => break,
                        }
                    }
                    dirty = true;
                }
            }
            _ = tokio::time::sleep_until(deadline) => draw_now = true,
        }
    }
    terminal::restore();
    Ok(TuiExit { session_id: app.session_id().map(str::to_owned), signal: exit_signal })
}

/// Reads terminal events on a thread of its own (crossterm's reads block) and hands them
/// to the loop. The thread ends with the process, or when the terminal fails.
fn spawn_input_reader() -> mpsc::Receiver<crossterm::event::Event> {
    let (sender, receiver) = mpsc::channel(1024);
    let _ = std::thread::Builder::new().name("kestrel-input".into()).spawn(move || {
        while let Ok(event) = crossterm::event::read() {
            if sender.blocking_send(event).is_err() {
                break;
            }
        }
    });
    receiver
}
