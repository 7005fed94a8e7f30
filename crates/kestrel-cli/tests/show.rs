//! `kestrel show ID`: a session's record read back as a transcript (prompts, answers,
//! tool calls with their outcome, turn ends and notices), `--json` for the stored lines,
//! id prefixes like every session command, and exit 2 naming an id that matches nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TestEnv, Wire, stderr, stdout};
use kestrel_testkit::{Fault, Script, Step};
use serde_json::json;

/// Runs one exec and returns its session id.
fn exec_session(env: &TestEnv, prompt: &str) -> String {
    let output = env.kestrel(&["exec", "--json", prompt]);
    let started: serde_json::Value =
        serde_json::from_str(stdout(&output).lines().next().expect("a first event"))
            .expect("JSON event");
    started["session_id"].as_str().expect("session_id").to_owned()
}

#[test]
fn show_prints_prompts_answers_and_each_tool_call_with_its_outcome() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("write_file", json!({"path": "notes.txt", "content": "alpha\n"})),
            Step::tool_call("read_file", json!({"path": "missing.txt"})),
            Step::text("wrote notes.txt; missing.txt is not there").with_reasoning("check both"),
        ]),
    );
    let id = exec_session(&env, "write the notes please");

    let shown = env.kestrel(&["show", &id[..13]]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let text = stdout(&shown);
    let expected_in_order = [
        format!("session {id}"),
        "scripted/test-model".into(),
        "## turn 1".into(),
        "> user".into(),
        "  write the notes please".into(),
        "$ write_file {".into(),
        "\"path\":\"notes.txt\"".into(),
        "  changed: notes.txt".into(),
        "  write_file ok (".into(),
        "$ read_file".into(),
        "  read_file failed".into(),
        "  | ".into(),
        "~ reasoning".into(),
        "  check both".into(),
        "< assistant".into(),
        "  wrote notes.txt; missing.txt is not there".into(),
        "-- turn ended".into(),
    ];
    let mut from = 0;
    for expected in &expected_in_order {
        let Some(at) = text[from..].find(expected.as_str()) else {
            panic!("`{expected}` missing (or out of order) after byte {from} in:\n{text}");
        };
        from += at + expected.len();
    }
}

#[test]
fn show_json_prints_the_record_lines_as_stored() {
    let env = TestEnv::new(Wire::Anthropic, Script::new([Step::text("hello")]));
    let id = exec_session(&env, "say hello");

    let shown = env.kestrel(&["show", "--json", &id]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let record = std::fs::read_to_string(&env.records()[0]).unwrap();
    assert_eq!(stdout(&shown), record);
    let first: serde_json::Value = serde_json::from_str(record.lines().next().unwrap()).unwrap();
    assert_eq!((first["type"].as_str(), first["id"].as_str()), (Some("session"), Some(&*id)));
}

#[test]
fn show_cuts_long_tool_output_unless_full() {
    let env = TestEnv::new(
        Wire::Responses,
        Script::new([
            Step::tool_call("read_file", json!({"path": "long.txt"})),
            Step::text("read it"),
        ]),
    );
    let lines: String = (1..=40).map(|n| format!("line number {n}\n")).collect();
    std::fs::write(env.work.path().join("long.txt"), lines).unwrap();
    let id = exec_session(&env, "read long.txt");

    let short = stdout(&env.kestrel(&["show", &id]));
    assert!(short.contains("line number 3\n"), "{short}");
    assert!(!short.contains("line number 40"), "{short}");
    assert!(short.contains("more lines (--full shows them)"), "{short}");

    let full = stdout(&env.kestrel(&["show", "--full", &id]));
    assert!(full.contains("line number 40"), "{full}");
    assert!(!full.contains("more lines"), "{full}");
}

#[test]
fn show_names_why_a_failed_turn_ended() {
    let step = Step::text("never").with_fault(Fault::Status {
        status: 500,
        retry_after_secs: None,
        message: Some("the scripted server is down".into()),
        times: Some(u32::MAX),
    });
    let env = TestEnv::new(Wire::Chat, Script::new([step]));
    let failed = env.kestrel(&["exec", "doomed prompt"]);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    let sessions = stdout(&env.kestrel(&["sessions", "--json"]));
    let listed: serde_json::Value = serde_json::from_str(sessions.lines().next().unwrap()).unwrap();
    let id = listed["id"].as_str().unwrap();

    let shown = env.kestrel(&["show", id]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let text = stdout(&shown);
    assert!(text.contains("doomed prompt"), "{text}");
    assert!(text.contains("-- turn failed: ") && text.contains("500"), "{text}");
}

#[test]
fn show_of_an_unknown_id_exits_2_naming_it() {
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("hello")]));
    let id = exec_session(&env, "one session exists");

    let shown = env.kestrel(&["show", "no-such-session"]);
    assert_eq!(shown.status.code(), Some(2));
    assert_eq!(stdout(&shown), "");
    assert!(
        stderr(&shown)
            .contains("no session matches `no-such-session`: `kestrel sessions` lists them"),
        "{}",
        stderr(&shown)
    );
    // Nothing was touched: the one session is still shown whole.
    assert!(stdout(&env.kestrel(&["show", &id])).contains("one session exists"));

    let missing = env.kestrel(&["show"]);
    assert_eq!(missing.status.code(), Some(2), "clap's usage error");
}

#[test]
fn show_numbers_turns_as_fork_at_counts_them() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([Step::text("first answer"), Step::text("second answer")]),
    );
    let id = exec_session(&env, "first prompt");
    let again = env.kestrel(&["exec", "resume", &id, "second prompt"]);
    assert!(again.status.success(), "{}", stderr(&again));

    let both = stdout(&env.kestrel(&["show", &id]));
    let first = both.find("## turn 1").expect("turn 1");
    let second = both.find("## turn 2").expect("turn 2");
    assert!(first < both.find("first prompt").unwrap(), "{both}");
    assert!(second < both.find("second prompt").unwrap(), "{both}");
    assert!(second > both.find("first answer").unwrap(), "{both}");

    let forked = env.kestrel(&["fork", &id, "--at", "1"]);
    assert!(forked.status.success(), "{}", stderr(&forked));
    let fork_id = stdout(&forked).trim().to_owned();
    let fork = stdout(&env.kestrel(&["show", &fork_id]));
    assert!(fork.contains("## turn 1") && fork.contains("first answer"), "{fork}");
    assert!(!fork.contains("## turn 2") && !fork.contains("second prompt"), "{fork}");
}
