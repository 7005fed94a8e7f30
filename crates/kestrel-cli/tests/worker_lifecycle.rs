//! A worker's session over time: cancelling a turn, loading a session into a new worker,
//! the record lock against a second worker, a worker killed mid-turn, stdin closing, and
//! the history an attaching client gets while a turn runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod worker_support;

use common::{TestEnv, Wire, body_text};
use kestrel_testkit::{Fault, Script, Step};
use serde_json::{Value, json};
use worker_support::{Answer, Worker, chunk_text, item_types, messages, record_items};

const LONG_ANSWER: &str = "one two three four five six seven eight nine ten eleven twelve \
    thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty";

fn slow(text: &str) -> Step {
    Step::text(text).with_fault(Fault::SlowChunks { delay_ms: 150 })
}

#[tokio::test]
async fn cancel_stops_a_streaming_turn_and_the_record_says_cancelled() {
    let env = TestEnv::new(Wire::Chat, Script::new([slow(LONG_ANSWER), Step::text("after")]));
    let mut worker = Worker::spawn(&env);
    let id = worker.start_session(&env.work_path()).await;
    let running = worker.send_prompt(&id, "talk");
    assert_eq!(worker.next_update().await["sessionUpdate"], "agent_message_chunk");
    worker.notify("session/cancel", json!({"sessionId": id})).await;
    let outcome = worker.serve(running, &[], |_| {}).await;
    assert_eq!(outcome.stop_reason(), "cancelled");
    let items = record_items(&env, &id);
    let last = items.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["stop_reason"].as_str()),
        (Some("turn_completed"), Some("cancelled"))
    );

    // The session takes the next prompt as usual.
    let outcome = worker.prompt(&id, "again", &[]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    assert_eq!(outcome.text(), "after");
    assert_eq!(worker.close().await, Some(0));
}

#[tokio::test]
async fn cancel_while_a_permission_request_waits_ends_the_turn() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([Step::tool_call("write_file", json!({"path": "w.txt", "content": "w"}))]),
    );
    let mut worker = Worker::spawn(&env);
    let work = env.work_path();
    let id = worker.start_session(&work).await;
    let running = worker.send_prompt(&id, "write");
    let question = worker.next_request().await;
    assert_eq!(question.method, "session/request_permission");
    worker.notify("session/cancel", json!({"sessionId": id})).await;
    let outcome = worker.serve(running, &[], |_| {}).await;
    assert_eq!(outcome.stop_reason(), "cancelled");
    // The client answers late, as ACP asks; the worker ignores it.
    worker.answer_permission(question, Answer::Cancelled).await;
    assert!(!work.join("w.txt").exists());
    let items = record_items(&env, &id);
    let result = items.iter().find(|item| item["type"] == "tool_result").unwrap();
    assert_eq!(result["is_error"], true);
    assert!(result["output"].as_str().unwrap().contains("cancelled"), "{result}");
    assert_eq!(items.last().unwrap()["stop_reason"], "cancelled");
    assert_eq!(env.requests().len(), 1, "nothing was sent to the model after the cancel");
    assert_eq!(worker.close().await, Some(0));
}

#[tokio::test]
async fn load_replays_a_finished_session_then_continues_it() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("write_file", json!({"path": "a.txt", "content": "alpha\n"})),
            Step::text("Wrote a.txt.").with_reasoning("It wants a file."),
            Step::text("second answer"),
        ]),
    );
    let work = env.work_path();
    let mut first = Worker::spawn_with(&env, &[("KESTREL_MODE", "auto")]);
    let id = first.start_session(&work).await;
    let live = first.prompt(&id, "make a.txt", &[]).await;
    assert_eq!(live.stop_reason(), "end_turn");
    assert_eq!(first.close().await, Some(0));

    let mut second = Worker::spawn(&env);
    second.initialize().await;
    let (loaded, updates) = second.load(&id, &work).await;
    let loaded = loaded.unwrap();
    assert_eq!(loaded["modes"]["currentModeId"], "ask");
    assert_eq!(loaded["configOptions"][0]["currentValue"], "scripted/test-model");
    let kinds: Vec<&str> = updates.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_thought_chunk",
            "agent_message_chunk",
            "usage_update"
        ]
    );
    assert_eq!(chunk_text(&updates, "user_message_chunk"), "make a.txt");
    assert_eq!(chunk_text(&updates, "agent_thought_chunk"), "It wants a file.");
    assert_eq!(chunk_text(&updates, "agent_message_chunk"), "Wrote a.txt.");
    let live_call = &live.of_kind("tool_call")[0];
    assert_eq!(updates[1]["toolCallId"], live_call["toolCallId"]);
    assert_eq!(updates[1]["title"], live_call["title"]);
    assert_eq!(updates[2]["status"], "completed");
    let output = updates[2]["content"][0]["content"]["text"].as_str().unwrap();
    assert!(output.starts_with("Created a.txt"), "{output}");

    let outcome = second.prompt(&id, "and now?", &[]).await;
    assert_eq!(outcome.text(), "second answer");
    let last = body_text(&env.requests()[2]);
    assert!(
        last.contains("make a.txt") && last.contains("Wrote a.txt.") && last.contains("and now?")
    );
    assert_eq!(second.close().await, Some(0));
}

