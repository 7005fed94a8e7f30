//! Daemon tests' harness: a temp home with a scripted model, ACP clients that are real
//! `kestrel acp` processes (so every client starts or finds the daemon as an editor
//! would), and a guard that stops the daemon (and kills it if it will not stop).
//! Every wait is bounded.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use crate::common::{TestEnv, Wire};
use kestrel_protocol::jsonrpc::{Connection, Incoming, Notification, Request, RequestId, RpcError};
use kestrel_testkit::{Fault, Script, Step};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The bound on any single wait in these tests.
pub const WAIT: Duration = Duration::from_secs(30);

/// A home, a workspace, a scripted model and whatever daemon the test starts.
pub struct DaemonTest {
    pub env: TestEnv,
    /// Extra environment for every `kestrel` the test runs (and so the daemon).
    pub vars: Vec<(String, String)>,
}

impl DaemonTest {
    pub fn new(script: Script) -> Self {
        let env = TestEnv::new(Wire::Chat, script);
        // Loud failures instead of long hangs if something goes wrong.
        let vars = vec![("KESTREL_DAEMON_IDLE_SECS".to_owned(), "120".to_owned())];
        Self { env, vars }
    }

    pub fn with_var(mut self, name: &str, value: &str) -> Self {
        self.vars.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = self.env.command(args);
        for (name, value) in &self.vars {
            command.env(name, value);
        }
        command
    }

    /// `kestrel daemon status --json`, parsed.
    pub fn status(&self) -> Value {
        let output = self.command(&["daemon", "status", "--json"]).output().unwrap();
        serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!("status is JSON: {}", String::from_utf8_lossy(&output.stdout))
        })
    }

    /// The running daemon's pid from its pid file (only while it holds it).
    pub fn daemon_pid(&self) -> Option<u32> {
        kestrel_daemon::client::endpoint(&self.home()).running_pid()
    }

    pub fn home(&self) -> kestrel_store::KestrelHome {
        kestrel_store::KestrelHome::at(self.env.home.path())
    }

    /// A new plain ACP client (an editor): a `kestrel acp` process, initialized without
    /// opting in to notices and Kestrel's extension notifications.
    pub async fn client(&self) -> AcpClient {
        let client = AcpClient::spawn(self);
        client.initialize().await;
        client
    }

    /// A new client that opted in (`session.notices`), as the TUI and the swarm do: it
    /// also hears `_kestrel/session/turn`, `_kestrel/worker/restarted` and notices.
    pub async fn kestrel_client(&self) -> AcpClient {
        let client = AcpClient::spawn(self);
        client.initialize_kestrel().await;
        client
    }

    /// The worker pid of `session_id`, waiting until it has one other than `not`.
    pub fn wait_worker_pid(&self, session_id: &str, not: Option<u64>) -> u64 {
        let deadline = Instant::now() + WAIT;
        loop {
            let status = self.status();
            let pid = session_status(&status, session_id)
                .and_then(|session| session["workerPid"].as_u64());
            if let Some(pid) = pid
                && Some(pid) != not
                && session_status(&status, session_id)
                    .is_some_and(|session| session["state"] == "live")
            {
                return pid;
            }
            assert!(Instant::now() < deadline, "no live worker for {session_id}: {status}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every record item of one session, as JSON values (header excluded).
    pub fn record_items(&self, session_id: &str) -> Vec<Value> {
        let path = self
            .env
            .records()
            .into_iter()
            .find(|path| path.file_stem().is_some_and(|stem| stem == session_id))
            .unwrap_or_else(|| panic!("a record for {session_id}"));
        crate::common::read_lines(&path).into_iter().skip(1).collect()
    }

    /// The daemon's and workers' logs, for a failing test's output.
    pub fn print_logs(&self) {
        let logs = self.env.home.path().join("logs");
        let Ok(entries) = std::fs::read_dir(&logs) else { return };
        for entry in entries.flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("--- {} (last lines)", entry.path().display());
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }

    pub fn stop_daemon(&self) {
        let _ = self.command(&["daemon", "stop"]).output();
    }
}

impl Drop for DaemonTest {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_logs();
        }
        let pid = self.daemon_pid();
        self.stop_daemon();
        if let Some(pid) = pid.or_else(|| self.daemon_pid()) {
            kill(pid, libc::SIGKILL);
        }
    }
}

