//! Leaving and coming back to a session in the TUI through the real binary on a pty:
//! SIGTERM says how to resume, a subagent's shown id resumes it, and a resumed session
//! shows the tokens it has used.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tui_support;

use kestrel_testkit::{Script, Step};
use serde_json::json;
use tui_support::TuiTest;

#[test]
fn sigterm_says_how_to_resume_the_session() {
    let mut test = TuiTest::new(Script::new([Step::text("Bye.")]));
    test.start(&[]);
    test.send("hello");
    test.wait("Bye.");
    tui_support::signal(test.pty().pid().unwrap(), libc::SIGTERM);
    test.pty.as_mut().unwrap().wait_exit(tui_support::WAIT).unwrap();
    let screen = test.wait("kestrel resume").replace('\n', "");
    let id = test.only_session_id();
    assert!(screen.contains(&format!("continue it with `kestrel resume {id}`")), "{screen}");
}

#[test]
fn a_subagents_shown_id_is_its_unique_tail_and_resumes_it() {
    let script = Script::new([
        Step::tool_call(
            "task",
            json!({"description": "count the files", "prompt": "How many files are here?"}),
        ),
        Step::text("There are 2 files."),
        Step::text("The subagent counted 2 files."),
    ]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("count them with a subagent");
    test.wait("The subagent counted 2 files.");
    let screen = test.pty().screen_text();
    let regex = regex::Regex::new(r"subagent ([0-9a-f]{12}) ").unwrap();
    let short = regex.captures(&screen).expect("a short id")[1].to_owned();
    let child = test
        .env
        .records()
        .into_iter()
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .find(|id| id.ends_with(&short))
        .expect("the shown id is the end of a session's");
    assert_eq!(child.len(), 36, "{child}");
    test.send("/quit");
    test.pty.as_mut().unwrap().wait_exit(tui_support::WAIT).unwrap();
    test.start(&["resume", &short]);
    test.wait("How many files are here?");
    test.wait("resumed the session");
}

#[test]
fn a_resumed_session_shows_its_tokens_so_far() {
    let mut test = TuiTest::new(Script::new([Step::text("First answer.")]));
    let output = test.command(&["exec", "first question"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let id = test.only_session_id();
    test.start(&["resume", &id]);
    test.wait("First answer.");
    let screen = test.wait_until("the session's tokens", |screen| {
        screen.lines().last().is_some_and(|status| status.contains(" tok"))
    });
    assert!(screen.contains("resumed the session"), "{screen}");
}
