//! `kestrel exec` end to end: the real binary against the scripted model server, for
//! each of the three wire APIs.

mod common;

use common::{TestEnv, Wire, body_text, stderr, stdout};
use kestrel_protocol::ExecEvent;
use kestrel_testkit::{Script, Step};
use serde_json::json;

fn multi_step_script() -> Script {
    Script::new([
        Step::tool_call("write_file", json!({"path": "notes/hello.txt", "content": "hi there\n"})),
        Step::tool_call("shell", json!({"command": "cat notes/hello.txt && echo shell-ran"})),
        Step::tool_call("read_file", json!({"path": "notes/hello.txt"})),
        Step::text("The file says hi there."),
    ])
}

#[test]
fn multi_step_task_runs_on_every_wire_api() {
    for wire in Wire::ALL {
        let env = TestEnv::new(wire, multi_step_script());
        let output = env.kestrel(&["exec", "write hello.txt, run it, read it back"]);
        assert!(output.status.success(), "{wire:?}: {}", stderr(&output));
        assert_eq!(stdout(&output), "The file says hi there.\n", "{wire:?}");
        let written = std::fs::read_to_string(env.work.path().join("notes/hello.txt")).unwrap();
        assert_eq!(written, "hi there\n");

        let requests = env.requests();
        assert_eq!(requests.len(), 4, "{wire:?}");
        let expected_path = match wire {
            Wire::Chat => "/v1/chat/completions",
            Wire::Responses => "/v1/responses",
            Wire::Anthropic => "/v1/messages",
        };
        assert!(requests.iter().all(|r| r.path == expected_path), "{wire:?}");
        // Each request carries the whole conversation: the last one has every tool output.
        let last = body_text(&requests[3]);
        assert!(last.contains("shell-ran"), "{wire:?}: shell output missing in {last}");
        assert!(last.contains("hi there"), "{wire:?}");
        assert!(last.contains("write hello.txt, run it, read it back"), "{wire:?}");
        // The key goes in a header, never in a record.
        let auth = match wire {
            Wire::Anthropic => requests[0].header("x-api-key").map(str::to_string),
            Wire::Chat | Wire::Responses => requests[0].header("authorization").map(str::to_string),
        };
        assert!(auth.is_some_and(|value| value.contains("sk-test-secret-key")), "{wire:?}");
        for record in env.records() {
            let text = std::fs::read_to_string(record).unwrap();
            assert!(!text.contains("sk-test-secret-key"), "{wire:?}: key leaked into a record");
        }
        if let Wire::Responses = wire {
            for request in &requests {
                assert_eq!(request.body["store"], json!(false));
                assert!(request.body.get("previous_response_id").is_none());
            }
        }
    }
}

