//! Turns another client runs, as the daemon's `_kestrel/session/turn` tells them: shown
//! working, and a prompt of this UI that the worker refused because one ran is kept and
//! sent when it ends.

use crate::app::SessionState;
use crate::composer::Prompt;
use crate::event::{AppEvent, OpenedSession};
use crate::status::LinkState;
use crate::test_support;
use crate::turn::Turn;
use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::{Incoming, Notification};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

fn turn_notice(app: &mut crate::app::App, params: Value) {
    let method = acp::kestrel::SESSION_TURN.to_owned();
    app.incoming(Incoming::Notification(Notification { method, params }));
}

fn started(app: &mut crate::app::App) {
    turn_notice(app, json!({"sessionId": "s1", "running": true}));
}

fn ended(app: &mut crate::app::App) {
    turn_notice(app, json!({"sessionId": "s1", "running": false, "stopReason": "end_turn"}));
}

/// The text of the next `session/prompt` the app sends.
async fn next_prompt(sent: &mut UnboundedReceiver<Value>) -> String {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), sent.recv()).await;
        let message = message.expect("a message within 10 s").expect("the link is open");
        if message["method"] == "session/prompt" {
            return message["params"]["prompt"][0]["text"].as_str().unwrap_or_default().to_owned();
        }
    }
}

fn user_cells(screen: &str, text: &str) -> usize {
    screen.matches(text).count()
}

#[tokio::test]
async fn a_prompt_refused_because_another_clients_turn_runs_is_kept_and_sent_when_it_ends() {
    let (mut app, _dir, _events) = test_support::app();
    let (_daemon, mut sent) = test_support::connect(&mut app);
    app.session = SessionState::Open("s1".into());
    // An editor's turn runs; the user types a prompt meanwhile: it waits.
    started(&mut app);
    app.send_prompt(Prompt::text("queued question"));
    assert_eq!(app.status.link, LinkState::Working);
    // The editor's turn ends and the queued prompt goes at once...
    ended(&mut app);
    assert_eq!(next_prompt(&mut sent).await, "queued question");
    // ...but the editor's next prompt reached the worker first: its turn starts and
    // ours is refused.
    started(&mut app);
    app.handle_event(AppEvent::PromptRefusedBusy {
        session_id: "s1".into(),
        message: "a prompt is already running in session s1".into(),
    });
    let screen = test_support::screen(&mut app);
    assert!(screen.contains("● working"), "the editor's turn is shown: {screen}");
    assert!(!screen.contains("already running") && !screen.contains("failed"), "{screen}");
    // Shown as queued, not as sent.
    assert!(screen.contains("queued: queued question"), "{screen}");
    assert_eq!(user_cells(&screen, "queued question"), 1, "{screen}");
    assert!(app.turn.as_ref().is_some_and(|turn| !turn.is_ours()));
    assert_eq!(app.queue.front().map(|prompt| prompt.text.as_str()), Some("queued question"));

    // The editor's second turn ends: the kept prompt is sent, once.
    ended(&mut app);
    assert_eq!(next_prompt(&mut sent).await, "queued question");
    assert!(app.turn.as_ref().is_some_and(Turn::is_ours), "now it is ours");
    assert!(app.queue.is_empty());
    let screen = test_support::screen(&mut app);
    assert_eq!(user_cells(&screen, "queued question"), 1, "{screen}");
}

#[tokio::test]
async fn a_refusal_heard_after_the_other_turns_end_sends_the_prompt_again_at_once() {
    let (mut app, _dir, _events) = test_support::app();
    let (_daemon, mut sent) = test_support::connect(&mut app);
    app.session = SessionState::Open("s1".into());
    app.send_prompt(Prompt::text("mine"));
    assert_eq!(next_prompt(&mut sent).await, "mine");
    // The other turn started and ended before our refusal was handled.
    started(&mut app);
    ended(&mut app);
    app.handle_event(AppEvent::PromptRefusedBusy {
        session_id: "s1".into(),
        message: "a prompt is already running".into(),
    });
    assert_eq!(next_prompt(&mut sent).await, "mine");
    assert!(app.turn.as_ref().is_some_and(Turn::is_ours));
}

#[tokio::test]
async fn a_prompt_refused_again_and_again_with_no_turn_announced_goes_back_to_the_composer() {
    let (mut app, _dir, _events) = test_support::app();
    let (_daemon, mut sent) = test_support::connect(&mut app);
    app.session = SessionState::Open("s1".into());
    app.send_prompt(Prompt::text("stubborn"));
    for _ in 0..3 {
        assert_eq!(next_prompt(&mut sent).await, "stubborn");
        app.handle_event(AppEvent::PromptRefusedBusy {
            session_id: "s1".into(),
            message: "a prompt is already running in session s1".into(),
        });
    }
    assert!(app.turn.is_none() && app.queue.is_empty());
    let screen = test_support::screen(&mut app);
    assert!(screen.contains("back in the composer"), "{screen}");
    assert!(screen.contains("● ready"), "{screen}");
    assert_eq!(app.composer.text(), "stubborn", "{screen}");
}

