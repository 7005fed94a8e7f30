//! Findings of a third review of the TUI, pinned through the real binary on a pty: the
//! mode of the UI that started the daemon stays its own, and a bad KESTREL_MODE is refused
//! up front.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tui_support;

use kestrel_testkit::{Script, Step};
use tui_support::TuiTest;

#[test]
fn the_mode_of_the_ui_that_started_the_daemon_is_not_every_later_uis() {
    let script = Script::new([Step::text("First."), Step::text("Second.")]);
    let mut test = TuiTest::new(script).with_config_first("mode = \"yolo\"");
    // No daemon yet: this UI starts it, with KESTREL_MODE in its environment.
    let mut command = test.command(&[]);
    command.env("KESTREL_MODE", "read-only");
    test.start_command(&command, tui_support::ROWS, tui_support::COLS);
    test.send("one");
    test.wait("First.");
    test.wait(" · read-only · ");
    let mut first = test.pty.take().unwrap();
    tui_support::signal(first.pid().unwrap(), libc::SIGTERM);
    first.wait_exit(tui_support::WAIT).unwrap();
    // A later UI without KESTREL_MODE gets the config's mode, not the first UI's.
    let command = test.command(&[]);
    test.start_command(&command, tui_support::ROWS, tui_support::COLS);
    test.send("two");
    test.wait("Second.");
    let screen = test.wait(" · yolo · ");
    assert!(!screen.contains(" · read-only · "), "{screen}");
}

#[test]
fn a_bad_kestrel_mode_is_refused_naming_the_variable() {
    let test = TuiTest::new(Script::new([]));
    let mut command = test.command(&[]);
    command.env("KESTREL_MODE", "readonly");
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("KESTREL_MODE") && stderr.contains("`readonly`"), "{stderr}");
    assert!(stderr.contains("read-only, ask, auto or yolo"), "{stderr}");
    // --mode wins: the variable is not even read.
    let output = test.command(&["--mode", "ask"]).env("KESTREL_MODE", "readonly").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("KESTREL_MODE"), "{stderr}");
}
