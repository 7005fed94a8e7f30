//! More of the interactive UI through a pty: plans, queued and steered messages, file
//! mentions, custom commands, quitting, editing an earlier message (fork), image paste,
//! wide text, and the /new, /sessions, /diff and /init commands.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tui_support;

use kestrel_testkit::{Fault, Key, Script, Step, vt100};
use serde_json::json;
use std::time::{Duration, Instant};
use tui_support::{TuiTest, WAIT};

fn slow_text(words: usize, delay_ms: u64) -> Step {
    let text: String = (1..=words).map(|n| format!("word{n} ")).collect();
    Step::text(&text).with_fault(Fault::SlowChunks { delay_ms })
}

#[test]
fn a_plan_shows_as_a_checklist() {
    let plan = json!({"plan": [
        {"step": "read the parser", "status": "completed"},
        {"step": "fix the off-by-one", "status": "in_progress"},
        {"step": "add a test", "status": "pending"}
    ]});
    let script = Script::new([Step::tool_call("update_plan", plan), Step::text("Planned.")]);
    let mut test = TuiTest::new(script).with_config_first("mode = \"auto\"");
    test.start(&[]);
    test.send("plan it");
    test.wait("Planned.");
    test.snapshot("plan");
}

#[test]
fn a_message_typed_during_a_turn_is_queued_and_sent_after_it() {
    let script = Script::new([slow_text(30, 60), Step::text("Second answer.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("first");
    test.wait("word2");
    test.send("second");
    test.wait("↳ queued: second");
    test.wait("Second answer.");
    let screen = test.settled();
    assert!(screen.contains("word30"), "the first turn ran to its end: {screen}");
    let second = test.env.requests()[1].body.to_string();
    assert!(second.contains("second"), "{second}");
}

#[test]
fn tab_during_a_turn_interrupts_it_and_sends_the_message_now() {
    let script = Script::new([slow_text(200, 100), Step::text("Steered.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("first");
    test.wait("word2");
    test.type_text("change course");
    test.wait("tab sends now");
    test.press(Key::Tab);
    test.wait("Steered.");
    let screen = test.settled();
    assert!(screen.contains("interrupted to send your new message"), "{screen}");
    assert!(!screen.contains("word200"), "{screen}");
    let second = test.env.requests().last().unwrap().body.to_string();
    assert!(second.contains("change course"), "{second}");
}

#[test]
fn at_mentions_complete_file_paths_and_send_them_as_links() {
    let mut test = TuiTest::new(Script::new([Step::text("Read it.")]));
    std::fs::create_dir_all(test.work_file("src")).unwrap();
    std::fs::write(test.work_file("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(test.work_file("README.md"), "# demo\n").unwrap();
    test.start(&[]);
    test.wait("● daemon ready");
    test.type_text("look at @mai");
    test.wait("@src/main.rs");
    test.snapshot("mention_menu");
    test.press(Key::Tab);
    test.wait("look at @src/main.rs");
    test.press(Key::Enter);
    test.wait("Read it.");
    let sent = test.env.requests()[0].body.to_string();
    assert!(sent.contains("src/main.rs"), "{sent}");
}

#[test]
fn custom_commands_come_from_project_and_user_files() {
    let mut test = TuiTest::new(Script::new([Step::text("Reviewed.")]));
    let project = test.work_file(".kestrel/commands");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("review.md"),
        "---\ndescription: review a file\n---\nReview $ARGUMENTS carefully.\n",
    )
    .unwrap();
    let user = test.env.home.path().join("commands");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(user.join("explain.md"), "Explain this code.\n").unwrap();
    test.start(&[]);
    test.wait("● daemon ready");
    test.type_text("/re");
    test.wait("review a file");
    test.snapshot("custom_command_menu");
    test.type_text("view lib.rs");
    test.press(Key::Enter);
    test.wait("Reviewed.");
    let sent = test.env.requests()[0].body.to_string();
    assert!(sent.contains("Review lib.rs carefully."), "{sent}");
}

#[test]
fn ctrl_c_twice_quits_and_says_how_to_resume() {
    let mut test = TuiTest::new(Script::new([Step::text("Bye.")]));
    test.start(&[]);
    test.send("hello");
    test.wait("Bye.");
    test.press(Key::Ctrl('c'));
    test.wait("press ctrl+c again to quit");
    test.press(Key::Ctrl('c'));
    let code = test.pty.as_mut().unwrap().wait_exit(WAIT).unwrap();
    assert_eq!(code, Some(0));
    let screen = test.wait("kestrel resume").replace('\n', "");
    let id = test.env.records()[0].file_stem().unwrap().to_string_lossy().into_owned();
    assert!(screen.contains(&format!("continue it with `kestrel resume {id}`")), "{screen}");
}

#[test]
fn esc_esc_edits_an_earlier_message_in_a_fork() {
    let script = Script::new([
        Step::text("First answer."),
        Step::text("Second answer."),
        Step::text("Edited answer."),
    ]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("first question");
    test.wait("First answer.");
    test.send("second question");
    test.wait("Second answer.");
    test.wait("● ready");
    // Two presses a moment apart (read together, two Escs are one key to a terminal app).
    test.press(Key::Esc);
    std::thread::sleep(Duration::from_millis(100));
    test.press(Key::Esc);
    test.wait("Edit an earlier message");
    test.wait("message 1 of 2");
    test.snapshot("edit_message_picker");
    test.press(Key::Down);
    test.press(Key::Enter);
    test.wait_until("the fork opened with the message to edit", |screen| {
        screen.contains("› first question") && !screen.contains("First answer.")
    });
    test.wait("● ready");
    let screen = test.settled();
    assert!(!screen.contains("interrupted"), "the fork ends before the turn: {screen}");
    test.type_text(", edited");
    test.press(Key::Enter);
    test.wait("Edited answer.");
    let last = test.env.requests().last().unwrap().body.to_string();
    assert!(last.contains("first question, edited"), "{last}");
    assert!(!last.contains("second question"), "the fork ends before the edited message: {last}");
    assert_eq!(test.env.records().len(), 2, "the original session is kept");
    for record in test.env.records() {
        let text = std::fs::read_to_string(record).unwrap();
        assert!(!text.contains("was interrupted"), "{text}");
    }
}

#[test]
fn a_pasted_image_path_is_sent_as_an_image() {
    let mut test = TuiTest::new(Script::new([Step::text("A tiny picture.")]));
    // A 1x1 PNG.
    let png: [u8; 67] = [
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    std::fs::write(test.work_file("shot.png"), png).unwrap();
    // No catalog knows the scripted model: config says it takes images.
    let config = std::fs::read_to_string(test.env.home.path().join("config.toml")).unwrap();
    let config = config.replace("[providers.scripted]\n", "[providers.scripted]\nimages = true\n");
    test.env.write_config(&config);
    test.start(&[]);
    test.wait("● daemon ready");
    test.type_text("what is in ");
    test.pty().paste("shot.png").unwrap();
    test.wait("what is in [Image #1: shot.png]");
    test.press(Key::Enter);
    test.wait("A tiny picture.");
    let sent = test.env.requests()[0].body.to_string();
    assert!(sent.contains("iVBORw0KGgo"), "the PNG's base64 reached the model: {sent}");
}

#[test]
fn wide_and_combining_characters_keep_their_columns() {
    let answer =
        "日本語のテキストを折り返します。絵文字 🎉🎉 もあります。café and cafe\u{301} are equal.";
    let mut test = TuiTest::new(Script::new([Step::text(answer)]));
    test.start(&[]);
    test.pty().resize(24, 40).unwrap();
    test.send("unicode");
    test.wait("equal.");
    test.snapshot("wide_text");
}

#[test]
fn new_starts_another_session_and_sessions_lists_them() {
    let script = Script::new([Step::text("One."), Step::text("Two.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("session one");
    test.wait("One.");
    // The turn has ended (else /new says the session keeps running).
    test.wait("● ready");
    test.send("/new");
    test.wait_until("a fresh screen", |screen| !screen.contains("One."));
    test.send("session two");
    test.wait("Two.");
    assert_eq!(test.env.records().len(), 2);
    test.send("/sessions");
    test.wait("session one");
    test.snapshot("sessions_picker");
}

#[test]
fn diff_shows_uncommitted_changes_and_init_writes_agents_md_once() {
    let mut test = TuiTest::new(Script::new([]));
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(test.env.work.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    };
    std::fs::write(test.work_file("a.txt"), "one\ntwo\n").unwrap();
    git(&["init", "-q"]);
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "start"]);
    std::fs::write(test.work_file("a.txt"), "one\nTWO\n").unwrap();
    test.start(&[]);
    test.wait("● daemon ready");
    test.send("/diff");
    test.wait("+TWO");
    let screen = test.settled();
    let masked: String = screen
        .lines()
        .map(|line| if line.starts_with("index ") { "index <hashes>" } else { line })
        .collect::<Vec<_>>()
        .join("\n");
    kestrel_testkit::assert_snapshot(&tui_support::snapshot_dir(), "diff", &masked);
    test.send("/init");
    test.wait("Wrote a starter");
    let agents = std::fs::read_to_string(test.work_file("AGENTS.md")).unwrap();
    assert!(agents.starts_with("# AGENTS.md"), "{agents}");
    test.send("/init");
    test.wait("already exists");
}

/// Waits until the `fn` of the answer's code block has a colour that `highlighted` accepts.
fn wait_for_keyword_colour(test: &TuiTest, highlighted: impl Fn(vt100::Color) -> bool) {
    let screen = test.wait("let x = 1;");
    let row = screen.lines().position(|line| line.contains("fn main()")).unwrap();
    let col = screen.lines().nth(row).unwrap().find("fn main()").unwrap();
    let (row, col) = (u16::try_from(row).unwrap(), u16::try_from(col).unwrap());
    let deadline = Instant::now() + WAIT;
    loop {
        let colour = test.pty().with_screen(|screen| screen.cell(row, col).unwrap().fgcolor());
        if highlighted(colour) {
            return;
        }
        assert!(Instant::now() < deadline, "`fn` never got a syntax colour: {colour:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const CODE_ANSWER: &str = "```rust\nfn main() {\n    let x = 1;\n}\n```\n";

#[test]
fn code_blocks_are_highlighted_once_syntaxes_load() {
    let mut test = TuiTest::new(Script::new([Step::text(CODE_ANSWER)]));
    test.start(&[]);
    test.send("code please");
    // Plain code is light grey (ANSI 7); highlighted keywords get a 256-colour entry.
    wait_for_keyword_colour(
        &test,
        |colour| matches!(colour, vt100::Color::Idx(index) if index >= 16),
    );
}

#[test]
fn a_16_colour_terminal_gets_highlighting_in_its_16_colours() {
    let mut test = TuiTest::new(Script::new([Step::text(CODE_ANSWER)]));
    let mut command = test.command(&[]);
    command.env("TERM", "xterm");
    test.pty = Some(kestrel_testkit::Pty::spawn(&command, 30, 100).unwrap());
    test.wait("─────");
    test.send("code please");
    wait_for_keyword_colour(
        &test,
        |colour| matches!(colour, vt100::Color::Idx(index) if index < 16 && index != 7),
    );
    // Every colour of the block is one of the 16 (named in the styles snapshot).
    let styled = test.settled_styles();
    let rows: Vec<&str> = styled
        .lines()
        .filter(|row| ["fn", "let", "}"].iter().any(|word| row.contains(word)))
        .filter(|row| !row.contains("Kestrel"))
        .collect();
    let rows = rows.join("\n");
    assert!(!rows.contains("idx") && !rows.contains('#'), "only the 16 colours: {rows}");
    kestrel_testkit::assert_snapshot(&tui_support::snapshot_dir(), "code_16_colours.styles", &rows);
}

#[test]
fn a_truecolor_terminal_gets_highlighting_in_rgb() {
    let mut test = TuiTest::new(Script::new([Step::text(CODE_ANSWER)]));
    let mut command = test.command(&[]);
    command.env("COLORTERM", "truecolor");
    test.pty = Some(kestrel_testkit::Pty::spawn(&command, 30, 100).unwrap());
    test.wait("─────");
    test.send("code please");
    wait_for_keyword_colour(&test, |colour| matches!(colour, vt100::Color::Rgb(..)));
}

#[test]
fn page_up_scrolls_back_and_esc_follows_again() {
    let long: String = (1..=60).map(|n| format!("line {n}\n\n")).collect();
    let mut test = TuiTest::new(Script::new([Step::text(&long)]));
    test.start(&[]);
    test.send("long answer");
    test.wait("line 60");
    test.wait("● ready");
    test.press(Key::PageUp);
    test.wait("more lines · pgdn or esc to follow");
    test.snapshot("scrolled_up");
    test.press(Key::Esc);
    test.wait_until("following the end again", |screen| {
        screen.contains("line 60") && !screen.contains("more lines")
    });
}

#[test]
fn losing_the_daemon_reconnects_and_the_session_carries_on() {
    let script = Script::new([Step::text("Before."), Step::text("After.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("one");
    test.wait("Before.");
    test.wait("● ready");
    let endpoint = kestrel_platform::Endpoint::new(&test.env.home.path().join("run"));
    let daemon = endpoint.running_pid().expect("a daemon runs");
    tui_support::signal(daemon, libc::SIGKILL);
    test.wait("reconnected to the daemon");
    test.wait("● ready");
    let screen = test.settled();
    assert!(screen.contains("› one") && screen.contains("Before."), "history is back: {screen}");
    test.send("two");
    test.wait("After.");
    assert_ne!(endpoint.running_pid(), Some(daemon), "a new daemon serves the session");
}

#[test]
fn a_subagent_shows_nested_under_its_task_and_opens_from_sessions() {
    let script = Script::new([
        Step::tool_call(
            "task",
            json!({"description": "count the files", "prompt": "How many files are here?"}),
        ),
        Step::tool_call("list_dir", json!({})),
        Step::text("There are 2 files."),
        Step::text("The subagent counted 2 files."),
    ]);
    let mut test = TuiTest::new(script);
    std::fs::write(test.work_file("a.txt"), "a").unwrap();
    std::fs::write(test.work_file("b.txt"), "b").unwrap();
    test.start(&[]);
    test.send("count them with a subagent");
    test.wait("The subagent counted 2 files.");
    test.wait("✓ list_dir");
    test.snapshot("subagent");
    test.send("/sessions");
    test.wait("└ How many files are here?");
    test.snapshot("sessions_with_subagent");
    test.press(Key::Down);
    test.press(Key::Enter);
    test.wait_until("the subagent's own session", |screen| {
        screen.contains("› How many files are here?") && screen.contains("There are 2 files.")
    });
}

#[test]
fn compact_summarises_the_conversation_on_demand() {
    let script = Script::new([
        Step::text("Answer one."),
        Step::text("Answer two."),
        Step::text("Answer three."),
        Step::text("Summary: three questions were answered."),
    ]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    for (question, answer) in
        [("one", "Answer one."), ("two", "Answer two."), ("three", "Answer three.")]
    {
        test.send(question);
        test.wait(answer);
        test.wait("● ready");
    }
    test.send("/compact");
    let screen = test.wait_until("the compaction's outcome", |screen| {
        screen.contains("compacted") || screen.contains("compaction failed")
    });
    assert!(screen.contains("the conversation was compacted"), "{screen}");
    let summary_request = test.env.requests().last().unwrap().body.to_string();
    assert!(summary_request.contains("Answer one."), "{summary_request}");
}

#[test]
fn a_large_paste_is_one_block_sent_whole() {
    let mut test = TuiTest::new(Script::new([Step::text("Got the log.")]));
    test.start(&[]);
    test.wait("● daemon ready");
    test.type_text("why does this fail: ");
    let log: String = (1..=40).map(|n| format!("error line {n}\n")).collect();
    test.pty().paste(&log).unwrap();
    test.wait("why does this fail: [Pasted text #1 +40 lines]");
    test.press(Key::Enter);
    test.wait("Got the log.");
    let sent = test.env.requests()[0].body.to_string();
    assert!(sent.contains("error line 1\\n") && sent.contains("error line 40"), "{sent}");
}

#[test]
fn without_a_config_the_empty_screen_says_how_to_start() {
    let mut test = TuiTest::new(Script::new([]));
    std::fs::remove_file(test.env.home.path().join("config.toml")).unwrap();
    test.start(&[]);
    test.wait("no config yet");
    test.wait("● daemon ready");
    test.snapshot("no_config");
}

#[test]
fn a_worker_crash_mid_turn_ends_the_turn_with_a_notice_and_is_not_resent() {
    let script = Script::new([slow_text(200, 100), Step::text("Fresh start.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("talk a lot");
    test.wait("word2");
    let pid = test.worker_pid(None);
    tui_support::signal(u32::try_from(pid).unwrap(), libc::SIGKILL);
    // The prompt's answer (cancelled) and the restart notice may come in either order.
    test.wait_until("the turn ended and the restart shown", |screen| {
        let ended = screen.contains("the turn was cancelled") || screen.contains("not re-sent");
        ended && screen.contains("was restarted") && screen.contains("worker restarted ×1")
    });
    assert!(!test.settled().contains("esc to interrupt"), "no turn is running");
    assert_eq!(test.env.requests().len(), 1, "the interrupted turn is not sent again");
    test.send("again");
    test.wait("Fresh start.");
}

#[test]
fn diff_shows_untracked_files_too() {
    let mut test = TuiTest::new(Script::new([]));
    let work = test.env.work_path();
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&work)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    };
    std::fs::write(work.join("a.txt"), "one\n").unwrap();
    git(&["init", "-q"]);
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "start"]);
    std::fs::write(work.join("brand-new.txt"), "fresh line\n").unwrap();
    std::fs::write(work.join(".gitignore"), "ignored.txt\n").unwrap();
    std::fs::write(work.join("ignored.txt"), "hidden line\n").unwrap();
    test.start(&[]);
    test.wait("● daemon ready");
    test.send("/diff");
    test.wait("+fresh line");
    let screen = test.settled();
    assert!(screen.contains("brand-new.txt"), "{screen}");
    assert!(!screen.contains("hidden line"), "ignored files stay out: {screen}");
}