#[tokio::test]
async fn another_clients_turn_shows_working_then_its_end_with_the_error_that_ended_it() {
    let (mut app, _dir, _events) = test_support::app();
    app.session = SessionState::Open("s1".into());
    started(&mut app);
    assert!(test_support::screen(&mut app).contains("● working"));
    // Our own session's notices only: another session's end changes nothing.
    turn_notice(&mut app, json!({"sessionId": "other", "running": false}));
    assert!(app.turn.is_some());
    turn_notice(
        &mut app,
        json!({"sessionId": "s1", "running": false, "error": "provider answered 401: bad key"}),
    );
    let screen = test_support::screen(&mut app);
    assert!(screen.contains("● ready"), "{screen}");
    assert!(screen.contains("the turn failed: provider answered 401: bad key"), "{screen}");
}

#[tokio::test]
async fn our_own_turn_is_ended_by_its_answer_not_by_the_notice() {
    let (mut app, _dir, _events) = test_support::app();
    let (_daemon, mut sent) = test_support::connect(&mut app);
    app.session = SessionState::Open("s1".into());
    app.send_prompt(Prompt::text("mine"));
    next_prompt(&mut sent).await;
    started(&mut app);
    ended(&mut app);
    assert!(app.turn.as_ref().is_some_and(Turn::is_ours), "its answer ends it");
    app.handle_event(AppEvent::PromptFinished {
        session_id: "s1".into(),
        result: Ok(acp::StopReason::EndTurn),
    });
    assert!(app.turn.is_none());
    assert_eq!(app.status.link, LinkState::Ready);
}

fn opened(turn_running: bool) -> AppEvent {
    AppEvent::SessionOpened(OpenedSession {
        session_id: "s1".into(),
        cwd: std::env::temp_dir(),
        modes: None,
        config_options: Vec::new(),
        loaded: true,
        turn_running,
    })
}

#[tokio::test]
async fn an_attach_answer_saying_a_turn_runs_shows_it_working_until_its_end() {
    let (mut app, _dir, _events) = test_support::app();
    app.session = SessionState::Opening(Some("s1".into()));
    app.handle_event(opened(true));
    assert!(app.turn.as_ref().is_some_and(|turn| !turn.is_ours()));
    assert_eq!(app.status.link, LinkState::Working);
    ended(&mut app);
    assert!(app.turn.is_none());
    assert_eq!(app.status.link, LinkState::Ready);
}

#[tokio::test]
async fn a_turn_notice_handled_before_the_attach_answer_wins_over_it() {
    // Ended while the load's answer was on its way: the answer's "running" is stale.
    let (mut app, _dir, _events) = test_support::app();
    app.session = SessionState::Opening(Some("s1".into()));
    ended(&mut app);
    assert!(app.turn.is_none(), "nothing shown while opening");
    app.handle_event(opened(true));
    assert!(app.turn.is_none(), "the newer notice said it ended");
    assert_eq!(app.status.link, LinkState::Ready);

    // Started while opening, the answer (older) said idle: shown working.
    let (mut app, _dir, _events) = test_support::app();
    app.session = SessionState::Opening(Some("s1".into()));
    started(&mut app);
    app.handle_event(opened(false));
    assert!(app.turn.as_ref().is_some_and(|turn| !turn.is_ours()));
    assert_eq!(app.status.link, LinkState::Working);
}

#[tokio::test]
async fn another_clients_turn_a_restart_interrupted_says_so_when_the_restart_came_first() {
    let (mut app, _dir, _events) = test_support::app();
    app.session = SessionState::Open("s1".into());
    started(&mut app);
    // The daemon's order: the restart, then the interrupted turn's end.
    let params = json!({"sessionId": "s1", "reason": "killed by signal 9", "restarts": 1});
    let method = acp::kestrel::WORKER_RESTARTED.to_owned();
    app.incoming(Incoming::Notification(Notification { method, params }));
    turn_notice(&mut app, json!({"sessionId": "s1", "running": false, "stopReason": "cancelled"}));
    let screen = test_support::screen(&mut app);
    assert!(screen.contains("interrupted when the worker stopped"), "{screen}");
    assert!(!screen.contains("the turn was cancelled"), "{screen}");
}
