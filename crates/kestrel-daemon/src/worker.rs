//! One worker process and the daemon's link to it: one socket that is the worker's
//! stdin and stdout (a single descriptor per worker on the daemon's side). The daemon
//! writes through a bounded queue (shutting the socket's write side closes the worker's
//! input, which is how a worker is asked to exit) and reads the worker's output itself,
//! in order: responses are matched to their [`Pending`] entry at their place in the
//! stream, so an answer is never delivered ahead of the notifications the worker sent
//! before it. Nothing is buffered for an idle worker.

use crate::client_link::ClientLink;
use crate::settings::WorkerCommand;
use kestrel_platform::{SocketChild, spawn_socket_child};
use kestrel_protocol::jsonrpc::{
    MAX_LINE_BYTES, Message, Notification, Request, RequestId, RpcError,
};
use serde_json::Value;
use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Lines waiting to be written to one worker's stdin.
const WORKER_QUEUE: usize = 256;

/// What a request the daemon sent to a worker is waiting for.
#[derive(Debug)]
pub(crate) enum Pending {
    /// A client's request, relayed; the answer goes back under the client's own id.
    Client { client: Arc<ClientLink>, id: RequestId, kind: Relayed },
    /// `_kestrel/session/history` for a client attaching with `session/load`.
    History { client: Arc<ClientLink>, id: RequestId },
    /// The `session/load` of a restarted worker.
    RestartLoad,
    /// The daemon's own request (initialize, a child's set-up); the answer goes here.
    Daemon(oneshot::Sender<Result<Value, RpcError>>),
    /// A child session's `session/prompt`, sent by the daemon for `_kestrel/session/spawn`:
    /// its turn runs until this is answered (the answer goes to nobody).
    ChildTurn,
}

impl Pending {
    /// Whether this waits for the end of a turn (a `session/prompt`).
    pub(crate) fn is_turn(&self) -> bool {
        match self {
            Pending::Client { kind, .. } => *kind == Relayed::Prompt,
            Pending::ChildTurn => true,
            Pending::History { .. } | Pending::RestartLoad | Pending::Daemon(_) => false,
        }
    }
}

/// Which relayed request a [`Pending::Client`] is, where the daemon acts on the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relayed {
    /// `session/new`: the answer names the session, which then joins the router.
    New,
    /// `session/load` of a session no worker had: the worker replays, then answers.
    Load,
    /// `session/prompt`: a turn is in flight until it is answered.
    Prompt,
    /// Anything else with a `sessionId`.
    Other,
}

/// A running worker as seen from the daemon. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct WorkerLink {
    lines: mpsc::Sender<String>,
    pending: Arc<Mutex<HashMap<i64, Pending>>>,
    /// Held while a prompt decides whether it starts the session's turn (and announces
    /// it) and while a turn's answer is settled (and its end announced): one order of
    /// turn ends and starts for every client.
    turn_order: Arc<Mutex<()>>,
    next_id: Arc<AtomicI64>,
    close: CancellationToken,
    pid: u32,
}

/// A freshly started worker: its process, the link to it and its output to read.
pub(crate) struct StartedWorker {
    pub(crate) process: SocketChild,
    pub(crate) link: WorkerLink,
    pub(crate) output: WorkerOutput,
}

/// Starts `command` as a worker in its own process group, talking over one socket,
/// stderr appended to `log` (0600); with `open_file_limit`, the worker's soft
/// RLIMIT_NOFILE is set back to it. Fails when the log cannot be opened or the program
/// cannot be started (EMFILE included).
pub(crate) fn start(
    command: &WorkerCommand,
    log: &Path,
    open_file_limit: Option<u64>,
) -> std::io::Result<StartedWorker> {
    let mut options = std::fs::OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let stderr = options.open(log)?;
    let mut process = std::process::Command::new(&command.program);
    process.args(&command.args).stderr(Stdio::from(stderr));
    let (child, socket) = spawn_socket_child(&mut process, open_file_limit)?;
    drop(process);
    let (read, write) = socket.into_split();
    let (lines, queued) = mpsc::channel(WORKER_QUEUE);
    let close = CancellationToken::new();
    tokio::spawn(write_lines(write, queued, close.clone()));
    let link = WorkerLink {
        lines,
        pending: Arc::default(),
        turn_order: Arc::default(),
        next_id: Arc::new(AtomicI64::new(1)),
        close,
        pid: child.id(),
    };
    Ok(StartedWorker { process: child, link, output: WorkerOutput::new(read) })
}

