//! Sessions outlive their process: resume replays the record into the same conversation,
//! fork copies it, and `kestrel sessions` lists them from the index.

mod common;

use common::{TestEnv, Wire, stderr, stdout};
use kestrel_testkit::{Script, Step};
use serde_json::json;

fn two_turn_script() -> Script {
    Script::new([
        Step::tool_call("write_file", json!({"path": "a.txt", "content": "alpha\n"})),
        Step::text("wrote a.txt"),
        Step::text("second answer"),
    ])
}

#[test]
fn resume_last_sends_the_same_conversation_plus_the_new_prompt() {
    for wire in Wire::ALL {
        let env = TestEnv::new(wire, two_turn_script());
        let first = env.kestrel(&["exec", "first prompt"]);
        assert!(first.status.success(), "{wire:?}: {}", stderr(&first));
        let second = env.kestrel(&["exec", "resume", "--last", "second prompt"]);
        assert!(second.status.success(), "{wire:?}: {}", stderr(&second));
        assert_eq!(stdout(&second), "second answer\n");

        let requests = env.requests();
        assert_eq!(requests.len(), 3);
        let key = match wire {
            Wire::Chat | Wire::Anthropic => "messages",
            Wire::Responses => "input",
        };
        let before = requests[1].body[key].as_array().unwrap().clone();
        let after = requests[2].body[key].as_array().unwrap().clone();
        // The resumed request starts with exactly what the first session last sent
        // (cache markers aside), then the first answer and the new prompt.
        assert!(after.len() > before.len(), "{wire:?}");
        for (old, new) in before.iter().zip(&after) {
            assert_eq!(strip_cache(old), strip_cache(new), "{wire:?}");
        }
        let tail = serde_json::to_string(&after[before.len()..]).unwrap();
        assert!(tail.contains("wrote a.txt") && tail.contains("second prompt"), "{wire:?}: {tail}");
        assert_eq!(env.records().len(), 1, "resume appends to the same record");
    }
}

fn strip_cache(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => map
            .iter()
            .filter(|(key, _)| key.as_str() != "cache_control")
            .map(|(key, value)| (key.clone(), strip_cache(value)))
            .collect(),
        serde_json::Value::Array(items) => items.iter().map(strip_cache).collect(),
        other => other.clone(),
    }
}

#[test]
fn resume_by_id_prefix_and_sessions_listing() {
    let env = TestEnv::new(Wire::Chat, two_turn_script());
    let first = env.kestrel(&["exec", "--json", "list me"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let started: serde_json::Value =
        serde_json::from_str(stdout(&first).lines().next().unwrap()).unwrap();
    let id = started["session_id"].as_str().unwrap().to_string();

    let listing = env.kestrel(&["sessions"]);
    assert!(listing.status.success());
    let text = stdout(&listing);
    assert!(text.contains(&id) && text.contains("list me"), "{text}");

    let prefix = &id[..13];
    let second = env.kestrel(&["exec", "resume", prefix, "again"]);
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(stdout(&second), "second answer\n");
}

#[test]
fn resume_of_an_unknown_session_is_a_clear_error() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    let output = env.kestrel(&["exec", "resume", "no-such-session", "hi"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("no-such-session"), "{}", stderr(&output));
}

#[test]
fn fork_at_n_copies_the_first_n_turns() {
    let env = TestEnv::new(Wire::Chat, two_turn_script());
    let first = env.kestrel(&["exec", "--json", "fork me"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let started: serde_json::Value =
        serde_json::from_str(stdout(&first).lines().next().unwrap()).unwrap();
    let id = started["session_id"].as_str().unwrap().to_string();
    let second = env.kestrel(&["exec", "resume", &id, "and again"]);
    assert!(second.status.success(), "{}", stderr(&second));

    // Turns are counted, not record items: the session has two.
    let beyond = env.kestrel(&["fork", &id, "--at", "3"]);
    assert_eq!(beyond.status.code(), Some(2), "{}", stderr(&beyond));
    assert!(stderr(&beyond).contains("it has 2 turns"), "{}", stderr(&beyond));
    let forked_items = |at: &str| {
        let fork = env.kestrel(&["fork", &id, "--at", at]);
        assert!(fork.status.success(), "{}", stderr(&fork));
        let fork_id = stdout(&fork).trim().to_string();
        assert_ne!(fork_id, id);
        let lines = env
            .records()
            .iter()
            .map(|path| common::read_lines(path))
            .find(|lines| lines[0]["id"] == fork_id.as_str())
            .unwrap();
        assert_eq!(lines[0]["forked_from"]["session_id"], id.as_str());
        lines[1..].to_vec()
    };
    let one = forked_items("1");
    let prompts: Vec<&str> = one
        .iter()
        .filter(|item| item["type"] == "user_message")
        .map(|item| item["text"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["fork me"]);
    assert_eq!(one.last().unwrap()["type"], "turn_completed", "the whole first turn");
    assert!(forked_items("0").is_empty());
    let both = forked_items("2");
    assert_eq!(both.iter().filter(|item| item["type"] == "turn_started").count(), 2);
}

#[test]
fn resume_by_id_from_elsewhere_works_in_the_sessions_own_directory() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::text("first"),
            Step::tool_call("write_file", json!({"path": "here.txt", "content": "x"})),
            Step::text("done"),
        ]),
    );
    let first = env.kestrel(&["exec", "--json", "start"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let started: serde_json::Value =
        serde_json::from_str(stdout(&first).lines().next().unwrap()).unwrap();
    let id = started["session_id"].as_str().unwrap().to_string();
    let elsewhere = tempfile::tempdir().unwrap();
    let second = env
        .command(&["exec", "resume", &id, "write here.txt"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert!(second.status.success(), "{}", stderr(&second));
    assert!(env.work.path().join("here.txt").exists(), "ran in the session's own cwd");
    assert!(!elsewhere.path().join("here.txt").exists());
}
