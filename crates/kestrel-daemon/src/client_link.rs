//! One connected client as the rest of the daemon sees it: an outbox that never blocks
//! its sender, bounded by the bytes waiting in it. Fan-out from a worker never waits
//! for a client; a client whose backlog passes [`MAX_BACKLOG_BYTES`] (it stopped
//! reading, or reads far slower than the session talks) is cut off rather than allowed
//! to stall a worker or grow the daemon's memory. A burst (a long streamed answer) is
//! absorbed. Everything sent to a client goes through the outbox, in order. What one
//! client can hold in the daemon is thus the backlog limit plus its connection's queue
//! (256 messages).

use kestrel_protocol::jsonrpc::{Connection, Message, Notification, RequestId, RpcError};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Bytes that may wait for one client (beyond its connection's own small queue) before
/// it is cut off, unless `KESTREL_DAEMON_CLIENT_BACKLOG` says otherwise.
pub const MAX_BACKLOG_BYTES: usize = 16 * 1024 * 1024;

/// A client's id, unique within one daemon's life.
pub(crate) type ClientId = u64;

enum OutboxItem {
    /// A message and the bytes it counts against the backlog (0 when exempt).
    Line(String, usize),
    Request {
        method: String,
        params: Value,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    },
}

/// The daemon's handle on one client connection.
#[derive(Debug)]
pub(crate) struct ClientLink {
    id: ClientId,
    outbox: mpsc::UnboundedSender<OutboxItem>,
    backlog: Arc<AtomicUsize>,
    max_backlog: usize,
    /// Cancelled when the client is cut off or the daemon stops; its stream is severed.
    gone: CancellationToken,
    /// The client advertised `session.notices`: restarts are shown as ACP notices.
    notices: AtomicBool,
}

impl std::fmt::Debug for OutboxItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutboxItem::Line(_, bytes) => write!(f, "Line({bytes})"),
            OutboxItem::Request { method, .. } => write!(f, "Request({method})"),
        }
    }
}

impl ClientLink {
    /// A link writing to `connection` through a fresh outbox task; `gone` ends it.
    pub(crate) fn start(
        id: ClientId,
        connection: Connection,
        gone: CancellationToken,
        max_backlog: usize,
    ) -> Self {
        let (outbox, items) = mpsc::unbounded_channel();
        let backlog = Arc::new(AtomicUsize::new(0));
        tokio::spawn(drain_outbox(connection, items, backlog.clone(), gone.clone()));
        Self { id, outbox, backlog, max_backlog, gone, notices: AtomicBool::new(false) }
    }

    pub(crate) fn id(&self) -> ClientId {
        self.id
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.gone.is_cancelled()
    }

    pub(crate) fn set_notices(&self, notices: bool) {
        self.notices.store(notices, Ordering::Relaxed);
    }

    pub(crate) fn wants_notices(&self) -> bool {
        self.notices.load(Ordering::Relaxed)
    }

    /// Queues an already serialised message. Never waits: a backlog over the limit
    /// ([`MAX_BACKLOG_BYTES`] by default) cuts the client off and returns false.
    pub(crate) fn send_line(&self, line: String) -> bool {
        let bytes = line.len();
        let before = self.backlog.fetch_add(bytes, Ordering::Relaxed);
        // One message always fits, however large; after that the limit holds.
        if before > 0 && before + bytes > self.max_backlog {
            self.backlog.fetch_sub(bytes, Ordering::Relaxed);
            // A client this far behind is not keeping up: cut it off (module comment).
            self.gone.cancel();
            return false;
        }
        self.push(OutboxItem::Line(line, bytes))
    }

    /// Queues a message that does not count against the backlog: an attaching client's
    /// history, which is bounded by the session itself and must arrive whole.
    pub(crate) fn send_line_exempt(&self, line: String) -> bool {
        self.push(OutboxItem::Line(line, 0))
    }

    pub(crate) fn notify(&self, method: &str, params: Value) -> bool {
        self.send_line(notification_line(method, params))
    }

    pub(crate) fn notify_exempt(&self, method: &str, params: Value) -> bool {
        self.send_line_exempt(notification_line(method, params))
    }

    pub(crate) fn respond(&self, id: RequestId, result: Result<Value, RpcError>) -> bool {
        self.send_line(Message::Response { id, result }.to_line())
    }

    /// Sends a request to the client after everything already queued, and waits for
    /// its answer. Fails with "the connection closed" when the client goes away first.
    pub(crate) async fn ask(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let (reply, answer) = oneshot::channel();
        if !self.push(OutboxItem::Request { method: method.to_owned(), params, reply }) {
            return Err(RpcError::closed());
        }
        tokio::select! {
            answer = answer => answer.unwrap_or_else(|_| Err(RpcError::closed())),
            () = self.gone.cancelled() => Err(RpcError::closed()),
        }
    }

    fn push(&self, item: OutboxItem) -> bool {
        !self.gone.is_cancelled() && self.outbox.send(item).is_ok()
    }
}

fn notification_line(method: &str, params: Value) -> String {
    Message::Notification(Notification { method: method.to_owned(), params }).to_line()
}

async fn drain_outbox(
    connection: Connection,
    mut items: mpsc::UnboundedReceiver<OutboxItem>,
    backlog: Arc<AtomicUsize>,
    gone: CancellationToken,
) {
    loop {
        let item = tokio::select! {
            item = items.recv() => item,
            () = gone.cancelled() => None,
        };
        let Some(item) = item else { break };
        match item {
            OutboxItem::Line(line, bytes) => {
                let sent = tokio::select! {
                    sent = connection.send_line(line) => sent.is_ok(),
                    () = gone.cancelled() => false,
                };
                backlog.fetch_sub(bytes, Ordering::Relaxed);
                if !sent {
                    break;
                }
            }
            OutboxItem::Request { method, params, reply } => {
                // Everything queued before is already in the connection's queue, so the
                // request is written after it; its answer is awaited off this loop.
                let connection = connection.clone();
                tokio::spawn(async move {
                    let _ = reply.send(connection.request(&method, params).await);
                });
            }
        }
    }
    gone.cancel();
}
