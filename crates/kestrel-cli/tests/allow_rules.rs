//! What the user's rules and approvals let through, mode by mode, through the real
//! binary: an `allow_write` rule lets the file tools write outside the workspace in ask
//! and auto (exactly where its paths lead, never through a symlink out of it); an
//! `allow` rule lets its command run unasked only when it covers every part of the
//! command line: outside the sandbox in ask, still in the sandbox in auto.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TestEnv, Wire, stderr, stdout};
use kestrel_testkit::{Script, ScriptedToolCall, Step};
use serde_json::{Value, json};
use std::path::Path;

/// The outputs of the record's tool results, in order, with whether each is an error.
fn tool_results(env: &TestEnv) -> Vec<(String, bool)> {
    env.record_items()
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .map(|item| {
            (item["output"].as_str().unwrap().to_string(), item["is_error"] == Value::Bool(true))
        })
        .collect()
}

fn script(calls: Vec<ScriptedToolCall>) -> Script {
    let mut steps: Vec<Step> = calls.into_iter().map(|call| Step::tool_calls(vec![call])).collect();
    steps.push(Step::text("done"));
    Script::new(steps)
}

fn write(path: &Path) -> ScriptedToolCall {
    ScriptedToolCall::new("write_file", json!({"path": path, "content": "note\n"}))
}

fn shell(command: &str) -> ScriptedToolCall {
    ScriptedToolCall::new("shell", json!({ "command": command }))
}

#[path = "../../kestrel-platform/tests/support/unconfined.rs"]
mod unconfined;

/// A directory outside the workspace that the sandbox keeps read-only (not under /tmp),
/// wherever the checkout and the target dir live.
fn outside() -> tempfile::TempDir {
    unconfined::unconfined_scratch()
}

fn add_config(env: &TestEnv, text: &str) {
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    env.write_config(&format!("{config}\n{text}\n"));
}

