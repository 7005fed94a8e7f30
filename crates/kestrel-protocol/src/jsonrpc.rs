//! JSON-RPC 2.0, one message per line, over any AsyncRead/AsyncWrite pair: the framing
//! of every ACP hop (client↔daemon, daemon↔worker, editor↔`kestrel acp`).
//!
//! A `Connection` sends requests (and awaits their responses by id), notifications and
//! responses; `Incoming` yields what the peer sends. Outgoing messages go through a
//! bounded queue, so a peer that stops reading slows its sender instead of growing memory.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// Messages waiting to be written, per connection.
const OUTGOING_QUEUE: usize = 256;
/// Messages read but not yet taken by the owner.
const INCOMING_QUEUE: usize = 256;
/// A longer line is a protocol error, not a reason to allocate without end.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// A request id: JSON-RPC allows numbers and strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(i64),
    String(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Number(number) => write!(f, "{number}"),
            RequestId::String(text) => f.write_str(text),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} (JSON-RPC error {code})")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// ACP: the session or resource does not exist.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;

    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(Self::METHOD_NOT_FOUND, format!("method not found: {method}"))
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(Self::INVALID_PARAMS, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Self::INTERNAL_ERROR, message)
    }

    /// The connection closed before an answer came.
    pub fn closed() -> Self {
        Self::new(Self::INTERNAL_ERROR, "the connection closed")
    }
}

/// A request from the peer.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: RequestId,
    pub method: String,
    pub params: Value,
}

/// A notification from the peer.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub method: String,
    pub params: Value,
}

/// Any JSON-RPC message, as parsed from one line.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response { id: RequestId, result: Result<Value, RpcError> },
}

#[derive(Serialize, Deserialize)]
struct Wire {
    jsonrpc: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<RequestId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    params: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<RpcError>,
}

impl Message {
    /// Parses one line. The error says what is wrong, for a `-32700`/`-32600` answer.
    pub fn parse(line: &str) -> Result<Message, RpcError> {
        let wire: Wire = serde_json::from_str(line).map_err(|error| {
            RpcError::new(RpcError::PARSE_ERROR, format!("parse error: {error}"))
        })?;
        if wire.jsonrpc != "2.0" {
            return Err(RpcError::new(RpcError::INVALID_REQUEST, "jsonrpc must be \"2.0\""));
        }
        match (wire.method, wire.id) {
            (Some(method), Some(id)) => Ok(Message::Request(Request {
                id,
                method,
                params: wire.params.unwrap_or(Value::Null),
            })),
            (Some(method), None) => Ok(Message::Notification(Notification {
                method,
                params: wire.params.unwrap_or(Value::Null),
            })),
            (None, Some(id)) => {
                let result = match (wire.result, wire.error) {
                    (_, Some(error)) => Err(error),
                    (Some(result), None) => Ok(result),
                    (None, None) => Ok(Value::Null),
                };
                Ok(Message::Response { id, result })
            }
            (None, None) => {
                Err(RpcError::new(RpcError::INVALID_REQUEST, "neither a method nor an id"))
            }
        }
    }

    /// The message as one line of JSON, without the newline.
    pub fn to_line(&self) -> String {
        let wire = match self {
            Message::Request(request) => Wire {
                jsonrpc: "2.0".into(),
                id: Some(request.id.clone()),
                method: Some(request.method.clone()),
                params: Some(request.params.clone()),
                result: None,
                error: None,
            },
            Message::Notification(notification) => Wire {
                jsonrpc: "2.0".into(),
                id: None,
                method: Some(notification.method.clone()),
                params: Some(notification.params.clone()),
                result: None,
                error: None,
            },
            Message::Response { id, result } => {
                let (result, error) = match result {
                    Ok(value) => (Some(value.clone()), None),
                    Err(error) => (None, Some(error.clone())),
                };
                Wire {
                    jsonrpc: "2.0".into(),
                    id: Some(id.clone()),
                    method: None,
                    params: None,
                    result,
                    error,
                }
            }
        };
        // Serialising a Value-only struct cannot fail.
        serde_json::to_string(&wire).unwrap_or_default()
    }
}

/// What the peer sends that its owner must handle.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request(Request),
    Notification(Notification),
}

