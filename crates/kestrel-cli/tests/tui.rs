//! The interactive UI driven through a pty like a person would: start-up, typing before
//! the daemon is up, the slash menu and pickers, streamed markdown, tool calls with
//! approval (allow and deny), edit diffs, interrupting, resuming, a worker crash,
//! resizing, and the terminal given back when the process is killed. Screens are
//! compared with snapshot files (tests/snapshots/tui/, KESTREL_UPDATE_SNAPSHOTS=1 to
//! rewrite them after review).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tui_support;

use kestrel_testkit::{Fault, Key, Pty, Script, Step};
use serde_json::json;
use std::time::Duration;
use tui_support::{COLS, ROWS, TuiTest, WAIT};

const MARKDOWN_ANSWER: &str = "## Plan\n\nI will **fix** the `parser` in three steps:\n\n1. read the code\n2. write a test\n3. change it\n\n```rust\nfn parse(input: &str) -> Option<u32> {\n    input.trim().parse().ok()\n}\n```\n\n| step | status |\n|------|--------|\n| read | done |\n\nSee [the docs](https://example.com/parser).\n";

#[test]
fn start_up_shows_the_composer_and_connects_the_daemon() {
    let mut test = TuiTest::new(Script::new([]));
    test.start(&[]);
    test.wait("● daemon ready");
    test.snapshot("startup");
    // The worker starts lazily: no model request, no session record yet.
    assert!(test.env.requests().is_empty());
    assert!(test.env.records().is_empty());
}

#[test]
fn without_a_terminal_it_says_to_use_exec() {
    let test = TuiTest::new(Script::new([]));
    let output = test.command(&[]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("needs a terminal") && stderr.contains("kestrel exec"), "{stderr}");
}

#[test]
fn text_typed_before_the_daemon_is_up_is_kept_and_sent() {
    let mut test = TuiTest::new(Script::new([Step::text("Early answer.")]));
    // Hold the start lock that clients take to start the daemon: until it is released
    // no daemon can start, so what is typed now is typed before any connection.
    let endpoint = kestrel_platform::Endpoint::new(&test.env.home.path().join("run"));
    endpoint.prepare_dirs().unwrap();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(endpoint.start_lock_path())
        .unwrap();
    lock.try_lock().unwrap();
    let pty = test.start(&[]);
    pty.type_text("early bird").unwrap();
    pty.press(Key::Enter).unwrap();
    let screen = test.wait("↳ queued: early bird");
    assert!(screen.contains("starting daemon"), "{screen}");
    assert!(!endpoint.socket_path().exists(), "no daemon listens yet");
    assert!(endpoint.running_pid().is_none(), "no daemon runs yet");
    drop(lock);
    test.wait("Early answer.");
    let sent = test.env.requests()[0].body.to_string();
    assert!(sent.contains("early bird"), "{sent}");
}

#[test]
fn text_typed_the_moment_it_starts_is_drawn_by_the_ui() {
    let mut test = TuiTest::new(Script::new([]));
    let pty = Pty::spawn(&test.command(&[]), ROWS, COLS).unwrap();
    // Before, during or right after the switch to raw mode and the first frame: a
    // person who starts typing at once. Echo would show it on the main screen only;
    // the UI's alternate screen shows what the UI itself drew.
    pty.type_text("zq-typed-at-once").unwrap();
    test.pty = Some(pty);
    let screen = test.wait("› zq-typed-at-once");
    assert_eq!(screen.matches("zq-typed-at-once").count(), 1, "every key once: {screen}");
    test.wait("● daemon ready");
    test.type_text(" and on");
    test.wait("› zq-typed-at-once and on");
}

#[test]
fn input_still_arriving_at_start_up_holds_back_no_frame() {
    let mut test = TuiTest::new(Script::new([]));
    let pty = Pty::spawn(&test.command(&[]), ROWS, COLS).unwrap();
    // A paste whose end has not arrived yet: the input parser waits for the rest. The
    // UI must draw and connect meanwhile (a UI that read its input before its first
    // frame would sit on a blank screen here).
    pty.write(b"\x1b[200~half a paste").unwrap();
    test.pty = Some(pty);
    let screen = test.wait("● daemon ready");
    assert!(!screen.contains("half a paste"), "the paste is not over: {screen}");
    test.pty.as_ref().unwrap().write(b" and the rest\x1b[201~").unwrap();
    test.wait("› half a paste and the rest");
}

