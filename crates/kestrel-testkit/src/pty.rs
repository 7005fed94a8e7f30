//! A pty screen driver for TUI tests: runs a real program on a pseudo-terminal of a
//! given size, feeds what it writes to a vt100 screen, and lets a test type keys, wait
//! (always bounded) until the screen shows something or stops changing, resize the
//! terminal, and read the screen as plain text. Cursor position reports (`CSI 6 n`) are
//! answered like a terminal would, and bells are counted.

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use std::io::{Read, Write};
use std::num::NonZeroU16;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use vt100;

/// What went wrong driving a pty.
#[derive(Debug, thiserror::Error)]
pub enum PtyError {
    #[error("cannot open a pty or start {program}: {message}")]
    Spawn { program: String, message: String },
    #[error("cannot write to the pty: {0}")]
    Write(#[from] std::io::Error),
    #[error("timed out after {waited:?} waiting for {what}; the screen:\n{screen}")]
    Timeout { what: String, waited: Duration, screen: String },
    #[error("the pty failed: {0}")]
    Pty(String),
}

/// A key to send, as a terminal encodes it (xterm sequences, no kitty protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Enter,
    Esc,
    Tab,
    Backspace,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    /// Control plus a letter (`Ctrl('c')` is ^C).
    Ctrl(char),
}

impl Key {
    /// The bytes a terminal sends for this key.
    pub fn bytes(self) -> Vec<u8> {
        match self {
            Key::Enter => b"\r".to_vec(),
            Key::Esc => b"\x1b".to_vec(),
            Key::Tab => b"\t".to_vec(),
            Key::Backspace => b"\x7f".to_vec(),
            Key::Up => b"\x1b[A".to_vec(),
            Key::Down => b"\x1b[B".to_vec(),
            Key::Right => b"\x1b[C".to_vec(),
            Key::Left => b"\x1b[D".to_vec(),
            Key::PageUp => b"\x1b[5~".to_vec(),
            Key::PageDown => b"\x1b[6~".to_vec(),
            Key::Ctrl(letter) => {
                let letter = letter.to_ascii_lowercase() as u8;
                vec![letter.wrapping_sub(b'a').wrapping_add(1) & 0x1f]
            }
        }
    }
}

/// Terminal behaviour the screen needs answers or counts for.
#[derive(Default)]
struct Terminal {
    bells: usize,
    /// Answers (cursor position reports) to write back to the program.
    replies: Vec<Vec<u8>>,
}

impl vt100::Callbacks for Terminal {
    fn audible_bell(&mut self, _: &mut vt100::Screen) {
        self.bells += 1;
    }

    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        if c == 'n' && i1.is_none() && params.first().and_then(|p| p.first()) == Some(&6) {
            let (row, col) = screen.cursor_position();
            self.replies.push(format!("\x1b[{};{}R", row + 1, col + 1).into_bytes());
        }
    }
}

struct State {
    parser: vt100::Parser<Terminal>,
    /// The program closed its side (it exited).
    closed: bool,
    last_output: Instant,
    /// Bytes received so far.
    received: u64,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

/// A program running on a pty, with its screen.
pub struct Pty {
    master: Box<dyn MasterPty + Send>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    shared: Shared,
    program: String,
}

fn size(rows: u16, cols: u16) -> PtySize {
    PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }
}

fn non_zero(value: u16) -> NonZeroU16 {
    NonZeroU16::new(value).unwrap_or(NonZeroU16::MIN)
}

