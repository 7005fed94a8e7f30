//! One connected client as the rest of the daemon sees it: a bounded outbox that never
//! blocks its sender. Fan-out from a worker uses `try_send`; a client whose outbox stays
//! full (it stopped reading) is cut off rather than allowed to stall a worker or grow
//! the daemon's memory. Everything sent to a client goes through the outbox, in order.

use kestrel_protocol::jsonrpc::{Connection, Message, Notification, RequestId, RpcError};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Messages waiting for one client beyond the connection's own queue. A client that
/// falls this far behind is disconnected (see the module comment).
pub(crate) const CLIENT_OUTBOX: usize = 1024;

/// A client's id, unique within one daemon's life.
pub(crate) type ClientId = u64;

enum OutboxItem {
    Line(String),
    Request { method: String, params: Value, reply: oneshot::Sender<Result<Value, RpcError>> },
}

/// The daemon's handle on one client connection.
#[derive(Debug)]
pub(crate) struct ClientLink {
    id: ClientId,
    outbox: mpsc::Sender<OutboxItem>,
    /// Cancelled when the client is gone or cut off; its stream is severed with it.
    gone: CancellationToken,
    /// The client advertised `session.notices`: restarts are shown as ACP notices.
    notices: AtomicBool,
}

impl std::fmt::Debug for OutboxItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutboxItem::Line(_) => f.write_str("Line"),
            OutboxItem::Request { method, .. } => write!(f, "Request({method})"),
        }
    }
}

impl ClientLink {
    /// A link writing to `connection` through a fresh outbox task; `gone` ends it.
    pub(crate) fn start(id: ClientId, connection: Connection, gone: CancellationToken) -> Self {
        let (outbox, items) = mpsc::channel(CLIENT_OUTBOX);
        tokio::spawn(drain_outbox(connection, items, gone.clone()));
        Self { id, outbox, gone, notices: AtomicBool::new(false) }
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

    /// Queues an already serialised message. Never waits: a full outbox cuts the client
    /// off and returns false.
    pub(crate) fn send_line(&self, line: String) -> bool {
        self.push(OutboxItem::Line(line))
    }

    pub(crate) fn notify(&self, method: &str, params: Value) -> bool {
        let message = Message::Notification(Notification { method: method.to_owned(), params });
        self.send_line(message.to_line())
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
        if self.gone.is_cancelled() {
            return false;
        }
        match self.outbox.try_send(item) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                // A client this far behind is not reading: cut it off (module comment).
                self.gone.cancel();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

async fn drain_outbox(
    connection: Connection,
    mut items: mpsc::Receiver<OutboxItem>,
    gone: CancellationToken,
) {
    loop {
        let item = tokio::select! {
            item = items.recv() => item,
            () = gone.cancelled() => None,
        };
        let Some(item) = item else { break };
        match item {
            OutboxItem::Line(line) => {
                let sent = tokio::select! {
                    sent = connection.send_line(line) => sent.is_ok(),
                    () = gone.cancelled() => false,
                };
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
