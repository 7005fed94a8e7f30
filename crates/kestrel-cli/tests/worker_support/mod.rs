//! Worker tests' harness: a real `kestrel worker` process over pipes, spoken to with
//! `kestrel_protocol::jsonrpc::Connection` as the daemon does. Every line in either
//! direction is kept, in order, as a transcript (for ordering checks and for the ACP
//! schema validator). Every wait is bounded.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use crate::common::TestEnv;
use kestrel_protocol::jsonrpc::{Connection, Incoming, Request, RpcError};
use serde_json::{Value, json};
use std::path::Path;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::mpsc;

/// The bound on any single wait in these tests.
pub const WAIT: Duration = Duration::from_secs(60);

/// Lines as they passed, both directions.
pub type Transcript = Arc<Mutex<Vec<String>>>;

/// How a test answers the worker's permission requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Answer {
    Option(&'static str),
    Cancelled,
}

/// What a prompt produced: its answer and the updates that came before it.
pub struct PromptOutcome {
    pub result: Result<Value, RpcError>,
    /// `update` objects of the `session/update` notifications, in order.
    pub updates: Vec<Value>,
    /// The `session/request_permission` params the worker sent, in order.
    pub permissions: Vec<Value>,
}

impl PromptOutcome {
    pub fn stop_reason(&self) -> &str {
        match &self.result {
            Ok(value) => value["stopReason"].as_str().unwrap(),
            Err(error) => panic!("the prompt failed: {error}"),
        }
    }

    /// The updates of one kind (`sessionUpdate`).
    pub fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.updates.iter().filter(|update| update["sessionUpdate"] == kind).collect()
    }

    /// The streamed agent message text.
    pub fn text(&self) -> String {
        chunk_text(&self.updates, "agent_message_chunk")
    }
}

