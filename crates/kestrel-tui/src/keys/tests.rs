use crate::test_support::{self, ctrl, key, type_text};
use crossterm::event::{Event, KeyCode};

const NOT_CONNECTED: &str = "not connected to the daemon: answer again once reconnected";

#[test]
fn a_digit_typed_after_a_paste_at_a_prompt_is_text_not_a_choice() {
    let (mut app, _dir, _events) = test_support::app();
    let mut approval = test_support::approval("s");
    approval.arm_for_test();
    app.approvals.push_back(approval);
    app.handle_terminal_event(Event::Paste("please check the item ".into()));
    type_text(&mut app, "1");
    app.handle_terminal_event(key(KeyCode::Enter));
    // Nothing was answered (an answer with no daemon would say it is not connected).
    assert_ne!(app.status.hint.as_deref(), Some(NOT_CONNECTED));
    assert_eq!(app.approvals.len(), 1);
    assert_eq!(app.composer.text(), "please check the item 1");
    // Digits choose again once an arrow shows intent.
    app.handle_terminal_event(key(KeyCode::Down));
    type_text(&mut app, "1");
    app.handle_terminal_event(key(KeyCode::Enter));
    assert_eq!(app.status.hint.as_deref(), Some(NOT_CONNECTED));
}

#[test]
fn editing_keys_typed_as_a_prompt_appears_edit_the_draft_and_enter_is_not_lost_silently() {
    let (mut app, _dir, _events) = test_support::app();
    type_text(&mut app, "fix the bugg");
    app.approvals.push_back(test_support::approval("s"));
    app.handle_terminal_event(key(KeyCode::Backspace));
    type_text(&mut app, " now");
    app.handle_terminal_event(ctrl('w'));
    app.handle_terminal_event(key(KeyCode::Left));
    app.handle_terminal_event(key(KeyCode::Delete));
    app.handle_terminal_event(ctrl('j'));
    type_text(&mut app, "x");
    assert_eq!(app.composer.text(), "fix the bug\nx");
    app.handle_terminal_event(key(KeyCode::Enter));
    assert_eq!(app.status.hint.as_deref(), Some("a prompt appeared: your message was not sent"));
    assert_eq!(app.composer.text(), "fix the bug\nx", "the draft stays");
    assert!(app.queue.is_empty());
    assert_eq!(app.approvals.len(), 1);
}

#[tokio::test]
async fn the_guard_starts_when_the_prompt_is_first_drawn() {
    let (mut app, _dir, _events) = test_support::app();
    app.approvals.push_back(test_support::approval("s"));
    // Long after the request came, but never drawn: keys are not the prompt's.
    tokio::time::sleep(crate::approval::GUARD * 2).await;
    type_text(&mut app, "1");
    app.handle_terminal_event(key(KeyCode::Enter));
    assert_ne!(app.status.hint.as_deref(), Some(NOT_CONNECTED));
    assert_eq!(app.composer.text(), "1");
    // Drawn, and the guard passed since: keys are the prompt's.
    app.frame_flushed();
    tokio::time::sleep(crate::approval::GUARD * 2).await;
    app.handle_terminal_event(key(KeyCode::Down));
    app.handle_terminal_event(key(KeyCode::Enter));
    assert_eq!(app.status.hint.as_deref(), Some(NOT_CONNECTED));
}