type Pending = Arc<Mutex<HashMap<RequestId, oneshot::Sender<Result<Value, RpcError>>>>>;

/// The sending half of a connection. Cheap to clone; all clones share one writer.
#[derive(Clone)]
pub struct Connection {
    outgoing: mpsc::Sender<String>,
    pending: Pending,
    next_id: Arc<AtomicI64>,
    /// Set (under the pending lock) once the reader has stopped: a request sent after
    /// that would never be answered, so it fails at once.
    read_closed: Arc<AtomicBool>,
}

impl Connection {
    /// Starts reader and writer tasks on the current tokio runtime. The receiver yields
    /// the peer's requests and notifications and ends when the peer closes.
    pub fn start<R, W>(reader: R, writer: W) -> (Connection, mpsc::Receiver<Incoming>)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (outgoing, outgoing_rx) = mpsc::channel::<String>(OUTGOING_QUEUE);
        let (incoming_tx, incoming_rx) = mpsc::channel(INCOMING_QUEUE);
        let pending: Pending = Arc::default();
        let read_closed = Arc::new(AtomicBool::new(false));
        tokio::spawn(write_loop(writer, outgoing_rx));
        let reader_state = (pending.clone(), read_closed.clone());
        tokio::spawn(read_loop(reader, incoming_tx, reader_state, outgoing.clone()));
        let next_id = Arc::new(AtomicI64::new(1));
        (Connection { outgoing, pending, next_id, read_closed }, incoming_rx)
    }

    /// Sends a request and waits for its response.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            if self.read_closed.load(Ordering::Acquire) {
                return Err(RpcError::closed());
            }
            pending.insert(id.clone(), tx);
        }
        let message = Message::Request(Request { id: id.clone(), method: method.into(), params });
        if self.outgoing.send(message.to_line()).await.is_err() {
            self.forget(&id);
            return Err(RpcError::closed());
        }
        rx.await.unwrap_or_else(|_| Err(RpcError::closed()))
    }

    /// Sends a notification. Fails only when the connection is closed.
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), RpcError> {
        let message = Message::Notification(Notification { method: method.into(), params });
        self.send_line(message.to_line()).await
    }

    /// Answers a request of the peer.
    pub async fn respond(
        &self,
        id: RequestId,
        result: Result<Value, RpcError>,
    ) -> Result<(), RpcError> {
        self.send_line(Message::Response { id, result }.to_line()).await
    }

    /// Sends an already serialised message (one line, no newline), e.g. when forwarding.
    pub async fn send_line(&self, line: String) -> Result<(), RpcError> {
        self.outgoing.send(line).await.map_err(|_| RpcError::closed())
    }

    /// True once the writer or the reader has stopped (the peer is gone).
    pub fn is_closed(&self) -> bool {
        self.outgoing.is_closed() || self.read_closed.load(Ordering::Acquire)
    }

    /// Waits until the writer has stopped.
    pub async fn closed(&self) {
        self.outgoing.closed().await
    }

    fn forget(&self, id: &RequestId) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(id);
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, mut lines: mpsc::Receiver<String>) {
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        if writer.write_all(line.as_bytes()).await.is_err() || writer.flush().await.is_err() {
            break;
        }
    }
    let _ = writer.shutdown().await;
}

