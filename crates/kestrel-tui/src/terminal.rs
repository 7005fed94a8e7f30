//! Terminal setup and restore. The TUI runs full-screen on the alternate screen, in raw
//! mode, with bracketed paste and (where the terminal has it) the kitty keyboard
//! protocol's unambiguous keys (Shift+Enter). Restoring is idempotent and runs on every
//! way out: normal exit, panic (hook), SIGTERM/SIGHUP (the run loop), suspend.

use crossterm::event::{
    DisableBracketedPaste, EnableBracketedPaste, KeyboardEnhancementFlags,
    PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{self, BufWriter, Stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

/// The terminal the UI draws on.
pub(crate) type Screen = Terminal<CrosstermBackend<BufWriter<Stdout>>>;

/// A frame is written in one go (ratatui flushes after each draw), not in stdout's
/// small line-buffer pieces that a terminal could show half-drawn.
const OUTPUT_BUFFER: usize = 64 * 1024;

/// Whether the terminal is in our mode (so restore has work to do).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

/// The exit code after a panic (Rust's own for a panicking main).
const PANIC_EXIT: i32 = 101;

/// Puts the terminal into the UI's mode and returns it to draw on. Installs the panic
/// hook (see [`on_panic`]).
///
/// Fails when stdout is not a terminal that accepts raw mode.
pub(crate) fn enter() -> io::Result<Screen> {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
            on_panic();
        }));
    });
    set_modes()?;
    let output = BufWriter::with_capacity(OUTPUT_BUFFER, io::stdout());
    // The cursor is hidden by `set_modes` and by every draw: no write of its own here.
    Terminal::new(CrosstermBackend::new(output))
}

fn set_modes() -> io::Result<()> {
    enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    execute!(
        io::stdout(),
        EnterAlternateScreen,
        EnableBracketedPaste,
        PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES),
        cursor::Hide
    )
}

/// Gives the terminal back as it was: main screen, cooked mode, cursor shown. Safe to
/// call any number of times, from any thread.
pub(crate) fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let _ = execute!(
        io::stdout(),
        PopKeyboardEnhancementFlags,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        cursor::Show
    );
    let _ = disable_raw_mode();
}

/// After a panic on any thread, the terminal restored and the message printed: the
/// process ends. A panic in a background task would otherwise be caught by tokio and
/// leave the UI running on a cooked terminal (or, on the input thread, a UI that no
/// longer reads keys); a half-working UI is worse than a clear exit. The session
/// itself lives in the daemon and can be resumed.
fn on_panic() {
    let message =
        b"kestrel: the UI stopped after an internal error (above); the terminal was restored. \
Your session keeps running in the daemon: `kestrel resume --last` reopens it.\n";
    let mut stderr = io::stderr();
    let _ = io::Write::write_all(&mut stderr, message);
    let _ = io::Write::flush(&mut stderr);
    std::process::exit(PANIC_EXIT);
}

/// Stops the process (ctrl+z) with the terminal restored, and takes it back when the
/// shell continues it.
pub(crate) fn suspend(screen: &mut Screen) -> io::Result<()> {
    restore();
    // SAFETY: raise(3) only sends a signal to this process.
    unsafe {
        libc::raise(libc::SIGTSTP);
    }
    set_modes()?;
    repaint(screen)
}

/// Clears the screen so that the next draw paints every cell. Unlike
/// `Terminal::clear`, it asks the terminal nothing (a cursor position query would wait
/// on the input thread, which holds the terminal's input).
pub(crate) fn repaint(screen: &mut Screen) -> io::Result<()> {
    let size = screen.size()?;
    screen.resize(ratatui::layout::Rect::new(0, 0, size.width, size.height))
}
