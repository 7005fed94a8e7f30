//! Keys and commands of the UI through a pty: new-line keys as terminals send them,
//! prompt history, ctrl+o, /cost and /quit, tiny terminals, and a panic in a
//! background task (the terminal restored, the process ended).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tui_support;

use kestrel_testkit::{Key, Pty, Script, Step};
use serde_json::json;
use std::time::Duration;
use tui_support::{COLS, ROWS, TuiTest, WAIT};

#[test]
fn ctrl_j_shift_enter_and_alt_enter_insert_new_lines() {
    let mut test = TuiTest::new(Script::new([Step::text("Four lines.")]));
    test.start(&[]);
    test.wait("● daemon ready");
    test.type_text("one");
    // ctrl+j (LF in raw mode).
    test.press(Key::Ctrl('j'));
    test.type_text("two");
    // Shift+Enter as the kitty keyboard protocol (CSI u) reports it.
    test.pty().write(b"\x1b[13;2u").unwrap();
    test.type_text("three");
    // Alt+Enter (ESC CR), which most terminals send without any protocol.
    test.pty().write(b"\x1b\r").unwrap();
    test.type_text("four");
    test.wait_until("four lines in the composer", |screen| {
        ["› one", "  two", "  three", "  four"].iter().all(|line| screen.contains(line))
    });
    test.press(Key::Enter);
    test.wait("Four lines.");
    let sent = test.env.requests()[0].body.to_string();
    assert!(sent.contains(r"one\ntwo\nthree\nfour"), "{sent}");
}