async fn read_loop<R: AsyncRead + Unpin>(
    reader: R,
    incoming: mpsc::Sender<Incoming>,
    (pending, read_closed): (Pending, Arc<AtomicBool>),
    outgoing: mpsc::Sender<String>,
) {
    let mut reader = BufReader::new(reader);
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        match read_line(&mut reader, &mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(line) = std::str::from_utf8(&buffer) else {
            let error = RpcError::new(RpcError::PARSE_ERROR, "parse error: not UTF-8");
            let _ = outgoing.send(parse_error_line(error)).await;
            continue;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match Message::parse(line) {
            Ok(Message::Request(request)) => {
                if incoming.send(Incoming::Request(request)).await.is_err() {
                    break;
                }
            }
            Ok(Message::Notification(notification)) => {
                if incoming.send(Incoming::Notification(notification)).await.is_err() {
                    break;
                }
            }
            Ok(Message::Response { id, result }) => {
                let waiter = pending.lock().ok().and_then(|mut pending| pending.remove(&id));
                if let Some(waiter) = waiter {
                    let _ = waiter.send(result);
                }
            }
            Err(error) => {
                let _ = outgoing.send(parse_error_line(error)).await;
            }
        }
    }
    // Everyone still waiting learns the connection is gone, and later requests fail.
    if let Ok(mut pending) = pending.lock() {
        read_closed.store(true, Ordering::Release);
        for (_, waiter) in pending.drain() {
            let _ = waiter.send(Err(RpcError::closed()));
        }
    }
}

fn parse_error_line(error: RpcError) -> String {
    // JSON-RPC answers an unparsable message with id null.
    let wire = Wire {
        jsonrpc: "2.0".into(),
        id: None,
        method: None,
        params: None,
        result: None,
        error: Some(error),
    };
    let mut value = serde_json::to_value(&wire).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert("id".into(), Value::Null);
    }
    value.to_string()
}

/// Reads one line (without its newline), refusing lines over `MAX_LINE_BYTES`.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buffer: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match available.iter().position(|&byte| byte == b'\n') {
            Some(end) => (&available[..end], Some(end + 1)),
            None => (available, None),
        };
        if buffer.len() + chunk.len() > MAX_LINE_BYTES {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "line too long"));
        }
        buffer.extend_from_slice(chunk);
        let consumed = done.unwrap_or(chunk.len());
        total += consumed;
        reader.consume(consumed);
        if done.is_some() {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_round_trip_through_lines() {
        let request = Message::Request(Request {
            id: RequestId::Number(7),
            method: "session/new".into(),
            params: json!({"cwd": "/w"}),
        });
        assert_eq!(
            request.to_line(),
            r#"{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/w"}}"#
        );
        assert_eq!(Message::parse(&request.to_line()).unwrap(), request);
        let error = Message::Response {
            id: RequestId::String("a".into()),
            result: Err(RpcError::method_not_found("x")),
        };
        assert_eq!(Message::parse(&error.to_line()).unwrap(), error);
        assert!(Message::parse("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"m\"}").is_err());
        assert_eq!(Message::parse("not json").unwrap_err().code, RpcError::PARSE_ERROR);
    }

    #[tokio::test]
    async fn requests_are_answered_by_id_and_garbage_gets_a_parse_error() {
        let (client_io, server_io) = tokio::io::duplex(1024);
        let (client_read, client_write) = tokio::io::split(client_io);
        let (server_read, server_write) = tokio::io::split(server_io);
        let (client, _client_incoming) = Connection::start(client_read, client_write);
        let (server, mut server_incoming) = Connection::start(server_read, server_write);
        tokio::spawn(async move {
            while let Some(Incoming::Request(request)) = server_incoming.recv().await {
                let answer = json!({"echo": request.params});
                server.respond(request.id, Ok(answer)).await.unwrap();
            }
        });
        let (a, b) = tokio::join!(client.request("one", json!(1)), client.request("two", json!(2)));
        assert_eq!(a.unwrap(), json!({"echo": 1}));
        assert_eq!(b.unwrap(), json!({"echo": 2}));
    }

    #[tokio::test]
    async fn a_closed_peer_fails_pending_requests() {
        let (client_io, server_io) = tokio::io::duplex(1024);
        let (client_read, client_write) = tokio::io::split(client_io);
        let (client, _incoming) = Connection::start(client_read, client_write);
        let waiting = tokio::spawn(async move { client.request("never", Value::Null).await });
        tokio::task::yield_now().await;
        drop(server_io);
        let result = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(result.unwrap_err().message, "the connection closed");
    }

    #[tokio::test]
    async fn a_request_after_the_peer_closed_fails_at_once() {
        let (client_io, server_io) = tokio::io::duplex(1024);
        let (client_read, client_write) = tokio::io::split(client_io);
        let (client, _incoming) = Connection::start(client_read, client_write);
        // The peer goes away with no request in flight: only the reader notices.
        drop(server_io);
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while !client.is_closed() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        let late = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            client.request("late", Value::Null),
        );
        assert_eq!(late.await.unwrap().unwrap_err().message, "the connection closed");
    }
}
