//! The one ordered way out of the worker: every `session/update` and every response goes
//! through a single task, which also keeps the session's history as updates. Because the
//! history snapshot for `_kestrel/session/history` is taken on that same task, between
//! two sends, an attaching client gets exactly the updates sent before it and then
//! every later notification: no gap, no duplicate.

use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::{Connection, RequestId, RpcError};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Messages waiting for the outbox task; senders wait when it is full.
const QUEUE: usize = 64;

enum Outgoing {
    Update { session_id: acp::SessionId, update: Box<acp::SessionUpdate>, notify: bool },
    Respond { id: RequestId, result: Result<Value, RpcError> },
    History { id: RequestId },
    Flush(oneshot::Sender<()>),
}

/// A handle on the outbox task. Cheap to clone; the task ends when every handle is gone.
#[derive(Clone)]
pub(crate) struct Outbox {
    queue: mpsc::Sender<Outgoing>,
}

impl Outbox {
    /// Starts the task that writes to `connection`.
    pub(crate) fn start(connection: Connection) -> (Outbox, JoinHandle<()>) {
        let (queue, receiver) = mpsc::channel(QUEUE);
        let task = tokio::spawn(run(connection, receiver));
        (Outbox { queue }, task)
    }

    /// Sends a `session/update` and adds it to the history.
    pub(crate) async fn update(&self, session_id: &acp::SessionId, update: acp::SessionUpdate) {
        let update = Box::new(update);
        self.send(Outgoing::Update { session_id: session_id.clone(), update, notify: true }).await
    }

    /// Adds to the history without sending: the user's own prompt, which the client
    /// that sent it already shows.
    pub(crate) async fn remember(&self, session_id: &acp::SessionId, update: acp::SessionUpdate) {
        let update = Box::new(update);
        self.send(Outgoing::Update { session_id: session_id.clone(), update, notify: false }).await
    }

    /// Answers a request after everything queued before.
    pub(crate) async fn respond(&self, id: RequestId, result: Result<Value, RpcError>) {
        self.send(Outgoing::Respond { id, result }).await
    }

    /// Answers `_kestrel/session/history` with the history as it stands at this point
    /// of the stream.
    pub(crate) async fn history(&self, id: RequestId) {
        self.send(Outgoing::History { id }).await
    }

    /// Waits until everything queued before has been handed to the connection, so that a
    /// request sent directly afterwards (a permission request) follows it on the wire.
    pub(crate) async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        self.send(Outgoing::Flush(done)).await;
        let _ = wait.await;
    }

    async fn send(&self, message: Outgoing) {
        // The task only stops once the peer is gone; then there is no one to tell.
        let _ = self.queue.send(message).await;
    }
}

async fn run(connection: Connection, mut receiver: mpsc::Receiver<Outgoing>) {
    let mut history = History::default();
    while let Some(message) = receiver.recv().await {
        // A send fails only once the peer is gone; the loop keeps draining so that
        // senders never wait on a dead connection.
        let _ = match message {
            Outgoing::Update { session_id, update, notify } => {
                let params = notify.then(|| {
                    let notification = acp::SessionNotification::new(session_id, (*update).clone());
                    serde_json::to_value(notification)
                });
                history.push(*update);
                match params {
                    Some(Ok(params)) => {
                        connection.notify(acp::CLIENT_METHOD_NAMES.session_update, params).await
                    }
                    Some(Err(error)) => Err(RpcError::internal(error.to_string())),
                    None => Ok(()),
                }
            }
            Outgoing::Respond { id, result } => connection.respond(id, result).await,
            Outgoing::History { id } => {
                let response = acp::kestrel::SessionHistoryResponse { updates: history.snapshot() };
                let result = serde_json::to_value(response)
                    .map_err(|error| RpcError::internal(error.to_string()));
                connection.respond(id, result).await
            }
            Outgoing::Flush(done) => {
                let _ = done.send(());
                Ok(())
            }
        };
    }
}

/// The session's updates so far. Consecutive text chunks of one kind are merged, so the
/// history grows with the conversation, not with the number of deltas.
#[derive(Default)]
struct History {
    updates: Vec<acp::SessionUpdate>,
}

impl History {
    fn push(&mut self, update: acp::SessionUpdate) {
        if let Some(last) = self.updates.last_mut()
            && merge(last, &update)
        {
            return;
        }
        self.updates.push(update);
    }

    fn snapshot(&self) -> Vec<acp::SessionUpdate> {
        self.updates.clone()
    }
}

/// Appends `next` to `last` when both are text chunks of the same kind.
fn merge(last: &mut acp::SessionUpdate, next: &acp::SessionUpdate) -> bool {
    use acp::SessionUpdate::{AgentMessageChunk, AgentThoughtChunk, UserMessageChunk};
    let (into, from) = match (last, next) {
        (AgentMessageChunk(into), AgentMessageChunk(from))
        | (AgentThoughtChunk(into), AgentThoughtChunk(from))
        | (UserMessageChunk(into), UserMessageChunk(from)) => (into, from),
        _ => return false,
    };
    match (&mut into.content, &from.content) {
        (acp::ContentBlock::Text(into), acp::ContentBlock::Text(from))
            if into.annotations.is_none() && from.annotations.is_none() =>
        {
            into.text.push_str(&from.text);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(update: &acp::SessionUpdate) -> Option<&str> {
        match update {
            acp::SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                acp::ContentBlock::Text(text) => Some(&text.text),
                _ => None,
            },
            _ => None,
        }
    }

    #[test]
    fn consecutive_chunks_merge_and_other_updates_separate_them() {
        let chunk = |t: &str| {
            acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(t.to_string().into()))
        };
        let mut history = History::default();
        history.push(chunk("Hel"));
        history.push(chunk("lo"));
        history.push(acp::SessionUpdate::ToolCall(acp::ToolCall::new("c", "shell")));
        history.push(chunk("!"));
        let updates = history.snapshot();
        assert_eq!(updates.len(), 3);
        assert_eq!(text(&updates[0]), Some("Hello"));
        assert_eq!(text(&updates[2]), Some("!"));
    }
}