/// An answer streamed slowly (a pause between its stream events): its turn runs long
/// enough for other clients to attach or prompt meanwhile.
pub fn slow(text: &str, delay_ms: u64) -> Step {
    Step::text(text).with_fault(Fault::SlowChunks { delay_ms })
}

/// Waits for `client`'s next `_kestrel/session/turn` of `session`; its params.
pub async fn turn_notice(client: &mut AcpClient, session: &str) -> Value {
    let event = client
        .wait_for("a _kestrel/session/turn notification", |event| {
            matches!(event, Event::Notification(n) if n.method == kestrel_daemon::SESSION_TURN
                && n.params["sessionId"] == session)
        })
        .await;
    match event {
        Event::Notification(notification) => notification.params,
        Event::Request(_) => unreachable!(),
    }
}

pub fn session_status<'a>(status: &'a Value, session_id: &str) -> Option<&'a Value> {
    status["sessions"].as_array()?.iter().find(|session| session["sessionId"] == session_id)
}

pub fn kill(pid: u32, signal: i32) {
    // SAFETY: kill(2) only sends a signal.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

pub fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// Waits (bounded) until `check` holds.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What the daemon sent a client that the client did not ask for.
#[derive(Debug, Clone)]
pub enum Event {
    Notification(Notification),
    Request(Request),
}

/// An ACP client: a `kestrel acp` child process driven over its stdio.
pub struct AcpClient {
    pub connection: Connection,
    events: mpsc::UnboundedReceiver<Event>,
    /// Everything received so far, in order (also what `next_*` consumed).
    pub seen: Vec<Event>,
    child: tokio::process::Child,
    stdin_copy: tokio::task::JoinHandle<()>,
}

impl AcpClient {
    pub fn spawn(test: &DaemonTest) -> AcpClient {
        Self::spawn_recording(test, None)
    }

    /// A client whose every message, both ways, is also appended to `transcript`
    /// (one JSON-RPC message per line, in the order they passed).
    pub fn spawn_recording(test: &DaemonTest, transcript: Option<Transcript>) -> AcpClient {
        let mut command = tokio::process::Command::from(test.command(&["acp"]));
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("kestrel acp starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        // The connection talks to pipes copied line by line to and from the child, so
        // lines can be recorded and the test can close stdin (abort the copy) while the
        // connection still reads.
        let (to_child, from_connection) = tokio::io::duplex(1024 * 1024);
        let (from_child, to_connection) = tokio::io::duplex(1024 * 1024);
        let stdin_copy = tokio::spawn(copy_lines(from_connection, stdin, transcript.clone()));
        tokio::spawn(copy_lines(stdout, to_connection, transcript));
        let (connection, mut incoming) = Connection::start(from_child, to_child);
        let (events_tx, events) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(message) = incoming.recv().await {
                let event = match message {
                    Incoming::Notification(notification) => Event::Notification(notification),
                    Incoming::Request(request) => Event::Request(request),
                };
                if events_tx.send(event).is_err() {
                    break;
                }
            }
        });
        AcpClient { connection, events, seen: Vec::new(), child, stdin_copy }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        tokio::time::timeout(WAIT, self.connection.request(method, params))
            .await
            .unwrap_or_else(|_| panic!("no answer to {method} within {WAIT:?}"))
    }

    pub async fn initialize(&self) -> Value {
        let params = json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}});
        self.request("initialize", params).await.expect("initialize answered")
    }

    /// `initialize` opting in to notices and Kestrel's extension notifications.
    pub async fn initialize_kestrel(&self) -> Value {
        let params = json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false, "session": {"notices": {}}}});
        self.request("initialize", params).await.expect("initialize answered")
    }

    pub async fn new_session(&self, cwd: &std::path::Path) -> String {
        let answer = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await
            .expect("session/new answered");
        answer["sessionId"].as_str().expect("a sessionId").to_owned()
    }

    pub async fn set_mode(&self, session_id: &str, mode: &str) {
        self.request("session/set_mode", json!({"sessionId": session_id, "modeId": mode}))
            .await
            .expect("mode set");
    }

    pub async fn load(&self, session_id: &str, cwd: &std::path::Path) -> Result<Value, RpcError> {
        self.request("session/load", json!({"sessionId": session_id, "cwd": cwd, "mcpServers": []}))
            .await
    }

    /// Sends a prompt and returns its pending answer.
    pub fn prompt(
        &self,
        session_id: &str,
        text: &str,
    ) -> tokio::task::JoinHandle<Result<Value, RpcError>> {
        let connection = self.connection.clone();
        let params = json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]});
        tokio::spawn(async move {
            tokio::time::timeout(WAIT * 2, connection.request("session/prompt", params))
                .await
                .unwrap_or_else(|_| Err(RpcError::internal("test: no answer to session/prompt")))
        })
    }

    /// The next event, or `None` when none comes within `wait`.
    pub async fn next_event(&mut self, wait: Duration) -> Option<Event> {
        let event = tokio::time::timeout(wait, self.events.recv()).await.ok().flatten()?;
        self.seen.push(event.clone());
        Some(event)
    }

    /// Reads events until one matches; panics after [`WAIT`].
    pub async fn wait_for(&mut self, what: &str, mut matches: impl FnMut(&Event) -> bool) -> Event {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left).await {
                Some(event) if matches(&event) => return event,
                Some(_) => {}
                None => panic!("timed out waiting for {what}; saw {:#?}", self.seen),
            }
        }
    }

    /// Waits for a `session/update` of `session_id` whose `sessionUpdate` is `kind`.
    pub async fn wait_update(&mut self, session_id: &str, kind: &str) -> Value {
        let what = format!("a {kind} update of {session_id}");
        let event = self
            .wait_for(&what, |event| {
                matches!(event, Event::Notification(n) if n.method == "session/update"
                    && n.params["sessionId"] == session_id
                    && n.params["update"]["sessionUpdate"] == kind)
            })
            .await;
        match event {
            Event::Notification(notification) => notification.params["update"].clone(),
            Event::Request(_) => unreachable!(),
        }
    }

    /// Waits for the daemon to ask a permission; returns the request.
    pub async fn wait_permission(&mut self) -> Request {
        let event = self
            .wait_for("a permission request", |event| {
                matches!(event, Event::Request(r) if r.method == "session/request_permission")
            })
            .await;
        match event {
            Event::Request(request) => request,
            Event::Notification(_) => unreachable!(),
        }
    }

    pub async fn answer(&self, id: RequestId, option_id: &str) {
        let outcome = json!({"outcome": {"outcome": "selected", "optionId": option_id}});
        self.connection.respond(id, Ok(outcome)).await.unwrap();
    }

    /// Every `session/update` seen so far for `session_id`.
    pub fn updates(&self, session_id: &str) -> Vec<Value> {
        self.seen
            .iter()
            .filter_map(|event| match event {
                Event::Notification(n)
                    if n.method == "session/update" && n.params["sessionId"] == session_id =>
                {
                    Some(n.params["update"].clone())
                }
                Event::Notification(_) | Event::Request(_) => None,
            })
            .collect()
    }

    /// The text of every agent message chunk seen for `session_id`, joined.
    pub fn agent_text(&self, session_id: &str) -> String {
        self.updates(session_id)
            .iter()
            .filter(|update| update["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|update| update["content"]["text"].as_str())
            .collect()
    }

    /// Drains events that arrive within `wait` into `seen`.
    pub async fn settle(&mut self, wait: Duration) {
        while self.next_event(wait).await.is_some() {}
    }

    /// Closes stdin (as an editor that quits) and waits for the bridge to exit.
    pub async fn close(mut self) -> std::process::ExitStatus {
        self.stdin_copy.abort();
        tokio::time::timeout(WAIT, self.child.wait()).await.expect("kestrel acp exits").unwrap()
    }
}

/// A file that several clients' messages are recorded into, whole lines at a time.
pub type Transcript = std::sync::Arc<std::sync::Mutex<std::fs::File>>;

async fn copy_lines<R, W>(from: R, mut to: W, transcript: Option<Transcript>)
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    use std::io::Write;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut lines = tokio::io::BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(transcript) = &transcript {
            let _ = writeln!(transcript.lock().unwrap(), "{line}");
        }
        let written = to.write_all(format!("{line}\n").as_bytes()).await;
        if written.is_err() || to.flush().await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// A workspace file path.
pub fn work_file(test: &DaemonTest, name: &str) -> PathBuf {
    test.env.work_path().join(name)
}