impl WorkerLink {
    /// The worker's pid (also its process group id).
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends a request whose answer is handled as `pending` says.
    pub(crate) async fn send_request(
        &self,
        method: &str,
        params: Value,
        pending: Pending,
    ) -> Result<(), RpcError> {
        self.send_turn_request(method, params, pending, || {}).await.map(|_| ())
    }

    /// Sends a request like [`WorkerLink::send_request`]; when it is a prompt that no
    /// other unanswered prompt precedes (it starts the session's turn), `on_start` runs
    /// before the request leaves. Whether it starts the turn is decided under the same
    /// lock that records it, so of two prompts sent at once exactly one starts it, and
    /// under the turn-order lock, so a turn's end being settled
    /// ([`WorkerLink::settle_answer`]) is announced before this start. Returns whether
    /// it started the turn.
    pub(crate) async fn send_turn_request(
        &self,
        method: &str,
        params: Value,
        pending: Pending,
        on_start: impl FnOnce(),
    ) -> Result<bool, RpcError> {
        let number = self.next_id.fetch_add(1, Ordering::Relaxed);
        let starts_turn = {
            let _order = self.turn_order.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let starts_turn = match self.pending.lock() {
                Ok(mut map) => {
                    let starts = pending.is_turn() && !map.values().any(Pending::is_turn);
                    map.insert(number, pending);
                    starts
                }
                Err(_) => false,
            };
            if starts_turn {
                on_start();
            }
            starts_turn
        };
        let request = Message::Request(Request {
            id: RequestId::Number(number),
            method: method.to_owned(),
            params,
        });
        if self.send_line(request.to_line()).await.is_err() {
            if let Ok(mut map) = self.pending.lock() {
                map.remove(&number);
            }
            return Err(RpcError::closed());
        }
        Ok(starts_turn)
    }

    /// Sends a request and waits for its answer (the reader must be running).
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let (reply, answer) = oneshot::channel();
        self.send_request(method, params, Pending::Daemon(reply)).await?;
        answer.await.unwrap_or_else(|_| Err(RpcError::closed()))
    }

    pub(crate) async fn notify(&self, method: &str, params: Value) -> Result<(), RpcError> {
        let message = Message::Notification(Notification { method: method.to_owned(), params });
        self.send_line(message.to_line()).await
    }

    pub(crate) async fn respond(
        &self,
        id: RequestId,
        result: Result<Value, RpcError>,
    ) -> Result<(), RpcError> {
        self.send_line(Message::Response { id, result }.to_line()).await
    }

    async fn send_line(&self, line: String) -> Result<(), RpcError> {
        self.lines.send(line).await.map_err(|_| RpcError::closed())
    }

    /// Takes the pending entry answered by `id` (if the daemon sent that request) and
    /// hands it to `settle` with whether a turn still runs after it (a prompt is left
    /// unanswered). A turn's answer is settled under the turn-order lock: its delivery
    /// and the end of the turn it brings reach clients before a prompt sent at the same
    /// moment announces the next turn's start ([`WorkerLink::send_turn_request`]).
    pub(crate) fn settle_answer<T>(
        &self,
        id: &RequestId,
        settle: impl FnOnce(Pending, bool) -> T,
    ) -> Option<T> {
        let order = self.turn_order.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (pending, turn_running) = {
            let RequestId::Number(number) = id else { return None };
            let mut map = self.pending.lock().ok()?;
            let pending = map.remove(number)?;
            (pending, map.values().any(Pending::is_turn))
        };
        // Only a turn's answer orders against turn starts; others need not hold it.
        let _order = pending.is_turn().then_some(order);
        Some(settle(pending, turn_running))
    }

    /// Takes every unanswered request (the worker is gone).
    pub(crate) fn take_pending(&self) -> Vec<Pending> {
        let Ok(mut map) = self.pending.lock() else { return Vec::new() };
        let mut entries: Vec<(i64, Pending)> = map.drain().collect();
        entries.sort_by_key(|(number, _)| *number);
        entries.into_iter().map(|(_, pending)| pending).collect()
    }

    /// True while a relayed `session/prompt` or a history request is unanswered.
    pub(crate) fn is_busy(&self) -> bool {
        let Ok(map) = self.pending.lock() else { return true };
        map.values().any(|pending| match pending {
            Pending::Client { kind, .. } => *kind == Relayed::Prompt,
            Pending::History { .. }
            | Pending::RestartLoad
            | Pending::Daemon(_)
            | Pending::ChildTurn => true,
        })
    }

    /// Closes the worker's stdin: the documented way to ask it to exit.
    pub(crate) fn close_stdin(&self) {
        self.close.cancel();
    }
}

