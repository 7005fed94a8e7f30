//! The TUI's composer through the real binary on a pty: queued and typed prompts are never
//! thrown away, history keeps pasted text and walks past slash commands, @-mentions see the
//! session's directory and new files, and text wraps and grows the composer as it should.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tui_support;

use kestrel_testkit::{Fault, Key, Script, Step};
use tui_support::TuiTest;

fn slow_text(words: usize, delay_ms: u64) -> Step {
    let text: String = (1..=words).map(|n| format!("word{n} ")).collect();
    Step::text(&text).with_fault(Fault::SlowChunks { delay_ms })
}

/// Waits (bounded) until the record at `path` contains `needle`.
fn wait_for_record(path: &std::path::Path, needle: &str) {
    let deadline = std::time::Instant::now() + tui_support::WAIT;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{needle} never reached {path:?}: {text}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The composer's first row (the lowest row starting with the prompt mark).
fn composer_row(screen: &str) -> String {
    let row = screen.lines().rev().find(|row| row.starts_with("› "));
    row.unwrap_or_default().trim_end().to_owned()
}

#[test]
fn new_keeps_the_turn_running_and_puts_queued_prompts_back_in_the_composer() {
    let script = Script::new([slow_text(30, 60), Step::text("Second answer.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("first");
    test.wait("word2");
    test.send("queued one");
    test.wait("↳ queued: queued one");
    test.send("/new");
    test.wait_until("the queued prompt back in the composer", |screen| {
        screen.lines().any(|row| row.starts_with("› queued one"))
    });
    let screen = test.settled();
    assert!(!screen.contains("interrupted"), "{screen}");
    // The left session's turn runs to its end in the daemon.
    let first = test.env.records()[0].clone();
    wait_for_record(&first, "word30");
    test.press(kestrel_testkit::Key::Enter);
    test.wait("Second answer.");
    let sent = test.env.requests()[1].body.to_string();
    assert!(sent.contains("queued one") && !sent.contains("word1"), "a new session: {sent}");
}

#[test]
fn a_session_that_cannot_open_leaves_the_typed_prompt_in_the_composer() {
    let mut test = TuiTest::new(Script::new([]));
    test.env.write_config("model = \"nosuch/model\"\n");
    test.start(&[]);
    test.send("keep this text");
    test.wait("could not open the session");
    test.wait_until("the prompt back in the composer", |screen| {
        screen.lines().any(|row| row.starts_with("› keep this text"))
    });
}

#[test]
fn a_pasted_prompt_recalled_from_history_sends_the_pasted_text() {
    let script = Script::new([Step::text("Read it."), Step::text("Read it again.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    let pasted: String = (1..=50).map(|n| format!("pasted line {n}\n")).collect();
    test.pty().paste(&pasted).unwrap();
    test.wait("[Pasted text #1 +50 lines]");
    test.press(Key::Enter);
    test.wait("Read it.");
    test.press(Key::Up);
    test.wait("› [Pasted text #1 +50 lines]");
    test.press(Key::Enter);
    test.wait("Read it again.");
    let sent = common::body_text(&test.env.requests()[1]);
    assert!(!sent.contains("[Pasted text #1"), "the placeholder was not sent: {sent}");
    assert_eq!(sent.matches("pasted line 50").count(), 2, "both prompts hold it: {sent}");
}

#[test]
fn mentions_and_init_use_the_resumed_sessions_directory() {
    let mut test = TuiTest::new(Script::new([Step::text("Old answer."), Step::text("Read.")]));
    // Outside the TUI's own directory (the work dir), so its files cannot match.
    let outside = tempfile::tempdir().unwrap();
    let other = outside.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("only-there.txt"), "the contents over there").unwrap();
    let output = test.command(&["exec", "an old task"]).current_dir(&other).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let id = test.only_session_id();
    test.start(&["resume", &id]);
    test.wait("Old answer.");
    test.wait("● ready");
    test.type_text("@only-th");
    test.wait("@only-there.txt");
    test.press(Key::Tab);
    test.wait("› @only-there.txt");
    test.press(Key::Enter);
    test.wait("Read.");
    let sent = test.env.requests()[1].body.to_string();
    let link = format!("file://{}", other.join("only-there.txt").display());
    assert!(sent.contains(&link), "the mentioned file is the session's: {sent}");
    test.send("/init");
    test.wait("AGENTS.md");
    test.settled();
    assert!(other.join("AGENTS.md").exists(), "written in the session's directory");
    assert!(!test.work_file("AGENTS.md").exists());
}

#[test]
fn a_file_made_during_a_turn_can_be_mentioned_after_it() {
    let script = Script::new([tui_support::touch("made-by-turn.txt"), Step::text("Made.")]);
    let mut test = TuiTest::new(script).with_config_first("mode = \"yolo\"");
    std::fs::write(test.work_file("existing.txt"), "x").unwrap();
    test.start(&[]);
    test.type_text("@exist");
    test.wait("@existing.txt");
    for _ in 0.."@exist".len() {
        test.press(Key::Backspace);
    }
    test.send("make a file");
    test.wait("Made.");
    test.type_text("@made-by");
    test.wait("@made-by-turn.txt");
}

#[test]
fn history_walks_past_a_recalled_slash_command() {
    let script = Script::new([Step::text("Answered.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("first prompt");
    test.wait("Answered.");
    test.send("/status");
    test.wait("Status");
    test.press(Key::Up);
    test.wait_until("/status recalled", |screen| composer_row(screen) == "› /status");
    test.press(Key::Up);
    test.wait_until("the prompt before it", |screen| composer_row(screen) == "› first prompt");
    // Editing a recalled command opens its menu again.
    test.press(Key::Down);
    test.wait_until("/status again", |screen| composer_row(screen) == "› /status");
    test.press(Key::Backspace);
    test.wait_until("the slash menu", |screen| {
        screen.contains("› /statu")
            && screen.lines().any(|row| row.contains("/status") && !row.starts_with("› "))
    });
}

#[test]
fn a_combining_mark_after_a_space_gets_a_base_and_tabs_reach_their_stop() {
    let script = Script::new([Step::text("mark \u{301}x end\n\nab\tcd")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("show marks");
    test.wait("end");
    let screen = test.settled();
    assert!(screen.contains("mark \u{25cc}\u{301}x end"), "the mark has a base: {screen}");
    assert!(screen.contains("ab      cd"), "the tab reaches column 8: {screen}");
}

#[test]
fn the_composer_grows_to_the_rows_its_word_wrapping_needs() {
    let mut test = TuiTest::new(Script::new([]));
    test.start(&[]);
    // Four 49-letter words: one per row at 98 columns of text, where counting
    // characters would give three rows.
    let words: Vec<String> =
        ["a", "b", "c", "d"].iter().map(|letter| letter.repeat(48) + "z").collect();
    test.type_text(&words.join(" "));
    test.wait_until("the last word", |screen| screen.contains(&words[3]));
    let screen = test.settled();
    for word in &words {
        assert!(screen.contains(word.as_str()), "{word} is shown: {screen}");
    }
}
