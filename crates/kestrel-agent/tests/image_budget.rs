//! A session's images cannot brick it: every request carries at most the newest 20 images
//! and about 15 MB of them (Anthropic's 32 MB request limit and its 2000 px rule past 20
//! images), older ones replaced by a note the model reads, in the history itself (so
//! memory stays bounded); the user is told at the end of a turn how many were newly left
//! out, by a notice (also in the record). An image the provider could not process (HTTP
//! 400) is replaced by a note and the request sent again, once. Run through a real
//! session against the scripted model server (Chat wire, images on).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestHome;
use kestrel_agent::{AgentEvent, Session, Unattended, open_session};
use kestrel_model::{ContentPart, Message};
use kestrel_protocol::{Mode, NoticeKind, RecordItem};
use kestrel_store::{KestrelHome, SessionIndex};
use kestrel_testkit::{Fault, LoggedRequest, Script, ScriptedServer, Step};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A session on the scripted server whose provider takes images.
struct Fixture {
    server: ScriptedServer,
    test: TestHome,
    session: Session,
}

fn fixture(script: Script) -> Fixture {
    fixture_on("chat", script)
}

/// A fixture whose provider speaks `wire`.
fn fixture_on(wire: &str, script: Script) -> Fixture {
    let server = ScriptedServer::start(script).unwrap();
    let test = TestHome::new(
        &server,
        // No catalog fetch: the model's image support comes from `images = true` alone.
        &format!(
            "catalog_url = \"off\"\n[providers.scripted]\nbase_url = \"{{base_url}}\"\nwire_api = \"{wire}\"\nimages = true\n"
        ),
    );
    let launch = test.launch("scripted/vision", Mode::Auto);
    let session = open_session(&launch, None, Arc::new(Unattended)).unwrap();
    Fixture { server, test, session }
}

/// Base64-looking image data that names itself, `len` characters long.
fn image(name: &str, len: usize) -> ContentPart {
    let mut data = format!("{name}Z");
    data.extend(std::iter::repeat_n('A', len.saturating_sub(data.len())));
    ContentPart::Image { media_type: "image/png".into(), data }
}

/// Runs a prompt to its end (bounded), and returns the notices the sink saw.
async fn run(session: &mut Session, prompt: Vec<ContentPart>) -> Vec<String> {
    let notices = Arc::new(Mutex::new(Vec::new()));
    let seen = notices.clone();
    let sink = move |event: AgentEvent| {
        if let AgentEvent::Notice(notice) = event {
            seen.lock().unwrap().push(notice.message);
        }
    };
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        session.run_prompt(prompt, &sink, &CancellationToken::new()),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(result.error.is_none(), "{result:?}");
    notices.lock().unwrap().clone()
}

fn body(request: &LoggedRequest) -> String {
    request.body.to_string()
}

fn image_blocks(body: &str) -> usize {
    body.matches("data:image/png;base64,").count()
}

