//! `kestrel worker` over pipes, spoken to as the daemon does: initialize, sessions,
//! streamed prompts with tool calls and diffs, permission requests, modes, model
//! switches and the errors a client gets for bad requests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod worker_support;

use common::{TestEnv, Wire, body_text};
use kestrel_protocol::jsonrpc::RpcError;
use kestrel_testkit::{Script, Step};
use serde_json::{Value, json};
use worker_support::{Answer, Worker, item_types, record_items};

fn kinds(updates: &[Value]) -> Vec<&str> {
    updates.iter().map(|update| update["sessionUpdate"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_prompt_streams_text_and_a_write_file_call_with_its_diff() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("write_file", json!({"path": "notes/a.txt", "content": "hello\n"})),
            Step::text("I wrote the file for you."),
        ]),
    );
    let mut worker = Worker::spawn_with(&env, &[("KESTREL_MODE", "auto")]);
    let init = worker.initialize().await;
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(init["agentCapabilities"]["promptCapabilities"]["image"], true);
    assert_eq!(init["agentCapabilities"]["sessionCapabilities"]["list"], json!({}));
    assert_eq!(init["agentInfo"]["name"], "kestrel");
    assert!(init["agentInfo"]["version"].is_string());

    let work = env.work_path();
    let session = worker.new_session(&work).await;
    let id = session["sessionId"].as_str().unwrap().to_string();
    assert_eq!(session["modes"]["currentModeId"], "auto");
    let modes: Vec<&str> = session["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|mode| mode["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["read-only", "ask", "auto", "yolo"]);
    let model = &session["configOptions"][0];
    assert_eq!(model["id"], "model");
    assert_eq!(model["type"], "select");
    assert_eq!(model["currentValue"], "scripted/test-model");
    assert_eq!(model["options"][0]["value"], "scripted/test-model");

    let outcome = worker.prompt(&id, "write notes/a.txt", &[]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    let mut seen = kinds(&outcome.updates);
    seen.dedup();
    assert_eq!(
        seen,
        ["usage_update", "tool_call", "tool_call_update", "agent_message_chunk", "usage_update"]
    );
    assert!(outcome.of_kind("agent_message_chunk").len() > 1, "the answer streams in pieces");
    assert_eq!(outcome.text(), "I wrote the file for you.");

    let call = outcome.of_kind("tool_call")[0];
    let call_id = call["toolCallId"].as_str().unwrap();
    assert_eq!(call["title"], "write_file: notes/a.txt");
    assert_eq!(call["kind"], "edit");
    assert!(call.get("status").is_none(), "pending, ACP's default, goes unsaid: {call}");
    assert_eq!(call["rawInput"], json!({"path": "notes/a.txt", "content": "hello\n"}));
    let file = work.join("notes/a.txt");
    assert_eq!(call["locations"], json!([{"path": file}]));
    let updates = outcome.of_kind("tool_call_update");
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[0]["toolCallId"], call_id);
    assert_eq!(updates[0]["status"], "in_progress");
    assert_eq!(updates[1]["status"], "completed");
    assert_eq!(
        updates[1]["content"][0],
        json!({"type": "diff", "path": file, "newText": "hello\n"})
    );
    let output = updates[1]["content"][1]["content"]["text"].as_str().unwrap();
    assert!(output.starts_with("Created notes/a.txt"), "{output}");
    let usage = outcome.of_kind("usage_update")[1];
    // The scripted model is in no catalog and on this machine: the local default window.
    assert_eq!(usage["size"], kestrel_model::LOCAL_DEFAULT_CONTEXT_WINDOW);
    assert_eq!(usage["cost"]["currency"], "USD");
    assert!(usage["used"].as_u64().unwrap() > 0);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\n");

    let listed = worker.request("session/list", json!({"cwd": work})).await.unwrap();
    let listed = &listed["sessions"][0];
    assert_eq!(listed["sessionId"], id.as_str());
    assert_eq!(listed["title"], "write notes/a.txt");
    assert_eq!(listed["cwd"], json!(work));
    assert!(listed["updatedAt"].is_string());

    assert_eq!(
        item_types(&record_items(&env, &id)),
        [
            "turn_started",
            "user_message",
            "tool_call",
            "tool_result",
            "assistant_message",
            "turn_completed"
        ]
    );
    assert_eq!(worker.close().await, Some(0));
}

fn permission_script() -> Script {
    Script::new([
        Step::tool_call("write_file", json!({"path": "once.txt", "content": "1\n"})),
        Step::text("one"),
        Step::tool_call("write_file", json!({"path": "always.txt", "content": "2\n"})),
        Step::tool_call("write_file", json!({"path": "always.txt", "content": "3\n"})),
        Step::text("two"),
        Step::tool_call("shell", json!({"command": "echo no > rejected.txt"})),
        Step::text("three"),
        Step::tool_call(
            "edit_file",
            json!({"path": "once.txt", "old_string": "1", "new_string": "x"}),
        ),
        Step::text("four"),
        Step::tool_call("write_file", json!({"path": "saved.txt", "content": "5\n"})),
        Step::text("five"),
    ])
}