/// The text of the chunks of `kind` among `updates`, joined.
pub fn chunk_text(updates: &[Value], kind: &str) -> String {
    updates
        .iter()
        .filter(|update| update["sessionUpdate"] == kind)
        .map(|update| update["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

pub struct Worker {
    pub child: Child,
    pub connection: Connection,
    incoming: mpsc::Receiver<Incoming>,
    pub transcript: Transcript,
    stderr: Arc<Mutex<String>>,
    /// The worker's stdin, taken away to close it.
    stdin: Arc<Mutex<Option<ChildStdin>>>,
}

impl Worker {
    /// Starts `kestrel worker` in the test's home and workspace.
    pub fn spawn(env: &TestEnv) -> Worker {
        Self::spawn_with(env, &[])
    }

    pub fn spawn_with(env: &TestEnv, vars: &[(&str, &str)]) -> Worker {
        let mut command = tokio::process::Command::from(env.command(&["worker"]));
        for (name, value) in vars {
            command.env(name, value);
        }
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        command.kill_on_drop(true);
        let mut child = command.spawn().expect("kestrel worker starts");
        let transcript: Transcript = Arc::default();
        let stdout = TeeReader::new(child.stdout.take().unwrap(), transcript.clone());
        let stdin_handle = Arc::new(Mutex::new(child.stdin.take()));
        let stdin = TeeWriter::new(stdin_handle.clone(), transcript.clone());
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        tokio::spawn(async move {
            let mut buffer = [0u8; 4096];
            while let Ok(read) = pipe.read(&mut buffer).await {
                if read == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..read]));
            }
        });
        let (connection, incoming) = Connection::start(stdout, stdin);
        Worker { child, connection, incoming, transcript, stderr, stdin: stdin_handle }
    }

    /// What the worker wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        tokio::time::timeout(WAIT, self.connection.request(method, params))
            .await
            .unwrap_or_else(|_| panic!("{method} got no answer within {WAIT:?}: {}", self.stderr()))
    }

    pub async fn notify(&self, method: &str, params: Value) {
        self.connection.notify(method, params).await.unwrap();
    }

    pub async fn initialize(&self) -> Value {
        let params = json!({
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}},
            "clientInfo": {"name": "kestrel-tests", "version": "0"}
        });
        self.request("initialize", params).await.unwrap()
    }

    /// `session/new` in `cwd`; the response.
    pub async fn new_session(&self, cwd: &Path) -> Value {
        let params = json!({"cwd": cwd, "mcpServers": []});
        self.request("session/new", params).await.unwrap_or_else(|error| {
            panic!("session/new failed: {error}; stderr: {}", self.stderr())
        })
    }

    /// Initializes and opens a new session; its id.
    pub async fn start_session(&self, cwd: &Path) -> String {
        self.initialize().await;
        self.new_session(cwd).await["sessionId"].as_str().unwrap().to_string()
    }

    /// `session/load`; the result and the updates replayed before it.
    pub async fn load(&mut self, id: &str, cwd: &Path) -> (Result<Value, RpcError>, Vec<Value>) {
        let params = json!({"sessionId": id, "cwd": cwd, "mcpServers": []});
        let result = self.request("session/load", params).await;
        let updates = self.drain_updates();
        (result, updates)
    }

    /// Sends a text prompt and serves the worker until it answers: permission requests
    /// get `answers` in turn (panicking if it asks more often).
    pub async fn prompt(&mut self, id: &str, text: &str, answers: &[Answer]) -> PromptOutcome {
        let pending = self.send_prompt(id, text);
        self.serve(pending, answers, |_| {}).await
    }

    /// Starts a prompt without waiting for it.
    pub fn send_prompt(
        &self,
        id: &str,
        text: &str,
    ) -> tokio::task::JoinHandle<Result<Value, RpcError>> {
        let connection = self.connection.clone();
        let params = json!({"sessionId": id, "prompt": [{"type": "text", "text": text}]});
        tokio::spawn(async move { connection.request("session/prompt", params).await })
    }

    /// Serves the worker until `pending` answers; `on_update` sees each update as it comes.
    pub async fn serve(
        &mut self,
        mut pending: tokio::task::JoinHandle<Result<Value, RpcError>>,
        answers: &[Answer],
        mut on_update: impl FnMut(&Value),
    ) -> PromptOutcome {
        let mut updates = Vec::new();
        let mut permissions = Vec::new();
        let deadline = tokio::time::Instant::now() + WAIT;
        let result = loop {
            tokio::select! {
                result = &mut pending => break result.unwrap(),
                message = self.incoming.recv() => match message {
                    Some(Incoming::Notification(notification)) => {
                        if notification.method == "session/update" {
                            on_update(&notification.params["update"]);
                            updates.push(notification.params["update"].clone());
                        }
                    }
                    Some(Incoming::Request(request)) => {
                        let answer = answers.get(permissions.len()).copied().unwrap_or_else(|| {
                            panic!("unexpected request from the worker: {request:?}")
                        });
                        permissions.push(request.params.clone());
                        self.answer(request, answer).await;
                    }
                    None => panic!("the worker closed its output: {}", self.stderr()),
                },
                () = tokio::time::sleep_until(deadline) => {
                    panic!("the prompt did not finish within {WAIT:?}: {}", self.stderr())
                }
            }
        };
        // Notifications read before the answer are already queued.
        updates.extend(self.drain_updates());
        PromptOutcome { result, updates, permissions }
    }

    async fn answer(&self, request: Request, answer: Answer) {
        assert_eq!(request.method, "session/request_permission");
        let outcome = match answer {
            Answer::Option(id) => json!({"outcome": "selected", "optionId": id}),
            Answer::Cancelled => json!({"outcome": "cancelled"}),
        };
        self.connection.respond(request.id, Ok(json!({"outcome": outcome}))).await.unwrap();
    }

    /// The next update, waiting for it.
    pub async fn next_update(&mut self) -> Value {
        let message = tokio::time::timeout(WAIT, self.incoming.recv())
            .await
            .unwrap_or_else(|_| panic!("no update within {WAIT:?}: {}", self.stderr()));
        match message {
            Some(Incoming::Notification(notification))
                if notification.method == "session/update" =>
            {
                notification.params["update"].clone()
            }
            Some(other) => panic!("expected an update, got {other:?}"),
            None => panic!("the worker closed its output: {}", self.stderr()),
        }
    }

    /// The next request from the worker (a permission request), waiting for it.
    pub async fn next_request(&mut self) -> Request {
        loop {
            let message = tokio::time::timeout(WAIT, self.incoming.recv())
                .await
                .unwrap_or_else(|_| panic!("no request within {WAIT:?}: {}", self.stderr()));
            match message {
                Some(Incoming::Request(request)) => return request,
                Some(Incoming::Notification(_)) => {}
                None => panic!("the worker closed its output: {}", self.stderr()),
            }
        }
    }

    /// Answers a permission request.
    pub async fn answer_permission(&self, request: Request, answer: Answer) {
        self.answer(request, answer).await
    }

    /// Updates already received and not yet taken.
    pub fn drain_updates(&mut self) -> Vec<Value> {
        let mut updates = Vec::new();
        while let Ok(message) = self.incoming.try_recv() {
            if let Incoming::Notification(notification) = message
                && notification.method == "session/update"
            {
                updates.push(notification.params["update"].clone());
            }
        }
        updates
    }

    /// Closes the worker's stdin and waits for it to exit; its exit code.
    pub async fn close(mut self) -> Option<i32> {
        self.close_stdin();
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the worker did not exit after stdin closed"))
            .unwrap();
        status.code()
    }

    /// Closes the worker's stdin (the connection cannot: its reader holds a writer handle
    /// until the worker's output ends).
    pub fn close_stdin(&self) {
        self.stdin.lock().unwrap().take();
    }

    /// The transcript so far, one message per line.
    pub fn transcript_text(&self) -> String {
        let mut text = self.transcript.lock().unwrap().join("\n");
        text.push('\n');
        text
    }
}