fn recorded_notices(home: &KestrelHome) -> Vec<String> {
    let record = SessionIndex::latest(home, None).unwrap().path;
    kestrel_store::read_record(&record)
        .unwrap()
        .entries
        .into_iter()
        .filter_map(|entry| match entry.item {
            RecordItem::Notice { notice } if notice.kind == NoticeKind::Info => {
                Some(notice.message)
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_request_carries_the_newest_twenty_images_and_notes_for_the_older_ones() {
    let mut fixture = fixture(Script::new([
        // Two requests in the first turn: the user is told once.
        Step::tool_call("list_dir", json!({})),
        Step::text("I see them."),
        Step::text("Still here."),
    ]));
    let mut prompt = vec![ContentPart::Text("compare these".into())];
    prompt.extend((1..=25).map(|n| image(&format!("IMG{n:02}"), 100)));
    let notices = run(&mut fixture.session, prompt).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].starts_with("5 images were left out of the context"), "{notices:?}");
    assert!(notices[0].contains("at most 20 images"), "{}", notices[0]);

    let requests = fixture.server.requests();
    for request in &requests {
        let body = body(request);
        assert_eq!(image_blocks(&body), 20, "{body}");
        for n in 1..=5 {
            assert!(!body.contains(&format!("IMG{n:02}Z")), "image {n} was dropped: {body}");
        }
        for n in 6..=25 {
            assert!(body.contains(&format!("IMG{n:02}Z")), "image {n} is kept: {body}");
        }
        assert_eq!(body.matches("not sent: dropped from the context").count(), 5, "{body}");
    }

    // The history itself holds notes for the dropped ones: no request clones them again.
    let (images, notes) = history_images(&fixture.session);
    assert_eq!((images.len(), notes), (20, 5));
    assert!(images.iter().all(|data| !(1..=5).any(|n| data.starts_with(&format!("IMG{n:02}Z")))));

    // The next turn still carries the same twenty; nothing new was left out: no notice.
    let notices = run(&mut fixture.session, vec![ContentPart::Text("and now?".into())]).await;
    assert!(notices.is_empty(), "{notices:?}");
    let last = body(fixture.server.requests().last().unwrap());
    assert_eq!(image_blocks(&last), 20);
    assert_eq!(recorded_notices(&fixture.test.home).len(), 1);
}

/// The image data the session's history holds, and how many dropped-image notes.
fn history_images(session: &Session) -> (Vec<String>, usize) {
    let mut images = Vec::new();
    let mut notes = 0;
    for message in session.history().messages() {
        let Message::User { content } = message else { continue };
        for part in content {
            match part {
                ContentPart::Image { data, .. } => images.push(data.clone()),
                ContentPart::Text(text) => {
                    notes += text.matches("not sent: dropped from the context").count()
                }
            }
        }
    }
    (images, notes)
}

const PNG: &[u8] = kestrel_testkit::PNG_1X1;

#[tokio::test]
async fn the_notice_says_once_at_the_end_of_the_turn_how_many_images_it_left_out() {
    let mut fixture = fixture(Script::new([
        Step::tool_call("read_file", json!({"path": "a.png"})),
        Step::tool_call("read_file", json!({"path": "b.png"})),
        Step::tool_call("read_file", json!({"path": "c.png"})),
        Step::text("Seen them all."),
    ]));
    for name in ["a.png", "b.png", "c.png"] {
        std::fs::write(fixture.test.cwd.join(name), PNG).unwrap();
    }
    // Twenty images fit; each image read_file adds drops one more, request after request.
    let mut prompt = vec![ContentPart::Text("compare these".into())];
    prompt.extend((1..=20).map(|n| image(&format!("IMG{n:02}"), 100)));
    let notices = Arc::new(Mutex::new(Vec::new()));
    let events = notices.clone();
    let sink = move |event: AgentEvent| {
        let name = match &event {
            AgentEvent::Notice(notice) => notice.message.clone(),
            AgentEvent::TurnCompleted { .. } => "(turn completed)".into(),
            AgentEvent::ToolCallStarted { .. } => "(tool call)".into(),
            _ => return,
        };
        events.lock().unwrap().push(name);
    };
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        fixture.session.run_prompt(prompt, &sink, &CancellationToken::new()),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(result.error.is_none(), "{result:?}");
    let events = notices.lock().unwrap().clone();
    let said: Vec<&String> = events.iter().filter(|event| !event.starts_with('(')).collect();
    assert_eq!(said.len(), 1, "{events:?}");
    assert!(said[0].starts_with("3 images were left out of the context"), "{events:?}");
    assert!(!said[0].contains("older"), "{}", said[0]);
    // Told after the last tool call, just before the turn ends.
    assert_eq!(&events[events.len() - 2..], [said[0].clone(), "(turn completed)".into()]);
    let requests = fixture.server.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests.iter().all(|request| image_blocks(&body(request)) == 20));
}

#[tokio::test]
async fn an_image_the_provider_cannot_process_is_removed_and_the_request_sent_again() {
    let refused = Fault::Status {
        status: 400,
        retry_after_secs: None,
        message: Some("Could not process image".into()),
        times: Some(1),
    };
    let mut fixture = fixture(Script::new([
        Step::text("Without the picture, then.").with_fault(refused),
        Step::text("Still going."),
    ]));
    let prompt = vec![ContentPart::Text("look".into()), image("BROKEN", 400)];
    let notices = run(&mut fixture.session, prompt).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].starts_with("the provider could not process an image of the conversation"),
        "{notices:?}"
    );
    assert!(notices[0].contains("Could not process image"), "{notices:?}");
    let requests = fixture.server.requests();
    assert_eq!(requests.len(), 2);
    assert!(body(&requests[0]).contains("BROKENZ"));
    let retried = body(&requests[1]);
    assert!(!retried.contains("BROKENZ") && image_blocks(&retried) == 0, "{retried}");
    assert!(retried.contains("removed: the provider could not process it"), "{retried}");
    assert!(history_images(&fixture.session).0.is_empty());

    // The session goes on: the next turn's request carries no image either.
    let notices = run(&mut fixture.session, vec![ContentPart::Text("and now?".into())]).await;
    assert!(notices.is_empty(), "{notices:?}");
    let last = body(fixture.server.requests().last().unwrap());
    assert!(!last.contains("BROKENZ") && last.contains("and now?"), "{last}");
}