#[test]
fn an_allow_write_rule_lets_the_file_tools_write_outside_the_workspace() {
    let elsewhere = outside();
    let target = elsewhere.path().join("x.txt");
    for mode in ["ask", "auto"] {
        // Without the rule: refused, and the refusal names the rule that would allow it.
        let env = TestEnv::new(Wire::Chat, script(vec![write(&target)]));
        let output = env.kestrel(&["exec", "--mode", mode, "go"]);
        assert!(output.status.success(), "{}", stderr(&output));
        let results = tool_results(&env);
        assert!(results[0].1 && results[0].0.contains("allow_write"), "{mode}: {results:?}");
        assert!(!target.exists(), "{mode}: written without a rule");

        let env = TestEnv::new(Wire::Chat, script(vec![write(&target)]));
        add_config(
            &env,
            &format!("[permissions]\nallow_write = [\"{}\"]", elsewhere.path().display()),
        );
        let output = env.kestrel(&["exec", "--mode", mode, "go"]);
        assert!(output.status.success(), "{}", stderr(&output));
        let results = tool_results(&env);
        assert!(!results[0].1, "{mode}: {results:?}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "note\n", "{mode}");
        std::fs::remove_file(&target).unwrap();
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git").args(args).current_dir(dir).output().unwrap();
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A git rule runs its command unasked in both modes: outside the sandbox in ask (it
/// commits), in the sandbox in auto, where `.git` stays read-only and the result says
/// why and to use ask (docs/permissions.md).
#[test]
fn a_git_rule_commits_in_ask_and_says_why_not_in_auto() {
    let calls =
        || vec![shell("git commit -q --allow-empty -m 'by the agent'"), shell("git tag v1")];
    for mode in ["ask", "auto"] {
        let env = TestEnv::new(Wire::Chat, script(calls()));
        let work = env.work_path();
        git(&work, &["init", "-q"]);
        git(&work, &["config", "user.name", "Test"]);
        git(&work, &["config", "user.email", "test@example.org"]);
        add_config(&env, "[permissions]\nallow = [\"git commit\"]");
        let output = env.kestrel(&["exec", "--mode", mode, "go"]);
        assert!(output.status.success(), "{mode}: {}", stderr(&output));
        let results = tool_results(&env);
        if mode == "ask" {
            assert!(!results[0].1, "the allowed command ran: {results:?}");
            assert!(git(&work, &["log", "--format=%s"]).contains("by the agent"));
        } else {
            let (text, failed) = &results[0];
            assert!(*failed && text.contains("does not make `.git` writable"), "{results:?}");
            assert!(text.contains("ask mode"), "{results:?}");
        }
        // A command no rule covers is not let through (asked, or sandboxed).
        assert!(results[1].1, "{mode}: {results:?}");
        assert!(git(&work, &["tag"]).is_empty());
    }
}

#[test]
fn a_symlink_in_an_allow_write_directory_does_not_lead_the_write_out_of_it() {
    let allowed = outside();
    let elsewhere = outside();
    let victim = elsewhere.path().join("victim.txt");
    std::fs::write(&victim, "keep\n").unwrap();
    let link = allowed.path().join("notes.txt");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    for mode in ["ask", "auto"] {
        let env = TestEnv::new(Wire::Chat, script(vec![write(&link)]));
        add_config(
            &env,
            &format!("[permissions]\nallow_write = [\"{}\"]", allowed.path().display()),
        );
        let output = env.kestrel(&["exec", "--mode", mode, "go"]);
        assert!(output.status.success(), "{}", stderr(&output));
        let results = tool_results(&env);
        assert!(results[0].1, "{mode}: the write went through the symlink: {results:?}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n", "{mode}");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "{mode}");
    }
}

/// With `allow = ["git commit"]` in ask, a line that adds anything to the covered
/// command (a list, a substitution, a pipe, a redirection, a second line, a subshell,
/// a shell started with BASH_ENV) is asked as without the rule (and, with nobody to ask,
/// not run): no commit, no write outside; the plain covered command runs.
#[test]
fn an_allow_rule_does_not_lift_the_sandbox_for_a_compound_command() {
    let out = outside();
    let o = out.path().display().to_string();
    let commit = "git commit -q --allow-empty";
    let abuses = [
        format!("{commit} -m a; touch {o}/list"),
        format!("{commit} -m a && touch {o}/and"),
        format!("{commit} -m \"$(touch {o}/substitution)\""),
        format!("{commit} -m \"`touch {o}/backticks`\""),
        format!("{commit} -m a | tee {o}/pipe"),
        format!("{commit} -m a > {o}/redirection"),
        format!("{commit} -m a\ntouch {o}/newline"),
        format!("({commit} -m a; touch {o}/subshell)"),
        format!("BASH_ENV=./rc bash -c '{commit} -m a'"),
    ];
    let mut calls = vec![ScriptedToolCall::new(
        "write_file",
        json!({"path": "rc", "content": format!("touch {o}/bash_env\n")}),
    )];
    calls.extend(abuses.iter().map(|line| shell(line)));
    calls.push(shell(&format!("{commit} -m covered")));
    let env = TestEnv::new(Wire::Chat, script(calls));
    let work = env.work_path();
    git(&work, &["init", "-q"]);
    git(&work, &["config", "user.name", "Test"]);
    git(&work, &["config", "user.email", "test@example.org"]);
    add_config(&env, "[permissions]\nallow = [\"git commit\"]");
    let output = env.kestrel(&["exec", "--mode", "ask", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert_eq!(results.len(), abuses.len() + 2, "{results:?}");
    // The plain covered command ran unasked; no abusing line's commit happened.
    assert!(!results.last().unwrap().1, "{results:?}");
    assert_eq!(git(&work, &["log", "--format=%s"]), "covered\n");
    assert_nothing_written(out.path(), &results);
}

/// A sed script whose label is followed by another command (GNU sed ends a label at a
/// blank) is not read-only: with a rule covering the rest of the line, the line is still
/// not covered, so ask does not run it outside the sandbox (nobody to ask: not run) and
/// sed's `e` writes nothing outside the workspace.
#[test]
fn a_sed_command_after_a_label_is_not_covered_by_a_rule_for_the_rest() {
    let out = outside();
    let o = out.path().display().to_string();
    let lines = [
        format!("touch a.txt; echo a | sed -n ':x e touch {o}/colon'"),
        format!("touch a.txt; echo a | sed -n 'tx e touch {o}/t'"),
    ];
    let env = TestEnv::new(Wire::Chat, script(lines.iter().map(|line| shell(line)).collect()));
    add_config(&env, "[permissions]\nallow = [\"touch a.txt\"]");
    let output = env.kestrel(&["exec", "--mode", "ask", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert_eq!(results.len(), lines.len(), "{results:?}");
    for (text, failed) in &results {
        assert!(*failed && text.contains("needs approval"), "{results:?}");
    }
    assert_nothing_written(out.path(), &results);
}

/// The model's `prepare` lines, run in auto (in the sandbox, as the model can), then in
/// the same session the `covered` lines in ask, where a line the rules cover runs
/// outside the sandbox unasked: the script.
fn prepare_then_ask(prepare: &[String], covered: &[String]) -> Script {
    let mut steps: Vec<Step> =
        prepare.iter().map(|line| Step::tool_calls(vec![shell(line)])).collect();
    steps.push(Step::text("prepared"));
    steps.extend(covered.iter().map(|line| Step::tool_calls(vec![shell(line)])));
    steps.push(Step::text("done"));
    Script::new(steps)
}

/// Runs a [`prepare_then_ask`] script: `exec` in auto, then `exec resume` in ask.
fn run_prepare_then_ask(env: &TestEnv) -> Vec<(String, bool)> {
    let first = env.kestrel(&["exec", "--json", "--mode", "auto", "prepare"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let started: Value = serde_json::from_str(stdout(&first).lines().next().unwrap()).unwrap();
    let id = started["session_id"].as_str().unwrap();
    let second = env.kestrel(&["exec", "resume", "--mode", "ask", id, "go on"]);
    assert!(second.status.success(), "{}", stderr(&second));
    tool_results(env)
}

fn assert_nothing_written(out: &Path, results: &[(String, bool)]) {
    let written: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(written.is_empty(), "written outside the workspace: {written:?}\n{results:?}");
}

/// A git rule lets out of the sandbox (in ask) only the workspace's own repository, the
/// one it had when the session started: a repository the model makes in the sandbox
/// (with a hook of its own) is not covered, so its hook never runs outside the sandbox.
/// (A workspace with none at start: `allow_rules_repository.rs`.)
#[test]
fn a_git_rule_does_not_cover_a_repository_the_model_made() {
    let out = outside();
    let o = out.path().display().to_string();
    let hooks = "sub/.git/hooks/pre-commit";
    let plant = format!(
        "git init -q sub && git -C sub config user.name T && git -C sub config user.email \
         t@example.org && printf '#!/bin/sh\\ntouch {o}/hook-ran\\n' > {hooks} && chmod +x {hooks}"
    );
    let commit = "cd sub && git commit -q --allow-empty -m x".to_string();
    let env = TestEnv::new(Wire::Chat, prepare_then_ask(&[plant], &[commit]));
    let work = env.work_path();
    git(&work, &["init", "-q"]);
    add_config(&env, "[permissions]\nallow = [\"git commit\"]");
    let results = run_prepare_then_ask(&env);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(!results[0].1 && work.join(hooks).exists(), "{results:?}");
    assert!(results[1].1 && results[1].0.contains("needs approval"), "{results:?}");
    assert_nothing_written(out.path(), &results);
}

/// A rule names a command as the user wrote it: the model, sandboxed, can make its
/// operand a symlink out of the workspace first (dangling, so that touching it creates
/// the target; or a directory on the way); the covered command is then not covered, and
/// ask does not run it outside the sandbox.
#[test]
fn an_allow_rule_does_not_follow_a_symlink_the_model_made_out_of_the_workspace() {
    let out = outside();
    let o = out.path().display().to_string();
    let links = format!("ln -s {o}/victim.txt a.txt && ln -s {o} d");
    let touches = ["touch a.txt".to_string(), "touch d/x".to_string()];
    let env = TestEnv::new(Wire::Chat, prepare_then_ask(&[links], &touches));
    add_config(&env, "[permissions]\nallow = [\"touch a.txt\", \"touch d/x\"]");
    let results = run_prepare_then_ask(&env);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(!results[0].1, "{results:?}");
    assert!(std::fs::symlink_metadata(env.work_path().join("d")).unwrap().is_symlink());
    for (text, failed) in &results[1..] {
        assert!(*failed && text.contains("needs approval"), "{results:?}");
    }
    assert_nothing_written(out.path(), &results);
}
