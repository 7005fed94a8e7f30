//! Opening one MCP connection: a local server as a child process (its own process
//! group, so everything it starts can be killed with it) speaking newline-delimited
//! JSON-RPC over stdio, or a remote one over streamable HTTP ([`HttpSink`]). Then the
//! MCP handshake ([`Client::initialize`]).

use crate::mcp::client::{Client, Sink};
use crate::mcp::http::HttpSink;
use kestrel_platform::{ProcessGroup, Signal, spawn_group};
use kestrel_protocol::jsonrpc::MAX_LINE_BYTES;
use kestrel_store::{McpServerSettings, McpTransport};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Lines of a server's stderr kept to explain why it failed.
const STDERR_LINES: usize = 20;
/// Characters kept of one stderr line.
const STDERR_LINE_CHARS: usize = 400;
/// How long a dead server's last words are waited for.
const STDERR_DRAIN: Duration = Duration::from_millis(500);
/// How long a server gets to exit on its own (stdin closed) before it is signalled.
pub(crate) const EXIT_GRACE: Duration = Duration::from_millis(1500);
/// Messages queued for a server's stdin.
const OUTGOING_QUEUE: usize = 64;

/// A live, initialized connection, and the process behind it for a local server.
pub(crate) struct Connection {
    pub(crate) client: Client,
    pub(crate) process: Option<ServerProcess>,
    /// A message each time the server says its tool list changed.
    pub(crate) list_changed: mpsc::Receiver<()>,
}

/// Starts the server of `settings` and performs the MCP handshake. `cwd` is the
/// session's directory (a relative `cwd` setting is relative to it). The error says
/// what failed, with the end of the server's stderr when it wrote any.
pub(crate) async fn connect(
    settings: &McpServerSettings,
    cwd: &Path,
) -> Result<Connection, String> {
    let (changed, list_changed) = mpsc::channel(1);
    match &settings.transport {
        McpTransport::Stdio { command, args, env, cwd: server_cwd } => {
            let dir = match server_cwd {
                Some(dir) => cwd.join(dir),
                None => cwd.to_path_buf(),
            };
            let mut process = ServerProcess::spawn(command, args, env, &dir)?;
            let (stdout, stdin) = process.pipes()?;
            let (lines, outgoing) = mpsc::channel(OUTGOING_QUEUE);
            let client = Client::new(Sink::Stdio(lines), changed);
            tokio::spawn(write_lines(stdin, outgoing, client.clone()));
            tokio::spawn(read_messages(stdout, client.clone()));
            match client.initialize().await {
                Ok(()) => Ok(Connection { client, process: Some(process), list_changed }),
                Err(error) => {
                    client.close("the handshake failed");
                    let what = format!("the MCP handshake failed: {error}");
                    Err(process.explain_failure(&what).await)
                }
            }
        }
        McpTransport::Http { url, headers } => {
            let client = Client::new(Sink::Http(HttpSink::new(url, headers)?), changed);
            match client.initialize().await {
                Ok(()) => Ok(Connection { client, process: None, list_changed }),
                Err(error) => {
                    client.close("the handshake failed");
                    Err(format!("the MCP handshake with {url} failed: {error}"))
                }
            }
        }
    }
}

/// Writes queued messages to the server's stdin; closing the connection closes stdin,
/// which asks a stdio server to exit.
async fn write_lines(mut stdin: ChildStdin, mut lines: mpsc::Receiver<String>, client: Client) {
    loop {
        let line = tokio::select! {
            line = lines.recv() => line,
            () = client.closed() => None,
        };
        let Some(mut line) = line else { break };
        line.push('\n');
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
    let _ = stdin.shutdown().await;
}

/// Reads the server's messages, one per line, until it closes its stdout. Lines that
/// are not JSON-RPC (a server logging to stdout) are skipped.
async fn read_messages(stdout: ChildStdout, client: Client) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = u64::try_from(MAX_LINE_BYTES).unwrap_or(u64::MAX);
        match (&mut reader).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.len() >= MAX_LINE_BYTES {
            break;
        }
        let _ = client.dispatch_text(String::from_utf8_lossy(&line).trim()).await;
    }
    client.close("the server closed the connection");
}