#[tokio::test]
async fn the_image_a_provider_names_in_its_refusal_is_the_one_removed() {
    // Anthropic names the block: the second image of the prompt is fine and stays.
    let refused = Fault::Status {
        status: 400,
        retry_after_secs: None,
        message: Some(
            "messages.0.content.1.image.source.base64.data: Image does not match the provided \
             media type image/png"
                .into(),
        ),
        times: Some(1),
    };
    let mut fixture =
        fixture_on("anthropic", Script::new([Step::text("One left.").with_fault(refused)]));
    let prompt = vec![ContentPart::Text("look".into()), image("BROKEN", 400), image("FINE", 400)];
    let notices = run(&mut fixture.session, prompt).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains("an image of the conversation"), "{notices:?}");
    let requests = fixture.server.requests();
    assert_eq!(requests.len(), 2);
    let retried = body(&requests[1]);
    assert!(!retried.contains("BROKENZ"), "{retried}");
    assert!(retried.contains("FINEZ"), "the image it did not name is sent again: {retried}");
    assert!(retried.contains("removed: the provider could not process it"), "{retried}");
}

#[tokio::test]
async fn large_images_are_kept_within_the_request_size_budget() {
    let mut fixture = fixture(Script::new([Step::text("Big pictures.")]));
    // Six screenshots of ~3.7 MB (4.9 MB of base64 each): 29 MB of images in all.
    let mut prompt = vec![ContentPart::Text("what changed?".into())];
    prompt.extend((1..=6).map(|n| image(&format!("SHOT{n}"), 4_900_000)));
    let notices = run(&mut fixture.session, prompt).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].starts_with("2 images were left out"), "{}", notices[0]);

    let body = body(&fixture.server.requests()[0]);
    assert_eq!(image_blocks(&body), 4);
    assert!(!body.contains("SHOT1Z") && !body.contains("SHOT2Z"));
    assert!((3..=6).all(|n| body.contains(&format!("SHOT{n}Z"))));
    assert!(body.contains("[image: image/png, 3.7 MB — not sent: dropped from the context"));
    // Well under Anthropic's 32 MB, with room for the conversation.
    assert!(body.len() < 21_000_000, "{} bytes", body.len());
}

#[tokio::test]
async fn a_session_within_the_budget_sends_every_image_and_tells_nothing() {
    let mut fixture = fixture(Script::new([Step::text("Two pictures.")]));
    let prompt = vec![ContentPart::Text("look".into()), image("ONE", 1_000), image("TWO", 1_000)];
    let notices = run(&mut fixture.session, prompt).await;
    assert!(notices.is_empty(), "{notices:?}");
    let body = body(&fixture.server.requests()[0]);
    assert_eq!(image_blocks(&body), 2);
    assert!(!body.contains("dropped from the context"));
    assert!(recorded_notices(&fixture.test.home).is_empty());
}
