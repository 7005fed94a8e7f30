use crate::app::SessionState;
use crate::test_support;
use crate::turn::Turn;
use std::time::Duration;

#[tokio::test]
async fn leaving_a_running_session_says_so_and_detaches_its_subagents_too() {
    let (mut app, _dir, _events) = test_support::app();
    let (_daemon, mut sent) = test_support::connect(&mut app);
    app.session = SessionState::Open("s1".into());
    app.turn = Some(Turn::ours(crate::composer::Prompt::text("q")));
    app.children.insert("child1".into(), "call1".into());
    app.approvals.push_back(test_support::approval("child1"));
    app.new_session();
    let screen = test_support::screen(&mut app);
    assert!(screen.contains("session s1 keeps running; /resume to answer its prompts"), "{screen}");
    assert!(app.children.is_empty() && app.approvals.is_empty());
    let mut detached = Vec::new();
    while detached.len() < 2 {
        let message = tokio::time::timeout(Duration::from_secs(10), sent.recv()).await;
        let message = message.unwrap().unwrap();
        assert_eq!(message["method"], "_kestrel/session/detach");
        detached.push(message["params"]["sessionId"].as_str().unwrap().to_owned());
    }
    detached.sort();
    assert_eq!(detached, ["child1", "s1"]);
}

#[tokio::test]
async fn leaving_an_idle_session_says_nothing_of_it() {
    let (mut app, _dir, _events) = test_support::app();
    let (_daemon, _sent) = test_support::connect(&mut app);
    app.session = SessionState::Open("s1".into());
    app.new_session();
    let screen = test_support::screen(&mut app);
    assert!(!screen.contains("keeps running"), "{screen}");
}
