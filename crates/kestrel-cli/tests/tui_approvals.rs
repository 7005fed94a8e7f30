//! Permission prompts through a pty: Esc then Enter rejects (the turn goes on), a short terminal
//! still shows what is asked, a pasted reason, allow-always, a subagent's request, a
//! prompt withdrawn by a lost daemon, and the prompt's colours.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tui_support;
/// A directory outside the workspace wherever the checkout and the target dir live.
#[path = "../../kestrel-platform/tests/support/unconfined.rs"]
mod unconfined;

use kestrel_testkit::{Key, Script, Step};
use serde_json::json;
use tui_support::{TuiTest, snapshot_dir};

fn touch(file: &str) -> Step {
    Step::tool_call("shell", json!({"command": format!("touch {file}")}))
}

/// Only the rows of `styled` that contain one of `needles` (the rest varies or does
/// not matter to the check).
fn rows_with(styled: &str, needles: &[&str]) -> String {
    let rows: Vec<&str> =
        styled.lines().filter(|row| needles.iter().any(|needle| row.contains(needle))).collect();
    rows.join("\n")
}

#[test]
fn esc_then_enter_at_an_approval_rejects_the_call_and_the_turn_goes_on() {
    let script = Script::new([touch("made-by-tool.txt"), Step::text("Understood, not touching.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("make a file");
    test.wait_prompt();
    // Esc only selects "reject": a stray Esc answers nothing.
    test.press(Key::Esc);
    test.wait("› 4. Reject");
    assert!(!test.pty().screen_text().contains("Understood"));
    test.press(Key::Enter);
    test.wait("Understood, not touching.");
    let screen = test.settled();
    assert!(!screen.contains("interrupted"), "Esc rejected the call, not the turn: {screen}");
    assert!(!test.work_file("made-by-tool.txt").exists());
    let sent = test.env.requests()[1].body.to_string();
    assert!(sent.contains("the user denied `shell`"), "the model learns it was refused: {sent}");
}

#[test]
fn a_short_terminal_keeps_the_asked_command_and_the_options_in_view() {
    let command: String = std::iter::once("cat > notes.txt <<'EOF'".to_owned())
        .chain((1..=20).map(|n| format!("note {n}")))
        .chain(std::iter::once("EOF".to_owned()))
        .collect::<Vec<_>>()
        .join("\n");
    let script = Script::new([
        Step::tool_call("shell", json!({"command": command})),
        Step::text("Left it."),
    ]);
    let mut test = TuiTest::new(script);
    let command = test.command(&[]);
    test.start_command(&command, 14, 80);
    test.send("write notes");
    let screen = test.wait_prompt();
    assert!(screen.contains("Allow shell: cat > notes.txt"), "the title: {screen}");
    assert!(screen.contains("$ cat > notes.txt <<'EOF'"), "the command: {screen}");
    assert!(screen.contains("more lines") && screen.contains("4. Reject"), "{screen}");
    test.snapshot("approval_short_terminal");
    // Ten rows: the prompt takes all but the status line; the title still names the
    // command, with every option.
    test.pty().resize(10, 80).unwrap();
    let screen = test.wait_until("the prompt redrawn at ten rows", |screen| {
        screen.starts_with("╭ Permission needed") && screen.contains("4. Reject")
    });
    assert!(screen.contains("Allow shell: cat > notes.txt"), "{screen}");
    assert!(screen.contains("1. Allow once"), "{screen}");
    test.press(Key::Esc);
    test.wait("› 4. Reject");
    test.press(Key::Enter);
    test.wait("Left it.");
    assert!(!test.work_file("notes.txt").exists());
}

#[test]
fn a_reason_can_be_pasted_when_rejecting() {
    let script = Script::new([touch("made-by-tool.txt"), Step::text("Understood.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("make a file");
    test.wait_prompt();
    test.type_text("4");
    test.press(Key::Enter);
    test.wait("Reason (optional)");
    test.pty().paste("not today,\nmaybe tomorrow").unwrap();
    test.wait("Reason (optional): not today, maybe tomorrow");
    test.press(Key::Enter);
    test.wait("Understood.");
    let sent = test.env.requests()[1].body.to_string();
    assert!(
        sent.contains("the user denied `shell`: not today, maybe tomorrow"),
        "the pasted reason reaches the model: {sent}"
    );
}

#[test]
fn allow_always_lets_the_next_matching_call_run_without_asking() {
    let append = || Step::tool_call("shell", json!({"command": "echo ran >> log.txt"}));
    let script = Script::new([append(), append(), Step::text("Logged twice.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("log it twice");
    let screen = test.wait_prompt();
    assert!(screen.contains("2. Always allow"), "{screen}");
    test.type_text("2");
    test.wait("› 2. Always allow");
    test.press(Key::Enter);
    test.wait("Logged twice.");
    let log = std::fs::read_to_string(test.work_file("log.txt")).unwrap();
    assert_eq!(log, "ran\nran\n", "both calls ran");
    assert_eq!(test.pty().bells(), 1, "the second call was not asked about");
    let screen = test.settled();
    assert!(!screen.contains("Permission needed"), "{screen}");
}

#[test]
fn a_subagents_approval_is_asked_here_and_answered() {
    let script = Script::new([
        Step::tool_call(
            "task",
            json!({"description": "make the file", "prompt": "Create made-by-child.txt", "mode": "ask"}),
        ),
        touch("made-by-child.txt"),
        Step::text("Created it."),
        Step::text("The subagent created the file."),
    ]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("delegate it");
    test.wait("A subagent asks: allow");
    test.snapshot("subagent_approval");
    assert!(test.pty().bells() >= 1);
    assert!(!test.work_file("made-by-child.txt").exists());
    test.type_text("1");
    test.press(Key::Enter);
    test.wait("The subagent created the file.");
    assert!(test.work_file("made-by-child.txt").exists());
}

#[test]
fn a_lost_daemon_withdraws_a_waiting_approval_plainly() {
    // The killed daemon's worker may still send the refused call's result to the model
    // before it notices it is orphaned (under load it does): that takes one answer.
    let script = Script::new([
        touch("made-by-tool.txt"),
        Step::text("Fresh start."),
        Step::text("Fresh start."),
    ]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("make a file");
    test.wait_prompt();
    let endpoint = kestrel_platform::Endpoint::new(&test.env.home.path().join("run"));
    let daemon = endpoint.running_pid().expect("a daemon runs");
    tui_support::signal(daemon, libc::SIGKILL);
    test.wait("reconnected to the daemon");
    let screen = test.settled();
    assert!(
        screen.contains("the approval of `shell: touch made-by-tool.txt` was withdrawn"),
        "it says what was withdrawn: {screen}"
    );
    assert!(!screen.contains("Permission needed"), "{screen}");
    assert!(!screen.contains("esc to interrupt"), "no turn is shown running: {screen}");
    assert!(!test.work_file("made-by-tool.txt").exists());
    test.send("start again");
    test.wait("Fresh start.");
}

#[test]
fn the_prompt_is_highlighted_and_the_selection_stands_out() {
    let script = Script::new([touch("made-by-tool.txt"), Step::text("Done.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("make a file");
    test.wait_prompt();
    test.type_text("1");
    test.wait("› 1. Allow once");
    let styled = test.settled_styles();
    let rows = rows_with(&styled, &["Permission needed", "Allow", "Reject", "enter confirm"]);
    kestrel_testkit::assert_snapshot(&snapshot_dir(), "approval_selected.styles", &rows);
    test.press(Key::Enter);
    test.wait("Done.");
}

#[test]
fn an_approved_write_outside_the_workspace_happens() {
    let elsewhere = unconfined::unconfined_scratch();
    let target = elsewhere.path().join("x.txt");
    let script = Script::new([
        Step::tool_call("write_file", json!({"path": target, "content": "approved\n"})),
        Step::text("Wrote it."),
    ]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("write outside");
    let screen = test.wait_prompt();
    assert!(screen.contains("1. Allow once"), "{screen}");
    test.type_text("1");
    test.wait("› 1. Allow once");
    test.press(Key::Enter);
    test.wait("Wrote it.");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "approved\n");
    let sent = test.env.requests()[1].body.to_string();
    assert!(!sent.contains("outside the workspace"), "the tool did not refuse: {sent}");
}
