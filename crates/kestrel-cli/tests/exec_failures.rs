//! Bad input through `kestrel exec`: each gives a clear message and the right exit code,
//! and nothing already recorded is lost.

mod common;

use common::{API_KEY_VAR, TestEnv, Wire, body_text, stderr, stdout};
use kestrel_testkit::{Fault, Script, ScriptedServer, ScriptedToolCall, Step};
use serde_json::json;

#[test]
fn missing_api_key_names_the_variable_and_sends_nothing() {
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("unused")]));
    let output = env.command(&["exec", "hi"]).env_remove(API_KEY_VAR).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains(API_KEY_VAR), "{}", stderr(&output));
    assert!(env.requests().is_empty());
    assert!(env.records().is_empty(), "no session is recorded for a config error");
}

#[test]
fn unreachable_base_url_is_named() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    // Port 9 on loopback: nothing listens there.
    env.write_config(&format!(
        "model = \"dead/m\"\n[providers.dead]\nbase_url = \"http://127.0.0.1:9/v1\"\nwire_api = \"chat\"\napi_key_env = \"{API_KEY_VAR}\"\nrequest_max_retries = 1\n"
    ));
    let output = env.kestrel(&["exec", "hi"]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("http://127.0.0.1:9/v1/chat/completions"), "{err}");
    let items = env.record_items();
    assert_eq!(items.last().unwrap()["stop_reason"], "failed");
}

#[test]
fn unauthorized_is_a_clear_failure_without_retries() {
    let fault =
        Fault::Status { status: 401, retry_after_secs: None, message: None, times: Some(5) };
    let env = TestEnv::new(Wire::Anthropic, Script::new([Step::text("x").with_fault(fault)]));
    let output = env.kestrel(&["exec", "hi"]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("401"), "{err}");
    assert!(err.contains(API_KEY_VAR), "{err}");
    assert_eq!(env.requests().len(), 1, "401 is not retried");
}

#[test]
fn rate_limit_then_success_is_retried_and_logged_with_the_url() {
    let fault =
        Fault::Status { status: 429, retry_after_secs: Some(0), message: None, times: Some(1) };
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("after retry").with_fault(fault)]));
    let output = env.kestrel(&["exec", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "after retry\n");
    assert_eq!(env.requests().len(), 2);
    let err = stderr(&output);
    assert!(err.contains("retrying") && err.contains("/v1/chat/completions"), "{err}");
}

#[test]
fn server_error_on_every_try_fails_with_exit_1() {
    let fault =
        Fault::Status { status: 500, retry_after_secs: None, message: None, times: Some(u32::MAX) };
    let env = TestEnv::new(Wire::Responses, Script::new([Step::text("x").with_fault(fault)]));
    let output = env.kestrel(&["exec", "hi"]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("500"), "{err}");
    // request_max_retries = 2 in the test config: three tries in all.
    assert_eq!(env.requests().len(), 3);
    assert_eq!(env.record_items().last().unwrap()["stop_reason"], "failed");
}

#[test]
fn stream_cut_mid_answer_keeps_what_arrived_and_marks_the_turn_failed() {
    for wire in Wire::ALL {
        let step = Step::text("one two three four five six seven eight nine ten")
            .with_fault(Fault::DropAfter { events: 7 });
        let env = TestEnv::new(wire, Script::new([step]));
        let output = env.kestrel(&["exec", "hi"]);
        assert_eq!(output.status.code(), Some(1), "{wire:?}");
        assert!(!stderr(&output).is_empty());
        let items = env.record_items();
        let last = items.last().unwrap();
        assert_eq!(last["type"], "turn_completed", "{wire:?}");
        assert_eq!(last["stop_reason"], "failed", "{wire:?}");
        assert!(last["error"].is_string());
        assert!(items.iter().any(|item| item["type"] == "user_message"));
        // What streamed before the cut is kept (and the cut was not retried away).
        let kept = items
            .iter()
            .find(|item| item["type"] == "assistant_message")
            .and_then(|item| item["text"].as_str())
            .unwrap_or_else(|| panic!("{wire:?}: no partial answer kept: {items:?}"));
        assert!(!kept.is_empty(), "{wire:?}");
        assert!("one two three four five six seven eight nine ten".starts_with(kept), "{wire:?}");
        assert_eq!(env.requests().len(), 1, "{wire:?}: a stream that yielded text is not retried");
    }
}