#[tokio::test]
async fn a_second_worker_cannot_open_a_session_another_holds() {
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("hi")]));
    let work = env.work_path();
    let first = Worker::spawn(&env);
    let id = first.start_session(&work).await;

    let mut second = Worker::spawn(&env);
    second.initialize().await;
    let (result, updates) = second.load(&id, &work).await;
    let error = result.unwrap_err();
    assert!(error.message.contains("already open in another process"), "{}", error.message);
    assert!(error.message.contains(&id), "{}", error.message);
    assert!(updates.is_empty());
    let (missing, _) = second.load("0000-no-such-session", &work).await;
    let missing = missing.unwrap_err();
    assert_eq!(missing.code, kestrel_protocol::jsonrpc::RpcError::RESOURCE_NOT_FOUND);
    assert_eq!(second.close().await, Some(0));
    assert_eq!(first.close().await, Some(0));
}

#[tokio::test]
async fn a_worker_killed_mid_turn_leaves_a_record_that_loads_as_interrupted() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("write_file", json!({"path": "kept.txt", "content": "kept\n"})),
            slow(LONG_ANSWER),
        ]),
    );
    let work = env.work_path();
    let mut first = Worker::spawn_with(&env, &[("KESTREL_MODE", "auto")]);
    let id = first.start_session(&work).await;
    let running = first.send_prompt(&id, "write and talk");
    // Wait until the tool has run and the answer is streaming, then kill -9.
    loop {
        if first.next_update().await["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    first.child.start_kill().unwrap();
    first.child.wait().await.unwrap();
    assert!(running.await.unwrap().is_err(), "the prompt gets no answer from a dead worker");

    let mut second = Worker::spawn(&env);
    second.initialize().await;
    let (loaded, updates) = second.load(&id, &work).await;
    loaded.unwrap();
    let kinds: Vec<&str> = updates.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
    assert_eq!(kinds[..3], ["user_message_chunk", "tool_call", "tool_call_update"]);
    assert_eq!(updates[2]["status"], "completed");
    assert_eq!(std::fs::read_to_string(work.join("kept.txt")).unwrap(), "kept\n");
    let items = record_items(&env, &id);
    assert_eq!(
        item_types(&items),
        ["turn_started", "user_message", "tool_call", "tool_result", "notice", "turn_completed"]
    );
    assert_eq!(items.last().unwrap()["stop_reason"], "interrupted");
    assert_eq!(env.requests().len(), 2, "the interrupted turn is not re-sent");
    assert_eq!(second.close().await, Some(0));
}

#[tokio::test]
async fn closing_stdin_mid_turn_cancels_it_and_exits_0() {
    let env = TestEnv::new(Wire::Chat, Script::new([slow(LONG_ANSWER)]));
    let mut worker = Worker::spawn(&env);
    let id = worker.start_session(&env.work_path()).await;
    let _running = worker.send_prompt(&id, "talk");
    assert_eq!(worker.next_update().await["sessionUpdate"], "agent_message_chunk");
    assert_eq!(worker.close().await, Some(0));
    let items = record_items(&env, &id);
    assert_eq!(items.last().unwrap()["stop_reason"], "cancelled");
}

#[tokio::test]
async fn history_during_a_turn_is_what_streamed_so_far_in_order_with_the_stream() {
    let env =
        TestEnv::new(Wire::Chat, Script::new([Step::text("earlier answer"), slow(LONG_ANSWER)]));
    let mut worker = Worker::spawn(&env);
    let id = worker.start_session(&env.work_path()).await;
    worker.prompt(&id, "first question", &[]).await;

    let running = worker.send_prompt(&id, "second question");
    let mut chunks = 0;
    while chunks < 3 {
        if worker.next_update().await["sessionUpdate"] == "agent_message_chunk" {
            chunks += 1;
        }
    }
    let history = worker.request("_kestrel/session/history", json!({"sessionId": id})).await;
    let history = history.unwrap();
    let outcome = worker.serve(running, &[], |_| {}).await;
    assert_eq!(outcome.stop_reason(), "end_turn");

    let updates = history["updates"].as_array().unwrap().clone();
    // Chunks are merged: one user message and one answer per turn so far.
    let kinds: Vec<&str> = updates.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "agent_message_chunk",
            "usage_update",
            "user_message_chunk",
            "agent_message_chunk"
        ]
    );
    assert_eq!(updates[0]["content"]["text"], "first question");
    assert_eq!(updates[1]["content"]["text"], "earlier answer");
    assert_eq!(updates[3]["content"]["text"], "second question");

    // Exactly the chunks sent before the answer are in it; the rest come after it.
    let transcript = messages(&worker.transcript);
    let answer = transcript
        .iter()
        .position(|m| m.get("result").is_some_and(|r| r.get("updates").is_some()))
        .unwrap();
    let chunk = |m: &Value| {
        (m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .then(|| m["params"]["update"]["content"]["text"].as_str().unwrap().to_string())
    };
    let second_turn_start =
        transcript.iter().rposition(|m| m["method"] == "session/prompt").unwrap();
    let before: String = transcript[second_turn_start..answer].iter().filter_map(chunk).collect();
    let after: String = transcript[answer..].iter().filter_map(chunk).collect();
    assert_eq!(updates[4]["content"]["text"].as_str().unwrap(), before);
    assert!(!after.is_empty(), "the answer was still streaming");
    assert_eq!(format!("{before}{after}"), LONG_ANSWER);
    assert_eq!(worker.close().await, Some(0));
}
