//! In ask a git rule lets a line out of the sandbox only for the repository a session's
//! line began with: the record keeps it, a resumed session and a subagent use the
//! record's, never one a sandboxed command made since (hooks and all). Nor does a line a
//! rule covers run outside the sandbox when the login PATH holds a directory sandboxed
//! commands can write. Through the real binary; the repository is planted in auto, as
//! the model can, and the commit tried in ask, where a covered line runs unconfined.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TestEnv, Wire, read_lines, stderr, stdout};
use kestrel_testkit::{Script, ScriptedToolCall, Step};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

#[path = "../../kestrel-platform/tests/support/unconfined.rs"]
mod unconfined;

fn shell(command: &str) -> Step {
    Step::tool_calls(vec![ScriptedToolCall::new("shell", json!({ "command": command }))])
}

/// Makes a repository in the workspace, as the model can in the sandbox when there is
/// none, whose pre-commit hook touches `marker` (outside the workspace).
fn plant(marker: &Path) -> String {
    format!(
        "git init -q . && git config user.name T && git config user.email t@example.org && \
         printf '#!/bin/sh\\ntouch {}\\n' > .git/hooks/pre-commit && chmod +x \
         .git/hooks/pre-commit",
        marker.display()
    )
}

const COMMIT: &str = "git commit -q --allow-empty -m x";

fn with_rule(env: &TestEnv) {
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    env.write_config(&format!("{config}\n[permissions]\nallow = [\"git commit\"]\n"));
}

fn all_tool_results(records: &[PathBuf]) -> Vec<(String, bool)> {
    records
        .iter()
        .flat_map(|path| read_lines(path))
        .filter(|item| item["type"] == "tool_result")
        .map(|item| (item["output"].as_str().unwrap().to_string(), item["is_error"] == true))
        .collect()
}

/// A session script that plants a repository in one turn and commits in the next, under
/// a `git commit` rule; the hook's marker path.
fn planting_env(out: &Path) -> (TestEnv, PathBuf) {
    let marker = out.join("hook-ran");
    let script = Script::new([
        shell(&plant(&marker)),
        Step::text("planted"),
        shell(COMMIT),
        Step::text("?"),
    ]);
    let env = TestEnv::new(Wire::Chat, script);
    with_rule(&env);
    (env, marker)
}

fn header(path: &Path) -> Value {
    read_lines(path).remove(0)
}