#[test]
fn malformed_json_in_the_stream_fails_clearly() {
    let step = Step::text("hello there").with_fault(Fault::MalformedJson { after_events: 1 });
    let env = TestEnv::new(Wire::Chat, Script::new([step]));
    let output = env.kestrel(&["exec", "hi"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("parse"), "{}", stderr(&output));
}

#[test]
fn invalid_tool_arguments_and_unknown_tools_go_back_to_the_model() {
    for wire in Wire::ALL {
        let env = TestEnv::new(
            wire,
            Script::new([
                Step::tool_calls(vec![ScriptedToolCall {
                    id: None,
                    name: "read_file".into(),
                    arguments: "{\"path\": \"a.txt\"".into(),
                }]),
                Step::tool_call("launch_rockets", json!({"count": 3})),
                Step::text("recovered"),
            ]),
        );
        let output = env.kestrel(&["exec", "hi"]);
        assert!(output.status.success(), "{wire:?}: {}", stderr(&output));
        assert_eq!(stdout(&output), "recovered\n");
        let requests = env.requests();
        assert!(body_text(&requests[1]).contains("not valid JSON"), "{wire:?}");
        assert!(body_text(&requests[2]).contains("unknown tool"), "{wire:?}");
        let results: Vec<serde_json::Value> =
            env.record_items().into_iter().filter(|item| item["type"] == "tool_result").collect();
        assert_eq!(results.len(), 2);
        assert!(results.iter().all(|r| r["is_error"] == true));
    }
}

#[test]
fn a_path_outside_the_workspace_is_refused_in_auto_mode() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("write_file", json!({"path": "../escaped.txt", "content": "x"})),
            Step::text("ok"),
        ]),
    );
    let output = env.kestrel(&["exec", "--mode", "auto", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let escaped = env.work.path().parent().unwrap().join("escaped.txt");
    assert!(!escaped.exists());
    assert!(body_text(&env.requests()[1]).contains("outside the workspace"));
}

#[test]
fn ask_mode_without_anyone_to_ask_denies_instead_of_hanging() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("write_file", json!({"path": "a.txt", "content": "x"})),
            Step::text("ok"),
        ]),
    );
    let output = env.kestrel(&["exec", "--mode", "ask", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!env.work.path().join("a.txt").exists());
    assert!(body_text(&env.requests()[1]).contains("no one is here to approve"));
}

#[test]
fn a_config_typo_names_the_file_line_and_key() {
    let env = TestEnv::with_server(ScriptedServer::start(Script::default()).unwrap());
    env.write_config("model = \"scripted/m\"\nmdoe = \"auto\"\n");
    let output = env.kestrel(&["exec", "hi"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("config.toml"), "{err}");
    assert!(err.contains(":2"), "line number: {err}");
    assert!(err.contains("mdoe"), "{err}");
}

#[test]
fn an_unknown_mode_or_missing_model_is_a_usage_error() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    let output = env.kestrel(&["exec", "--mode", "reckless", "hi"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--mode: unknown mode `reckless`"), "{}", stderr(&output));
    // The variable is named when the bad mode came from it.
    let output = env.command(&["exec", "hi"]).env("KESTREL_MODE", "bogus").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("KESTREL_MODE: unknown mode `bogus`"), "{err}");
    assert!(env.requests().is_empty() && env.records().is_empty(), "nothing ran: {err}");
    env.write_config("");
    let output = env.kestrel(&["exec", "hi"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--model"), "{}", stderr(&output));
}

/// Waits (bounded) until `path` exists.
fn wait_for_file(path: &std::path::Path) -> bool {
    for _ in 0..200 {
        if path.exists() && std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// True once `pid` is gone (or a zombie waiting for a parent that will reap it).
fn process_gone(pid: u32) -> bool {
    for _ in 0..200 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) if stat.split(") ").nth(1).is_some_and(|rest| rest.starts_with('Z')) => {
                return true;
            }
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
    false
}

#[test]
fn sigterm_cancels_the_turn_and_kills_the_running_command() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("shell", json!({"command": "echo $$ > started.pid; exec sleep 30"})),
            Step::text("never"),
        ]),
    );
    let child = env.command(&["exec", "--mode", "yolo", "sleep"]).spawn().unwrap();
    let pid_file = env.work.path().join("started.pid");
    assert!(wait_for_file(&pid_file), "the command never started");
    let sleeper: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(process_gone(sleeper), "the command outlived kestrel");
    let items = env.record_items();
    let last = items.last().unwrap();
    assert_eq!(last["type"], "turn_completed");
    assert_eq!(last["stop_reason"], "cancelled");
    let result = items.iter().find(|item| item["type"] == "tool_result").unwrap();
    assert_eq!(result["is_error"], true);
}

#[test]
fn a_cancel_runs_no_more_calls_and_the_session_still_resumes() {
    for wire in Wire::ALL {
        let env = TestEnv::new(
            wire,
            Script::new([
                Step::tool_calls(vec![
                    ScriptedToolCall::new(
                        "shell",
                        json!({"command": "echo $$ > started.pid; exec sleep 30"}),
                    ),
                    ScriptedToolCall::new(
                        "write_file",
                        json!({"path": "after_cancel.txt", "content": "x"}),
                    ),
                ]),
                Step::text("resumed fine"),
            ]),
        );
        let child = env.command(&["exec", "--mode", "yolo", "two calls"]).spawn().unwrap();
        let pid_file = env.work.path().join("started.pid");
        assert!(wait_for_file(&pid_file), "{wire:?}: the command never started");
        let killed = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{wire:?}: {}", stderr(&output));
        assert!(!env.work.path().join("after_cancel.txt").exists(), "{wire:?}: ran after cancel");
        let results: Vec<serde_json::Value> =
            env.record_items().into_iter().filter(|item| item["type"] == "tool_result").collect();
        assert_eq!(results.len(), 2, "{wire:?}: every call is answered");
        // The scripted server refuses unanswered calls as the real APIs do.
        let resumed = env.kestrel(&["exec", "resume", "--last", "go on"]);
        assert!(resumed.status.success(), "{wire:?}: {}", stderr(&resumed));
        assert_eq!(stdout(&resumed), "resumed fine\n");
    }
}