#[test]
fn a_streamed_markdown_answer_renders_headings_lists_code_and_tables() {
    let step = Step::text(MARKDOWN_ANSWER).with_fault(Fault::SlowChunks { delay_ms: 5 });
    let mut test = TuiTest::new(Script::new([step]));
    test.start(&[]);
    test.send("fix the parser");
    test.wait("(https://example.com/parser)");
    test.snapshot("markdown_answer");
}

#[test]
fn the_slash_menu_filters_and_runs_commands() {
    let mut test = TuiTest::new(Script::new([]));
    // /status names the sandbox backend: none here, so the screen is the same everywhere.
    let mut command = test.command(&[]);
    command.env("KESTREL_SANDBOX", "none");
    test.start_command(&command, ROWS, COLS);
    test.wait("● daemon ready");
    test.type_text("/");
    test.wait("/sessions");
    test.snapshot("slash_menu");
    test.type_text("st");
    test.wait_until("the menu filtered", |screen| !screen.contains("/model"));
    test.snapshot("slash_menu_filtered");
    test.press(Key::Enter);
    test.wait("Status");
    test.snapshot("status");
    test.type_text("/help");
    test.press(Key::Enter);
    test.wait("ctrl+c twice");
    test.snapshot("help");
}

#[test]
fn the_mode_picker_chooses_a_mode_that_the_session_gets() {
    let mut test = TuiTest::new(Script::new([Step::text("Mode noted.")]));
    test.start(&[]);
    test.wait("● daemon ready");
    test.type_text("/mode");
    test.press(Key::Enter);
    test.wait("Mode");
    test.snapshot("mode_picker");
    test.type_text("auto");
    test.press(Key::Enter);
    test.wait_until("auto in the status line", |screen| screen.contains("test-model · auto"));
    test.send("hello");
    test.wait("Mode noted.");
    test.wait_until("auto kept after the session opened", |screen| {
        screen.contains("test-model · auto")
    });
}

#[test]
fn the_model_picker_lists_the_workers_models() {
    let mut test = TuiTest::new(Script::new([]));
    test.start(&[]);
    test.wait("● daemon ready");
    test.type_text("/model");
    test.press(Key::Enter);
    test.wait("(current)");
    test.snapshot("model_picker");
    test.press(Key::Esc);
    test.wait_until("the picker closed", |screen| !screen.contains("(current)"));
}

#[test]
fn a_command_is_allowed_once_after_an_approval_that_a_stray_key_cannot_answer() {
    let script = Script::new([
        Step::tool_call("shell", json!({"command": "touch made-by-tool.txt"})),
        Step::text("Created the file."),
    ]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("make a file");
    test.wait("Permission needed");
    assert!(test.pty().bells() >= 1, "a waiting approval rings the bell");
    // Enter and letters do not answer it.
    test.press(Key::Enter);
    test.type_text("y");
    std::thread::sleep(Duration::from_millis(300));
    assert!(test.pty().screen_text().contains("Permission needed"));
    assert!(!test.work_file("made-by-tool.txt").exists());
    test.snapshot("approval");
    // After stray typing a digit selects nothing ("see item 1⏎" must not approve);
    // an arrow key shows intent again.
    test.type_text("1");
    test.press(Key::Enter);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!test.work_file("made-by-tool.txt").exists(), "typed text approved the call");
    test.press(Key::Down);
    test.type_text("1");
    test.wait("› 1. Allow once");
    test.press(Key::Enter);
    test.wait("Created the file.");
    assert!(test.work_file("made-by-tool.txt").exists());
    test.snapshot("approval_allowed");
}