#[test]
fn a_resumed_session_does_not_trust_a_repository_made_since_it_began() {
    let out = unconfined::unconfined_scratch();
    let (env, marker) = planting_env(out.path());
    let first = env.kestrel(&["exec", "--json", "--mode", "auto", "go"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let line = stdout(&first).lines().next().unwrap().to_string();
    let id =
        serde_json::from_str::<Value>(&line).unwrap()["session_id"].as_str().unwrap().to_string();
    let records = env.records();
    assert_eq!(header(&records[0])["repository"], json!({"kind": "none"}));
    assert!(env.work_path().join(".git/hooks/pre-commit").exists(), "{:?}", env.tool_results());

    let resumed = env.kestrel(&["exec", "resume", "--mode", "ask", &id, "commit it"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let results = env.tool_results();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[1].1 && results[1].0.contains("needs approval"), "{results:?}");
    assert!(!marker.exists(), "the planted hook ran outside the sandbox: {results:?}");
}

#[test]
fn a_subagent_trusts_the_repository_its_parent_began_with() {
    let out = unconfined::unconfined_scratch();
    let marker = out.path().join("hook-ran");
    let task = ScriptedToolCall::new(
        "task",
        json!({"description": "commit", "prompt": "commit", "mode": "ask"}),
    );
    let script = Script::new([
        shell(&plant(&marker)),
        Step::tool_calls(vec![task]),
        // The child's turn.
        shell(COMMIT),
        Step::text("child tried"),
        Step::text("parent done"),
    ]);
    let env = TestEnv::new(Wire::Chat, script);
    with_rule(&env);
    let output = env.kestrel(&["exec", "--mode", "auto", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let records = env.records();
    assert_eq!(records.len(), 2, "{records:?}");
    for record in &records {
        assert_eq!(header(record)["repository"], json!({"kind": "none"}), "{record:?}");
    }
    let results = all_tool_results(&records);
    // The child's commit in ask was not covered: asked, and with nobody to ask (a
    // subagent's question goes to its parent's host) denied.
    let asked = |(text, error): &(String, bool)| *error && text.contains("denied `shell`");
    assert!(results.iter().any(asked), "{results:?}");
    assert!(!marker.exists(), "the planted hook ran outside the sandbox: {results:?}");
}

#[test]
fn a_covered_line_stays_unrun_when_the_login_path_holds_a_writable_directory() {
    // Ask runs a covered line outside the sandbox (auto keeps it in).
    for (mode, rule, line) in [("ask", "touch a.txt", "touch a.txt"), ("ask", "git commit", COMMIT)]
    {
        let home = tempfile::tempdir().unwrap();
        let env = TestEnv::new(Wire::Chat, Script::new([shell(line), Step::text("done")]));
        let work = env.work_path();
        for args in [
            &["init", "-q"][..],
            &["config", "user.name", "T"],
            &["config", "user.email", "t@example.org"],
        ] {
            let status = std::process::Command::new("git").args(args).current_dir(&work).status();
            assert!(status.unwrap().success());
        }
        let bin = work.join("bin");
        std::fs::write(
            home.path().join(".bash_profile"),
            format!("export PATH=\"{}:$PATH\"\n", bin.display()),
        )
        .unwrap();
        let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
        env.write_config(&format!("{config}\n[permissions]\nallow = [\"{rule}\"]\n"));
        let output =
            env.command(&["exec", "--mode", mode, "go"]).env("HOME", home.path()).output().unwrap();
        assert!(output.status.success(), "{mode}: {}", stderr(&output));
        let results = env.tool_results();
        assert!(results[0].1 && results[0].0.contains("PATH holds"), "{mode}: {results:?}");
        assert!(results[0].0.contains(&bin.display().to_string()), "{mode}: {results:?}");
        assert!(!work.join("a.txt").exists());
        let log = std::process::Command::new("git").args(["log"]).current_dir(&work).output();
        assert!(!log.unwrap().status.success(), "{mode}: nothing was committed");
    }
}

#[test]
fn a_line_kept_in_the_sandbox_by_an_uncovered_part_says_which() {
    let line = "touch notes.txt && git commit -q --allow-empty -m x";
    let env = TestEnv::new(Wire::Chat, Script::new([shell(line), Step::text("done")]));
    let work = env.work_path();
    for args in [
        &["init", "-q"][..],
        &["config", "user.name", "T"],
        &["config", "user.email", "t@example.org"],
    ] {
        assert!(
            std::process::Command::new("git")
                .args(args)
                .current_dir(&work)
                .status()
                .unwrap()
                .success()
        );
    }
    with_rule(&env);
    let output = env.kestrel(&["exec", "--mode", "auto", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = env.tool_results();
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0].0.contains("allow rules cover part of this line, but not `touch notes.txt`"),
        "{results:?}"
    );
}

#[test]
fn a_new_session_does_not_trust_a_repository_a_sandboxed_command_made() {
    let out = unconfined::unconfined_scratch();
    let (env, marker) = planting_env(out.path());
    let first = env.kestrel(&["exec", "--mode", "auto", "plant"]);
    assert!(first.status.success(), "{}", stderr(&first));
    // A session of its own, begun with the model's repository in place.
    let second = env.kestrel(&["exec", "--mode", "ask", "commit"]);
    assert!(second.status.success(), "{}", stderr(&second));
    let records = env.records();
    assert_eq!(records.len(), 2, "{records:?}");
    for record in &records {
        assert_eq!(header(record)["repository"], json!({"kind": "none"}), "{record:?}");
    }
    let results = all_tool_results(&records);
    let asked = |(text, error): &(String, bool)| *error && text.contains("needs approval");
    assert!(results.iter().any(asked), "{results:?}");
    assert!(!marker.exists(), "the planted hook ran outside the sandbox: {results:?}");
}