#[tokio::test]
async fn ask_mode_asks_the_client_and_follows_its_answers() {
    let env = TestEnv::new(Wire::Chat, permission_script());
    let mut worker = Worker::spawn(&env);
    let work = env.work_path();
    let id = worker.start_session(&work).await;

    // Allow once: asked, written.
    let outcome = worker.prompt(&id, "write once", &[Answer::Option("allow_once")]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    assert_eq!(outcome.permissions.len(), 1);
    let request = &outcome.permissions[0];
    assert_eq!(request["sessionId"], id.as_str());
    let call_id = outcome.of_kind("tool_call")[0]["toolCallId"].clone();
    assert_eq!(request["toolCall"]["toolCallId"], call_id);
    assert_eq!(request["toolCall"]["title"], "write_file: once.txt");
    let options: Vec<(&str, &str)> = request["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|option| (option["optionId"].as_str().unwrap(), option["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        options,
        [
            ("allow_once", "allow_once"),
            ("allow_always", "allow_always"),
            ("allow_always_save", "allow_always"),
            ("reject_once", "reject_once")
        ]
    );
    // The policy's reason for asking is part of the call shown with the question.
    let reason = request["toolCall"]["content"][0]["content"]["text"].as_str().unwrap();
    assert!(reason.contains("once.txt"), "{reason}");
    assert!(work.join("once.txt").exists());
    // The call is shown (pending) before the question, and runs only after the answer.
    let transcript = worker_support::messages(&worker.transcript);
    let announced = transcript.iter().position(|m| m["params"]["update"]["toolCallId"] == call_id);
    let asked = transcript.iter().position(|m| m["method"] == "session/request_permission");
    assert!(announced.unwrap() < asked.unwrap());

    // Allow always: asked for the first write only; the same write again runs at once.
    let outcome = worker.prompt(&id, "write twice", &[Answer::Option("allow_always")]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    assert_eq!(outcome.permissions.len(), 1);
    assert_eq!(std::fs::read_to_string(work.join("always.txt")).unwrap(), "3\n");

    // Reject: another tool is asked for again; nothing runs and the model hears why.
    let outcome = worker.prompt(&id, "run it", &[Answer::Option("reject_once")]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    assert_eq!(outcome.permissions.len(), 1);
    assert!(!work.join("rejected.txt").exists());
    let result = outcome.of_kind("tool_call_update");
    assert_eq!(result.len(), 1, "a refused call never goes in_progress");
    assert_eq!(result[0]["status"], "failed");
    let requests = env.requests();
    assert!(body_text(&requests[6]).contains("the user denied `shell`"));

    // A `cancelled` outcome is a refusal too.
    let outcome = worker.prompt(&id, "edit it", &[Answer::Cancelled]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    assert_eq!(std::fs::read_to_string(work.join("once.txt")).unwrap(), "1\n");
    let requests = env.requests();
    assert!(body_text(&requests[8]).contains("the permission request was cancelled"));

    // Always, and saved: the rule lands in the user's config for later sessions.
    let outcome = worker.prompt(&id, "save it", &[Answer::Option("allow_always_save")]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    assert!(work.join("saved.txt").exists());
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    assert!(config.contains("[[permissions.project]]") && config.contains("saved.txt"), "{config}");
    assert_eq!(worker.close().await, Some(0));
}

#[tokio::test]
async fn set_mode_changes_what_the_next_tool_calls_may_do() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("write_file", json!({"path": "a.txt", "content": "a\n"})),
            Step::text("done"),
            Step::tool_call("write_file", json!({"path": "b.txt", "content": "b\n"})),
            Step::text("refused"),
        ]),
    );
    let mut worker = Worker::spawn(&env);
    let work = env.work_path();
    let id = worker.start_session(&work).await;

    let result = worker.request("session/set_mode", json!({"sessionId": id, "modeId": "yolo"}));
    assert_eq!(result.await.unwrap(), json!({}));
    assert_eq!(
        worker.next_update().await,
        json!({"sessionUpdate": "current_mode_update", "currentModeId": "yolo"})
    );
    // No question asked (the harness panics on an unexpected request).
    let outcome = worker.prompt(&id, "write a", &[]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    assert!(work.join("a.txt").exists());

    worker
        .request("session/set_mode", json!({"sessionId": id, "modeId": "read-only"}))
        .await
        .unwrap();
    let outcome = worker.prompt(&id, "write b", &[]).await;
    assert_eq!(outcome.of_kind("tool_call_update")[0]["status"], "failed");
    assert!(!work.join("b.txt").exists());

    let error = worker
        .request("session/set_mode", json!({"sessionId": id, "modeId": "turbo"}))
        .await
        .unwrap_err();
    assert_eq!(error.code, RpcError::INVALID_PARAMS);
    assert!(error.message.contains("unknown mode `turbo`"), "{}", error.message);
    assert_eq!(worker.close().await, Some(0));
}

#[tokio::test]
async fn the_model_config_option_switches_the_model_and_is_recorded() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([Step::text("from the other model"), Step::text("still the other")]),
    );
    let mut worker = Worker::spawn(&env);
    let work = env.work_path();
    let id = worker.start_session(&work).await;

    let params = json!({"sessionId": id, "configId": "model", "value": "scripted/other-model"});
    let result = worker.request("session/set_config_option", params).await.unwrap();
    let selector = &result["configOptions"][0];
    assert_eq!(selector["currentValue"], "scripted/other-model");
    let values: Vec<&str> = selector["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|option| option["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["scripted/test-model", "scripted/other-model"]);
    let update = worker.next_update().await;
    assert_eq!(update["sessionUpdate"], "config_option_update");
    assert_eq!(update["configOptions"][0]["currentValue"], "scripted/other-model");

    let outcome = worker.prompt(&id, "hi", &[]).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    assert_eq!(env.requests()[0].body["model"], "other-model");
    let notice = record_items(&env, &id)
        .into_iter()
        .find(|item| item["type"] == "notice")
        .expect("a model switch notice");
    assert_eq!(notice["kind"], "model_switch");
    assert_eq!(notice["model"], "scripted/other-model");

    // Refused switches say why and change nothing.
    let bad = [
        (json!({"configId": "model", "value": "nowhere/x"}), "unknown provider `nowhere`"),
        (json!({"configId": "model", "value": "no-slash"}), "no-slash"),
        (json!({"configId": "speed", "value": "fast"}), "unknown config option `speed`"),
        (json!({"configId": "model", "type": "boolean", "value": true}), "not a boolean"),
    ];
    for (mut params, expected) in bad {
        params["sessionId"] = json!(id);
        let error = worker.request("session/set_config_option", params).await.unwrap_err();
        assert_eq!(error.code, RpcError::INVALID_PARAMS, "{expected}");
        assert!(error.message.contains(expected), "{expected}: {}", error.message);
    }
    assert_eq!(worker.close().await, Some(0));

    // A new worker continues with the switched model.
    let mut worker = Worker::spawn(&env);
    worker.initialize().await;
    let (loaded, _) = worker.load(&id, &work).await;
    assert_eq!(loaded.unwrap()["configOptions"][0]["currentValue"], "scripted/other-model");
    worker.prompt(&id, "again", &[]).await;
    assert_eq!(env.requests()[1].body["model"], "other-model");
    assert_eq!(worker.close().await, Some(0));
}