async fn write_lines(
    mut input: OwnedWriteHalf,
    mut lines: mpsc::Receiver<String>,
    close: CancellationToken,
) {
    loop {
        let line = tokio::select! {
            line = lines.recv() => line,
            () = close.cancelled() => None,
        };
        let Some(mut line) = line else { break };
        line.push('\n');
        let written = tokio::select! {
            written = input.write_all(line.as_bytes()) => written.is_ok(),
            () = close.cancelled() => false,
        };
        if !written {
            break;
        }
    }
    // Dropping the write half shuts the socket's write side: the worker's end of input.
}

/// The worker's output, read when the socket is readable: complete lines are taken
/// from what was read, and only a partial line is kept between reads (so a worker that
/// says nothing costs no buffer).
pub(crate) struct WorkerOutput {
    read: OwnedReadHalf,
    /// Bytes read after the last complete line.
    partial: Vec<u8>,
    /// How far `partial` is known to hold no newline.
    scanned: usize,
    ended: bool,
}

/// Bytes taken per read (on the stack, for the moment of the read).
const READ_CHUNK: usize = 16 * 1024;

/// One line from a worker.
pub(crate) enum WorkerLine {
    /// A message and the line it came from (relayed as is, without re-encoding).
    Message(Message, String),
    /// Something that is not JSON-RPC; logged and skipped.
    Garbage(RpcError),
}

impl WorkerOutput {
    fn new(read: OwnedReadHalf) -> Self {
        Self { read, partial: Vec::new(), scanned: 0, ended: false }
    }

    /// The next line, or `None` at end of file (the worker closed its output or
    /// exited). A line longer than `MAX_LINE_BYTES` or not UTF-8 ends the stream too (a
    /// worker that writes such things is broken and is restarted). Cancel-safe.
    pub(crate) async fn next(&mut self) -> Option<WorkerLine> {
        loop {
            while let Some(line) = self.take_line() {
                let line = String::from_utf8(line).ok()?;
                let trimmed = line.trim();
                if trimmed.is_empty() {
                    continue;
                }
                return Some(match Message::parse(trimmed) {
                    Ok(message) => WorkerLine::Message(message, trimmed.to_owned()),
                    Err(error) => WorkerLine::Garbage(error),
                });
            }
            if self.ended || self.partial.len() >= MAX_LINE_BYTES {
                return None;
            }
            if self.read.readable().await.is_err() {
                return None;
            }
            self.read_available();
        }
    }

    /// The next complete line (without its newline); at end of file, what is left.
    fn take_line(&mut self) -> Option<Vec<u8>> {
        let found = self.partial[self.scanned..].iter().position(|byte| *byte == b'\n');
        let Some(offset) = found else {
            self.scanned = self.partial.len();
            if self.ended && !self.partial.is_empty() {
                self.scanned = 0;
                return Some(std::mem::take(&mut self.partial));
            }
            return None;
        };
        let end = self.scanned + offset;
        let rest = self.partial.split_off(end + 1);
        let mut line = std::mem::replace(&mut self.partial, rest);
        line.truncate(end);
        self.scanned = 0;
        Some(line)
    }