impl Pty {
    /// Starts `command` (its program, arguments, environment changes and directory; its
    /// stdio settings are ignored) on a `rows` x `cols` pty with `TERM=xterm-256color`.
    ///
    /// Fails when no pty can be opened or the program cannot be started.
    pub fn spawn(command: &std::process::Command, rows: u16, cols: u16) -> Result<Pty, PtyError> {
        let program = command.get_program().to_string_lossy().into_owned();
        let spawn_error = |message: String| PtyError::Spawn { program: program.clone(), message };
        let pair = native_pty_system()
            .openpty(size(rows, cols))
            .map_err(|error| spawn_error(error.to_string()))?;
        let mut builder = CommandBuilder::new(command.get_program());
        builder.args(command.get_args());
        builder.env("TERM", "xterm-256color");
        builder.env_remove("COLORTERM");
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => builder.env(key, value),
                None => builder.env_remove(key),
            }
        }
        if let Some(dir) = command.get_current_dir() {
            builder.cwd(dir);
        }
        let child =
            pair.slave.spawn_command(builder).map_err(|error| spawn_error(error.to_string()))?;
        drop(pair.slave);
        let reader =
            pair.master.try_clone_reader().map_err(|error| spawn_error(error.to_string()))?;
        let writer = pair.master.take_writer().map_err(|error| spawn_error(error.to_string()))?;
        let writer = Arc::new(Mutex::new(writer));
        let parser = vt100::Parser::new_with_callbacks(
            non_zero(rows),
            non_zero(cols),
            0,
            Terminal::default(),
        );
        let shared: Shared = Arc::new((
            Mutex::new(State { parser, closed: false, last_output: Instant::now(), received: 0 }),
            Condvar::new(),
        ));
        let thread_shared = shared.clone();
        let thread_writer = writer.clone();
        std::thread::Builder::new()
            .name("pty-reader".into())
            .spawn(move || read_loop(reader, thread_shared, thread_writer))
            .map_err(|error| spawn_error(error.to_string()))?;
        Ok(Pty { master: pair.master, writer, child, shared, program })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        match self.shared.0.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The program's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.process_id()
    }

    /// Writes raw bytes, as if typed.
    pub fn write(&self, bytes: &[u8]) -> Result<(), PtyError> {
        let mut writer = match self.writer.lock() {
            Ok(writer) => writer,
            Err(poisoned) => poisoned.into_inner(),
        };
        writer.write_all(bytes)?;
        writer.flush()?;
        Ok(())
    }

    /// Types text.
    pub fn type_text(&self, text: &str) -> Result<(), PtyError> {
        self.write(text.as_bytes())
    }

    /// Presses a key.
    pub fn press(&self, key: Key) -> Result<(), PtyError> {
        self.write(&key.bytes())
    }

    /// Pastes text as a terminal with bracketed paste does.
    pub fn paste(&self, text: &str) -> Result<(), PtyError> {
        let mut bytes = b"\x1b[200~".to_vec();
        bytes.extend_from_slice(text.as_bytes());
        bytes.extend_from_slice(b"\x1b[201~");
        self.write(&bytes)
    }

    /// The screen as text: every row, trailing spaces removed, joined by newlines.
    pub fn screen_text(&self) -> String {
        let state = self.state();
        screen_text(state.parser.screen())
    }

    /// The screen's text with its styles marked where they change: `«fg=green,bold»`
    /// names the new style, `«»` is the default again (colours 0-15 by name, others as
    /// `idx196` or `#rrggbb`; attributes bold, dim, italic, underline, inverse).
    pub fn styled_text(&self) -> String {
        let state = self.state();
        styled_text(state.parser.screen())
    }

    /// Runs `inspect` on the vt100 screen (colours, modes, cursor).
    pub fn with_screen<T>(&self, inspect: impl FnOnce(&vt100::Screen) -> T) -> T {
        let state = self.state();
        inspect(state.parser.screen())
    }

    /// Bells rung so far.
    pub fn bells(&self) -> usize {
        self.state().parser.callbacks().bells
    }

    /// Whether the program has closed the pty (it exited).
    pub fn closed(&self) -> bool {
        self.state().closed
    }

    /// Waits until `check` holds for the screen text; fails after `timeout` with the
    /// screen in the error.
    pub fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&str) -> bool,
    ) -> Result<String, PtyError> {
        let deadline = Instant::now() + timeout;
        let (lock, ready) = &*self.shared;
        let mut state = match lock.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        loop {
            let text = screen_text(state.parser.screen());
            if check(&text) {
                return Ok(text);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(PtyError::Timeout {
                    what: what.to_owned(),
                    waited: timeout,
                    screen: text,
                });
            }
            let wait = (deadline - now).min(Duration::from_millis(50));
            state = match ready.wait_timeout(state, wait) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Waits until the screen contains `needle`.
    pub fn wait_for_text(&self, needle: &str, timeout: Duration) -> Result<String, PtyError> {
        self.wait_until(&format!("{needle:?} on screen"), timeout, |text| text.contains(needle))
    }

    /// Waits until the screen's text has not changed for `quiet` (and returns it). Output
    /// that changes nothing visible (cursor moves, mode switches) does not count.
    pub fn wait_stable(&self, quiet: Duration, timeout: Duration) -> Result<String, PtyError> {
        let deadline = Instant::now() + timeout;
        let mut seen = self.screen_text();
        let mut since = Instant::now();
        loop {
            let text = self.screen_text();
            if text != seen {
                seen = text.clone();
                since = Instant::now();
            } else if since.elapsed() >= quiet {
                return Ok(text);
            }
            if Instant::now() >= deadline {
                return Err(PtyError::Timeout {
                    what: format!("the screen to be quiet for {quiet:?}"),
                    waited: timeout,
                    screen: text,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Resizes the terminal (the program gets SIGWINCH).
    pub fn resize(&self, rows: u16, cols: u16) -> Result<(), PtyError> {
        {
            let mut state = self.state();
            state.parser.set_size(non_zero(rows), non_zero(cols));
        }
        self.master.resize(size(rows, cols)).map_err(|error| PtyError::Pty(error.to_string()))
    }

    /// Waits up to `timeout` for the program to exit; returns its exit code (`None`
    /// when a signal ended it).
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<Option<u32>, PtyError> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    return Ok(status.signal().is_none().then(|| status.exit_code()));
                }
                Ok(None) => {}
                Err(error) => return Err(PtyError::Pty(error.to_string())),
            }
            if Instant::now() >= deadline {
                return Err(PtyError::Timeout {
                    what: format!("{} to exit", self.program),
                    waited: timeout,
                    screen: self.screen_text(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn screen_text(screen: &vt100::Screen) -> String {
    let (_, cols) = screen.size();
    let rows: Vec<String> =
        screen.rows(0, cols.get()).map(|row| row.trim_end().to_owned()).collect();
    rows.join("\n")
}

/// The screen as text with its styles marked, for snapshots of colours and attributes:
/// wherever the style changes, `«fg=green,bold»` names the new one (`«»` is the default
/// style again); colours 0-15 by name, others as `idx196` or `#rrggbb`; attributes
/// `bold`, `dim`, `italic`, `underline`, `inverse`. Trailing default-styled spaces are
/// left out.
fn styled_text(screen: &vt100::Screen) -> String {
    let (rows, cols) = screen.size();
    let mut out: Vec<String> = Vec::new();
    for row in 0..rows.get() {
        let mut line = String::new();
        let mut current = String::new();
        // Where the line's text ends once trailing default-styled blanks are cut.
        let mut keep = 0;
        for col in 0..cols.get() {
            let Some(cell) = screen.cell(row, col) else { continue };
            if cell.is_wide_continuation() {
                continue;
            }
            let style = cell_style(cell);
            if style != current {
                line.push_str(&format!("«{style}»"));
                current = style;
            }
            let contents = cell.contents();
            line.push_str(if contents.is_empty() { " " } else { contents });
            if !(current.is_empty() && contents.trim().is_empty()) {
                keep = line.len();
            }
        }
        line.truncate(keep);
        out.push(line);
    }
    out.join("\n")
}

fn cell_style(cell: &vt100::Cell) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (name, colour) in [("fg", cell.fgcolor()), ("bg", cell.bgcolor())] {
        match colour {
            vt100::Color::Default => {}
            vt100::Color::Idx(index) => parts.push(format!("{name}={}", colour_name(index))),
            vt100::Color::Rgb(red, green, blue) => {
                parts.push(format!("{name}=#{red:02x}{green:02x}{blue:02x}"))
            }
        }
    }
    for (name, on) in [
        ("bold", cell.bold()),
        ("dim", cell.dim()),
        ("italic", cell.italic()),
        ("underline", cell.underline()),
        ("inverse", cell.inverse()),
    ] {
        if on {
            parts.push(name.to_owned());
        }
    }
    parts.join(",")
}

fn colour_name(index: u8) -> String {
    const NAMES: [&str; 16] = [
        "black",
        "red",
        "green",
        "yellow",
        "blue",
        "magenta",
        "cyan",
        "white",
        "bright-black",
        "bright-red",
        "bright-green",
        "bright-yellow",
        "bright-blue",
        "bright-magenta",
        "bright-cyan",
        "bright-white",
    ];
    match NAMES.get(usize::from(index)) {
        Some(name) => (*name).to_owned(),
        None => format!("idx{index}"),
    }
}

fn read_loop(
    mut reader: Box<dyn Read + Send>,
    shared: Shared,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let read = reader.read(&mut buffer);
        let (lock, ready) = &*shared;
        let mut state = match lock.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        match read {
            Ok(0) | Err(_) => {
                state.closed = true;
                ready.notify_all();
                return;
            }
            Ok(count) => {
                state.parser.process(&buffer[..count]);
                state.last_output = Instant::now();
                state.received += count as u64;
                let replies = std::mem::take(&mut state.parser.callbacks_mut().replies);
                drop(state);
                ready.notify_all();
                if !replies.is_empty()
                    && let Ok(mut writer) = writer.lock()
                {
                    for reply in replies {
                        let _ = writer.write_all(&reply);
                    }
                    let _ = writer.flush();
                }
            }
        }
    }
}