#[tokio::test]
async fn bad_requests_get_clear_json_rpc_errors() {
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("ok")]));
    let worker = Worker::spawn(&env);
    let work = env.work_path();

    let early = worker.request("session/new", json!({"cwd": work, "mcpServers": []})).await;
    let early = early.unwrap_err();
    assert_eq!(early.code, RpcError::INVALID_REQUEST);
    assert!(early.message.contains("initialize"), "{}", early.message);
    worker.initialize().await;

    let unknown = worker.request("session/fly", json!({})).await.unwrap_err();
    assert_eq!(unknown.code, RpcError::METHOD_NOT_FOUND);
    let unknown = worker.request("_kestrel/nothing", json!({})).await.unwrap_err();
    assert_eq!(unknown.code, RpcError::METHOD_NOT_FOUND);

    let cases = [
        ("session/new", json!({"mcpServers": []}), "cwd"),
        ("session/new", json!({"cwd": "relative/dir", "mcpServers": []}), "absolute"),
        ("session/new", json!({"cwd": work.join("missing"), "mcpServers": []}), "missing"),
        ("session/prompt", json!({"sessionId": "s"}), "prompt"),
        ("_kestrel/session/history", json!({}), "sessionId"),
    ];
    for (method, params, expected) in cases {
        let error = worker.request(method, params).await.unwrap_err();
        assert_eq!(error.code, RpcError::INVALID_PARAMS, "{method}: {}", error.message);
        assert!(error.message.contains(expected), "{method}: {}", error.message);
    }

    let none = json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]});
    let error = worker.request("session/prompt", none).await.unwrap_err();
    assert_eq!(error.code, RpcError::RESOURCE_NOT_FOUND);

    let id = worker.new_session(&work).await["sessionId"].as_str().unwrap().to_string();
    let second = worker.request("session/new", json!({"cwd": work, "mcpServers": []})).await;
    let second = second.unwrap_err();
    assert!(second.message.contains("already runs session"), "{}", second.message);
    let other = json!({"sessionId": "other", "cwd": work, "mcpServers": []});
    let other = worker.request("session/load", other).await.unwrap_err();
    assert!(other.message.contains("already runs session"), "{}", other.message);
    let wrong = json!({"sessionId": "other", "prompt": [{"type": "text", "text": "hi"}]});
    let wrong = worker.request("session/prompt", wrong).await.unwrap_err();
    assert!(wrong.message.contains(&id), "{}", wrong.message);
    let empty = json!({"sessionId": id, "prompt": [{"type": "text", "text": " "}]});
    let empty = worker.request("session/prompt", empty).await.unwrap_err();
    assert_eq!(empty.code, RpcError::INVALID_PARAMS);
    assert!(empty.message.contains("empty"), "{}", empty.message);
    let audio = json!({"sessionId": id, "prompt": [{"type": "audio", "mimeType": "audio/wav", "data": "AA=="}]});
    let audio = worker.request("session/prompt", audio).await.unwrap_err();
    assert!(audio.message.contains("audio"), "{}", audio.message);
    assert!(env.requests().is_empty(), "no bad request reached the model");
    assert_eq!(worker.close().await, Some(0));
}

