//! Context compaction end to end: a session that fills its context compacts itself
//! before the next request (a summarising request with no tools, then the summary and
//! the recent turns instead of the old ones), a resume that starts from the compaction,
//! a provider's "context window exceeded" answered by a compaction and one retry, and
//! `_kestrel/session/compact` on demand.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod worker_support;

use common::{TestEnv, Wire, body_text, stderr, stdout};
use kestrel_testkit::{Fault, LoggedRequest, Script, ScriptedUsage, Step};
use serde_json::{Value, json};
use worker_support::{Worker, record_items};

/// The provider's words when a conversation does not fit (OpenAI's).
const TOO_LONG: &str = "This model's maximum context length is 128000 tokens. However, your \
messages resulted in 131072 tokens. Please reduce the length of the messages.";

fn used(input: u64, output: u64) -> ScriptedUsage {
    ScriptedUsage {
        input_tokens: input,
        cached_input_tokens: 0,
        output_tokens: output,
        reasoning_tokens: 0,
    }
}

/// Compaction from half the (unknown model's 128k) window on.
fn compacting_env(wire: Wire, script: Script) -> TestEnv {
    let env = TestEnv::new(wire, script);
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    env.write_config(&format!("{config}\n[agent]\ncompact_at = 0.5\n"));
    env
}

fn offers_tools(request: &LoggedRequest) -> bool {
    request.body.get("tools").and_then(Value::as_array).is_some_and(|tools| !tools.is_empty())
}

fn run(env: &TestEnv, args: &[&str]) -> std::process::Output {
    let output = env.kestrel(args);
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    output
}

#[test]
fn a_long_session_compacts_itself_and_resumes_from_the_compaction() {
    let env = compacting_env(
        Wire::Chat,
        Script::new([
            Step::text("answer one").with_usage(used(1_000, 10)),
            Step::text("answer two").with_usage(used(2_000, 10)),
            // The context is now past half the window...
            Step::text("answer three").with_usage(used(100_000, 10)),
            // ...so the next prompt first asks for a summary,
            Step::text("SUMMARY OF THE FIRST TWO TASKS").with_usage(used(5_000, 100)),
            Step::text("answer four").with_usage(used(3_000, 10)),
            Step::text("answer five").with_usage(used(3_000, 10)),
        ]),
    );
    let first = run(&env, &["exec", "--json", "first task"]);
    let line = stdout(&first).lines().next().unwrap().to_string();
    let id =
        serde_json::from_str::<Value>(&line).unwrap()["session_id"].as_str().unwrap().to_string();
    for prompt in ["second task", "third task"] {
        run(&env, &["exec", "resume", &id, prompt]);
    }
    let fourth = run(&env, &["exec", "resume", &id, "fourth task"]);
    assert_eq!(stdout(&fourth), "answer four\n");
    assert!(stderr(&fourth).contains("compacted"), "{}", stderr(&fourth));

    let requests = env.requests();
    assert_eq!(requests.len(), 5);
    // The summarising request: no tools, its own system prompt, the old turns only.
    let summarising = &requests[3];
    assert!(!offers_tools(summarising), "{}", summarising.body);
    let text = body_text(summarising);
    assert!(text.contains("handoff summaries"), "{text}");
    for old in ["first task", "answer one", "second task", "answer two"] {
        assert!(text.contains(old), "{old} missing from {text}");
    }
    assert!(!text.contains("third task") && !text.contains("fourth task"), "{text}");
    // The next request: the summary, then the recent turn and the current task verbatim.
    let next = body_text(&requests[4]);
    assert!(offers_tools(&requests[4]));
    for kept in ["SUMMARY OF THE FIRST TWO TASKS", "third task", "answer three", "fourth task"] {
        assert!(next.contains(kept), "{kept} missing from {next}");
    }
    for gone in ["first task", "answer one", "second task", "answer two"] {
        assert!(!next.contains(gone), "{gone} still in {next}");
    }

    // The record: the summary replaces everything before the third turn's prompt.
    let items = env.record_items();
    let third = items.iter().position(|i| i["type"] == "user_message" && i["text"] == "third task");
    let compaction = items.iter().find(|i| i["type"] == "compaction").unwrap();
    assert_eq!(compaction["replaces_through"], third.unwrap() as u64 - 1, "{compaction}");
    assert_eq!(compaction["summary"], "SUMMARY OF THE FIRST TWO TASKS");

    // A resume starts from the compaction: summary, kept turn, what followed.
    run(&env, &["exec", "resume", &id, "fifth task"]);
    let resumed = body_text(&env.requests()[5]);
    for kept in ["SUMMARY OF THE FIRST TWO TASKS", "third task", "answer four", "fifth task"] {
        assert!(resumed.contains(kept), "{kept} missing from {resumed}");
    }
    assert!(!resumed.contains("first task") && !resumed.contains("answer two"), "{resumed}");
}

