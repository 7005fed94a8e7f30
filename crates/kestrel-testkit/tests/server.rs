//! The server itself: request log, routing, bad requests, scripts, lifecycle.
#![allow(clippy::expect_used)] // test code: a failed expectation is a failed test

mod support;

use std::io::ErrorKind;

use kestrel_testkit::{
    Fault, LoggedRequest, Script, ScriptError, ScriptedServer, ScriptedToolCall, ServerOptions,
    Step,
};
use serde_json::json;
use support::{post, request_body, send, send_raw};

fn start(steps: Vec<Step>) -> ScriptedServer {
    ScriptedServer::start(Script::new(steps)).expect("server starts")
}

#[test]
fn base_url_is_loopback_with_the_v1_prefix() {
    let server = start(Vec::new());
    let base_url = server.base_url();
    assert!(base_url.starts_with("http://127.0.0.1:"), "{base_url}");
    assert!(base_url.ends_with("/v1"), "{base_url}");
    assert_eq!(base_url, format!("http://{}/v1", server.address()));
}

#[test]
fn request_log_records_method_path_lower_cased_headers_in_order_and_body() {
    let server = start(vec![Step::text("one"), Step::text("two")]);
    let body = request_body("chat/completions", true);
    send(
        &server,
        "POST",
        "/v1/chat/completions?api-version=1",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer sk-1"),
            ("X-Custom", "A b"),
        ],
        body.to_string().as_bytes(),
    );
    post(&server, "messages", &request_body("messages", false));

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/chat/completions?api-version=1");
    let names: Vec<&str> = first.headers.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["host", "content-type", "authorization", "x-custom", "content-length"]);
    assert_eq!(first.header("X-CUSTOM"), Some("A b"));
    assert_eq!(first.header("authorization"), Some("Bearer sk-1"));
    assert_eq!(first.header("missing"), None);
    assert_eq!(first.body, body);
    assert_eq!(requests[1].path, "/v1/messages");
    assert_eq!(requests[1].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(server.remaining(), 0);
}

#[test]
fn steps_are_served_in_order_one_per_request() {
    let server = start(vec![Step::text("first"), Step::text("second")]);
    assert_eq!(server.remaining(), 2);
    let text = |endpoint| post(&server, endpoint, &request_body(endpoint, false)).json();
    assert_eq!(text("chat/completions")["choices"][0]["message"]["content"], "first");
    assert_eq!(server.remaining(), 1);
    assert_eq!(text("messages")["content"][0]["text"], "second");
    assert_eq!(server.remaining(), 0);
}

#[test]
fn non_json_body_is_logged_as_null_and_rejected_without_using_a_step() {
    let server = start(vec![Step::text("unused")]);
    let response = send(&server, "POST", "/v1/responses", &[], b"{not json");
    assert_eq!(response.status, 400);
    assert!(
        response.json()["error"]["message"].as_str().is_some_and(|m| m.contains("not valid JSON"))
    );
    assert!(server.requests()[0].body.is_null());
    assert_eq!(server.remaining(), 1);
}

#[test]
fn chunked_request_bodies_are_read() {
    let server = start(vec![Step::text("ok")]);
    let body = request_body("chat/completions", false).to_string();
    let (head, tail) = body.split_at(body.len() / 2);
    let raw = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{head}\r\n{:x}\r\n{tail}\r\n0\r\n\r\n",
        head.len(),
        tail.len()
    );
    let response = send_raw(&server, raw.as_bytes());
    assert_eq!(response.status, 200);
    assert_eq!(server.requests()[0].body, request_body("chat/completions", false));
}

#[test]
fn models_endpoint_answers_an_openai_list_without_using_a_step() {
    let server = start(vec![Step::text("unused")]);
    let response = send(&server, "GET", "/v1/models", &[], b"");
    assert_eq!(response.status, 200);
    let body = response.json();
    assert_eq!(body["object"], "list");
    assert_eq!(body["data"][0]["object"], "model");
    assert!(body["data"][0]["id"].is_string());
    assert!(body["data"][0]["owned_by"].is_string());
    assert_eq!(server.remaining(), 1);
    assert_eq!(server.requests()[0].method, "GET");
}

