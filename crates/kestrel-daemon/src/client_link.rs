//! One connected client as the rest of the daemon sees it: an outbox that never blocks
//! its sender, bounded by the bytes waiting in it. Fan-out from a worker never waits
//! for a client; a client whose backlog passes [`MAX_BACKLOG_BYTES`] (it stopped
//! reading, or reads far slower than the session talks) is cut off rather than allowed
//! to stall a worker or grow the daemon's memory. A burst (a long streamed answer) is
//! absorbed. Everything sent to a client goes through the outbox, in order, and counts:
//! replies, notifications, permission requests and an attaching client's history (which
//! may pass the limit once, so a long history still arrives whole). What one client can
//! hold in the daemon is thus the backlog limit plus one history plus what its
//! connection's own requests wait in (64 KiB); the outbox itself holds at most
//! [`MAX_QUEUED_MESSAGES`]. One task per client takes the outbox and writes it to the
//! socket itself, whatever is queued in one write: an update reaches ten attached
//! clients after ten task wake-ups, not twenty.

use kestrel_protocol::jsonrpc::{Connection, Message, Notification, RequestId, RpcError};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Bytes that may wait for one client (beyond its connection's own small queue) before
/// it is cut off, unless `KESTREL_DAEMON_CLIENT_BACKLOG` says otherwise.
pub const MAX_BACKLOG_BYTES: usize = 16 * 1024 * 1024;

/// Messages that may wait in one client's outbox; past this the client is cut off like
/// one over its byte backlog.
pub const MAX_QUEUED_MESSAGES: usize = 65_536;

/// Bytes gathered from the outbox into one write to the socket.
const WRITE_BATCH: usize = 64 * 1024;

/// A client's id, unique within one daemon's life.
pub(crate) type ClientId = u64;

enum OutboxItem {
    /// A message and the bytes it counts against the backlog.
    Line(String, usize),
    Request {
        method: String,
        params: Value,
        /// What it counts against the backlog (its params' length).
        bytes: usize,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    },
}

/// The daemon's handle on one client connection.
#[derive(Debug)]
pub(crate) struct ClientLink {
    id: ClientId,
    outbox: mpsc::Sender<OutboxItem>,
    backlog: Arc<AtomicUsize>,
    max_backlog: usize,
    /// Cancelled when the client is cut off or the daemon stops; its stream is severed.
    gone: CancellationToken,
    /// The client advertised `session.notices`: it gets ACP notices and Kestrel's
    /// extension notifications (a plain ACP client gets neither).
    extensions: AtomicBool,
}

impl std::fmt::Debug for OutboxItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutboxItem::Line(_, bytes) => write!(f, "Line({bytes})"),
            OutboxItem::Request { method, bytes, .. } => write!(f, "Request({method}, {bytes})"),
        }
    }
}

impl ClientLink {
    /// A link writing to `socket` from a fresh outbox task, which also copies what
    /// `connection` writes (its requests, read from `requests`) to the socket; `gone`
    /// ends it.
    pub(crate) fn start<W, R>(
        id: ClientId,
        socket: W,
        connection: Connection,
        requests: R,
        gone: CancellationToken,
        max_backlog: usize,
    ) -> Self
    where
        W: AsyncWrite + Unpin + Send + 'static,
        R: AsyncRead + Unpin + Send + 'static,
    {
        let (outbox, items) = mpsc::channel(MAX_QUEUED_MESSAGES);
        let backlog = Arc::new(AtomicUsize::new(0));
        let writer = Writer { socket, connection, backlog: backlog.clone(), batch: Vec::new() };
        tokio::spawn(drain_outbox(writer, requests, items, gone.clone()));
        Self { id, outbox, backlog, max_backlog, gone, extensions: AtomicBool::new(false) }
    }

    pub(crate) fn id(&self) -> ClientId {
        self.id
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.gone.is_cancelled()
    }

