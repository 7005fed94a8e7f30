//! Attaching to a session whose turn is running (another client's prompt): the
//! `session/load` answer says so (`_meta.kestrel.turnRunning`), every attached client
//! hears `_kestrel/session/turn` when a turn starts and ends, and a TUI that `/resume`s
//! such a session shows it working, keeps what is typed meanwhile, and shows it ready
//! when the turn ends. The turn is kept running by the scripted model's slow chunks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;
mod tui_support;

use daemon_support::{DaemonTest, slow, turn_notice};
use kestrel_testkit::{Key, Pty, Script, Step};
use serde_json::json;
use tui_support::{COLS, ROWS, TuiTest, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attach_during_a_turn_says_it_runs_and_its_end_is_announced() {
    let test = DaemonTest::new(Script::new([slow("slowly done", 1_000), Step::text("quick")]));
    let mut first = test.kestrel_client().await;
    let cwd = test.env.work_path();
    let session = first.new_session(&cwd).await;
    let turn = first.prompt(&session, "take your time");
    let started = turn_notice(&mut first, &session).await;
    assert_eq!(started, json!({"sessionId": session, "running": true}));

    let mut second = test.kestrel_client().await;
    let attached = second.load(&session, &cwd).await.expect("attach mid-turn");
    assert_eq!(attached["_meta"]["kestrel"]["turnRunning"], true, "{attached}");
    let ended = turn_notice(&mut second, &session).await;
    assert_eq!(ended, json!({"sessionId": session, "running": false, "stopReason": "end_turn"}));
    assert_eq!(turn.await.unwrap().unwrap()["stopReason"], "end_turn");
    assert_eq!(second.agent_text(&session), "slowly done");

    // Attaching between turns: nothing runs.
    let third = test.kestrel_client().await;
    let idle = third.load(&session, &cwd).await.expect("attach between turns");
    assert_eq!(idle["_meta"]["kestrel"]["turnRunning"], false, "{idle}");

    // A turn another client starts reaches the attached ones, start and end.
    let answer = third.prompt(&session, "quick one").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    assert_eq!(turn_notice(&mut second, &session).await["running"], true);
    assert_eq!(turn_notice(&mut second, &session).await["running"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_second_prompt_does_not_end_the_running_turn() {
    let test = DaemonTest::new(Script::new([slow("slowly done", 800)]));
    let mut first = test.kestrel_client().await;
    let cwd = test.env.work_path();
    let session = first.new_session(&cwd).await;
    let turn = first.prompt(&session, "take your time");
    turn_notice(&mut first, &session).await;
    let second = test.kestrel_client().await;
    second.load(&session, &cwd).await.expect("attach mid-turn");
    let refused = second.prompt(&session, "me too").await.unwrap();
    let error = refused.expect_err("a second prompt while one runs is refused");
    assert!(error.message.contains("already running"), "{}", error.message);
    assert!(kestrel_protocol::acp::kestrel::is_turn_running_error(&error), "{error:?}");
    // The next turn notice the first client hears is the real end, not the refusal.
    let next = turn_notice(&mut first, &session).await;
    assert_eq!(next["running"], false, "{next}");
    assert_eq!(turn.await.unwrap().unwrap()["stopReason"], "end_turn");
    assert_eq!(next["stopReason"], "end_turn");
}

/// `kestrel resume --last` on a pty (no truecolor, so screens compare as text).
fn resume_last(test: &DaemonTest) -> Pty {
    let mut command = test.command(&["resume", "--last"]);
    command.env_remove("COLORTERM");
    Pty::spawn(&command, ROWS, COLS).expect("the TUI starts")
}

/// `kestrel resume --last` once it shows the editor's turn ("from the editor") running.
async fn resume_showing_the_editors_turn(test: &DaemonTest) -> Pty {
    let tui = resume_last(test);
    tokio::task::spawn_blocking(move || {
        wait_screen(&tui, "the editor's turn shown running", |screen| {
            screen.contains("from the editor") && screen.contains("● working")
        });
        tui
    })
    .await
    .unwrap()
}

fn wait_screen(pty: &Pty, what: &str, check: impl FnMut(&str) -> bool) -> String {
    pty.wait_until(what, WAIT, check).unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn resuming_a_session_whose_turn_runs_shows_it_working_then_ready() {
    let script = Script::new([slow("Slow answer.", 2_000), Step::text("Next answer.")]);
    let mut test = TuiTest::new(script);
    test.start(&[]);
    test.send("slow question");
    test.wait("● working");

    // A second terminal opens the same session with /resume while the turn runs.
    let second = Pty::spawn(&test.command(&[]), ROWS, COLS).expect("a second TUI starts");
    wait_screen(&second, "the second TUI's daemon link", |screen| {
        screen.contains("● daemon ready")
    });
    second.type_text("/resume").unwrap();
    wait_screen(&second, "the typed command", |screen| screen.contains("/resume"));
    second.press(Key::Enter).unwrap();
    wait_screen(&second, "the resume picker", |screen| screen.contains("slow question"));
    second.press(Key::Enter).unwrap();
    let working = wait_screen(&second, "the running turn shown as running", |screen| {
        screen.contains("resumed the session") && screen.contains("● working")
    });
    assert!(!working.contains("Slow answer."), "attached before the answer: {working}");

    // Typed while it runs: kept until the turn is over, then sent (no error).
    second.type_text("next question").unwrap();
    wait_screen(&second, "the typed prompt", |screen| screen.contains("next question"));
    second.press(Key::Enter).unwrap();
    let done = wait_screen(&second, "both answers, then ready", |screen| {
        screen.contains("Slow answer.")
            && screen.contains("Next answer.")
            && screen.contains("● ready")
    });
    assert!(!done.contains("already running"), "{done}");
    assert!(!done.contains("failed"), "{done}");
    // The first terminal saw the other terminal's turn too, and is ready again.
    test.wait_until("the first TUI ready after the second's turn", |screen| {
        screen.contains("Next answer.") && screen.contains("● ready")
    });
    assert_eq!(test.env.records().len(), 1, "one session, continued");
    drop(second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kestrel_resume_of_a_session_an_editor_runs_shows_its_turn_until_it_ends() {
    let test = DaemonTest::new(Script::new([slow("Editor answer.", 2_000)]));
    let mut editor = test.kestrel_client().await;
    let session = editor.new_session(&test.env.work_path()).await;
    let turn = editor.prompt(&session, "from the editor");
    turn_notice(&mut editor, &session).await;

    let tui = resume_showing_the_editors_turn(&test).await;
    let tui = tokio::task::spawn_blocking(move || {
        wait_screen(&tui, "the turn's end", |screen| {
            screen.contains("Editor answer.") && screen.contains("● ready")
        });
        tui
    })
    .await
    .unwrap();
    assert_eq!(turn.await.unwrap().unwrap()["stopReason"], "end_turn");
    drop(tui);
}

/// The editor's next prompt reaches the worker just before the one the TUI queued
/// (the TUI is held still while the editor's turn ends and its next prompt goes): the
/// worker refuses the TUI's, which is kept, shown queued under the editor's running
/// turn, and sent when that turn ends — never lost, never shown as failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tui_prompt_refused_because_an_editors_turn_got_there_first_is_sent_after_it() {
    let test = DaemonTest::new(Script::new([
        slow("Editor one.", 1_000),
        slow("Editor two.", 600),
        Step::text("TUI answer."),
    ]));
    let mut editor = test.kestrel_client().await;
    let session = editor.new_session(&test.env.work_path()).await;
    let first = editor.prompt(&session, "from the editor");
    turn_notice(&mut editor, &session).await;

    let tui = resume_showing_the_editors_turn(&test).await;
    let tui = tokio::task::spawn_blocking(move || {
        tui.type_text("tui question").unwrap();
        wait_screen(&tui, "the typed prompt", |screen| screen.contains("tui question"));
        tui.press(Key::Enter).unwrap();
        wait_screen(&tui, "the prompt queued", |screen| screen.contains("queued: tui question"));
        tui
    })
    .await
    .unwrap();

    let pid = tui.pid().expect("the TUI's pid");
    tui_support::signal(pid, libc::SIGSTOP);
    assert_eq!(first.await.unwrap().unwrap()["stopReason"], "end_turn");
    let second = editor.prompt(&session, "editor again");
    let ended = turn_notice(&mut editor, &session).await;
    assert_eq!(ended["running"], false, "{ended}");
    let started = turn_notice(&mut editor, &session).await;
    assert_eq!(started["running"], true, "the editor's second turn: {started}");
    tui_support::signal(pid, libc::SIGCONT);

    assert_eq!(second.await.unwrap().unwrap()["stopReason"], "end_turn");
    let tui = tokio::task::spawn_blocking(move || {
        let done = wait_screen(&tui, "the TUI's prompt answered after the editor's turn", |s| {
            s.contains("Editor two.") && s.contains("TUI answer.") && s.contains("● ready")
        });
        assert!(!done.contains("already running") && !done.contains("failed"), "{done}");
        tui
    })
    .await
    .unwrap();
    let prompts: Vec<String> = test
        .record_items(&session)
        .iter()
        .filter(|item| item["type"] == "user_message")
        .filter_map(|item| item["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(prompts, ["from the editor", "editor again", "tui question"]);
    drop(tui);
}