#[test]
fn unknown_path_and_wrong_method_get_clear_errors() {
    let server = start(vec![Step::text("unused")]);
    let response = send(&server, "POST", "/v1/completions/legacy", &[], b"{}");
    assert_eq!(response.status, 404);
    assert_eq!(response.json()["error"]["message"], "Invalid URL (POST /v1/completions/legacy)");

    let response = send(&server, "GET", "/v1/chat/completions", &[], b"");
    assert_eq!(response.status, 405);
    assert_eq!(response.header("allow"), Some("POST"));
    assert!(response.json()["error"]["message"].as_str().is_some_and(|m| m.contains("use POST")));
    assert_eq!(server.remaining(), 1);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn malformed_http_gets_400() {
    let server = start(vec![Step::text("unused")]);
    let response = send_raw(&server, b"NOT A REQUEST LINE AT ALL\r\n\r\n");
    assert_eq!(response.status, 400);
    assert!(response.json()["error"]["message"].as_str().is_some_and(|m| m.contains("malformed")));
    let response =
        send_raw(&server, b"POST /v1/responses HTTP/1.1\r\nContent-Length: lots\r\n\r\n");
    assert_eq!(response.status, 400);
    assert!(server.requests().is_empty());
    assert_eq!(server.remaining(), 1);
}

#[test]
fn dropping_the_server_closes_its_port() {
    let server = start(vec![Step::text("unused")]);
    let address = server.address();
    drop(server);
    let error = std::net::TcpStream::connect(address).expect_err("nothing listens any more");
    assert_eq!(error.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn request_log_file_gets_one_json_line_per_request() {
    let directory = tempfile::tempdir().expect("tempdir");
    let log = directory.path().join("requests.jsonl");
    let server = ScriptedServer::start_with(
        Script::new([Step::text("ok")]),
        ServerOptions { port: 0, request_log: Some(log.clone()), ..ServerOptions::default() },
    )
    .expect("server starts");
    post(&server, "responses", &request_body("responses", true));
    send(&server, "GET", "/v1/models", &[], b"");
    let lines: Vec<LoggedRequest> = std::fs::read_to_string(&log)
        .expect("log written")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a LoggedRequest per line"))
        .collect();
    assert_eq!(lines, server.requests());
    assert_eq!(lines.len(), 2);
}

#[test]
fn unopenable_request_log_fails_start_naming_the_file() {
    let directory = tempfile::tempdir().expect("tempdir");
    let log = directory.path().join("missing-dir").join("log.jsonl");
    let error = ScriptedServer::start_with(
        Script::default(),
        ServerOptions { port: 0, request_log: Some(log.clone()), ..ServerOptions::default() },
    )
    .expect_err("cannot open");
    assert!(error.to_string().contains(&log.display().to_string()), "{error}");
}

#[test]
fn script_loads_from_json_with_arguments_as_text_or_object() {
    let script = Script::from_json(
        r#"{"steps": [
            {"reply": {"text": "hi", "reasoning": "r", "usage": {"input_tokens": 5}}},
            {"reply": {"tool_calls": [
                {"name": "shell", "arguments": {"command": "ls"}},
                {"id": "call_x", "name": "read_file", "arguments": "{broken"}
            ]}, "fault": {"kind": "status", "status": 429, "retry_after_secs": 1}},
            {"reply": {}, "fault": {"kind": "drop_after", "events": 2}},
            {"reply": {}, "fault": {"kind": "malformed_json", "after_events": 1}},
            {"reply": {}, "fault": {"kind": "slow_chunks", "delay_ms": 5}}
        ]}"#,
    )
    .expect("valid script");
    assert_eq!(script.steps.len(), 5);
    assert_eq!(script.steps[0].reply.usage.map(|usage| usage.input_tokens), Some(5));
    assert_eq!(script.steps[0].reply.usage.map(|usage| usage.output_tokens), Some(0));
    assert_eq!(
        script.steps[1].reply.tool_calls,
        [
            ScriptedToolCall::new("shell", json!({ "command": "ls" })),
            ScriptedToolCall::raw("read_file", "{broken").with_id("call_x"),
        ]
    );
    assert_eq!(
        script.steps[1].fault,
        Some(Fault::Status { status: 429, retry_after_secs: Some(1), message: None, times: None })
    );
    assert_eq!(script.steps[4].fault, Some(Fault::SlowChunks { delay_ms: 5 }));

    // Round trip, and the bare-array form.
    let text = serde_json::to_string(&script.steps).expect("serializes");
    assert_eq!(Script::from_json(&text).expect("array form"), script);
}

#[test]
fn bad_scripts_are_rejected_with_clear_errors() {
    let error = Script::from_json("{\"steps\": [").expect_err("truncated");
    assert!(matches!(error, ScriptError::Parse { .. }));
    assert!(error.to_string().contains("script is not valid"), "{error}");

    let error = Script::from_json(r#"{"steps": [{"replay": {}}]}"#).expect_err("typo");
    assert!(error.to_string().contains("replay"), "{error}");

    let error = Script::from_json(r#"[{"reply": {}, "fault": {"kind": "explode"}}]"#)
        .expect_err("unknown fault");
    assert!(error.to_string().contains("explode"), "{error}");

    let error = Script::from_json(r#"[{"reply": {}, "fault": {"kind": "status", "status": 200}}]"#)
        .expect_err("not an error status");
    assert!(error.to_string().contains("step 0"), "{error}");
    assert!(error.to_string().contains("400..=599"), "{error}");

    let error =
        Script::from_json(r#"[{"reply": {"tool_calls": [{"name": "", "arguments": "{}"}]}}]"#)
            .expect_err("nameless tool call");
    assert!(error.to_string().contains("empty name"), "{error}");
}

#[test]
fn script_file_errors_name_the_file() {
    let directory = tempfile::tempdir().expect("tempdir");
    let missing = directory.path().join("nope.json");
    let error = Script::from_file(&missing).expect_err("missing");
    assert!(matches!(error, ScriptError::Read { .. }));
    assert!(error.to_string().contains("nope.json"), "{error}");

    let broken = directory.path().join("broken.json");
    std::fs::write(&broken, "{\"steps\": 3}").expect("write");
    let error = Script::from_file(&broken).expect_err("broken");
    assert!(error.to_string().contains("broken.json"), "{error}");
}

#[test]
fn starting_with_an_invalid_script_is_an_invalid_input_error() {
    let step = Step::text("x").with_fault(Fault::Status {
        status: 302,
        retry_after_secs: None,
        message: None,
        times: None,
    });
    let error = ScriptedServer::start(Script::new([step])).expect_err("invalid");
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.to_string().contains("302"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_from_async_tests_and_drops_inside_a_runtime() {
    let server = start(vec![Step::text("async")]);
    let address = server.address();
    let body = request_body("chat/completions", false).to_string();
    let response = tokio::task::spawn_blocking(move || {
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut stream = std::net::TcpStream::connect(address).expect("connect");
        stream.set_read_timeout(Some(std::time::Duration::from_secs(20))).expect("timeout");
        std::io::Write::write_all(&mut stream, request.as_bytes()).expect("write");
        let mut raw = String::new();
        std::io::Read::read_to_string(&mut stream, &mut raw).expect("read");
        raw
    })
    .await
    .expect("joined");
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(response.contains("\"async\""));
    drop(server);
}

#[test]
fn the_server_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ScriptedServer>();
}
