//! The exec host's subagents: each child is a `kestrel worker` process this host starts
//! itself (in its own process group, stderr to `$KESTREL_HOME/logs/`) and drives over
//! ACP: `initialize`, `session/new` naming the parent, `session/prompt`. The child's
//! model and mode are given in its environment (`KESTREL_MODEL`, `KESTREL_MODE`). No one
//! can answer a child's permission request here, so each is rejected.

use super::child_record::ChildRecord;
use super::{CANCEL_GRACE, ChildOutcome, ChildRequest, ChildSession, START_TIMEOUT, SubagentHost};
use futures_util::future::BoxFuture;
use kestrel_platform::{ProcessGroup, Signal, spawn_group};
use kestrel_protocol::jsonrpc::{Connection, Incoming, RpcError};
use kestrel_protocol::{SessionId, StopReason, acp};
use kestrel_store::KestrelHome;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a finished child's worker gets to exit after its stdin closes.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Starts children as `PROGRAM worker` processes.
pub struct ProcessHost {
    home: KestrelHome,
    program: PathBuf,
    started: AtomicU64,
}

impl ProcessHost {
    /// Children run `program worker`: the kestrel binary itself
    /// (`std::env::current_exe()`) in `kestrel exec`.
    pub fn new(home: KestrelHome, program: PathBuf) -> Self {
        Self { home, program, started: AtomicU64::new(0) }
    }

    async fn start(&self, request: ChildRequest) -> Result<Box<dyn ChildSession>, String> {
        let number = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        let log = self.log_file(&request.parent_id, number);
        let mut command = tokio::process::Command::new(&self.program);
        command
            .arg("worker")
            .env("KESTREL_HOME", self.home.root())
            .env("KESTREL_MODEL", &request.model)
            .env("KESTREL_MODE", request.mode.as_str())
            .current_dir(&request.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log.map_or_else(|_| Stdio::null(), Stdio::from))
            .kill_on_drop(false);
        let mut group = spawn_group(&mut command)
            .map_err(|error| format!("cannot run `{} worker`: {error}", self.program.display()))?;
        let child = group.child_mut();
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = group.signal(Signal::Kill);
            return Err("the worker's pipes were not set up".into());
        };
        let done = CancellationToken::new();
        let (connection, incoming) = Connection::start(stdout, closable(stdin, done.clone()));
        tokio::spawn(answer_child(connection.clone(), incoming, done.clone()));
        let opened = tokio::time::timeout(START_TIMEOUT, open(&connection, &request)).await;
        let id = match opened {
            Ok(Ok(id)) => id,
            Ok(Err(message)) => return Err(give_up(group, &done, message, &self.home).await),
            Err(_) => {
                let message =
                    format!("its worker did not answer within {} s", START_TIMEOUT.as_secs());
                return Err(give_up(group, &done, message, &self.home).await);
            }
        };
        let record = match ChildRecord::locate(&self.home, &id) {
            Ok(record) => record,
            Err(message) => return Err(give_up(group, &done, message, &self.home).await),
        };
        let params = json!({
            "sessionId": id.as_str(),
            "prompt": [{"type": "text", "text": request.prompt}],
        });
        let prompting = connection.clone();
        let prompt = tokio::spawn(async move {
            prompting.request(acp::AGENT_METHOD_NAMES.session_prompt, params).await
        });
        Ok(Box::new(ProcessChild { id, group, connection, done, prompt, record }))
    }

    /// `logs/worker-<parent>-task-<n>.log`, appended, 0600.
    fn log_file(&self, parent: &SessionId, number: u64) -> std::io::Result<std::fs::File> {
        let logs = self.home.logs_dir();
        kestrel_store::ensure_dir(&logs).map_err(std::io::Error::other)?;
        let mut options = std::fs::OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(logs.join(format!("worker-{parent}-task-{number}.log")))
    }
}

impl SubagentHost for ProcessHost {
    fn spawn(&self, request: ChildRequest) -> BoxFuture<'_, Result<Box<dyn ChildSession>, String>> {
        Box::pin(self.start(request))
    }
}

/// A writer into the child's stdin that closes it once `done` fires: the connection
/// itself keeps its output open while it still reads, and the worker exits only when
/// its stdin closes.
fn closable(
    mut stdin: tokio::process::ChildStdin,
    done: CancellationToken,
) -> tokio::io::DuplexStream {
    let (writer, mut reader) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::io::copy(&mut reader, &mut stdin) => {}
            () = done.cancelled() => {}
        }
        // Dropping `stdin` closes it.
    });
    writer
}

/// `initialize` and `session/new` (naming the parent); the child's session id.
async fn open(connection: &Connection, request: &ChildRequest) -> Result<SessionId, String> {
    let initialize = json!({"protocolVersion": 1, "clientCapabilities": {}});
    connection
        .request(acp::AGENT_METHOD_NAMES.initialize, initialize)
        .await
        .map_err(|error| format!("its worker refused `initialize`: {}", error.message))?;
    let params = json!({
        "cwd": request.cwd,
        "mcpServers": [],
        "_meta": {"kestrel": {"parentSessionId": request.parent_id.as_str()}},
    });
    let response = connection
        .request(acp::AGENT_METHOD_NAMES.session_new, params)
        .await
        .map_err(|error| format!("its session could not be created: {}", error.message))?;
    response
        .get("sessionId")
        .and_then(Value::as_str)
        .map(SessionId::from_string)
        .ok_or_else(|| "its worker's session/new answer has no sessionId".to_string())
}