#[tokio::test]
async fn a_prompt_while_one_runs_is_refused_and_a_failed_turn_is_an_error() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([Step::text("slow answer with several words in it")
            .with_fault(kestrel_testkit::Fault::SlowChunks { delay_ms: 100 })]),
    );
    let mut worker = Worker::spawn(&env);
    let id = worker.start_session(&env.work_path()).await;
    let running = worker.send_prompt(&id, "first");
    assert_eq!(worker.next_update().await["sessionUpdate"], "agent_message_chunk");
    let params = json!({"sessionId": id, "prompt": [{"type": "text", "text": "second"}]});
    let busy = worker.request("session/prompt", params).await.unwrap_err();
    assert!(busy.message.contains("already running"), "{}", busy.message);
    // Clients know the refusal by its data, not its words.
    assert_eq!(busy.data, Some(json!({"reason": "turn_running"})), "{busy:?}");
    let outcome = worker.serve(running, &[], |_| {}).await;
    assert_eq!(outcome.stop_reason(), "end_turn");

    // The script is used up: the provider answers 500 and the turn fails.
    let outcome = worker.prompt(&id, "third", &[]).await;
    let error = outcome.result.unwrap_err();
    assert!(error.message.contains("script exhausted"), "{}", error.message);
    let items = record_items(&env, &id);
    let last = items.last().unwrap();
    assert_eq!(last["stop_reason"], "failed");
    assert!(last["error"].as_str().unwrap().contains("script exhausted"));
    assert_eq!(worker.close().await, Some(0));
}

#[tokio::test]
async fn images_and_resources_in_a_prompt_reach_the_model() {
    let env = TestEnv::new(Wire::Anthropic, Script::new([Step::text("a red square")]));
    // The catalog does not know the scripted model: config says it takes images.
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    env.write_config(
        &config.replace("[providers.scripted]\n", "[providers.scripted]\nimages = true\n"),
    );
    let mut worker = Worker::spawn(&env);
    let work = env.work_path();
    let id = worker.start_session(&work).await;
    let prompt = json!([
        {"type": "text", "text": "what is in "},
        {"type": "resource_link", "name": "square.png", "uri": "file:///w/square.png"},
        {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAACklEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg=="},
        {"type": "resource", "resource": {"uri": "file:///w/notes.txt", "text": "it is red"}}
    ]);
    let running = {
        let connection = worker.connection.clone();
        let params = json!({"sessionId": id, "prompt": prompt});
        tokio::spawn(async move { connection.request("session/prompt", params).await })
    };
    let outcome = worker.serve(running, &[], |_| {}).await;
    assert_eq!(outcome.stop_reason(), "end_turn");
    let body = &env.requests()[0].body;
    let content = body["messages"][0]["content"].to_string();
    assert!(content.contains("what is in [square.png](file:///w/square.png)"), "{content}");
    assert!(content.contains("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"), "{content}");
    assert!(content.contains("image/png"), "{content}");
    assert!(content.contains("it is red"), "{content}");
    let user = record_items(&env, &id).into_iter().find(|item| item["type"] == "user_message");
    let text = user.unwrap()["text"].as_str().unwrap().to_string();
    assert!(text.contains("[image: image/png]"), "{text}");
    assert_eq!(worker.close().await, Some(0));
}
