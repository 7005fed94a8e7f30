//! Opening one MCP connection: a local server as a child process (its own process
//! group, so everything it starts can be killed with it) speaking over stdio, or a
//! remote one over streamable HTTP with our reqwest client (rustls with ring: no second
//! TLS stack). The MCP handshake is rmcp's.

use kestrel_platform::{ProcessGroup, Signal, spawn_group};
use kestrel_store::{McpServerSettings, McpTransport};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{NotificationContext, RoleClient, RunningService, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Lines of a server's stderr kept to explain why it failed.
const STDERR_LINES: usize = 20;
/// Characters kept of one stderr line.
const STDERR_LINE_CHARS: usize = 400;
/// How long a dead server's last words are waited for.
const STDERR_DRAIN: Duration = Duration::from_millis(500);
/// How long a server gets to exit on its own (stdin closed) before it is signalled.
pub(crate) const EXIT_GRACE: Duration = Duration::from_millis(1500);

/// A live connection: rmcp's service, and the process behind it for a local server.
pub(crate) struct Connection {
    pub(crate) service: RunningService<RoleClient, Handler>,
    pub(crate) process: Option<ServerProcess>,
    /// A message each time the server says its tool list changed.
    pub(crate) list_changed: mpsc::Receiver<()>,
    /// Cancelling it closes the connection (and so the server's stdin).
    pub(crate) close: CancellationToken,
}

/// What rmcp calls on our side of the connection: it tells who we are and passes the
/// server's `tools/list_changed` on.
#[derive(Clone)]
pub(crate) struct Handler {
    list_changed: mpsc::Sender<()>,
}

impl rmcp::ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // One pending refresh is enough: it lists everything anew.
        let _ = self.list_changed.try_send(());
    }

    fn get_info(&self) -> ClientConfig {
        let implementation = Implementation::new("kestrel", env!("CARGO_PKG_VERSION"));
        ClientConfig::new(ClientCapabilities::default(), implementation)
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Starts the server of `settings` and performs the MCP handshake. `cwd` is the
/// session's directory (a relative `cwd` setting is relative to it). The error says
/// what failed, with the end of the server's stderr when it wrote any.
pub(crate) async fn connect(
    settings: &McpServerSettings,
    cwd: &Path,
) -> Result<Connection, String> {
    let (sender, list_changed) = mpsc::channel(1);
    let handler = Handler { list_changed: sender };
    let close = CancellationToken::new();
    match &settings.transport {
        McpTransport::Stdio { command, args, env, cwd: server_cwd } => {
            let dir = match server_cwd {
                Some(dir) => cwd.join(dir),
                None => cwd.to_path_buf(),
            };
            let mut process = ServerProcess::spawn(command, args, env, &dir)?;
            let (stdout, stdin) = process.pipes()?;
            match handler.serve_with_ct((stdout, stdin), close.clone()).await {
                Ok(service) => {
                    Ok(Connection { service, process: Some(process), list_changed, close })
                }
                Err(error) => Err(process.explain_failure(&format!("{error}")).await),
            }
        }
        McpTransport::Http { url, headers } => {
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(header_map(headers)?);
            let transport = StreamableHttpClientTransport::with_client(http_client()?, config);
            match handler.serve_with_ct(transport, close.clone()).await {
                Ok(service) => Ok(Connection { service, process: None, list_changed, close }),
                Err(error) => Err(format!("cannot connect to {url}: {error}")),
            }
        }
    }
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

    fn pipes(
        &mut self,
    ) -> Result<(tokio::process::ChildStdout, tokio::process::ChildStdin), String> {
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

/// "status 1" or "killed by signal 9".
pub(crate) fn describe(status: ExitStatus) -> String {
    match (status.code(), kestrel_platform::exit_signal(&status)) {
        (Some(code), _) => format!("status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

fn header_map(
    headers: &BTreeMap<String, String>,
) -> Result<HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>, String> {
    headers
        .iter()
        .map(|(name, value)| {
            let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("`{name}` is not a valid HTTP header name"))?;
            let value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| format!("the value of header `{name}` is not valid in HTTP"))?;
            Ok((header, value))
        })
        .collect()
}

/// Our reqwest client, as rmcp's default one is set up (no idle pooling: it stalls on
/// half-read bodies), following only same-origin 307/308 redirects, which keep the body.
fn http_client() -> Result<reqwest::Client, String> {
    // reqwest panics without a rustls provider; the binary installs ring at start,
    // but a library must not rely on that.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let redirects = reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if keeps_body && same_origin && attempt.previous().len() <= 5 {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(redirects)
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("kestrel/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| format!("could not set up the HTTP client: {error}"))
}