#[test]
fn up_and_down_walk_the_prompt_history() {
    let script = Script::new([Step::text("First answer."), Step::text("Second answer.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("first prompt");
    test.wait("First answer.");
    test.send("second prompt");
    test.wait("Second answer.");
    test.wait("● ready");
    test.type_text("draft");
    test.wait("› draft");
    let composer = |test: &TuiTest, text: &'static str| {
        test.wait_until(&format!("the composer showing {text:?}"), |screen| {
            let rows: Vec<&str> = screen.lines().collect();
            // The composer is the row above the rule above the status line.
            rows.len() >= 3 && rows[rows.len() - 3].trim_end() == format!("› {text}")
        });
    };
    test.press(Key::Up);
    composer(&test, "second prompt");
    test.press(Key::Up);
    composer(&test, "first prompt");
    test.press(Key::Down);
    composer(&test, "second prompt");
    test.press(Key::Down);
    composer(&test, "draft");
}

#[test]
fn ctrl_o_expands_collapsed_tool_output() {
    let script = Script::new([
        Step::tool_call("shell", json!({"command": "for n in $(seq 1 12); do echo out-$n; done"})),
        Step::text("Printed."),
    ]);
    let mut test = TuiTest::new(script).with_config_first("mode = \"yolo\"");
    test.start(&[]);
    test.send("print lines");
    test.wait("Printed.");
    let screen = test.wait("out-12");
    assert!(!screen.contains("out-1\n") && !screen.contains("out-2"), "collapsed: {screen}");
    test.press(Key::Ctrl('o'));
    test.wait_until("the full output", |screen| screen.contains("out-1\n"));
    test.snapshot("tool_output_expanded");
    test.press(Key::Ctrl('o'));
    test.wait_until("collapsed again", |screen| !screen.contains("out-2"));
}

#[test]
fn cost_shows_the_sessions_tokens_and_cost() {
    let mut test = TuiTest::new(Script::new([Step::text("Cheap answer.")]));
    test.start(&[]);
    test.send("how much");
    test.wait("Cheap answer.");
    test.wait("● ready");
    test.send("/cost");
    test.wait("Cost");
    test.snapshot("cost");
}

#[test]
fn quit_exits_and_says_how_to_resume() {
    let mut test = TuiTest::new(Script::new([Step::text("Bye.")]));
    test.start(&[]);
    test.send("hello");
    test.wait("Bye.");
    test.send("/quit");
    let code = test.pty.as_mut().unwrap().wait_exit(WAIT).unwrap();
    assert_eq!(code, Some(0));
    let screen = test.wait("kestrel resume").replace('\n', "");
    let id = test.env.records()[0].file_stem().unwrap().to_string_lossy().into_owned();
    assert!(screen.contains(&format!("continue it with `kestrel resume {id}`")), "{screen}");
    assert!(test.pty().with_screen(|screen| !screen.alternate_screen()));
}

#[test]
fn tiny_terminals_do_not_break_the_ui() {
    let script = Script::new([
        Step::tool_call("shell", json!({"command": "touch made-by-tool.txt"})),
        Step::text("Made it."),
    ]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("make a file");
    test.wait_prompt();
    for (rows, cols) in [(5, 20), (1, 1), (2, 3), (1, 100), (30, 1), (4, 8), (6, 30)] {
        test.pty().resize(rows, cols).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(!test.pty().closed(), "the UI died at {rows}x{cols}");
    }
    test.pty().resize(ROWS, COLS).unwrap();
    test.wait_prompt();
    test.type_text("1");
    test.wait("› 1. Allow once");
    test.press(Key::Enter);
    test.wait("Made it.");
    test.pty().resize(3, 10).unwrap();
    test.type_text("still here");
    std::thread::sleep(Duration::from_millis(200));
    test.pty().resize(ROWS, COLS).unwrap();
    test.wait("› still here");
}

#[test]
fn keys_typed_as_the_terminal_resizes_are_not_held_back() {
    let mut test = TuiTest::new(Script::new([]));
    test.start(&[]);
    test.wait("● daemon ready");
    let mut typed = String::new();
    for round in 0..30u8 {
        let (rows, cols) = if round % 2 == 0 { (24, 80) } else { (ROWS, COLS) };
        test.pty().resize(rows, cols).unwrap();
        // Right after the resize: the key and the size change arrive together.
        let key = char::from(b'a' + round % 26);
        test.type_text(&key.to_string());
        typed.push(key);
        test.wait(&format!("› {typed}"));
    }
}

#[test]
fn a_panic_in_a_background_task_restores_the_terminal_and_exits() {
    let test = TuiTest::new(Script::new([]));
    let shell = test.in_shell(&[("KESTREL_TUI_TEST_PANIC", "task"), ("RUST_BACKTRACE", "0")]);
    let pty = Pty::spawn(&shell, ROWS, COLS).unwrap();
    let screen = pty.wait_for_text("exit=101", WAIT).unwrap();
    assert!(screen.contains("a panic in a background task"), "the panic is shown: {screen}");
    assert!(screen.contains("the terminal was restored"), "{screen}");
    assert!(screen.contains("kestrel resume --last"), "{screen}");
    let screen = pty.wait_until("stty's report", WAIT, |text| text.contains("icanon")).unwrap();
    assert!(!screen.contains("-icanon") && !screen.contains("-echo"), "cooked mode: {screen}");
    pty.with_screen(|screen| {
        assert!(!screen.alternate_screen(), "back on the main screen");
        assert!(!screen.hide_cursor(), "the cursor is visible");
        assert!(!screen.bracketed_paste(), "bracketed paste is off");
    });
}

#[test]
fn sighup_restores_the_terminal_and_exits_129() {
    let test = TuiTest::new(Script::new([]));
    let pty = Pty::spawn(&test.in_shell(&[]), ROWS, COLS).unwrap();
    pty.wait_for_text("● daemon ready", WAIT).unwrap();
    let kestrel = tui_support::children(pty.pid().unwrap());
    assert_eq!(kestrel.len(), 1, "sh runs kestrel: {kestrel:?}");
    tui_support::signal(kestrel[0], libc::SIGHUP);
    pty.wait_for_text("exit=129", WAIT).unwrap();
    let screen = pty.wait_until("stty's report", WAIT, |text| text.contains("icanon")).unwrap();
    assert!(!screen.contains("-icanon") && !screen.contains("-echo"), "cooked mode: {screen}");
    pty.with_screen(|screen| {
        assert!(!screen.alternate_screen(), "back on the main screen");
        assert!(!screen.hide_cursor(), "the cursor is visible");
    });
}
