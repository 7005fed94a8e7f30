//! The `scripted-model` binary: what e2e tests and benchmarks run from outside.
#![allow(clippy::expect_used)] // test code: a failed expectation is a failed test

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kestrel_testkit::LoggedRequest;

const BINARY: &str = env!("CARGO_BIN_EXE_scripted-model");
const WAIT: Duration = Duration::from_secs(20);

/// Kills the child if a test fails before it exits.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "scripted-model did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_to_end(arguments: &[&str]) -> (ExitStatus, String, String) {
    let mut guard = Guard(
        Command::new(BINARY)
            .args(arguments)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn"),
    );
    let status = wait_for_exit(&mut guard.0);
    let mut stdout = String::new();
    let mut stderr = String::new();
    guard.0.stdout.take().expect("stdout").read_to_string(&mut stdout).expect("stdout");
    guard.0.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("stderr");
    (status, stdout, stderr)
}

#[test]
fn prints_its_listening_line_serves_logs_and_exits_when_stdin_closes() {
    let directory = tempfile::tempdir().expect("tempdir");
    let script = directory.path().join("script.json");
    let log = directory.path().join("requests.jsonl");
    // Routed steps (`when`) load from JSON too: the first is for another model.
    let steps = r#"{"steps": [
        {"when": {"model": "other-model"}, "reply": {"text": "not for this request"}},
        {"when": {"model": "test-model", "contains": "\"hi\""}, "reply": {"text": "from the binary"}}
    ]}"#;
    std::fs::write(&script, steps).expect("write");

    let mut guard = Guard(
        Command::new(BINARY)
            .args([
                "--script",
                script.to_str().expect("utf-8"),
                "--log",
                log.to_str().expect("utf-8"),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn"),
    );
    let stdout = guard.0.stdout.take().expect("stdout");
    let (line_sender, line_receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = line_sender.send(lines.next());
        let _ = line_sender.send(lines.next()); // None: nothing after the first line
    });
    let line =
        line_receiver.recv_timeout(WAIT).expect("a line in time").expect("a line").expect("utf-8");
    let base_url = line.strip_prefix("listening ").expect("listening line");
    let address = base_url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/v1"))
        .expect("http://127.0.0.1:PORT/v1");
    assert!(address.starts_with("127.0.0.1:"), "{line}");

    let body = support::request_body("chat/completions", false).to_string();
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(response.contains("from the binary"));

    let logged: Vec<LoggedRequest> = std::fs::read_to_string(&log)
        .expect("log file")
        .lines()
        .map(|line| serde_json::from_str(line).expect("LoggedRequest line"))
        .collect();
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0].path, "/v1/chat/completions");
    assert_eq!(logged[0].body["model"], "test-model");

    drop(guard.0.stdin.take());
    let status = wait_for_exit(&mut guard.0);
    assert!(status.success(), "{status}");
    let rest = line_receiver.recv_timeout(WAIT).expect("stdout closed");
    assert!(rest.is_none(), "exactly one line on stdout, then {rest:?}");
}

#[test]
fn missing_script_argument_is_a_usage_error() {
    let (status, stdout, stderr) = run_to_end(&[]);
    assert_eq!(status.code(), Some(2));
    assert!(stdout.is_empty());
    assert!(stderr.contains("--script FILE.json is required"), "{stderr}");
    assert!(stderr.contains("usage: scripted-model"), "{stderr}");
}

#[test]
fn bad_arguments_are_usage_errors() {
    let (status, _, stderr) = run_to_end(&["--script", "x.json", "--port", "http"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("--port \"http\" is not a port number"), "{stderr}");

    let (status, _, stderr) = run_to_end(&["--scrip", "x.json"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("unknown argument \"--scrip\""), "{stderr}");

    let (status, _, stderr) = run_to_end(&["--script"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("--script needs a value"), "{stderr}");
}

#[test]
fn unreadable_or_invalid_script_names_the_file() {
    let directory = tempfile::tempdir().expect("tempdir");
    let missing = directory.path().join("missing.json");
    let (status, stdout, stderr) = run_to_end(&["--script", missing.to_str().expect("utf-8")]);
    assert_eq!(status.code(), Some(2));
    assert!(stdout.is_empty());
    assert!(stderr.contains("missing.json"), "{stderr}");

    let invalid = directory.path().join("invalid.json");
    std::fs::write(&invalid, "[{\"reply\": {\"txt\": 1}}]").expect("write");
    let (status, _, stderr) = run_to_end(&["--script", invalid.to_str().expect("utf-8")]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("invalid.json") && stderr.contains("txt"), "{stderr}");
}
