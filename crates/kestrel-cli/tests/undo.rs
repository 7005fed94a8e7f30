//! `kestrel undo` end to end: a scripted session writes, edits, patches and runs shell
//! commands that change files; undo puts every file back, refuses files the user
//! changed since (listing them, touching nothing), and `--force` overwrites them; a
//! session the daemon runs is undone by its worker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;
mod tui_support;

use common::{TestEnv, Wire, stderr, stdout};
use daemon_support::DaemonTest;
use kestrel_testkit::{Script, Step};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use tui_support::TuiTest;

fn read(env: &TestEnv, path: &str) -> Option<String> {
    std::fs::read_to_string(env.work.path().join(path)).ok()
}

fn write(env: &TestEnv, path: &str, text: &str) {
    std::fs::write(env.work.path().join(path), text).unwrap();
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn changing_turn() -> Vec<Step> {
    let patch =
        "*** Begin Patch\n*** Update File: patched.txt\n@@\n-old line\n+new line\n*** End Patch";
    vec![
        Step::tool_call("write_file", json!({"path": "src/new.rs", "content": "fn new() {}\n"})),
        Step::tool_call(
            "edit_file",
            json!({"path": "edited.txt", "old_string": "before", "new_string": "after"}),
        ),
        Step::tool_call("apply_patch", json!({ "patch": patch })),
        Step::tool_call(
            "shell",
            json!({"command": "echo generated > gen.txt && rm doomed.txt && echo more >> tracked.txt"}),
        ),
        Step::text("changed everything"),
    ]
}

fn prepare(env: &TestEnv) {
    write(env, "edited.txt", "before\n");
    write(env, "patched.txt", "old line\n");
    write(env, "doomed.txt", "precious\n");
    write(env, "tracked.txt", "tracked\n");
    git(env.work.path(), &["init", "-q"]);
    git(env.work.path(), &["add", "."]);
    git(env.work.path(), &["commit", "-q", "-m", "base"]);
}

#[test]
fn undo_restores_every_file_the_turn_changed_by_any_tool() {
    let env = TestEnv::new(Wire::Chat, Script::new(changing_turn()));
    prepare(&env);
    let output = env.kestrel(&["exec", "change things"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(read(&env, "edited.txt").unwrap(), "after\n");
    assert_eq!(read(&env, "gen.txt").unwrap(), "generated\n");
    assert!(read(&env, "doomed.txt").is_none());
    let checkpoints = env.record_items().iter().filter(|item| item["type"] == "checkpoint").count();
    assert_eq!(checkpoints, 4, "one checkpoint per changing call");

    let output = env.kestrel(&["undo"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with("undid turn 1 of session "), "{text}");
    assert!(text.contains("removed src/new.rs") && text.contains("restored doomed.txt"), "{text}");
    // Where what undo replaced went, so an edit it took is never out of reach.
    let saved = text.lines().last().unwrap();
    assert!(saved.starts_with("what these files held before the undo is saved in "), "{text}");
    let dir = saved.split(" is saved in ").nth(1).unwrap().split(" (").next().unwrap();
    assert!(std::path::Path::new(dir).is_dir(), "{dir}");
    assert!(read(&env, "src/new.rs").is_none());
    assert_eq!(read(&env, "edited.txt").unwrap(), "before\n");
    assert_eq!(read(&env, "patched.txt").unwrap(), "old line\n");
    assert!(read(&env, "gen.txt").is_none());
    assert_eq!(read(&env, "doomed.txt").unwrap(), "precious\n");
    assert_eq!(read(&env, "tracked.txt").unwrap(), "tracked\n");
    assert_eq!(git(env.work.path(), &["status", "--porcelain"]), "", "back to the commit");

    // The record keeps the history and says what undo did.
    let items = env.record_items();
    let notice = items.iter().rev().find(|item| item["type"] == "notice").unwrap();
    assert!(notice["message"].as_str().unwrap().contains("undo: turn 1"), "{notice}");
    assert!(
        items.iter().any(
            |item| item["type"] == "checkpoint" && item["files"]["undo"]["turns"] == json!([1])
        )
    );

    let output = env.kestrel(&["undo"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("nothing to undo"), "{}", stderr(&output));
}

#[test]
fn undo_refuses_files_the_user_changed_since_until_forced() {
    let env = TestEnv::new(Wire::Chat, Script::new(changing_turn()));
    prepare(&env);
    let output = env.kestrel(&["exec", "change things"]);
    assert!(output.status.success(), "{}", stderr(&output));
    write(&env, "edited.txt", "the user's own work\n");

    let output = env.kestrel(&["undo"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("edited.txt (changed since turn 1)") && message.contains("--force"),
        "{message}"
    );
    assert_eq!(read(&env, "edited.txt").unwrap(), "the user's own work\n");
    assert_eq!(
        read(&env, "gen.txt").unwrap(),
        "generated\n",
        "nothing is undone when something is refused"
    );

    let output = env.kestrel(&["undo", "--dry-run", "--force"]);
    assert!(
        output.status.success() && stdout(&output).contains("would restore edited.txt"),
        "{}",
        stdout(&output)
    );
    assert_eq!(read(&env, "gen.txt").unwrap(), "generated\n");

    let output = env.kestrel(&["undo", "--force"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("restored edited.txt (overwriting changes made since"),
        "{}",
        stdout(&output)
    );
    assert_eq!(read(&env, "edited.txt").unwrap(), "before\n");
    assert!(read(&env, "gen.txt").is_none());
}

#[test]
fn undo_several_turns_by_session_id() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("write_file", json!({"path": "f.txt", "content": "one\n"})),
            Step::text("first"),
            Step::tool_call("write_file", json!({"path": "f.txt", "content": "two\n"})),
            Step::text("second"),
        ]),
    );
    write(&env, "f.txt", "zero\n");
    assert!(env.kestrel(&["exec", "one"]).status.success());
    assert!(env.kestrel(&["exec", "resume", "--last", "two"]).status.success());
    let record = &env.records()[0];
    let id = record.file_stem().unwrap().to_str().unwrap().to_string();
    let output = env.kestrel(&["undo", &id[..12], "--turns", "2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).starts_with("undid turns 1, 2 of session"), "{}", stdout(&output));
    assert_eq!(read(&env, "f.txt").unwrap(), "zero\n");
}

#[test]
fn bad_undo_requests_are_clear_errors() {
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("hi")]));
    let output = env.kestrel(&["undo"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no session"), "{}", stderr(&output));
    assert!(env.kestrel(&["exec", "hi"]).status.success());
    let output = env.kestrel(&["undo"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("nothing to undo"), "{}", stderr(&output));
    // It names the session it looked at (the newest one started here).
    let id = common::read_lines(&env.records()[0])[0]["id"].as_str().unwrap().to_string();
    assert!(stderr(&output).contains(&format!("session {id}: ")), "{}", stderr(&output));
    let output = env.kestrel(&["undo", "--turns", "0"]);
    assert_eq!(output.status.code(), Some(2));
    let output = env.kestrel(&["undo", "no-such-session"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no-such-session"), "{}", stderr(&output));
}

/// A session the daemon runs: `_kestrel/session/undo` through the daemon (dry run,
/// refusal with every file, bad params, nothing to undo), and `kestrel undo` while the
/// daemon holds the session, which goes through the daemon too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_of_a_session_the_daemon_runs_goes_through_its_worker() {
    let test = DaemonTest::new(Script::new(changing_turn()));
    prepare(&test.env);
    let client = test.client().await;
    let id = client.new_session(test.env.work.path()).await;
    // The mode is the session's (the daemon does not take KESTREL_MODE from its starter).
    client.set_mode(&id, "auto").await;
    let answer = client.prompt(&id, "change things").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn", "{answer}");
    assert_eq!(read(&test.env, "gen.txt").unwrap(), "generated\n");

    let undo = |extra: serde_json::Value| {
        let mut params = json!({ "sessionId": id });
        params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        params
    };
    let error = client.request("_kestrel/session/undo", undo(json!({"turns": 0}))).await;
    assert_eq!(error.unwrap_err().code, -32602);

    let dry = client.request("_kestrel/session/undo", undo(json!({"dryRun": true}))).await.unwrap();
    assert_eq!(dry["dryRun"], true, "{dry}");
    assert_eq!(dry["turns"], json!([1]));
    let removed = dry["files"].as_array().unwrap().iter().any(|file| {
        file["path"].as_str().unwrap().ends_with("src/new.rs") && file["action"] == "removed"
    });
    assert!(removed, "{dry}");
    assert_eq!(read(&test.env, "gen.txt").unwrap(), "generated\n", "a dry run changes nothing");

    write(&test.env, "edited.txt", "the user's own work\n");
    let error = client.request("_kestrel/session/undo", undo(json!({}))).await.unwrap_err();
    assert_eq!(error.code, -32010, "{error:?}");
    let files = &error.data.as_ref().unwrap()["files"];
    assert!(files[0]["path"].as_str().unwrap().ends_with("edited.txt"), "{files}");
    assert_eq!(files[0]["reason"], "changed since turn 1");

    // `kestrel undo` while the daemon holds the session: through its worker.
    let output = test.command(&["undo"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("edited.txt (changed since turn 1)"), "{}", stderr(&output));
    let output = test.command(&["undo", "--force"]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with(&format!("undid turn 1 of session {id}")), "{text}");
    assert!(text.contains("restored edited.txt (overwriting changes made since"), "{text}");
    assert_eq!(read(&test.env, "edited.txt").unwrap(), "before\n");
    assert!(read(&test.env, "gen.txt").is_none());
    assert_eq!(read(&test.env, "doomed.txt").unwrap(), "precious\n");

    let error = client.request("_kestrel/session/undo", undo(json!({}))).await.unwrap_err();
    assert_eq!(error.code, -32011, "{error:?}");
    assert!(error.message.contains("nothing to undo"), "{}", error.message);
    client.close().await;
    test.stop_daemon();
}

/// A session another process holds that is not the daemon's: the reason, exactly.
#[test]
fn undo_of_a_session_held_elsewhere_says_which_and_what_to_do() {
    let env = TestEnv::new(Wire::Chat, Script::new(changing_turn()));
    prepare(&env);
    assert!(env.kestrel(&["exec", "change things"]).status.success());
    let record = env.records()[0].clone();
    let id = record.file_stem().unwrap().to_str().unwrap().to_string();
    let home = kestrel_store::KestrelHome::at(env.home.path());
    let (_held, _) =
        kestrel_store::SessionRecord::open(&home, &kestrel_protocol::SessionId::from_string(&id))
            .unwrap();
    let output = env.kestrel(&["undo"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains(&format!("session {id} is open in another process"))
            && message.contains("once that process has finished"),
        "{message}"
    );
    assert_eq!(read(&env, "gen.txt").unwrap(), "generated\n");
}

/// `/undo` in the TUI: a dry run says what it would do, an undo puts the turn's file
/// back and says so, and a second one says there is nothing left to undo.
#[test]
fn slash_undo_in_the_tui_puts_back_the_files_of_the_last_turn() {
    let script = Script::new([
        Step::tool_call("write_file", json!({"path": "notes.txt", "content": "the model's\n"})),
        Step::text("Wrote the notes."),
    ]);
    let mut test = TuiTest::new(script).with_config_first("mode = \"auto\"");
    std::fs::write(test.work_file("notes.txt"), "mine\n").unwrap();
    test.start(&[]);
    test.send("write the notes");
    test.wait("Wrote the notes.");
    test.wait("● ready");
    assert_eq!(std::fs::read_to_string(test.work_file("notes.txt")).unwrap(), "the model's\n");

    test.send("/undo --dry-run");
    test.wait("would restore notes.txt");
    assert_eq!(std::fs::read_to_string(test.work_file("notes.txt")).unwrap(), "the model's\n");
    test.send("/undo");
    test.wait("restored notes.txt");
    assert_eq!(std::fs::read_to_string(test.work_file("notes.txt")).unwrap(), "mine\n");
    test.send("/undo");
    test.wait("nothing to undo");
    test.send("/undo sideways");
    test.wait("usage is /undo [N] [--force] [--dry-run]");
}

/// Undo waits for the turn: while a prompt runs it is refused, plainly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_while_a_turn_runs_is_refused() {
    let script = Script::new([
        Step::tool_call("shell", json!({"command": "sleep 2 && echo done > slept.txt"})),
        Step::text("slept"),
    ]);
    let test = DaemonTest::new(script);
    let mut client = test.client().await;
    let id = client.new_session(test.env.work.path()).await;
    client.set_mode(&id, "auto").await;
    let prompt = client.prompt(&id, "sleep");
    client.wait_update(&id, "tool_call").await;
    let error =
        client.request("_kestrel/session/undo", json!({"sessionId": id})).await.unwrap_err();
    assert_eq!(error.code, -32600, "{error:?}");
    assert!(error.message.contains("undo after it ends"), "{}", error.message);
    assert_eq!(prompt.await.unwrap().unwrap()["stopReason"], "end_turn");
    let answer = client.request("_kestrel/session/undo", json!({"sessionId": id})).await.unwrap();
    assert_eq!(answer["files"][0]["action"], "removed", "{answer}");
    assert!(read(&test.env, "slept.txt").is_none());
    client.close().await;
    test.stop_daemon();
}