#[test]
fn a_context_window_error_is_answered_by_compaction_and_one_retry() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("list_dir", json!({})),
            // Refused as too long; the step is then served to the summarising request.
            Step::text("SUMMARY: the user asked for a listing").with_fault(Fault::Status {
                status: 400,
                retry_after_secs: None,
                message: Some(TOO_LONG.into()),
                times: Some(1),
            }),
            Step::text("done after compaction"),
        ]),
    );
    std::fs::write(env.work.path().join("marker.txt"), "x").unwrap();
    let output = run(&env, &["exec", "list the files please"]);
    assert_eq!(stdout(&output), "done after compaction\n");

    let requests = env.requests();
    assert_eq!(requests.len(), 4, "the call, the refused request, the summary, one retry");
    // The one step is what filled the context: all of it is summarised.
    let summarising = body_text(&requests[2]);
    assert!(!offers_tools(&requests[2]));
    assert!(summarising.contains("list the files please") && summarising.contains("marker.txt"));
    let retry = body_text(&requests[3]);
    // The summary with the current request verbatim.
    assert!(retry.contains("SUMMARY: the user asked for a listing"), "{retry}");
    assert!(retry.contains("verbatim") && retry.contains("list the files please"), "{retry}");
    assert!(!retry.contains("marker.txt"), "{retry}");
    let items = env.record_items();
    assert!(items.iter().any(|i| i["type"] == "compaction"));
    let end = items.iter().rev().find(|i| i["type"] == "turn_completed").unwrap();
    assert_eq!(end["stop_reason"], "end_turn");
}

#[test]
fn a_second_context_window_error_fails_the_turn_without_another_retry() {
    let refused = || Fault::Status {
        status: 400,
        retry_after_secs: None,
        message: Some(TOO_LONG.into()),
        times: Some(1),
    };
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("list_dir", json!({})),
            Step::text("SUMMARY").with_fault(refused()),
            Step::text("never sent").with_fault(refused()),
        ]),
    );
    let output = env.kestrel(&["exec", "list the files"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("longer than the model's context window"),
        "{}",
        stderr(&output)
    );
    assert_eq!(env.requests().len(), 4, "exactly one retry");
    let end = env.record_items().into_iter().rev().find(|i| i["type"] == "turn_completed").unwrap();
    assert_eq!(end["stop_reason"], "failed");
}

#[tokio::test]
async fn compact_on_demand_through_the_worker() {
    let env = TestEnv::new(
        Wire::Anthropic,
        Script::new([
            Step::text("first answer"),
            Step::text("second answer"),
            Step::text("third answer").with_usage(used(50_000, 10)),
            Step::text("THE SUMMARY"),
            Step::text("after compaction"),
        ]),
    );
    let mut worker = Worker::spawn(&env);
    let id = worker.start_session(&env.work_path()).await;
    let compact = |id: &str| json!({"sessionId": id});

    // Before the model answered anything there is nothing to compact.
    let answer = worker.request("_kestrel/session/compact", compact(&id)).await.unwrap();
    assert_eq!(answer["compacted"], false, "{answer}");
    assert!(answer["reason"].as_str().unwrap().contains("nothing to compact"), "{answer}");

    for prompt in ["first question", "second question", "third question"] {
        worker.prompt(&id, prompt, &[]).await;
    }
    let answer = worker.request("_kestrel/session/compact", compact(&id)).await.unwrap();
    assert_eq!(answer["compacted"], true, "{answer}");
    assert!(answer["tokensAfter"].as_u64().unwrap() < answer["tokensBefore"].as_u64().unwrap());
    let requests = env.requests();
    assert!(!offers_tools(&requests[3]));

    let outcome = worker.prompt(&id, "fourth question", &[]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    let next = body_text(&env.requests()[4]);
    assert!(next.contains("THE SUMMARY") && next.contains("third question"), "{next}");
    assert!(!next.contains("first question"), "{next}");
    assert!(record_items(&env, &id).iter().any(|item| item["type"] == "compaction"));

    // Bad params are a clear error.
    let error = worker.request("_kestrel/session/compact", json!({})).await.unwrap_err();
    assert_eq!(error.code, -32602);
    assert!(error.message.contains("sessionId"), "{}", error.message);
    worker.close().await;
}
