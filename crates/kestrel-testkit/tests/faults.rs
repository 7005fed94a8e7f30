//! Fault injection: error statuses, cut streams, malformed events, slow streams, and
//! the end of the script, in each API's own shape.
#![allow(clippy::expect_used)] // test code: a failed expectation is a failed test

mod support;

use kestrel_testkit::{Fault, SCRIPT_EXHAUSTED, Script, ScriptedServer, Step};
use serde_json::Value;
use support::{ENDPOINTS, Event, post, request_body};

fn start(step: Step) -> ScriptedServer {
    ScriptedServer::start(Script::new([step])).expect("server starts")
}

/// The error message from either error shape.
fn error_message(endpoint: &str, body: &Value) -> String {
    let message = &body["error"]["message"];
    if endpoint == "messages" {
        assert_eq!(body["type"], "error", "{body}");
    }
    message.as_str().unwrap_or_else(|| panic!("no error message in {body}")).to_owned()
}

#[test]
fn status_fault_fails_times_then_serves_the_step() {
    for endpoint in ENDPOINTS {
        let server = start(Step::text("finally").with_fault(Fault::Status {
            status: 429,
            retry_after_secs: Some(2),
            message: None,
            times: Some(2),
        }));
        for _ in 0..2 {
            let response = post(&server, endpoint, &request_body(endpoint, true));
            assert_eq!(response.status, 429, "{endpoint}");
            assert_eq!(response.header("retry-after"), Some("2"), "{endpoint}");
            let body = response.json();
            let kind = if endpoint == "messages" { "rate_limit_error" } else { "requests" };
            assert_eq!(body["error"]["type"], kind, "{endpoint}: {body}");
            assert!(error_message(endpoint, &body).contains("rate limit"));
            assert_eq!(server.remaining(), 1, "a failing step is not consumed");
        }
        let response = post(&server, endpoint, &request_body(endpoint, true));
        assert_eq!(response.status, 200, "{endpoint}");
        assert!(response.complete);
        assert_eq!(server.remaining(), 0);
        assert_eq!(server.requests().len(), 3);
    }
}

#[test]
fn status_fault_fails_once_by_default_with_the_scripted_message() {
    for endpoint in ENDPOINTS {
        let server = start(Step::text("ok").with_fault(Fault::Status {
            status: 401,
            retry_after_secs: None,
            message: Some("bad key".into()),
            times: None,
        }));
        let response = post(&server, endpoint, &request_body(endpoint, false));
        assert_eq!(response.status, 401);
        assert_eq!(response.header("retry-after"), None);
        let body = response.json();
        assert_eq!(error_message(endpoint, &body), "bad key");
        if endpoint == "messages" {
            assert_eq!(body["error"]["type"], "authentication_error");
        } else {
            assert_eq!(body["error"]["code"], "invalid_api_key");
        }
        assert_eq!(post(&server, endpoint, &request_body(endpoint, false)).status, 200);
    }
}

#[test]
fn status_fault_with_max_times_fails_every_retry() {
    let server = start(Step::text("never").with_fault(Fault::Status {
        status: 503,
        retry_after_secs: None,
        message: None,
        times: Some(u32::MAX),
    }));
    for _ in 0..8 {
        let response = post(&server, "chat/completions", &request_body("chat/completions", true));
        assert_eq!(response.status, 503);
        assert_eq!(response.json()["error"]["type"], "server_error");
    }
    assert_eq!(server.remaining(), 1);
}

#[test]
fn drop_after_cuts_the_stream_without_the_terminating_chunk() {
    for endpoint in ENDPOINTS {
        let server = start(
            Step::text("this stream will be cut short").with_fault(Fault::DropAfter { events: 3 }),
        );
        let response = post(&server, endpoint, &request_body(endpoint, true));
        assert_eq!(response.status, 200, "{endpoint}");
        assert!(!response.complete, "{endpoint}: the cut must be visible");
        let events = response.events();
        assert_eq!(events.len(), 3, "{endpoint}");
        assert!(events.iter().all(|event| serde_json::from_str::<Value>(&event.data).is_ok()));
        assert_eq!(server.remaining(), 0, "a dropped stream consumes its step");
    }
}

