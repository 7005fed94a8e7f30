//! The client side of one MCP session (spec 2025-11-25, back to 2024-11-05): the
//! `initialize` handshake, `tools/list` with pagination, `tools/call` with
//! `notifications/cancelled` when a call is abandoned, `ping` answered, and the server's
//! `notifications/tools/list_changed` passed on. Messages are JSON-RPC 2.0 (the protocol
//! crate's `Message`); how they travel is the transport's business ([`Sink`]).
//! Kestrel declares no client capabilities, so servers do not ask it for roots, sampling
//! or elicitation; such requests are answered "method not found".

use crate::mcp::http::HttpSink;
use kestrel_protocol::jsonrpc::{Message, Notification, Request, RequestId, RpcError};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// The protocol versions this client speaks, newest first; the first is the one asked for.
pub(crate) const PROTOCOL_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// How long sending a notification or response over HTTP may hold up what follows it.
const NOTIFICATION_POST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A connection to one server. Cheap to clone; clones share it.
#[derive(Clone)]
pub(crate) struct Client {
    shared: Arc<Shared>,
}

struct Shared {
    pending: Mutex<HashMap<RequestId, oneshot::Sender<Result<Value, RpcError>>>>,
    next_id: AtomicI64,
    sink: Sink,
    list_changed: mpsc::Sender<()>,
    /// Cancelled when the connection is gone (the server closed it, or we did).
    closed: CancellationToken,
}

/// Where outgoing messages go.
pub(crate) enum Sink {
    /// Lines for the writer task of a child's stdin.
    Stdio(mpsc::Sender<String>),
    Http(HttpSink),
}

/// One tool as `tools/list` describes it (the fields Kestrel uses).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListedTool {
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: Option<String>,
    #[serde(default)]
    pub(crate) input_schema: Map<String, Value>,
    // `annotations` (readOnlyHint...) are not read: they are the server's claims, and
    // the permission policy does not trust them.
}

impl Client {
    /// A client sending through `sink`; `list_changed` gets a message for each
    /// `notifications/tools/list_changed` (one pending is enough).
    pub(crate) fn new(sink: Sink, list_changed: mpsc::Sender<()>) -> Self {
        Self {
            shared: Arc::new(Shared {
                pending: Mutex::new(HashMap::new()),
                next_id: AtomicI64::new(1),
                sink,
                list_changed,
                closed: CancellationToken::new(),
            }),
        }
    }

    /// Handles one message from the server: answers, its requests, its notifications.
    pub(crate) async fn dispatch(&self, message: Message) {
        match message {
            Message::Response { id, result } => {
                let waiter = self.shared.pending.lock().ok().and_then(|mut p| p.remove(&id));
                if let Some(waiter) = waiter {
                    let _ = waiter.send(result);
                }
            }
            Message::Request(Request { id, method, .. }) => {
                let result = match method.as_str() {
                    "ping" => Ok(json!({})),
                    _ => Err(RpcError::method_not_found(&method)),
                };
                let _ = self.send(Message::Response { id, result }).await;
            }
            Message::Notification(Notification { method, .. }) => {
                if method == "notifications/tools/list_changed" {
                    let _ = self.shared.list_changed.try_send(());
                }
            }
        }
    }

    /// Handles a message, or a batch of them, as JSON text. `Err`: not JSON-RPC.
    pub(crate) async fn dispatch_text(&self, text: &str) -> Result<(), String> {
        if text.is_empty() {
            return Ok(());
        }
        if text.starts_with('[') {
            let batch: Vec<Value> =
                serde_json::from_str(text).map_err(|e| format!("not JSON-RPC: {e}"))?;
            for item in batch {
                let message = Message::parse(&item.to_string()).map_err(|e| e.message)?;
                self.dispatch(message).await;
            }
            return Ok(());
        }
        let message = Message::parse(text).map_err(|e| e.message)?;
        self.dispatch(message).await;
        Ok(())
    }