/// A local server's process group and the end of its stderr.
pub(crate) struct ServerProcess {
    group: ProcessGroup,
    stderr: Arc<Mutex<VecDeque<String>>>,
    reader: Option<JoinHandle<()>>,
    command: String,
}

impl ServerProcess {
    fn spawn(
        command: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
        dir: &Path,
    ) -> Result<Self, String> {
        let mut builder = Command::new(command);
        builder
            .args(args)
            .env_clear()
            .envs(inherited_environment())
            .envs(env)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut group = spawn_group(&mut builder)
            .map_err(|error| format!("cannot run `{command}` (in {}): {error}", dir.display()))?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let reader = group
            .child_mut()
            .stderr
            .take()
            .map(|pipe| tokio::spawn(keep_tail(pipe, stderr.clone())));
        Ok(Self { group, stderr, reader, command: command.to_string() })
    }

    fn pipes(&mut self) -> Result<(ChildStdout, ChildStdin), String> {
        let child = self.group.child_mut();
        match (child.stdout.take(), child.stdin.take()) {
            (Some(stdout), Some(stdin)) => Ok((stdout, stdin)),
            (None, _) | (_, None) => Err(format!("`{}` started without stdio pipes", self.command)),
        }
    }

    /// Waits for the leader to exit (cancel-safe).
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.group.wait().await
    }

    /// Why the server is gone: `what` and, when it exited, its status and the end of its
    /// stderr. Takes down whatever is left of its group.
    pub(crate) async fn explain_failure(&mut self, what: &str) -> String {
        let status = tokio::time::timeout(EXIT_GRACE, self.group.wait()).await;
        let mut message = match status {
            Ok(Ok(status)) => format!("`{}` exited ({})", self.command, describe(status)),
            Ok(Err(_)) | Err(_) => format!("`{}`: {what}", self.command),
        };
        let _ = self.group.signal(Signal::Kill);
        let tail = self.stderr_tail().await;
        if !tail.is_empty() {
            message.push_str(&format!("; its stderr ends with:\n{tail}"));
        }
        message
    }

    /// Ends the server: it was asked to quit by closing its stdin; whatever is left of
    /// its group after a grace period is terminated.
    pub(crate) async fn stop(&mut self) {
        if tokio::time::timeout(EXIT_GRACE, self.group.wait()).await.is_err() {
            let _ = self.group.terminate(EXIT_GRACE).await;
        }
        // Children it left behind die with the group.
        let _ = self.group.signal(Signal::Kill);
    }

    async fn stderr_tail(&mut self) -> String {
        if let Some(reader) = self.reader.take() {
            let _ = tokio::time::timeout(STDERR_DRAIN, reader).await;
        }
        match self.stderr.lock() {
            Ok(lines) => lines.iter().cloned().collect::<Vec<_>>().join("\n"),
            Err(_) => String::new(),
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // `ProcessGroup` kills a group whose leader was not reaped. Once reaped, the
        // group was killed right then (`stop`, `explain_failure`): signalling it again
        // later could hit a reused process group id.
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
    }
}

async fn keep_tail(pipe: ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = BufReader::new(pipe).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line: String = line.chars().take(STDERR_LINE_CHARS).collect();
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == STDERR_LINES {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    }
}

/// The variables a stdio server inherits from Kestrel: enough to find and run programs,
/// never the user's keys (like the MCP SDKs' `getDefaultEnvironment`, plus locale and
/// temp dir). Anything else a server needs goes in its `env`.
#[cfg(not(windows))]
const INHERITED_VARIABLES: &[&str] =
    &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR"];
#[cfg(windows)]
const INHERITED_VARIABLES: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
];

/// Kestrel's values of [`INHERITED_VARIABLES`]; shell functions (`()...`) are left out.
fn inherited_environment() -> Vec<(&'static str, std::ffi::OsString)> {
    INHERITED_VARIABLES
        .iter()
        .filter_map(|name| Some((*name, std::env::var_os(name)?)))
        .filter(|(_, value)| !value.as_encoded_bytes().starts_with(b"()"))
        .collect()
}

/// "status 1" or "killed by signal 9".
pub(crate) fn describe(status: ExitStatus) -> String {
    match (status.code(), kestrel_platform::exit_signal(&status)) {
        (Some(code), _) => format!("status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}
