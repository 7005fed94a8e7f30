//! Images from tools end to end: `read_file` on an image reaches a model that takes
//! images (catalog `modalities.input` has `image`) as an image block after the tool
//! results, on every wire, while the record keeps a placeholder; a model that takes no
//! images gets a note instead, and the request carries no image.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog_support;
mod common;
mod daemon_support;

use catalog_support::CatalogServer;
use common::{TestEnv, Wire, body_text, stderr};
use daemon_support::{DaemonTest, WAIT};
use kestrel_testkit::{Script, ScriptedToolCall, Step};
use serde_json::json;

/// The smallest valid PNG: 1×1, transparent.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

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