    /// The connection is gone: every waiting request fails with `why`.
    pub(crate) fn close(&self, why: &str) {
        self.shared.closed.cancel();
        if let Ok(mut pending) = self.shared.pending.lock() {
            for (_, waiter) in pending.drain() {
                let _ = waiter.send(Err(RpcError::internal(why)));
            }
        }
        if let Sink::Http(http) = &self.shared.sink {
            http.close();
        }
    }

    /// Resolves once the connection is gone.
    pub(crate) async fn closed(&self) {
        self.shared.closed.cancelled().await
    }

    /// The handshake. Fails when the server answers with an error or a protocol version
    /// this client does not speak.
    pub(crate) async fn initialize(&self) -> Result<(), String> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSIONS[0],
            "capabilities": {},
            "clientInfo": {"name": "kestrel", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = self.request("initialize", params).await.map_err(|e| e.message)?;
        let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        if !PROTOCOL_VERSIONS.contains(&version) {
            return Err(format!(
                "it speaks MCP protocol version `{version}`; Kestrel speaks {}",
                PROTOCOL_VERSIONS.join(", ")
            ));
        }
        if let Sink::Http(http) = &self.shared.sink {
            http.set_protocol_version(version);
        }
        self.notify("notifications/initialized", json!({})).await.map_err(|e| e.message)?;
        if let Sink::Http(http) = &self.shared.sink {
            http.listen(self.clone());
        }
        Ok(())
    }

    /// Every tool, page by page.
    pub(crate) async fn list_tools(&self) -> Result<Vec<ListedTool>, String> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let page = self.request("tools/list", params).await.map_err(|e| e.message)?;
            let listed = page.get("tools").cloned().unwrap_or(Value::Array(Vec::new()));
            let listed: Vec<ListedTool> = serde_json::from_value(listed)
                .map_err(|error| format!("its tools/list answer is not valid: {error}"))?;
            tools.extend(listed);
            cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_string);
            if cursor.is_none() {
                return Ok(tools);
            }
        }
    }

    /// Calls a tool; the raw `CallToolResult`. Dropping the future cancels the call on
    /// the server.
    pub(crate) async fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, RpcError> {
        self.request("tools/call", json!({"name": name, "arguments": arguments})).await
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = RequestId::Number(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
        let (sender, answer) = oneshot::channel();
        if let Ok(mut pending) = self.shared.pending.lock() {
            pending.insert(id.clone(), sender);
        }
        let guard = Abandon { client: self.clone(), id: Some(id.clone()) };
        let request = Message::Request(Request { id, method: method.into(), params });
        self.send(request).await?;
        let result = answer.await.unwrap_or_else(|_| Err(RpcError::closed()));
        guard.answered();
        result
    }

    async fn notify(&self, method: &str, params: Value) -> Result<(), RpcError> {
        self.send(Message::Notification(Notification { method: method.into(), params })).await
    }

    async fn send(&self, message: Message) -> Result<(), RpcError> {
        if self.shared.closed.is_cancelled() {
            return Err(RpcError::closed());
        }
        match &self.shared.sink {
            Sink::Stdio(lines) => {
                lines.send(message.to_line()).await.map_err(|_| RpcError::closed())
            }
            Sink::Http(http) => {
                // A request's answer may stream for long: it is read on its own task. A
                // notification or response is sent before anything after it, so the
                // server sees `initialized` before the first request.
                let is_request = matches!(message, Message::Request(_));
                let posted = http.post(message, self.clone());
                if !is_request {
                    let _ = tokio::time::timeout(NOTIFICATION_POST_TIMEOUT, posted).await;
                }
                Ok(())
            }
        }
    }
}

/// Cancels a request on the server when its caller stops waiting (timeout, user cancel).
struct Abandon {
    client: Client,
    id: Option<RequestId>,
}

impl Abandon {
    fn answered(mut self) {
        self.id = None;
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let client = self.client.clone();
        if let Ok(mut pending) = client.shared.pending.lock() {
            pending.remove(&id);
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let params = json!({"requestId": id, "reason": "the caller stopped waiting"});
                let _ = client.notify("notifications/cancelled", params).await;
            });
        }
    }
}