    /// Records whether the client opted in to notices and Kestrel's extension
    /// notifications (`initialize`'s `clientCapabilities.session.notices`).
    pub(crate) fn set_takes_extensions(&self, opted_in: bool) {
        self.extensions.store(opted_in, Ordering::Relaxed);
    }

    /// Whether the client opted in to ACP notices and Kestrel's extension notifications
    /// (a Kestrel client: the TUI, the swarm); otherwise it is a plain ACP client.
    pub(crate) fn takes_extensions(&self) -> bool {
        self.extensions.load(Ordering::Relaxed)
    }

    /// Queues an already serialised message. Never waits: a backlog over the limit
    /// ([`MAX_BACKLOG_BYTES`] by default) cuts the client off and returns false.
    pub(crate) fn send_line(&self, line: String) -> bool {
        let bytes = line.len();
        self.count(bytes, false) && self.push(OutboxItem::Line(line, bytes))
    }

    /// Queues a line of an attaching client's history. It counts, but is refused only
    /// when the backlog is already over the limit: one history arrives whole however
    /// long; a client that attaches again without reading it is cut off.
    pub(crate) fn send_history_line(&self, line: String) -> bool {
        let bytes = line.len();
        self.count(bytes, true) && self.push(OutboxItem::Line(line, bytes))
    }

    /// Adds `bytes` to the backlog; false (and the client cut off) when that passes the
    /// limit. One message always fits, however large; after that the limit holds.
    fn count(&self, bytes: usize, history: bool) -> bool {
        let before = self.backlog.fetch_add(bytes, Ordering::Relaxed);
        let over = if history {
            before > self.max_backlog
        } else {
            before > 0 && before + bytes > self.max_backlog
        };
        if over {
            self.backlog.fetch_sub(bytes, Ordering::Relaxed);
            // A client this far behind is not keeping up: cut it off (module comment).
            self.gone.cancel();
        }
        !over
    }

    /// Queues a notification the daemon writes. Every notification to a client, the
    /// daemon's own and a worker's relayed, goes through here or
    /// [`ClientLink::relay_notification`]: the one gate that keeps Kestrel's extensions
    /// (`_kestrel/...`) from plain ACP clients.
    pub(crate) fn notify(&self, method: &str, params: Value) -> bool {
        if !self.takes(method) {
            return true;
        }
        self.send_line(notification_line(method, params))
    }

    /// Queues a notification already serialised (`line`, a worker's as it came), gated
    /// as [`ClientLink::notify`].
    pub(crate) fn relay_notification(&self, method: &str, line: String) -> bool {
        if !self.takes(method) {
            return true;
        }
        self.send_line(line)
    }

    /// Whether the client is sent notifications of `method`: a standard one always, an
    /// extension (a leading underscore) only when it opted in.
    fn takes(&self, method: &str) -> bool {
        !method.starts_with('_') || self.takes_extensions()
    }

    pub(crate) fn notify_history(&self, method: &str, params: Value) -> bool {
        if !self.takes(method) {
            return true;
        }
        self.send_history_line(notification_line(method, params))
    }

    pub(crate) fn respond(&self, id: RequestId, result: Result<Value, RpcError>) -> bool {
        self.send_line(Message::Response { id, result }.to_line())
    }

    /// Sends a request to the client after everything already queued, and waits for
    /// its answer. Fails with "the connection closed" when the client goes away first.
    pub(crate) async fn ask(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let (reply, answer) = oneshot::channel();
        let bytes = method.len() + params.to_string().len();
        if !self.count(bytes, false) {
            return Err(RpcError::closed());
        }
        if !self.push(OutboxItem::Request { method: method.to_owned(), params, bytes, reply }) {
            return Err(RpcError::closed());
        }
        tokio::select! {
            answer = answer => answer.unwrap_or_else(|_| Err(RpcError::closed())),
            () = self.gone.cancelled() => Err(RpcError::closed()),
        }
    }