/// Copies each complete line read into the transcript.
struct TeeReader {
    inner: ChildStdout,
    transcript: Transcript,
    partial: Vec<u8>,
}

impl TeeReader {
    fn new(inner: ChildStdout, transcript: Transcript) -> Self {
        Self { inner, transcript, partial: Vec::new() }
    }
}

impl AsyncRead for TeeReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &result {
            let fresh = buf.filled()[before..].to_vec();
            let this = &mut *self;
            record(&mut this.partial, &fresh, &this.transcript);
        }
        result
    }
}

/// Copies each complete line written into the transcript; fails once stdin is closed.
struct TeeWriter {
    inner: Arc<Mutex<Option<ChildStdin>>>,
    transcript: Transcript,
    partial: Vec<u8>,
}

impl TeeWriter {
    fn new(inner: Arc<Mutex<Option<ChildStdin>>>, transcript: Transcript) -> Self {
        Self { inner, transcript, partial: Vec::new() }
    }

    fn with_stdin<T>(
        &self,
        use_it: impl FnOnce(Pin<&mut ChildStdin>) -> Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        match self.inner.lock().unwrap().as_mut() {
            Some(stdin) => use_it(Pin::new(stdin)),
            None => Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into())),
        }
    }
}

impl AsyncWrite for TeeWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let result = self.with_stdin(|stdin| stdin.poll_write(cx, buf));
        if let Poll::Ready(Ok(written)) = &result {
            let written = buf[..*written].to_vec();
            let this = &mut *self;
            record(&mut this.partial, &written, &this.transcript);
        }
        result
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.with_stdin(|stdin| stdin.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.with_stdin(|stdin| stdin.poll_shutdown(cx))
    }
}

fn record(partial: &mut Vec<u8>, bytes: &[u8], transcript: &Transcript) {
    partial.extend_from_slice(bytes);
    while let Some(end) = partial.iter().position(|&byte| byte == b'\n') {
        let line: Vec<u8> = partial.drain(..=end).collect();
        let line = String::from_utf8_lossy(&line[..end]).trim().to_string();
        if !line.is_empty() {
            transcript.lock().unwrap().push(line);
        }
    }
}

/// The parsed transcript lines.
pub fn messages(transcript: &Transcript) -> Vec<Value> {
    transcript.lock().unwrap().iter().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The record items (header excluded) of the session `id`.
pub fn record_items(env: &TestEnv, id: &str) -> Vec<Value> {
    let path = env
        .records()
        .into_iter()
        .find(|path| path.file_stem().is_some_and(|stem| stem == id))
        .unwrap_or_else(|| panic!("no record for session {id}"));
    crate::common::read_lines(&path).into_iter().skip(1).collect()
}

/// The `type`s of record items, bookkeeping (usage, checkpoints) left out.
pub fn item_types(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|item| item["type"].as_str().unwrap().to_string())
        .filter(|kind| kind != "usage" && kind != "checkpoint")
        .collect()
}
