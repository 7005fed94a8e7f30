//! TUI tests' harness: the real `kestrel` on a pty (kestrel-testkit's vt100 driver)
//! against the scripted model, in a temp home and workspace; screens masked (paths, ids,
//! times, spinners) and compared with snapshot files under `tests/snapshots/tui/`.
//! Dropping a test stops the daemon it started (killing it if it will not stop).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use crate::common::{TestEnv, Wire};
use kestrel_testkit::{Key, Pty, Script};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The bound on any single wait.
pub const WAIT: Duration = Duration::from_secs(30);
/// How long the screen must not change to count as settled.
pub const QUIET: Duration = Duration::from_millis(400);
pub const ROWS: u16 = 30;
pub const COLS: u16 = 100;

pub struct TuiTest {
    pub env: TestEnv,
    pub pty: Option<Pty>,
}

impl TuiTest {
    /// A home whose config points at a scripted model speaking `script` (mode `ask`).
    pub fn new(script: Script) -> Self {
        Self { env: TestEnv::new(Wire::Chat, script), pty: None }
    }

    /// Appends lines to the config (e.g. `mode = "auto"`, which must come before tables:
    /// so it is put first).
    pub fn with_config_first(self, line: &str) -> Self {
        let path = self.env.home.path().join("config.toml");
        let old = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{line}\n{old}")).unwrap();
        self
    }

    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = self.env.command(args);
        command.env("KESTREL_DAEMON_IDLE_SECS", "120").env_remove("COLORTERM");
        // A UI with no model looks for keys and local servers: none of this machine's.
        for key in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"] {
            command.env_remove(key);
        }
        command.env("KESTREL_PROBE_PORTS", "ollama=1,lmstudio=1,llamacpp=1,vllm=1");
        command
    }

    /// Starts `kestrel ARGS` on a pty of the default size and waits for its first frame
    /// (keys typed earlier meet a terminal still in cooked mode, where Enter is a newline).
    pub fn start(&mut self, args: &[&str]) -> &Pty {
        let command = self.command(args);
        self.pty = Some(Pty::spawn(&command, ROWS, COLS).expect("kestrel starts on a pty"));
        self.wait_until("the first frame", |screen| screen.contains("─────"));
        self.pty()
    }

    /// Starts `command` on a `rows` x `cols` pty and waits for the first frame.
    pub fn start_command(&mut self, command: &std::process::Command, rows: u16, cols: u16) {
        self.pty = Some(Pty::spawn(command, rows, cols).expect("kestrel starts on a pty"));
        self.wait_until("the first frame", |screen| screen.contains("─────"));
    }

    /// `sh -c` running kestrel (with this test's environment) and then printing its exit
    /// code and the terminal's `icanon`/`echo` modes, to see what it left behind.
    pub fn in_shell(&self, extra_env: &[(&str, &str)]) -> std::process::Command {
        let kestrel = self.command(&[]);
        let mut shell = std::process::Command::new("sh");
        shell
            .arg("-c")
            .arg("\"$0\"; echo \"exit=$?\"; stty -a | tr ' ;' '\\n\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' '; echo")
            .arg(kestrel.get_program());
        for (key, value) in kestrel.get_envs() {
            match value {
                Some(value) => shell.env(key, value),
                None => shell.env_remove(key),
            };
        }
        for (key, value) in extra_env {
            shell.env(key, value);
        }
        shell.current_dir(self.env.work.path());
        shell
    }

    /// The settled screen with its styles (kestrel-testkit's `styled_text`), masked.
    pub fn settled_styles(&self) -> String {
        self.settled();
        self.mask(&self.pty().styled_text())
    }

    pub fn pty(&self) -> &Pty {
        self.pty.as_ref().expect("started")
    }

    pub fn wait(&self, text: &str) -> String {
        self.pty().wait_for_text(text, WAIT).unwrap_or_else(|error| panic!("{error}"))
    }

    /// Waits for a permission prompt to take keys: its keys hint appears once the
    /// guard against stray keys has passed (keys sooner go to the composer).
    pub fn wait_prompt(&self) -> String {
        self.wait_until("a permission prompt taking keys", |screen| {
            screen.contains("Permission needed") && screen.contains("esc reject")
        })
    }

    pub fn wait_until(&self, what: &str, check: impl FnMut(&str) -> bool) -> String {
        self.pty().wait_until(what, WAIT, check).unwrap_or_else(|error| panic!("{error}"))
    }

    pub fn type_text(&self, text: &str) {
        self.pty().type_text(text).unwrap();
    }

    pub fn press(&self, key: Key) {
        self.pty().press(key).unwrap();
    }

    /// Types a prompt and sends it.
    pub fn send(&self, text: &str) {
        self.type_text(text);
        // Give the UI a moment to draw the typed text before Enter, as a person would.
        self.wait(text.lines().last().unwrap_or(text));
        self.press(Key::Enter);
    }

    /// The settled screen, masked.
    pub fn settled(&self) -> String {
        let text = self.pty().wait_stable(QUIET, WAIT).unwrap_or_else(|error| panic!("{error}"));
        self.mask(&text)
    }

    /// Compares the settled screen with `tests/snapshots/tui/NAME.snap`.
    pub fn snapshot(&self, name: &str) {
        let screen = self.settled();
        kestrel_testkit::assert_snapshot(&snapshot_dir(), name, &screen);
    }

    /// Replaces what differs between runs: paths, session ids, dates, times, spinners.
    pub fn mask(&self, text: &str) -> String {
        let mut text = text.to_owned();
        let work = self.env.work_path().display().to_string();
        let home = self.env.home.path().display().to_string();
        text = text.replace(&work, "<work>").replace(&home, "<home>");
        let patterns: [(&str, &str); 5] = [
            (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<session-id>"),
            (r"subagent [0-9a-f]{12}\b", "subagent <id>"),
            (r"\d{4}-\d\d-\d\d \d\d:\d\d", "<date>"),
            (r"[⠋⠙⠹⠸⠼⠴⠦⠧] (Working|Interrupting) \d+s", "⠿ $1 Ns"),
            (r"/tmp/\.tmp[A-Za-z0-9]+", "<tmp>"),
        ];
        for (pattern, replacement) in patterns {
            let regex = regex::Regex::new(pattern).unwrap();
            text = regex.replace_all(&text, replacement).into_owned();
        }
        text
    }

    /// The pid of the worker of the TUI's session, once one is live.
    pub fn worker_pid(&self, not: Option<u64>) -> u64 {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let output = self.command(&["daemon", "status", "--json"]).output().unwrap();
            let status: serde_json::Value =
                serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
            let pid = status["sessions"].as_array().and_then(|sessions| {
                sessions
                    .iter()
                    .filter(|session| session["state"] == "live")
                    .find_map(|session| session["workerPid"].as_u64())
            });
            if let Some(pid) = pid
                && Some(pid) != not
            {
                return pid;
            }
            assert!(std::time::Instant::now() < deadline, "no live worker: {status}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn work_file(&self, name: &str) -> PathBuf {
        self.env.work_path().join(name)
    }
}

impl Drop for TuiTest {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(pty) = &self.pty
        {
            eprintln!("--- screen at failure:\n{}", pty.screen_text());
        }
        drop(self.pty.take());
        let endpoint = kestrel_platform::Endpoint::new(&self.env.home.path().join("run"));
        let pid = endpoint.running_pid();
        let _ = self.command(&["daemon", "stop"]).output();
        if let Some(pid) = pid.or_else(|| endpoint.running_pid()) {
            signal(pid, libc::SIGKILL);
        }
    }
}

pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) only sends a signal.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// The children of a process (Linux: /proc/PID/task/PID/children).
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .collect()
}

pub fn snapshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/tui")
}

/// A step that runs `touch FILE` through the shell tool (a command ask mode asks about).
pub fn touch(file: &str) -> kestrel_testkit::Step {
    kestrel_testkit::Step::tool_call(
        "shell",
        serde_json::json!({"command": format!("touch {file}")}),
    )
}

impl TuiTest {
    /// The id of the only session (its record's file name).
    pub fn only_session_id(&self) -> String {
        let records = self.env.records();
        records[0].file_stem().unwrap().to_string_lossy().into_owned()
    }
}