/// Stops a child that could not be set up; the message says where its log is.
async fn give_up(
    mut group: ProcessGroup,
    done: &CancellationToken,
    message: String,
    home: &KestrelHome,
) -> String {
    done.cancel();
    let _ = group.terminate(Duration::from_millis(500)).await;
    format!("{message} (its log is in {})", home.logs_dir().display())
}

/// Answers what the child asks its client: permission requests are rejected (no one
/// is there to ask), anything else is not supported. Notifications are dropped: the
/// parent reads the child's record instead.
async fn answer_child(
    connection: Connection,
    mut incoming: tokio::sync::mpsc::Receiver<Incoming>,
    done: CancellationToken,
) {
    loop {
        let message = tokio::select! {
            message = incoming.recv() => message,
            () = done.cancelled() => None,
        };
        let Some(message) = message else { return };
        let Incoming::Request(request) = message else { continue };
        let result = if request.method == acp::CLIENT_METHOD_NAMES.session_request_permission {
            Ok(reject(&request.params))
        } else {
            Err(RpcError::method_not_found(&request.method))
        };
        let _ = connection.respond(request.id, result).await;
    }
}

/// The permission answer that refuses: the request's `reject_once` option, or cancelled.
fn reject(params: &Value) -> Value {
    let options = params.get("options").and_then(Value::as_array);
    let reject = options
        .into_iter()
        .flatten()
        .find(|option| option.get("kind").and_then(Value::as_str) == Some("reject_once"));
    match reject.and_then(|option| option.get("optionId")) {
        Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
        None => json!({"outcome": {"outcome": "cancelled"}}),
    }
}

/// A running child process.
struct ProcessChild {
    id: SessionId,
    group: ProcessGroup,
    connection: Connection,
    done: CancellationToken,
    prompt: JoinHandle<Result<Value, RpcError>>,
    record: ChildRecord,
}

impl ProcessChild {
    async fn run(mut self, cancel: CancellationToken) -> Result<ChildOutcome, String> {
        let answer = tokio::select! {
            answer = &mut self.prompt => Some(answer),
            () = cancel.cancelled() => None,
        };
        let answer = match answer {
            Some(answer) => Some(answer),
            None => {
                let params = json!({"sessionId": self.id.as_str()});
                let _ =
                    self.connection.notify(acp::AGENT_METHOD_NAMES.session_cancel, params).await;
                tokio::time::timeout(CANCEL_GRACE, &mut self.prompt).await.ok()
            }
        };
        // Closing stdin asks the worker to exit; whatever is left of its group is killed.
        self.done.cancel();
        self.prompt.abort();
        drop(self.connection);
        if tokio::time::timeout(EXIT_GRACE, self.group.wait()).await.is_err() {
            let _ = self.group.signal(Signal::Kill);
            let _ = self.group.wait().await;
        }
        let _ = kestrel_platform::kill_group(self.group.id(), Signal::Kill);
        if let Some(outcome) = self.record.poll()? {
            return Ok(outcome);
        }
        // The turn left no end in the record: the worker was killed or failed outside it.
        let error = match answer {
            None => "cancelled; the subagent did not stop in time and was killed".to_string(),
            Some(Ok(Err(error))) => error.message,
            Some(Ok(Ok(_))) => "the subagent's turn ended without being recorded".to_string(),
            Some(Err(error)) => error.to_string(),
        };
        let stop_reason =
            if cancel.is_cancelled() { StopReason::Cancelled } else { StopReason::Failed };
        Ok(self.record.outcome(stop_reason, Some(error)))
    }
}

impl ChildSession for ProcessChild {
    fn id(&self) -> &SessionId {
        &self.id
    }

    fn finish(
        self: Box<Self>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ChildOutcome, String>> {
        Box::pin(self.run(cancel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_requests_are_answered_with_the_reject_option() {
        let params = json!({"options": [
            {"optionId": "allow_once", "kind": "allow_once", "name": "Allow"},
            {"optionId": "reject_once", "kind": "reject_once", "name": "Reject"}
        ]});
        assert_eq!(
            reject(&params),
            json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}})
        );
        assert_eq!(reject(&json!({})), json!({"outcome": {"outcome": "cancelled"}}));
    }

    #[tokio::test]
    async fn a_program_that_cannot_run_is_a_clear_error() {
        let home_dir = tempfile::tempdir().unwrap();
        let host = ProcessHost::new(
            KestrelHome::at(home_dir.path()),
            home_dir.path().join("no-such-kestrel"),
        );
        let request = ChildRequest {
            parent_id: SessionId::new(),
            cwd: home_dir.path().to_path_buf(),
            prompt: "p".into(),
            model: "a/b".into(),
            mode: kestrel_protocol::Mode::ReadOnly,
        };
        let error = host.spawn(request).await.err().unwrap();
        assert!(error.contains("cannot run") && error.contains("no-such-kestrel"), "{error}");
    }
}