#[test]
fn drop_after_zero_sends_only_the_head() {
    let server = start(Step::text("x").with_fault(Fault::DropAfter { events: 0 }));
    let response = post(&server, "messages", &request_body("messages", true));
    assert_eq!(response.status, 200);
    assert!(!response.complete);
    assert!(response.body.is_empty());
}

#[test]
fn drop_after_cuts_a_non_streaming_body_short() {
    let server = start(Step::text("a complete answer").with_fault(Fault::DropAfter { events: 1 }));
    let response = post(&server, "responses", &request_body("responses", false));
    assert_eq!(response.status, 200);
    assert!(!response.complete, "fewer bytes than Content-Length");
}

#[test]
fn malformed_json_inserts_one_broken_event_at_the_position() {
    for endpoint in ENDPOINTS {
        let server = start(
            Step::text("some text here").with_fault(Fault::MalformedJson { after_events: 2 }),
        );
        let response = post(&server, endpoint, &request_body(endpoint, true));
        assert_eq!(response.status, 200);
        assert!(response.complete, "{endpoint}: the rest of the stream follows");
        let events = response.events();
        let broken: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, event)| {
                event.data != "[DONE]" && serde_json::from_str::<Value>(&event.data).is_err()
            })
            .map(|(index, _)| index)
            .collect();
        assert_eq!(broken, [2], "{endpoint}");
    }
}

#[test]
fn malformed_json_makes_a_non_streaming_body_invalid() {
    let server = start(Step::text("ok").with_fault(Fault::MalformedJson { after_events: 0 }));
    let response = post(&server, "chat/completions", &request_body("chat/completions", false));
    assert_eq!(response.status, 200);
    assert!(response.complete);
    assert!(serde_json::from_slice::<Value>(&response.body).is_err());
}

#[test]
fn slow_chunks_still_deliver_the_whole_stream() {
    for endpoint in ENDPOINTS {
        let slow =
            start(Step::text("slow but sure").with_fault(Fault::SlowChunks { delay_ms: 15 }));
        let fast = start(Step::text("slow but sure"));
        let slow_response = post(&slow, endpoint, &request_body(endpoint, true));
        let fast_response = post(&fast, endpoint, &request_body(endpoint, true));
        assert_eq!(slow_response.status, 200);
        assert!(slow_response.complete, "{endpoint}");
        assert_eq!(slow_response.chunks.len(), fast_response.chunks.len());
        let kinds = |events: Vec<Event>| -> Vec<Option<String>> {
            events.into_iter().map(|event| event.event).collect()
        };
        assert_eq!(kinds(slow_response.events()), kinds(fast_response.events()));
    }
}

#[test]
fn exhausted_script_answers_500_in_each_api_shape_and_logs_the_request() {
    for endpoint in ENDPOINTS {
        let server = start(Step::text("only one"));
        assert_eq!(post(&server, endpoint, &request_body(endpoint, true)).status, 200);
        let response = post(&server, endpoint, &request_body(endpoint, true));
        assert_eq!(response.status, 500, "{endpoint}");
        let body = response.json();
        assert_eq!(error_message(endpoint, &body), SCRIPT_EXHAUSTED);
        let kind = if endpoint == "messages" { "api_error" } else { "server_error" };
        assert_eq!(body["error"]["type"], kind);
        assert_eq!(server.requests().len(), 2);
    }
}

#[test]
fn dropping_the_server_ends_a_slow_stream_at_once() {
    use std::io::{Read, Write};
    let server = start(Step::text("a b c").with_fault(Fault::SlowChunks { delay_ms: 600_000 }));
    let body = request_body("messages", true).to_string();
    let mut stream = std::net::TcpStream::connect(server.address()).expect("connect");
    stream.set_read_timeout(Some(std::time::Duration::from_secs(20))).expect("timeout");
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nanthropic-version: 2023-06-01\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut first = [0; 256];
    let read = stream.read(&mut first).expect("the head and first event come at once");
    assert!(String::from_utf8_lossy(&first[..read]).starts_with("HTTP/1.1 200 OK"));

    drop(server); // must not wait out the ten-minute delay
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).expect("the connection closes");
    let text = String::from_utf8_lossy(&rest);
    assert!(!text.contains("message_stop"), "the stream was cut, not finished");
}
