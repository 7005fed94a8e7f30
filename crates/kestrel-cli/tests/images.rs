//! Images from tools end to end: `read_file` on an image reaches a model that takes
//! images (catalog `modalities.input` has `image`) as an image block after the tool
//! results, on every wire, while the record keeps a placeholder; a model that takes no
//! images gets a note instead, and the request carries no image (also for a user's image,
//! and for earlier images after a switch to such a model); `[providers.NAME] images`
//! overrides the catalog.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog_support;
mod common;
mod daemon_support;

use catalog_support::CatalogServer;
use common::{TestEnv, Wire, body_text, stderr};
use daemon_support::{DaemonTest, WAIT};
use kestrel_testkit::{Script, ScriptedToolCall, Step};
use serde_json::{Value, json};

const PNG: &[u8] = kestrel_testkit::PNG_1X1;

/// A catalog in which the scripted model takes images.
const VISION_CATALOG: &str = r#"{"scripted": {"id": "scripted", "models": {
    "test-model": {"id": "test-model", "modalities": {"input": ["text", "image"], "output": ["text"]},
                   "limit": {"context": 64000, "output": 4096}}}}}"#;

/// Fills the home's catalog cache with `catalog`, served from a loopback server.
fn cache_catalog(env: &TestEnv, catalog: &str) {
    let server = CatalogServer::start(catalog);
    let output = env
        .command(&["models", "scripted", "--refresh"])
        .env("KESTREL_CATALOG_URL", &server.url)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

/// The model requests (`kestrel models` also asked the provider's list with a GET).
fn model_requests(env: &TestEnv) -> Vec<kestrel_testkit::LoggedRequest> {
    env.requests().into_iter().filter(|request| request.method == "POST").collect()
}

fn read_the_image() -> Script {
    Script::new([
        Step::tool_call("read_file", json!({"path": "dot.png"})),
        Step::text("A transparent dot."),
    ])
}

#[test]
fn read_file_on_an_image_shows_it_to_a_model_that_takes_images_on_every_wire() {
    for wire in Wire::ALL {
        let env = TestEnv::new(wire, read_the_image());
        cache_catalog(&env, VISION_CATALOG);
        std::fs::write(env.work_path().join("dot.png"), PNG).unwrap();
        let output = env.kestrel(&["exec", "what is in dot.png?"]);
        assert!(output.status.success(), "{wire:?}: {}", stderr(&output));

        let second = body_text(&model_requests(&env)[1]);
        assert!(second.contains("[image: image/png] dot.png"), "{wire:?}: {second}");
        let image_block = match wire {
            Wire::Chat => r#""type":"image_url""#,
            Wire::Responses => r#""type":"input_image""#,
            Wire::Anthropic => r#""type":"image""#,
        };
        assert!(second.contains(image_block), "{wire:?}: no image block in {second}");
        assert!(second.contains("iVBORw0KGgo"), "{wire:?}: the PNG reaches the model");
        assert!(!second.contains("does not take images"), "{wire:?}: {second}");

        // The record keeps the placeholder, not the data.
        let result = env.record_items().into_iter().find(|i| i["type"] == "tool_result").unwrap();
        assert_eq!(result["is_error"], false, "{wire:?}");
        let recorded = result["output"].as_str().unwrap();
        assert!(recorded.starts_with("[image: image/png] dot.png"), "{wire:?}: {recorded}");
        assert!(!recorded.contains("iVBORw0KGgo"), "{wire:?}: {recorded}");
    }
}

#[test]
fn a_model_that_takes_no_images_gets_a_note_instead_of_the_image() {
    // No catalog entry: the model is not known to take images.
    let env = TestEnv::new(Wire::Chat, read_the_image());
    std::fs::write(env.work_path().join("dot.png"), PNG).unwrap();
    let output = env.kestrel(&["exec", "what is in dot.png?"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let second = body_text(&model_requests(&env)[1]);
    assert!(second.contains("[image: image/png] dot.png"), "{second}");
    assert!(second.contains("the model in use does not take images"), "{second}");
    assert!(!second.contains("iVBORw0KGgo") && !second.contains("image_url"), "{second}");
}

/// A cancel after a tool returned an image, with calls of the step left unrun: those get
/// their results before the images message, so the next turn's request is one every wire
/// takes (Anthropic wants a step's tool results first in the next user message, Chat
/// right after the call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_after_a_tool_returned_an_image_leaves_a_session_that_goes_on() {
    for wire in [Wire::Anthropic, Wire::Chat] {
        let write =
            |path: &str| ScriptedToolCall::new("write_file", json!({"path": path, "content": "x"}));
        let script = Script::new([
            Step::tool_calls(vec![
                ScriptedToolCall::new("read_file", json!({"path": "dot.png"})),
                write("a.txt"),
                write("b.txt"),
                // The cancel may reach the worker after it asked about b.txt, never after
                // it asked about c.txt: this call is left unrun either way.
                write("c.txt"),
            ]),
            Step::text("still here"),
        ]);
        let test = DaemonTest {
            env: TestEnv::new(wire, script),
            vars: vec![("KESTREL_DAEMON_IDLE_SECS".to_owned(), "120".to_owned())],
        };
        cache_catalog(&test.env, VISION_CATALOG);
        std::fs::write(test.env.work_path().join("dot.png"), PNG).unwrap();
        let mut client = test.client().await;
        let session = client.new_session(&test.env.work_path()).await;
        client.set_mode(&session, "ask").await;
        let turn = client.prompt(&session, "look, then write");
        // The image is read; the first write asks; the user cancels instead.
        client.wait_permission().await;
        client.connection.notify("session/cancel", json!({"sessionId": session})).await.unwrap();
        let answer = tokio::time::timeout(WAIT, turn).await.unwrap().unwrap().unwrap();
        assert_eq!(answer["stopReason"], "cancelled", "{wire:?}");

        let answer = client.prompt(&session, "go on").await.unwrap().unwrap();
        assert_eq!(answer["stopReason"], "end_turn", "{wire:?}: {answer}");
        client.settle(std::time::Duration::from_millis(300)).await;
        assert!(client.agent_text(&session).contains("still here"), "{wire:?}");
        let second = body_text(&model_requests(&test.env)[1]);
        assert!(second.contains("cancelled the turn before this call ran"), "{wire:?}: {second}");
        assert!(second.contains("iVBORw0KGgo"), "{wire:?}: the image is still in the history");
    }
}

/// Sends a prompt of text and the 1×1 PNG through the daemon and waits for its answer.
async fn prompt_with_image(client: &daemon_support::AcpClient, session: &str) {
    let image = json!({"type": "image", "mimeType": "image/png", "data": PNG_BASE64});
    prompt_to_the_end(client, session, json!([{"type": "text", "text": "what is this?"}, image]))
        .await;
}

/// Sends `prompt` and waits for its turn to end well.
async fn prompt_to_the_end(client: &daemon_support::AcpClient, session: &str, prompt: Value) {
    let answer = client
        .request("session/prompt", json!({"sessionId": session, "prompt": prompt}))
        .await
        .unwrap();
    assert_eq!(answer["stopReason"], "end_turn", "{answer}");
}

/// A prompt whose image no provider takes (SVG), with a question.
fn svg_prompt() -> Value {
    json!([
        {"type": "text", "text": "what is this?"},
        {"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zy8+"},
    ])
}

/// [`PNG`], base64.
const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAACklEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg==";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_image_reaches_a_model_that_takes_no_images_as_a_note() {
    let test = DaemonTest::new(Script::new([Step::text("No picture here.")]));
    let client = test.client().await;
    let session = client.new_session(&test.env.work_path()).await;
    prompt_with_image(&client, &session).await;
    let first = body_text(&model_requests(&test.env)[0]);
    assert!(!first.contains("image_url") && !first.contains("iVBORw0KGgo"), "{first}");
    assert!(first.contains("[image: image/png] (The image was not sent"), "{first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_configured_with_images_gets_them_without_a_catalog_entry() {
    let test = DaemonTest::new(Script::new([Step::text("A dot.")]));
    let config = std::fs::read_to_string(test.env.home.path().join("config.toml")).unwrap();
    let config = config.replace("[providers.scripted]\n", "[providers.scripted]\nimages = true\n");
    test.env.write_config(&config);
    let client = test.client().await;
    let session = client.new_session(&test.env.work_path()).await;
    prompt_with_image(&client, &session).await;
    let first = body_text(&model_requests(&test.env)[0]);
    assert!(first.contains("image_url") && first.contains("iVBORw0KGgo"), "{first}");
}

#[test]
fn a_provider_images_setting_that_is_not_a_boolean_is_a_clear_config_error() {
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("unused")]));
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    let config =
        config.replace("[providers.scripted]\n", "[providers.scripted]\nimages = \"yes\"\n");
    env.write_config(&config);
    let output = env.kestrel(&["exec", "hello"]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.contains("images") && err.contains("config.toml"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_to_a_model_that_takes_no_images_replaces_earlier_images_with_a_note() {
    let test = DaemonTest::new(Script::new([Step::text("A dot."), Step::text("Still text.")]));
    cache_catalog(&test.env, VISION_CATALOG);
    let client = test.client().await;
    let session = client.new_session(&test.env.work_path()).await;
    prompt_with_image(&client, &session).await;
    let first = body_text(&model_requests(&test.env)[0]);
    assert!(first.contains("iVBORw0KGgo"), "the vision model gets the image: {first}");
    let params = json!({"sessionId": session, "configId": "model", "value": "scripted/text-only"});
    client.request("session/set_config_option", params).await.unwrap();
    let answer = client.prompt(&session, "and now?").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn", "{answer}");
    let second = body_text(&model_requests(&test.env)[1]);
    assert!(!second.contains("iVBORw0KGgo") && !second.contains("image_url"), "{second}");
    assert!(second.contains("[image: image/png] (The image was not sent"), "{second}");
}

/// An image of a type no provider takes is left out of the prompt with a note in its
/// place: the user's text still reaches the model, and the user is told (a notice, in the
/// record too). A prompt of nothing but such an image is refused saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_image_no_provider_takes_is_left_out_and_the_text_is_sent() {
    let test = DaemonTest::new(Script::new([Step::text("Fine without it.")]));
    cache_catalog(&test.env, VISION_CATALOG);
    let client = test.client().await;
    let session = client.new_session(&test.env.work_path()).await;
    prompt_to_the_end(&client, &session, svg_prompt()).await;
    let first = body_text(&model_requests(&test.env)[0]);
    assert!(first.contains("what is this?"), "{first}");
    assert!(first.contains("[image: image/svg+xml — left out of the prompt: "), "{first}");
    assert!(!first.contains("PHN2Zy8+") && !first.contains("image_url"), "{first}");
    let notices: Vec<String> = test
        .record_items(&session)
        .into_iter()
        .filter(|item| item["type"] == "notice")
        .map(|item| item["message"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        notices.iter().any(|n| n.starts_with("an image in the prompt was not sent (image/svg+xml")),
        "{notices:?}"
    );

    let alone = json!([{"type": "image", "mimeType": "image/bmp", "data": "Qk0="}]);
    let error = client
        .request("session/prompt", json!({"sessionId": session, "prompt": alone}))
        .await
        .unwrap_err();
    assert!(error.message.contains("an image in the prompt cannot be sent"), "{error:?}");
    assert!(error.message.contains("image/bmp"), "{error:?}");
    assert_eq!(model_requests(&test.env).len(), 1);
}

/// Through the daemon, a client that advertised `session.notices` is told that a prompt's
/// image was left out by a `notice`; a plain client (attached to the same session) gets
/// warnings and errors only, and this is an info notice: nothing of it reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_left_out_prompt_image_reaches_clients_through_the_daemon_as_they_asked() {
    let test = DaemonTest::new(Script::new([Step::text("Fine without it.")]));
    cache_catalog(&test.env, VISION_CATALOG);
    let mut notices = daemon_support::AcpClient::spawn(&test);
    let with_notices =
        json!({"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}});
    notices.request("initialize", with_notices).await.unwrap();
    let cwd = test.env.work_path();
    let session = notices.new_session(&cwd).await;
    let mut plain = test.client().await;
    plain.load(&session, &cwd).await.unwrap();
    prompt_to_the_end(&notices, &session, svg_prompt()).await;
    let notice = notices.wait_update(&session, "notice").await;
    let title = notice["title"].as_str().unwrap_or_default();
    assert!(title.starts_with("an image in the prompt was not sent (image/svg+xml"), "{notice}");
    plain.wait_update(&session, "usage_update").await;
    plain.settle(std::time::Duration::from_millis(200)).await;
    let updates = plain.updates(&session);
    assert!(updates.iter().all(|update| update["sessionUpdate"] != "notice"), "{updates:?}");
    let text: String =
        updates.iter().filter_map(|update| update["content"]["text"].as_str()).collect();
    assert!(text.contains("Fine without it.") && !text.contains("[kestrel]"), "{text}");
}

/// A prompt image declared as another type than its bytes (the TUI takes the type from
/// the file name) goes under the type its bytes say; one without data is left out with a
/// note, the text still sent. The user is told in the turn, after its prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_image_goes_as_its_bytes_say_and_one_without_data_is_left_out() {
    let test = DaemonTest::new(Script::new([Step::text("One picture.")]));
    cache_catalog(&test.env, VISION_CATALOG);
    let client = test.client().await;
    let session = client.new_session(&test.env.work_path()).await;
    let prompt = json!([
        {"type": "text", "text": "two pictures"},
        {"type": "image", "mimeType": "image/jpeg", "data": PNG_BASE64},
        {"type": "image", "mimeType": "image/png", "data": ""},
    ]);
    prompt_to_the_end(&client, &session, prompt).await;
    let first = body_text(&model_requests(&test.env)[0]);
    assert!(first.contains("data:image/png;base64,iVBORw0KGgo"), "{first}");
    assert!(!first.contains("image/jpeg;base64"), "{first}");
    assert!(first.contains("two pictures"), "{first}");
    assert!(first.contains("left out of the prompt: the image has no data"), "{first}");
    let items = test.record_items(&session);
    let kinds: Vec<&str> = items.iter().filter_map(|item| item["type"].as_str()).collect();
    let notice = kinds.iter().position(|kind| *kind == "notice").unwrap();
    assert_eq!(&kinds[..notice + 1], ["turn_started", "user_message", "notice"], "{kinds:?}");
    assert!(items[notice]["message"].as_str().unwrap().contains("the image has no data"));
}

/// An image that passed the checks but that the provider could not process (HTTP 400
/// "Could not process image") is removed from the conversation, the user told, and the
/// request sent again: the turn ends well, and `exec --json` carries the notice.
#[test]
fn an_image_the_provider_cannot_process_is_removed_and_exec_json_says_so() {
    let refused = kestrel_testkit::Fault::Status {
        status: 400,
        retry_after_secs: None,
        message: Some("Could not process image".into()),
        times: Some(1),
    };
    let env = TestEnv::new(
        Wire::Anthropic,
        Script::new([
            Step::tool_call("read_file", json!({"path": "dot.png"})),
            Step::text("Could not see it, but here is my answer.").with_fault(refused),
        ]),
    );
    cache_catalog(&env, VISION_CATALOG);
    std::fs::write(env.work_path().join("dot.png"), PNG).unwrap();
    let output = env.kestrel(&["exec", "--json", "what is in dot.png?"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let notice = events.iter().find(|event| event["type"] == "notice").expect("a notice event");
    assert_eq!(notice["kind"], "info", "{notice}");
    let message = notice["message"].as_str().unwrap();
    assert!(message.starts_with("the provider could not process an image"), "{message}");
    assert_eq!(events.last().unwrap()["type"], "turn.completed", "{events:?}");
    let requests = model_requests(&env);
    assert_eq!(requests.len(), 3, "read, refused, sent again");
    assert!(body_text(&requests[1]).contains("iVBORw0KGgo"));
    let retried = body_text(&requests[2]);
    assert!(!retried.contains("iVBORw0KGgo"), "{retried}");
    assert!(retried.contains("removed: the provider could not process it"), "{retried}");
}
