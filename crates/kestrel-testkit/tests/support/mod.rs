//! A raw HTTP/1.1 client over std::net, so the tests see the exact bytes the server
//! sends (framing, chunks, SSE lines) rather than what a client library makes of them.
#![allow(dead_code)] // each test file uses a different part

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use kestrel_testkit::ScriptedServer;
use serde_json::Value;

/// Every read is bounded: a broken server fails the test instead of hanging it.
const READ_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The decoded body (chunks joined).
    pub body: Vec<u8>,
    /// The body ended properly: terminating chunk seen, or all Content-Length bytes read.
    pub complete: bool,
    /// Each chunk's payload, in order.
    pub chunks: Vec<Vec<u8>>,
}

/// One SSE event as a client parses it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub event: Option<String>,
    pub data: String,
}

impl Event {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data)
            .unwrap_or_else(|error| panic!("event data is not JSON ({error}): {}", self.data))
    }
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("body is UTF-8")
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("body is not JSON ({error}): {}", self.text()))
    }

    /// The SSE events, checking the framing: blocks end in a blank line, every line
    /// is `event:` or `data:`.
    pub fn events(&self) -> Vec<Event> {
        let text = self.text();
        assert!(text.ends_with("\n\n") || !self.complete, "stream does not end with a blank line");
        text.split("\n\n")
            .filter(|block| !block.is_empty())
            .map(|block| {
                let mut event = Event { event: None, data: String::new() };
                for line in block.lines() {
                    if let Some(name) = line.strip_prefix("event: ") {
                        event.event = Some(name.to_owned());
                    } else if let Some(data) = line.strip_prefix("data: ") {
                        event.data = data.to_owned();
                    } else {
                        panic!("unexpected SSE line {line:?}");
                    }
                }
                event
            })
            .collect()
    }
}

/// Sends one request and reads the whole response (the server closes after it).
pub fn send(
    server: &ScriptedServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> RawResponse {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", server.address());
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    send_raw(server, &bytes)
}

/// Sends these exact bytes and reads the whole response.
pub fn send_raw(server: &ScriptedServer, bytes: &[u8]) -> RawResponse {
    let mut stream = TcpStream::connect(server.address()).expect("connect");
    stream.set_read_timeout(Some(READ_TIMEOUT)).expect("timeout");
    stream.write_all(bytes).expect("write request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    parse_response(&raw)
}

/// POSTs JSON to `{base}/{endpoint}` the way the provider's clients do.
pub fn post(server: &ScriptedServer, endpoint: &str, body: &Value) -> RawResponse {
    let path = format!("/v1/{endpoint}");
    let mut headers =
        vec![("Content-Type", "application/json"), ("Authorization", "Bearer sk-test")];
    if endpoint == "messages" {
        headers = vec![
            ("Content-Type", "application/json"),
            ("x-api-key", "sk-ant-test"),
            ("anthropic-version", "2023-06-01"),
        ];
    }
    send(server, "POST", &path, &headers, body.to_string().as_bytes())
}

/// A minimal valid request body for each endpoint.
pub fn request_body(endpoint: &str, stream: bool) -> Value {
    match endpoint {
        "chat/completions" => serde_json::json!({
            "model": "test-model",
            "stream": stream,
            "stream_options": { "include_usage": true },
            "messages": [{ "role": "user", "content": "hi" }],
        }),
        "responses" => serde_json::json!({
            "model": "test-model",
            "stream": stream,
            "store": false,
            "input": [{ "role": "user", "content": "hi" }],
        }),
        "messages" => serde_json::json!({
            "model": "test-model",
            "stream": stream,
            "max_tokens": 1024,
            "messages": [{ "role": "user", "content": "hi" }],
        }),
        other => panic!("no such endpoint {other}"),
    }
}

pub const ENDPOINTS: [&str; 3] = ["chat/completions", "responses", "messages"];

fn parse_response(raw: &[u8]) -> RawResponse {
    let split = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(raw)));
    let head = std::str::from_utf8(&raw[..split]).expect("head is UTF-8");
    let rest = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let mut parts = status_line.splitn(3, ' ');
    assert_eq!(parts.next(), Some("HTTP/1.1"), "status line {status_line:?}");
    let status = parts.next().and_then(|code| code.parse().ok()).expect("status code");
    let headers: Vec<(String, String)> = lines
        .map(|line| {
            let (name, value) = line.split_once(':').expect("header line");
            (name.trim().to_ascii_lowercase(), value.trim().to_owned())
        })
        .collect();
    let mut response =
        RawResponse { status, headers, body: Vec::new(), complete: false, chunks: Vec::new() };
    if response.header("transfer-encoding") == Some("chunked") {
        decode_chunks(rest, &mut response);
    } else {
        let length: usize = response
            .header("content-length")
            .expect("content-length or chunked")
            .parse()
            .expect("numeric content-length");
        response.complete = rest.len() >= length;
        response.body = rest[..length.min(rest.len())].to_vec();
    }
    response
}

fn decode_chunks(mut rest: &[u8], response: &mut RawResponse) {
    loop {
        let Some(line_end) = rest.windows(2).position(|window| window == b"\r\n") else {
            return;
        };
        let size_text = std::str::from_utf8(&rest[..line_end]).expect("chunk size");
        let size = usize::from_str_radix(size_text, 16).expect("hex chunk size");
        rest = &rest[line_end + 2..];
        if size == 0 {
            response.complete = rest == b"\r\n";
            return;
        }
        if rest.len() < size + 2 {
            return;
        }
        assert_eq!(&rest[size..size + 2], b"\r\n", "chunk not followed by CRLF");
        response.body.extend_from_slice(&rest[..size]);
        response.chunks.push(rest[..size].to_vec());
        rest = &rest[size + 2..];
    }
}