#[test]
fn record_holds_every_item_of_the_turn_in_order() {
    let env = TestEnv::new(Wire::Chat, multi_step_script());
    let output = env.kestrel(&["exec", "do it"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let types: Vec<String> = env
        .record_items()
        .iter()
        .map(|item| item["type"].as_str().unwrap().to_string())
        .filter(|kind| kind != "usage")
        .collect();
    assert_eq!(
        types,
        [
            "turn_started",
            "user_message",
            "tool_call",
            // write_file changed a file: what it was is saved for undo.
            "checkpoint",
            "tool_result",
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_result",
            "assistant_message",
            "turn_completed"
        ]
    );
    let items = env.record_items();
    assert_eq!(items.last().unwrap()["stop_reason"], "end_turn");
    assert!(items.iter().all(|item| item["ts"].is_string()));
    let header = &common::read_lines(&env.records()[0])[0];
    assert_eq!(header["type"], "session");
    assert_eq!(header["provider"], "scripted");
    assert_eq!(header["model"], "test-model");
}

#[test]
fn json_mode_prints_only_events() {
    let env = TestEnv::new(Wire::Responses, multi_step_script());
    let output = env.kestrel(&["exec", "--json", "do it"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let events: Vec<ExecEvent> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(matches!(events.first(), Some(ExecEvent::SessionStarted { version: 1, .. })));
    assert!(matches!(events.get(1), Some(ExecEvent::TurnStarted {})));
    assert!(matches!(events.last(), Some(ExecEvent::TurnCompleted { .. })));
    let tool_starts = events.iter().filter(|e| matches!(e, ExecEvent::ItemStarted { .. })).count();
    assert!(tool_starts >= 4, "three tool calls and a message start: {events:?}");
    let file_changes = stdout(&output).matches("\"type\":\"file_change\"").count();
    assert_eq!(file_changes, 1, "write_file reports its change");
    let streamed: String = events
        .iter()
        .filter_map(|event| match event {
            ExecEvent::ItemUpdated { item } => match &item.kind {
                kestrel_protocol::ExecItemKind::AgentMessage { text } => Some(text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "The file says hi there.");
}

#[test]
fn output_last_message_and_prompt_from_stdin() {
    let env = TestEnv::new(Wire::Anthropic, Script::new([Step::text("answer from stdin")]));
    let out_file = env.work.path().join("last.txt");
    let mut command =
        env.command(&["exec", "--output-last-message", out_file.to_str().unwrap(), "-"]);
    command.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"prompt via stdin").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(out_file).unwrap(), "answer from stdin");
    assert!(body_text(&env.requests()[0]).contains("prompt via stdin"));
}

#[test]
fn max_turns_stops_the_loop_with_exit_1() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("list_dir", json!({})),
            Step::tool_call("list_dir", json!({})),
            Step::text("never reached"),
        ]),
    );
    let output = env.kestrel(&["exec", "--max-turns", "2", "loop"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("--max-turns 2"), "{}", stderr(&output));
    assert_eq!(env.requests().len(), 2);
}

#[test]
fn shell_commands_do_not_see_api_keys_or_tokens() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call(
                "shell",
                json!({"command": "env; echo visible=$KESTREL_PLAIN_SETTING"}),
            ),
            Step::text("done"),
        ]),
    );
    let output = env
        .command(&["exec", "show the environment"])
        .env("GITHUB_TOKEN", "ghp-should-not-leak")
        .env("KESTREL_PLAIN_SETTING", "kept")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let sent = body_text(&env.requests()[1]);
    assert!(sent.contains("visible=kept"), "ordinary variables stay: {sent}");
    assert!(!sent.contains("sk-test-secret-key"), "the provider key reached the model");
    assert!(!sent.contains("ghp-should-not-leak"), "a token reached the model");
    let record = std::fs::read_to_string(&env.records()[0]).unwrap();
    assert!(!record.contains("sk-test-secret-key") && !record.contains("ghp-should-not-leak"));
}

#[test]
fn project_and_user_instructions_reach_the_system_prompt() {
    for wire in Wire::ALL {
        let env = TestEnv::new(wire, Script::new([Step::text("ok")]));
        std::fs::create_dir_all(env.work.path().join(".git")).unwrap();
        std::fs::create_dir_all(env.work.path().join("pkg")).unwrap();
        std::fs::write(env.work.path().join("AGENTS.md"), "ROOT-RULE: use tabs").unwrap();
        std::fs::write(env.work.path().join("pkg/CLAUDE.md"), "PKG-RULE: no unsafe").unwrap();
        std::fs::write(env.home.path().join("AGENTS.md"), "USER-RULE: be brief").unwrap();
        let output = env
            .command(&["exec", "--cd", env.work.path().join("pkg").to_str().unwrap(), "hi"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{wire:?}: {}", stderr(&output));
        let request = &env.requests()[0];
        let system = match wire {
            Wire::Chat => request.body["messages"][0].to_string(),
            Wire::Responses => request.body["instructions"].to_string(),
            Wire::Anthropic => request.body["system"].to_string(),
        };
        let user = system.find("USER-RULE").expect("user AGENTS.md");
        let root = system.find("ROOT-RULE").expect("root AGENTS.md");
        let pkg = system.find("PKG-RULE").expect("CLAUDE.md where no AGENTS.md");
        assert!(user < root && root < pkg, "{wire:?}: nearer files come later");
    }
}
