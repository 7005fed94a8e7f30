//! Permission requests: a worker's `session/request_permission` goes to every attached
//! client and the first answer wins; with no client attached it waits, and is shown to
//! the next client that attaches. A client that goes away without answering is no answer.
//! A subagent's request also goes to the plain ACP clients of its parent and their
//! ancestors (an editor follows the parent only), naming the subagent.

use crate::client_link::ClientLink;
use crate::messages;
use crate::router::Router;
use crate::session::{LiveSession, PendingPermission};
use crate::worker::WorkerLink;
use kestrel_protocol::jsonrpc::{RequestId, RpcError};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

/// How far up a chain of parents a subagent's request goes (a guard against a cycle in a
/// damaged index).
const MAX_ANCESTORS: usize = 16;

/// Records the worker's request and asks every attached client, and, for a subagent,
/// the clients of its ancestors.
pub(crate) fn ask_all(
    router: &Router,
    session: &Arc<LiveSession>,
    link: &WorkerLink,
    id: RequestId,
    params: Value,
) {
    let clients = {
        let mut state = session.state();
        state.permissions.push(PendingPermission {
            worker_pid: link.pid(),
            id: id.clone(),
            params: params.clone(),
            asked: BTreeSet::new(),
        });
        state.clients.values().cloned().collect::<Vec<_>>()
    };
    for client in clients {
        offer(session, &client);
    }
    offer_to_ancestors(router, session, link, &id, &params);
}

/// Asks the clients of `session`'s ancestors (live in the daemon) its waiting request:
/// an editor attached to the parent only would never see it, and the parent's `task`
/// would wait forever. Each gets it under the session id it knows, with the subagent
/// named in the title and in `_meta.kestrel.childSessionId`. Clients that take Kestrel's
/// notices are left out: they attach to children themselves.
fn offer_to_ancestors(
    router: &Router,
    session: &Arc<LiveSession>,
    link: &WorkerLink,
    id: &RequestId,
    params: &Value,
) {
    let Some(child_id) = session.id() else { return };
    for ancestor_id in ancestors(router, child_id) {
        let Some(ancestor) = router.session(&ancestor_id) else { continue };
        let clients: Vec<Arc<ClientLink>> = ancestor.state().clients.values().cloned().collect();
        // Kestrel's own clients (those that take its notices: the TUI) follow a parent's
        // children themselves and are asked when they attach to the child.
        for client in clients.into_iter().filter(|client| !client.takes_extensions()) {
            let fresh = session
                .state()
                .permissions
                .iter_mut()
                .find(|permission| permission.worker_pid == link.pid() && permission.id == *id)
                .is_some_and(|permission| permission.asked.insert(client.id()));
            if !fresh {
                continue;
            }
            let asked = for_ancestor(params, child_id, &ancestor_id);
            ask_for_ancestor(session, link, client, id, asked);
        }
    }
}

/// Asks `client` the subagent's request (already in the ancestor's shape) and settles
/// it with the answer.
fn ask_for_ancestor(
    session: &Arc<LiveSession>,
    link: &WorkerLink,
    client: Arc<ClientLink>,
    id: &RequestId,
    asked: Value,
) {
    let (session, link, id) = (session.clone(), link.clone(), id.clone());
    tokio::spawn(async move {
        let answer = client.ask("session/request_permission", asked).await;
        resolve(&session, &link, &client, id, answer).await;
    });
}

/// Asks `client`, attaching to `session`, the waiting requests of `session`'s live
/// descendants, as `offer_to_ancestors` would have when they arrived: a client that
/// attaches later (or after the one asked left without answering) is asked too.
pub(crate) fn offer_descendants(
    router: &Router,
    session: &Arc<LiveSession>,
    client: &Arc<ClientLink>,
) {
    if client.takes_extensions() {
        return;
    }
    let Some(ancestor_id) = session.id().map(str::to_owned) else { return };
    for descendant in router.sessions() {
        let Some(child_id) = descendant.id().map(str::to_owned) else { continue };
        if child_id == ancestor_id || !ancestors(router, &child_id).contains(&ancestor_id) {
            continue;
        }
        let to_ask: Vec<(WorkerLink, RequestId, Value)> = {
            let mut state = descendant.state();
            let Some(link) = state.worker.clone() else { continue };
            state
                .permissions
                .iter_mut()
                .filter(|permission| permission.worker_pid == link.pid())
                .filter_map(|permission| {
                    permission
                        .asked
                        .insert(client.id())
                        .then(|| (link.clone(), permission.id.clone(), permission.params.clone()))
                })
                .collect()
        };
        for (link, id, params) in to_ask {
            let asked = for_ancestor(&params, &child_id, &ancestor_id);
            ask_for_ancestor(&descendant, &link, client.clone(), &id, asked);
        }
    }
}

/// The ids of `session_id`'s parent, its parent's parent, ... (the router's lineage).
fn ancestors(router: &Router, session_id: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut current = session_id.to_owned();
    while let Some(parent) = router.parent_of(&current) {
        if found.len() >= MAX_ANCESTORS || found.contains(&parent) {
            break;
        }
        found.push(parent.clone());
        current = parent;
    }
    found
}

/// A subagent's request as its ancestor's client sees it: under the ancestor's session
/// id, titled `subagent ID: TITLE`, with the subagent's id in `_meta`.
fn for_ancestor(params: &Value, child_id: &str, ancestor_id: &str) -> Value {
    let mut params = params.clone();
    let Value::Object(map) = &mut params else { return params };
    map.insert("sessionId".into(), Value::String(ancestor_id.to_owned()));
    if let Some(Value::Object(tool_call)) = map.get_mut("toolCall") {
        let title = tool_call.get("title").and_then(Value::as_str).unwrap_or("a tool call");
        let title = format!("subagent {child_id}: {title}");
        tool_call.insert("title".into(), Value::String(title));
    }
    let meta = map.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Value::Object(meta) = meta {
        let kestrel = meta.entry("kestrel").or_insert_with(|| json!({}));
        if !kestrel.is_object() {
            *kestrel = json!({});
        }
        if let Value::Object(kestrel) = kestrel {
            kestrel.insert("childSessionId".into(), Value::String(child_id.to_owned()));
        }
    }
    params
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ancestors_client_sees_the_request_under_its_session_naming_the_subagent() {
        let params = json!({
            "sessionId": "child",
            "toolCall": {"toolCallId": "c1", "title": "write_file notes.txt"},
            "options": [],
            "_meta": {"other": 1},
        });
        let asked = for_ancestor(&params, "child", "parent");
        assert_eq!(asked["sessionId"], "parent");
        assert_eq!(asked["toolCall"]["title"], "subagent child: write_file notes.txt");
        assert_eq!(asked["_meta"], json!({"other": 1, "kestrel": {"childSessionId": "child"}}));
        assert_eq!(
            for_ancestor(&json!({"sessionId": "c"}), "c", "p")["_meta"]["kestrel"]["childSessionId"],
            "c"
        );
    }
}