    fn read_available(&mut self) {
        let mut chunk = [0u8; READ_CHUNK];
        match self.read.try_read(&mut chunk) {
            Ok(0) => self.ended = true,
            Ok(read) => self.partial.extend_from_slice(&chunk[..read]),
            Err(error) if error.kind() == ErrorKind::WouldBlock => {}
            Err(_) => self.ended = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A link whose lines go nowhere (kept readable so sends succeed).
    fn link() -> (WorkerLink, mpsc::Receiver<String>) {
        let (lines, queued) = mpsc::channel(WORKER_QUEUE);
        let link = WorkerLink {
            lines,
            pending: Arc::default(),
            turn_order: Arc::default(),
            next_id: Arc::new(AtomicI64::new(1)),
            close: CancellationToken::new(),
            pid: 0,
        };
        (link, queued)
    }

    fn prompt() -> Pending {
        Pending::ChildTurn
    }

    #[tokio::test]
    async fn output_lines_are_split_across_reads_and_a_last_unterminated_line_is_kept() {
        let (ours, mut theirs) = tokio::net::UnixStream::pair().unwrap();
        let (read, _write) = ours.into_split();
        let mut output = WorkerOutput::new(read);
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{{\"t\":\"{}\"}}}}",
            "a".repeat(40_000)
        );
        let writer = tokio::spawn(async move {
            theirs
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n  \nnot json\n")
                .await
                .unwrap();
            theirs.write_all(long.as_bytes()).await.unwrap();
            theirs.write_all(b"\n{\"jsonrpc\":\"2.0\",\"method\":\"last\"}").await.unwrap();
        });
        let Some(WorkerLine::Message(Message::Response { .. }, _)) = output.next().await else {
            panic!("a response first")
        };
        assert!(matches!(output.next().await, Some(WorkerLine::Garbage(_))), "blank lines skipped");
        let Some(WorkerLine::Message(Message::Notification(long), raw)) = output.next().await
        else {
            panic!("the long line")
        };
        assert_eq!(long.method, "x");
        assert_eq!(raw.len(), 40_000 + 48);
        writer.await.unwrap();
        let Some(WorkerLine::Message(Message::Notification(last), _)) = output.next().await else {
            panic!("the last line, ended by end of file")
        };
        assert_eq!(last.method, "last");
        assert!(output.next().await.is_none());
        assert!(output.partial.capacity() == 0, "nothing kept once all is read");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn of_two_prompts_sent_at_once_exactly_one_starts_the_turn() {
        for _ in 0..200 {
            let (link, mut queued) = link();
            let barrier = Arc::new(tokio::sync::Barrier::new(2));
            let send = |link: WorkerLink, barrier: Arc<tokio::sync::Barrier>| async move {
                barrier.wait().await;
                let mut announced = false;
                let started = link
                    .send_turn_request("session/prompt", Value::Null, prompt(), || announced = true)
                    .await;
                (started, announced)
            };
            let one = tokio::spawn(send(link.clone(), barrier.clone()));
            let two = tokio::spawn(send(link.clone(), barrier));
            let (one, two) = (one.await.unwrap(), two.await.unwrap());
            assert_eq!(one.0.clone().unwrap(), one.1, "announced exactly when it started");
            assert_eq!(two.0.clone().unwrap(), two.1);
            assert!(one.1 ^ two.1, "one start: {one:?} {two:?}");
            assert!(queued.recv().await.is_some() && queued.recv().await.is_some());
        }
    }

    /// A turn's answer is settled (its end announced) while a prompt is sent from
    /// elsewhere: the next turn's start is announced after that end, never before it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_turns_end_is_announced_before_a_prompt_sent_meanwhile_starts_the_next() {
        let (link, _queued) = link();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let hear = |heard: &Arc<Mutex<Vec<&'static str>>>, what| heard.lock().unwrap().push(what);
        let first = || hear(&heard, "start 1");
        assert!(
            link.send_turn_request("session/prompt", Value::Null, prompt(), first).await.unwrap()
        );
        let runtime = tokio::runtime::Handle::current();
        let second = link
            .settle_answer(&RequestId::Number(1), |_, turn_running| {
                let (link, heard_too) = (link.clone(), heard.clone());
                let second = std::thread::spawn(move || {
                    let start = || hear(&heard_too, "start 2");
                    runtime.block_on(link.send_turn_request(
                        "session/prompt",
                        Value::Null,
                        prompt(),
                        start,
                    ))
                });
                // The other prompt's moment to start its turn, were it not held.
                std::thread::sleep(Duration::from_millis(200));
                if !turn_running {
                    hear(&heard, "end 1");
                }
                second
            })
            .unwrap();
        assert!(second.join().unwrap().unwrap(), "the second prompt starts a turn");
        assert_eq!(*heard.lock().unwrap(), ["start 1", "end 1", "start 2"]);
    }

    #[tokio::test]
    async fn a_prompt_after_the_running_one_is_answered_starts_a_new_turn() {
        let (link, _queued) = link();
        assert!(
            link.send_turn_request("session/prompt", Value::Null, prompt(), || {}).await.unwrap()
        );
        assert!(
            !link.send_turn_request("session/prompt", Value::Null, prompt(), || {}).await.unwrap()
        );
        let other = Pending::Daemon(oneshot::channel().0);
        assert!(
            !link.send_turn_request("session/set_mode", Value::Null, other, || {}).await.unwrap()
        );
        let still_running = |_, running| running;
        assert!(link.settle_answer(&RequestId::Number(1), still_running).unwrap(), "2 runs");
        assert!(!link.settle_answer(&RequestId::Number(2), still_running).unwrap());
        assert!(
            link.send_turn_request("session/prompt", Value::Null, prompt(), || {}).await.unwrap()
        );
    }
}