    /// Never waits: a full outbox cuts the client off, like a backlog over the limit.
    fn push(&self, item: OutboxItem) -> bool {
        if self.gone.is_cancelled() {
            self.uncount(&item);
            return false;
        }
        match self.outbox.try_send(item) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(item)) => {
                self.uncount(&item);
                self.gone.cancel();
                false
            }
            Err(mpsc::error::TrySendError::Closed(item)) => {
                self.uncount(&item);
                false
            }
        }
    }

    fn uncount(&self, item: &OutboxItem) {
        let bytes = match item {
            OutboxItem::Line(_, bytes) | OutboxItem::Request { bytes, .. } => *bytes,
        };
        self.backlog.fetch_sub(bytes, Ordering::Relaxed);
    }
}

fn notification_line(method: &str, params: Value) -> String {
    Message::Notification(Notification { method: method.to_owned(), params }).to_line()
}

/// The socket side of one client.
struct Writer<W> {
    socket: W,
    connection: Connection,
    backlog: Arc<AtomicUsize>,
    /// Lines waiting for one write; emptied (and kept small) after each.
    batch: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> Writer<W> {
    /// Takes `item` in order; false once the socket failed.
    async fn take(&mut self, item: OutboxItem) -> bool {
        match item {
            OutboxItem::Line(line, bytes) => {
                self.batch.extend_from_slice(line.as_bytes());
                self.batch.push(b'\n');
                self.backlog.fetch_sub(bytes, Ordering::Relaxed);
                true
            }
            OutboxItem::Request { method, params, bytes, reply } => {
                self.backlog.fetch_sub(bytes, Ordering::Relaxed);
                // Everything queued before is written first; the request itself goes
                // through the connection (which matches its answer), and is awaited off
                // this loop.
                let written = self.flush().await;
                let connection = self.connection.clone();
                tokio::spawn(async move {
                    let _ = reply.send(connection.request(&method, params).await);
                });
                written
            }
        }
    }

    async fn flush(&mut self) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        let written = self.socket.write_all(&self.batch).await.is_ok();
        self.batch.clear();
        if self.batch.capacity() > 4 * WRITE_BATCH {
            self.batch = Vec::new();
        }
        written
    }

    async fn write_line(&mut self, mut line: String) -> bool {
        line.push('\n');
        self.socket.write_all(line.as_bytes()).await.is_ok()
    }
}

/// What the writer takes next: from the outbox, or a line the connection wrote.
enum Next {
    Item(OutboxItem),
    Request(String),
}

async fn drain_outbox<W, R>(
    mut writer: Writer<W>,
    requests: R,
    mut items: mpsc::Receiver<OutboxItem>,
    gone: CancellationToken,
) where
    W: AsyncWrite + Unpin,
    R: AsyncRead + Unpin,
{
    let mut requests = Some(BufReader::new(requests).lines());
    loop {
        let next = tokio::select! {
            item = items.recv() => item.map(Next::Item),
            line = next_request(&mut requests) => Some(Next::Request(line)),
            () = gone.cancelled() => None,
        };
        let written = match next {
            None => break,
            Some(Next::Request(line)) => writer.write_line(line).await,
            Some(Next::Item(item)) => {
                let mut written = writer.take(item).await;
                // Whatever else is queued goes in the same write.
                while written && writer.batch.len() < WRITE_BATCH {
                    let Ok(item) = items.try_recv() else { break };
                    written = writer.take(item).await;
                }
                written && writer.flush().await
            }
        };
        if !written {
            break;
        }
    }
    let _ = writer.socket.shutdown().await;
    gone.cancel();
}

/// The next line the connection wrote (a request to the client, or its answer to
/// something unparsable); pending for good once the connection stopped writing.
async fn next_request<R: AsyncRead + Unpin>(
    requests: &mut Option<tokio::io::Lines<BufReader<R>>>,
) -> String {
    if let Some(lines) = requests
        && let Ok(Some(line)) = lines.next_line().await
    {
        return line;
    }
    *requests = None;
    std::future::pending().await
}
