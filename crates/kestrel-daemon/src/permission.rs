//! Permission requests: a worker's `session/request_permission` goes to every attached
//! client and the first answer wins; with no client attached it waits, and is shown to
//! the next client that attaches. A client that goes away without answering is no answer.

use crate::client_link::ClientLink;
use crate::messages;
use crate::session::{LiveSession, PendingPermission};
use crate::worker::WorkerLink;
use kestrel_protocol::jsonrpc::{RequestId, RpcError};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Records the worker's request and asks every attached client.
pub(crate) fn ask_all(session: &Arc<LiveSession>, link: &WorkerLink, id: RequestId, params: Value) {
    let clients = {
        let mut state = session.state();
        state.permissions.push(PendingPermission {
            worker_pid: link.pid(),
            id,
            params,
            asked: BTreeSet::new(),
        });
        state.clients.values().cloned().collect::<Vec<_>>()
    };
    for client in clients {
        offer(session, &client);
    }
}

/// Asks `client` every waiting permission request it has not been asked yet.
pub(crate) fn offer(session: &Arc<LiveSession>, client: &Arc<ClientLink>) {
    let mut to_ask = Vec::new();
    {
        let mut state = session.state();
        let Some(link) = state.worker.clone() else { return };
        for permission in &mut state.permissions {
            if permission.worker_pid == link.pid() && permission.asked.insert(client.id()) {
                to_ask.push((link.clone(), permission.id.clone(), permission.params.clone()));
            }
        }
    }
    for (link, id, params) in to_ask {
        let session = session.clone();
        let client = client.clone();
        tokio::spawn(async move {
            let answer = client.ask("session/request_permission", params).await;
            resolve(&session, &link, &client, id, answer).await;
        });
    }
}

async fn resolve(
    session: &LiveSession,
    link: &WorkerLink,
    client: &ClientLink,
    id: RequestId,
    answer: Result<Value, RpcError>,
) {
    let won = {
        let mut state = session.state();
        let position = state
            .permissions
            .iter()
            .position(|permission| permission.worker_pid == link.pid() && permission.id == id);
        match position {
            // The client left without answering: the request waits for another one.
            Some(index)
                if answer.as_ref().err() == Some(&RpcError::closed()) || client.is_gone() =>
            {
                state.permissions[index].asked.remove(&client.id());
                false
            }
            Some(index) => {
                state.permissions.remove(index);
                true
            }
            // Someone else answered first, or the turn was cancelled.
            None => false,
        }
    };
    if won {
        let _ = link.respond(id, answer).await;
    }
}

/// The turn is being cancelled: every waiting request of the current worker is
/// answered `cancelled`, as ACP requires of a client after `session/cancel`.
pub(crate) async fn cancel_all(session: &LiveSession) {
    let (link, ids) = {
        let mut state = session.state();
        let Some(link) = state.worker.clone() else { return };
        let pid = link.pid();
        let ids: Vec<RequestId> = state
            .permissions
            .iter()
            .filter(|permission| permission.worker_pid == pid)
            .map(|permission| permission.id.clone())
            .collect();
        state.permissions.retain(|permission| permission.worker_pid != pid);
        (link, ids)
    };
    for id in ids {
        let _ = link.respond(id, Ok(messages::permission_cancelled())).await;
    }
}
