//! A worker's subagents: the worker asks its client (the daemon) to start each child
//! with `_kestrel/session/spawn`. The daemon answers with the child's id only and sends
//! the child its prompt itself (docs/protocol.md), so the parent follows the child's
//! record for its answer and usage, and cancels it with a `session/cancel` notification
//! through the daemon. The child's process belongs to the daemon, which supervises it.
//! The MCP servers the parent's client gave it go to the child too (the child loads the
//! configured ones itself), so a child has its parent's tools; it starts its own server
//! processes.

use super::child_record::ChildRecord;
use super::{ChildOutcome, ChildRequest, ChildSession, START_TIMEOUT, SubagentHost};
use futures_util::future::BoxFuture;
use kestrel_protocol::jsonrpc::{Connection, RpcError};
use kestrel_protocol::{SessionId, acp};
use kestrel_store::KestrelHome;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Starts children through the worker's client.
pub(crate) struct ClientHost {
    connection: Connection,
    home: KestrelHome,
    /// The parent session's MCP servers from its client (`session/new` `mcpServers`).
    mcp_servers: Vec<acp::McpServer>,
}

impl ClientHost {
    pub(crate) fn new(
        connection: Connection,
        home: KestrelHome,
        mcp_servers: Vec<acp::McpServer>,
    ) -> Self {
        Self { connection, home, mcp_servers }
    }

    async fn start(&self, request: ChildRequest) -> Result<Box<dyn ChildSession>, String> {
        let params = acp::kestrel::SpawnSessionRequest {
            parent_session_id: acp::SessionId::from(&request.parent_id),
            cwd: request.cwd,
            prompt: request.prompt,
            model: Some(request.model),
            mode: Some(request.mode),
            mcp_servers: self.mcp_servers.clone(),
        };
        let params = serde_json::to_value(params).map_err(|error| error.to_string())?;
        let connection = self.connection.clone();
        let mut asked =
            tokio::spawn(
                async move { connection.request(acp::kestrel::SESSION_SPAWN, params).await },
            );
        let response = match tokio::time::timeout(START_TIMEOUT, &mut asked).await {
            Ok(Ok(Ok(response))) => response,
            Ok(Err(error)) => return Err(format!("the spawn request was lost: {error}")),
            Ok(Ok(Err(error))) if error.code == RpcError::METHOD_NOT_FOUND => {
                return Err(format!(
                    "this session's client does not start subagents ({} is not supported)",
                    acp::kestrel::SESSION_SPAWN
                ));
            }
            Ok(Ok(Err(error))) => return Err(error.message),
            Err(_) => {
                cancel_when_started(self.connection.clone(), asked);
                return Err(format!(
                    "the daemon did not start it within {} s",
                    START_TIMEOUT.as_secs()
                ));
            }
        };
        let response: acp::kestrel::SpawnSessionResponse = serde_json::from_value(response)
            .map_err(|error| format!("the daemon's spawn answer is malformed: {error}"))?;
        let id = SessionId::from_string(response.session_id.0.to_string());
        let record = ChildRecord::locate(&self.home, &id)?;
        Ok(Box::new(ClientChild { id, connection: self.connection.clone(), record }))
    }
}

/// How long an abandoned spawn is still waited for, to cancel the child it starts.
const LATE_START_WAIT: Duration = Duration::from_secs(600);

/// A spawn given up on may still start its child (the daemon goes on and prompts it);
/// nobody would follow that child, so it is cancelled as soon as its id comes.
fn cancel_when_started(connection: Connection, asked: JoinHandle<Result<Value, RpcError>>) {
    tokio::spawn(async move {
        let Ok(Ok(Ok(response))) = tokio::time::timeout(LATE_START_WAIT, asked).await else {
            return;
        };
        if let Some(id) = response.get("sessionId").and_then(Value::as_str) {
            let params = json!({"sessionId": id});
            let _ = connection.notify(acp::AGENT_METHOD_NAMES.session_cancel, params).await;
        }
    });
}

impl SubagentHost for ClientHost {
    fn spawn(&self, request: ChildRequest) -> BoxFuture<'_, Result<Box<dyn ChildSession>, String>> {
        Box::pin(self.start(request))
    }
}

/// A child session the daemon runs.
struct ClientChild {
    id: SessionId,
    connection: Connection,
    record: ChildRecord,
}

impl ClientChild {
    async fn run(mut self, cancel: CancellationToken) -> Result<ChildOutcome, String> {
        let (connection, id) = (self.connection, self.id);
        self.record
            .follow(&cancel, async || {
                let params = json!({"sessionId": id.as_str()});
                let _ = connection.notify(acp::AGENT_METHOD_NAMES.session_cancel, params).await;
            })
            .await
    }
}

impl ChildSession for ClientChild {
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
    use kestrel_protocol::jsonrpc::Incoming;
    use std::time::Duration;

    #[tokio::test]
    async fn a_child_whose_start_was_given_up_on_is_cancelled_when_its_id_comes() {
        let (worker_end, daemon_end) = tokio::io::duplex(64 * 1024);
        let (worker_read, worker_write) = tokio::io::split(worker_end);
        let (daemon_read, daemon_write) = tokio::io::split(daemon_end);
        let (worker, _worker_incoming) = Connection::start(worker_read, worker_write);
        let (daemon, mut daemon_incoming) = Connection::start(daemon_read, daemon_write);
        let asking = worker.clone();
        let asked =
            tokio::spawn(
                async move { asking.request(acp::kestrel::SESSION_SPAWN, json!({})).await },
            );
        // The worker stops waiting; the daemon answers late.
        cancel_when_started(worker.clone(), asked);
        let mut next = async || {
            tokio::time::timeout(Duration::from_secs(10), daemon_incoming.recv())
                .await
                .expect("a message within the bound")
                .expect("the connection is open")
        };
        let Incoming::Request(spawn) = next().await else { panic!("the spawn request first") };
        daemon.respond(spawn.id, Ok(json!({"sessionId": "late-child"}))).await.unwrap();
        let Incoming::Notification(cancel) = next().await else { panic!("a notification") };
        assert_eq!(cancel.method, acp::AGENT_METHOD_NAMES.session_cancel);
        assert_eq!(cancel.params, json!({"sessionId": "late-child"}));
    }
}