#[test]
fn a_denied_command_does_not_run_and_the_reason_is_asked() {
    let script = Script::new([
        Step::tool_call("shell", json!({"command": "touch made-by-tool.txt"})),
        Step::text("Understood, I left it."),
    ]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("make a file");
    test.wait_prompt();
    let screen = test.wait("Reject");
    test.type_text(&option_number(&screen, "Reject"));
    test.press(Key::Enter);
    test.wait("Reason (optional)");
    test.type_text("not today");
    test.wait("not today");
    test.press(Key::Enter);
    test.wait("Understood, I left it.");
    assert!(!test.work_file("made-by-tool.txt").exists());
    let sent = test.env.requests()[1].body.to_string();
    assert!(
        sent.contains("the user denied `shell`: not today"),
        "the reason reaches the model: {sent}"
    );
    test.snapshot("approval_denied");
}

#[test]
fn a_file_edit_shows_a_coloured_diff() {
    let script = Script::new([
        Step::tool_call(
            "edit_file",
            json!({"path": "notes.txt", "old_string": "beta", "new_string": "BETA"}),
        ),
        Step::text("Edited."),
    ]);
    let mut test = TuiTest::new(script).with_config_first("mode = \"auto\"");
    std::fs::write(test.work_file("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    test.start(&[]);
    test.send("shout beta");
    test.wait("Edited.");
    test.snapshot("edit_diff");
    // Added lines are green, removed ones red.
    let screen = test.pty().screen_text();
    let row = screen.lines().position(|line| line.contains("+BETA")).unwrap();
    let col = screen.lines().nth(row).unwrap().find("+BETA").unwrap();
    let colour = test.pty().with_screen(|screen| {
        screen.cell(u16::try_from(row).unwrap(), u16::try_from(col).unwrap()).unwrap().fgcolor()
    });
    assert_eq!(colour, kestrel_testkit::vt100::Color::Idx(2), "green");
    let styled = test.settled_styles();
    let rows: Vec<&str> = styled
        .lines()
        .filter(|row| ["alpha", "beta", "BETA", "gamma"].iter().any(|word| row.contains(word)))
        .collect();
    kestrel_testkit::assert_snapshot(
        &tui_support::snapshot_dir(),
        "edit_diff.styles",
        &rows.join("\n"),
    );
}

#[test]
fn esc_interrupts_a_running_turn() {
    let long: String = (1..=200).map(|n| format!("word{n} ")).collect();
    let step = Step::text(&long).with_fault(Fault::SlowChunks { delay_ms: 100 });
    let mut test = TuiTest::new(Script::new([step]));
    test.start(&[]);
    test.send("talk a lot");
    test.wait("word2");
    test.wait("esc to interrupt");
    test.press(Key::Esc);
    test.wait("interrupted");
    let screen = test.settled();
    assert!(!screen.contains("word200"), "{screen}");
    assert!(!screen.contains("esc to interrupt"), "{screen}");
    // How much streamed before the interrupt varies: those lines are left out.
    let screen: Vec<&str> = screen.lines().filter(|line| !line.contains("word")).collect();
    kestrel_testkit::assert_snapshot(
        &tui_support::snapshot_dir(),
        "interrupted",
        &screen.join("\n"),
    );
}

#[test]
fn resume_last_shows_the_history_and_continues_the_session() {
    let test_script = Script::new([Step::text("First answer."), Step::text("Second answer.")]);
    let mut test = TuiTest::new(test_script);
    let output = test.command(&["exec", "first question"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    test.start(&["resume", "--last"]);
    test.wait("First answer.");
    test.wait("● ready");
    test.snapshot("resumed");
    test.send("second question");
    test.wait("Second answer.");
    let sent = test.env.requests()[1].body.to_string();
    assert!(sent.contains("first question") && sent.contains("First answer."), "{sent}");
    assert_eq!(test.env.records().len(), 1, "the same session continued");
}

#[test]
fn the_resume_picker_lists_sessions_and_opens_one() {
    let mut test = TuiTest::new(Script::new([Step::text("Old answer.")]));
    let output = test.command(&["exec", "an old task"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    test.start(&[]);
    test.wait("● daemon ready");
    test.type_text("/resume");
    test.press(Key::Enter);
    test.wait("an old task");
    test.snapshot("resume_picker");
    test.press(Key::Enter);
    test.wait("Old answer.");
    test.wait("● ready");
}

#[test]
fn resuming_an_unknown_session_says_so() {
    let mut test = TuiTest::new(Script::new([]));
    test.start(&["resume", "no-such-session"]);
    test.wait("cannot resume");
    let screen = test.settled();
    assert!(screen.contains("no-such-session"), "{screen}");
}

#[test]
fn a_worker_crash_shows_a_notice_and_the_session_carries_on() {
    let script = Script::new([Step::text("Before the crash."), Step::text("After the crash.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("one");
    test.wait("Before the crash.");
    let pid = test.worker_pid(None);
    tui_support::signal(u32::try_from(pid).unwrap(), libc::SIGKILL);
    test.wait("worker restarted ×1");
    test.wait_until("the restart notice", |screen| screen.contains("⚠"));
    test.snapshot("worker_restarted");
    test.send("two");
    test.wait("After the crash.");
    assert_ne!(test.worker_pid(Some(pid)), pid);
}

#[test]
fn resizing_rewraps_the_conversation() {
    let step = Step::text(MARKDOWN_ANSWER);
    let mut test = TuiTest::new(Script::new([step]));
    test.start(&[]);
    test.send("fix the parser");
    test.wait("(https://example.com/parser)");
    test.settled();
    test.pty().resize(20, 50).unwrap();
    test.wait_until("the narrow layout", |screen| {
        screen.lines().all(|line| line.chars().count() <= 50) && screen.contains("● ready")
    });
    test.snapshot("resized_narrow");
    test.pty().resize(ROWS, COLS).unwrap();
    test.wait_until("the wide layout", |screen| {
        screen.lines().any(|line| line.contains("I will fix the parser in three steps:"))
    });
}

#[test]
fn the_terminal_is_restored_when_the_process_is_killed() {
    let test = TuiTest::new(Script::new([]));
    // A shell runs kestrel and, once it is gone, shows the terminal's modes.
    let mut command = test.command(&[]);
    let kestrel = command.get_program().to_owned();
    command = {
        let mut shell = std::process::Command::new("sh");
        shell
            .arg("-c")
            .arg("\"$0\"; echo \"exit=$?\"; stty -a | tr ' ;' '\\n\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' '; echo")
            .arg(kestrel);
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => shell.env(key, value),
                None => shell.env_remove(key),
            };
        }
        shell.current_dir(test.env.work.path());
        shell
    };
    let pty = Pty::spawn(&command, ROWS, COLS).unwrap();
    pty.wait_for_text("● daemon ready", WAIT).unwrap();
    assert!(pty.with_screen(|screen| screen.alternate_screen() && screen.bracketed_paste()));
    let shell = pty.pid().unwrap();
    let tui = tui_support::children(shell);
    assert_eq!(tui.len(), 1, "sh runs kestrel: {tui:?}");
    tui_support::signal(tui[0], libc::SIGTERM);
    let screen = pty.wait_for_text("exit=143", WAIT).unwrap();
    let screen =
        pty.wait_until("stty's report", WAIT, |text| text.contains("icanon")).unwrap_or(screen);
    assert!(
        screen.contains("icanon echo") || screen.contains("icanon") && !screen.contains("-icanon"),
        "{screen}"
    );
    assert!(
        !screen.contains("-icanon") && !screen.contains("-echo"),
        "cooked mode is back: {screen}"
    );
    pty.with_screen(|screen| {
        assert!(!screen.alternate_screen(), "back on the main screen");
        assert!(!screen.hide_cursor(), "the cursor is visible");
        assert!(!screen.bracketed_paste(), "bracketed paste is off");
    });
    drop(pty);
    drop(test);
}

/// The number of the approval option labelled `label` on `screen`.
fn option_number(screen: &str, label: &str) -> String {
    screen
        .lines()
        .find_map(|line| {
            let line = line.trim().trim_start_matches(['│', '›']).trim();
            let (number, rest) = line.split_once(". ")?;
            (rest.trim().trim_end_matches('│').trim() == label).then(|| number.to_owned())
        })
        .unwrap_or_else(|| panic!("no option {label:?} on screen:\n{screen}"))
}

#[test]
fn ctrl_z_suspends_with_the_terminal_restored_and_fg_repaints() {
    let test = TuiTest::new(Script::new([]));
    let kestrel = test.command(&[]);
    let mut shell = std::process::Command::new("bash");
    shell.args(["--norc", "--noprofile", "-i"]).current_dir(test.env.work.path());
    for (key, value) in kestrel.get_envs() {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    shell.env("PS1", "shell$ ");
    let pty = Pty::spawn(&shell, ROWS, COLS).unwrap();
    pty.wait_for_text("shell$", WAIT).unwrap();
    pty.type_text(&format!("{}\r", kestrel.get_program().to_string_lossy())).unwrap();
    pty.wait_for_text("● daemon ready", WAIT).unwrap();
    pty.type_text("draft").unwrap();
    pty.wait_for_text("› draft", WAIT).unwrap();
    pty.press(Key::Ctrl('z')).unwrap();
    pty.wait_for_text("Stopped", WAIT).unwrap();
    assert!(pty.with_screen(|screen| !screen.alternate_screen()), "the main screen is back");
    pty.type_text("fg\r").unwrap();
    let screen = pty
        .wait_until("the UI repainted", WAIT, |text| {
            text.contains("› draft") && text.contains("ready")
        })
        .unwrap();
    assert!(screen.contains("Kestrel v"), "{screen}");
    assert!(pty.with_screen(|screen| screen.alternate_screen()));
    pty.press(Key::Ctrl('c')).unwrap();
    pty.press(Key::Ctrl('c')).unwrap();
    pty.wait_for_text("shell$", WAIT).unwrap();
}
