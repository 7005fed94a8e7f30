//! MCP servers end to end: `kestrel exec` and `kestrel worker` against the scripted
//! model, with the real npm servers pinned in tests/mcp (`npm ci --prefix tests/mcp`).
//! The model calls their tools and the results reach its next request; an image result
//! reaches it as an image; a server that cannot start is reported and the turn goes on;
//! exec's first request waits for the servers to settle, so it has all their tools;
//! a tool timeout is an error result; server processes end with the session.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog_support;
mod common;
mod worker_support;

use common::{TestEnv, Wire, body_text, stderr, stdout};
use kestrel_testkit::{LoggedRequest, Script, Step};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use worker_support::{Worker, record_items};

/// Every wait here is bounded by this.
const LIMIT: Duration = Duration::from_secs(90);

fn bin(name: &str) -> PathBuf {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/node_modules/.bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run npm ci --prefix tests/mcp (the MCP tests need the pinned npm servers)",
        path.display()
    );
    path.canonicalize().unwrap()
}

/// `[mcp_servers.NAME]` for a command, as TOML.
fn server_table(name: &str, command: &str, args: &[&str], extra: &str) -> String {
    format!("\n[mcp_servers.{name}]\ncommand = {}\nargs = {}\n{extra}", json!(command), json!(args))
}

/// The env's config plus MCP servers.
fn with_servers(env: &TestEnv, tables: &[String]) {
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    env.write_config(&format!("{config}{}", tables.concat()));
}

/// The tool names a request offered, on any wire.
fn offered_tools(request: &LoggedRequest) -> Vec<String> {
    let Some(tools) = request.body["tools"].as_array() else { return Vec::new() };
    tools
        .iter()
        .filter_map(|tool| tool["name"].as_str().or_else(|| tool["function"]["name"].as_str()))
        .map(str::to_string)
        .collect()
}

/// Caches a catalog in which the scripted model takes images (MCP images are sent only
/// to such models).
fn vision_catalog(env: &TestEnv) {
    let server = catalog_support::CatalogServer::start(
        r#"{"scripted": {"id": "scripted", "models": {"test-model": {"id": "test-model",
            "modalities": {"input": ["text", "image"], "output": ["text"]}}}}}"#,
    );
    let output = env
        .command(&["models", "scripted", "--refresh"])
        .env("KESTREL_CATALOG_URL", &server.url)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

/// The model requests (`kestrel models` also asked the provider's list with a GET).
fn model_requests(env: &TestEnv) -> Vec<LoggedRequest> {
    env.requests().into_iter().filter(|request| request.method == "POST").collect()
}

fn everything() -> String {
    server_table("everything", &bin("mcp-server-everything").display().to_string(), &["stdio"], "")
}

#[test]
fn tools_of_both_npm_servers_are_called_end_to_end_on_every_wire() {
    for wire in Wire::ALL {
        let env = TestEnv::new(
            wire,
            Script::new([
                Step::tool_call("mcp__everything__echo", json!({"message": "ping from the model"})),
                Step::tool_call("mcp__fs__read_text_file", json!({"path": "notes.txt"})),
                Step::tool_call("mcp__everything__get-tiny-image", json!({})),
                Step::text("All three tools answered."),
            ]),
        );
        vision_catalog(&env);
        let work = env.work_path();
        std::fs::write(work.join("notes.txt"), "the secret word is kestrel\n").unwrap();
        let fs = bin("mcp-server-filesystem").display().to_string();
        with_servers(
            &env,
            &[everything(), server_table("fs", &fs, &[&work.display().to_string()], "")],
        );

        let output = env.kestrel(&["exec", "use the MCP tools"]);
        assert!(output.status.success(), "{wire:?}: {}", stderr(&output));
        assert_eq!(stdout(&output), "All three tools answered.\n", "{wire:?}");
        assert!(!stderr(&output).contains("MCP server"), "{wire:?}: {}", stderr(&output));

        let requests = model_requests(&env);
        assert_eq!(requests.len(), 4, "{wire:?}");
        // exec waits for its servers to settle: the first request has every tool, and
        // so do the others.
        for request in &requests {
            let tools = offered_tools(request);
            for name in [
                "read_file",
                "mcp__everything__echo",
                "mcp__everything__get-tiny-image",
                "mcp__fs__read_text_file",
            ] {
                assert!(tools.contains(&name.to_string()), "{wire:?}: {name} not in {tools:?}");
            }
        }
        assert!(body_text(&requests[1]).contains("Echo: ping from the model"), "{wire:?}");
        // The filesystem server's `fs` path is relative to the session's directory.
        assert!(body_text(&requests[2]).contains("the secret word is kestrel"), "{wire:?}");
        let last = body_text(&requests[3]);
        assert!(last.contains("[image: image/png]"), "{wire:?}: placeholder in the tool result");
        let image_block = match wire {
            Wire::Chat => "\"image_url\"",
            Wire::Responses => "\"input_image\"",
            Wire::Anthropic => "\"type\":\"image\"",
        };
        assert!(last.contains(image_block), "{wire:?}: no image block in {last}");
        assert!(last.contains("iVBORw0KGgo"), "{wire:?}: the PNG data reaches the model");

        let results: Vec<Value> =
            env.record_items().into_iter().filter(|item| item["type"] == "tool_result").collect();
        assert_eq!(results.len(), 3, "{wire:?}");
        assert!(results.iter().all(|r| r["is_error"] == false), "{wire:?}: {results:?}");
        assert_eq!(results[0]["output"], "Echo: ping from the model");
    }
}

#[test]
fn a_server_that_cannot_start_is_reported_and_the_turn_ends_normally() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("mcp__broken__lookup", json!({"query": "x"})),
            Step::text("Carried on without it."),
        ]),
    );
    with_servers(&env, &[server_table("broken", "/nonexistent/kestrel-mcp-server", &[], "")]);
    let output = env.kestrel(&["exec", "--json", "try the broken server"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert_eq!(
        err.matches("kestrel: MCP server `broken` failed to start").count(),
        1,
        "reported once on stderr: {err}"
    );
    assert!(err.contains("/nonexistent/kestrel-mcp-server"), "{err}");
    // With --json, stdout stays JSON only.
    for line in stdout(&output).lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|_| panic!("not JSON: {line}"));
    }
    let items = env.record_items();
    let notices: Vec<&Value> = items.iter().filter(|item| item["type"] == "notice").collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0]["message"].as_str().unwrap().contains("`broken` failed to start"));
    let result = items.iter().find(|item| item["type"] == "tool_result").unwrap();
    assert_eq!(result["is_error"], true);
    assert!(result["output"].as_str().unwrap().contains("failed to start"), "{result}");
    let completed = items.iter().rfind(|item| item["type"] == "turn_completed").unwrap();
    assert_eq!(completed["stop_reason"], "end_turn");
}

#[test]
fn exec_waits_for_a_slow_server_before_its_first_request() {
    let env = TestEnv::new(
        Wire::Anthropic,
        Script::new([
            Step::tool_call("mcp__slow__echo", json!({"message": "worth the wait"})),
            Step::text("done"),
        ]),
    );
    let started = env.work_path().join("started");
    let go = env.work_path().join("go");
    // The server comes up only once the test says so.
    let script = format!(
        "touch '{}'; while [ ! -e '{}' ]; do sleep 0.05; done; exec '{}' stdio",
        started.display(),
        go.display(),
        bin("mcp-server-everything").display()
    );
    with_servers(&env, &[server_table("slow", "bash", &["-c", &script], "")]);
    let mut child = env
        .command(&["exec", "wait for the slow server"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + LIMIT;
    while !started.exists() {
        assert!(Instant::now() < deadline, "the server was not started");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(env.requests().is_empty(), "a request went out before the server was up");
    std::fs::write(&go, "").unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "kestrel exec did not finish");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let requests = env.requests();
    assert_eq!(requests.len(), 2);
    let first = offered_tools(&requests[0]);
    assert!(first.contains(&"read_file".to_string()), "{first:?}");
    assert!(first.contains(&"mcp__slow__echo".to_string()), "{first:?}");
    assert!(body_text(&requests[1]).contains("Echo: worth the wait"));
}

#[test]
fn a_tool_that_outlives_its_timeout_is_an_error_result() {
    let env = TestEnv::new(
        Wire::Responses,
        Script::new([
            Step::tool_call(
                "mcp__everything__trigger-long-running-operation",
                json!({"duration": 30, "steps": 30}),
            ),
            Step::text("It timed out."),
        ]),
    );
    let everything = bin("mcp-server-everything").display().to_string();
    with_servers(
        &env,
        &[server_table("everything", &everything, &["stdio"], "tool_timeout_sec = 1\n")],
    );
    let output = env.kestrel(&["exec", "run the slow tool"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let second = body_text(&env.requests()[1]);
    assert!(second.contains("did not answer within 1 s"), "{second}");
}

#[test]
fn a_stdio_server_gets_a_minimal_environment_without_kestrels_keys() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([Step::tool_call("mcp__everything__get-env", json!({})), Step::text("Seen.")]),
    );
    let everything = bin("mcp-server-everything").display().to_string();
    with_servers(
        &env,
        &[server_table("everything", &everything, &["stdio"], "env = { MCP_SETTING = \"on\" }\n")],
    );
    let output = env
        .command(&["exec", "show the server's environment"])
        .env("ANTHROPIC_API_KEY", "sk-ant-must-not-leak")
        .env("LANG", "C.UTF-8")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let second = body_text(&env.requests()[1]);
    assert!(second.contains("MCP_SETTING"), "the configured env is set: {second}");
    assert!(second.contains("PATH") && second.contains("C.UTF-8"), "{second}");
    for secret in ["sk-ant-must-not-leak", "sk-test-secret-key", "KESTREL_HOME"] {
        assert!(!second.contains(secret), "{secret} reached the server: {second}");
    }
}

#[test]
fn server_processes_end_with_the_session() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("mcp__everything__echo", json!({"message": "hi"})),
            Step::text("bye"),
        ]),
    );
    let work = env.work_path();
    let (server_pid, child_pid) = (work.join("server.pid"), work.join("child.pid"));
    let script = format!(
        "sleep 600 & echo $! > '{}'; echo $$ > '{}'; exec '{}' stdio",
        child_pid.display(),
        server_pid.display(),
        bin("mcp-server-everything").display()
    );
    with_servers(&env, &[server_table("everything", "bash", &["-c", &script], "")]);
    let output = env.kestrel(&["exec", "say hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let pids: Vec<i32> = [server_pid, child_pid]
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap().trim().parse().unwrap())
        .collect();
    let deadline = Instant::now() + LIMIT;
    while pids.iter().any(|pid| alive(*pid)) {
        assert!(Instant::now() < deadline, "MCP server processes outlived the session");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    !status.is_empty()
        && !status.lines().any(|line| line.starts_with("State:") && line.contains('Z'))
}

#[tokio::test]
async fn acp_session_new_mcp_servers_join_the_session() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("mcp__acp-everything__echo", json!({"message": "via ACP"})),
            Step::tool_call("mcp__broken__x", json!({})),
            Step::text("done"),
        ]),
    );
    let mut worker = Worker::spawn_with(&env, &[("KESTREL_MODE", "auto")]);
    let init = worker.initialize().await;
    assert_eq!(init["agentCapabilities"]["mcpCapabilities"]["http"], true);
    let work = env.work_path();
    let servers = json!([
        {"name": "acp-everything", "command": bin("mcp-server-everything"), "args": ["stdio"], "env": []},
        {"name": "broken", "command": "/nonexistent/kestrel-mcp-server", "args": [], "env": []},
    ]);
    let session = worker
        .request("session/new", json!({"cwd": work, "mcpServers": servers}))
        .await
        .unwrap_or_else(|error| panic!("session/new failed: {error}: {}", worker.stderr()));
    let id = session["sessionId"].as_str().unwrap().to_string();
    let outcome = tokio::time::timeout(LIMIT, worker.prompt(&id, "use the ACP server", &[]))
        .await
        .expect("the prompt ends");
    assert_eq!(outcome.stop_reason(), "end_turn");
    let requests = env.requests();
    assert!(body_text(&requests[1]).contains("Echo: via ACP"));
    assert!(offered_tools(&requests[1]).contains(&"mcp__acp-everything__echo".to_string()));
    assert!(body_text(&requests[2]).contains("`broken` failed to start"));
    let completed: Vec<&Value> = outcome
        .updates
        .iter()
        .filter(|update| update["sessionUpdate"] == "tool_call_update")
        .filter(|update| update["status"] == "completed" || update["status"] == "failed")
        .collect();
    assert_eq!(completed.len(), 2, "{completed:?}");
    assert!(worker.stderr().contains("MCP server `broken` failed to start"), "{}", worker.stderr());
    let items = record_items(&env, &id);
    assert!(items.iter().any(|item| item["type"] == "notice"
        && item["message"].as_str().unwrap_or_default().contains("`broken` failed to start")));
    worker.close().await;
}

#[test]
fn read_only_mode_refuses_mcp_tools_even_those_the_server_marks_read_only() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("mcp__fs__read_text_file", json!({"path": "notes.txt"})),
            Step::tool_call("mcp__fs__write_file", json!({"path": "notes.txt", "content": "x"})),
            Step::text("done"),
        ]),
    );
    let work = env.work_path();
    std::fs::write(work.join("notes.txt"), "untouched\n").unwrap();
    let fs = bin("mcp-server-filesystem").display().to_string();
    with_servers(&env, &[server_table("fs", &fs, &[&work.display().to_string()], "")]);
    let output = env.kestrel(&["exec", "--mode", "read-only", "read, then try to write"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = env.requests();
    // readOnlyHint is the server's claim, not trusted: nothing of the server runs.
    let refused = body_text(&requests[1]);
    assert!(!refused.contains("untouched") && refused.contains("read-only mode"), "{refused}");
    let refused = body_text(&requests[2]);
    assert!(refused.contains("read-only mode"), "{refused}");
    assert_eq!(std::fs::read_to_string(work.join("notes.txt")).unwrap(), "untouched\n");
}

/// A stdio MCP server (node, as the npm servers need) that lists its tools two pages at a
/// time, like a server with many tools, and answers calls of any of them. A call of
/// `add_tool` adds `added_tool`: the server says its list changed and answers the call
/// only once it has been asked for its list again.
const PAGED_SERVER: &str = r#"
const readline = require("readline");
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const tool = (name) => ({name, description: name, inputSchema: {type: "object"}});
let added = false;
let held = null;
readline.createInterface({input: process.stdin}).on("line", (line) => {
  const message = JSON.parse(line);
  if (message.method === "notifications/cancelled" && process.env.CANCELLED_LOG) {
    require("fs").appendFileSync(process.env.CANCELLED_LOG, JSON.stringify(message.params) + "\n");
  }
  if (message.id === undefined) return;
  const reply = (result) => send({jsonrpc: "2.0", id: message.id, result});
  switch (message.method) {
    case "initialize":
      return reply({protocolVersion: message.params.protocolVersion,
                    capabilities: {tools: {listChanged: true}}, serverInfo: {name: "paged", version: "1"}});
    case "tools/list":
      if (!(message.params && message.params.cursor === "page-2")) {
        const first = [tool("first_page_tool"), tool("add_tool"), tool("never_answers")];
        return reply({tools: first, nextCursor: "page-2"});
      }
      reply({tools: [tool("second_page_tool")].concat(added ? [tool("added_tool")] : [])});
      if (held) { send(held); held = null; }
      return;
    case "tools/call":
      const answer = {jsonrpc: "2.0", id: message.id,
                      result: {content: [{type: "text", text: "called " + message.params.name}]}};
      if (message.params.name === "never_answers") return;
      if (message.params.name !== "add_tool") return send(answer);
      added = true;
      held = answer;
      return send({jsonrpc: "2.0", method: "notifications/tools/list_changed"});
    default:
      send({jsonrpc: "2.0", id: message.id, error: {code: -32601, message: "no"}});
  }
});
"#;

#[test]
fn tools_listed_over_several_pages_are_all_offered() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("mcp__paged__second_page_tool", json!({})),
            Step::text("Both pages."),
        ]),
    );
    let script = env.home.path().join("paged.js");
    std::fs::write(&script, PAGED_SERVER).unwrap();
    with_servers(&env, &[server_table("paged", "node", &[&script.display().to_string()], "")]);
    let output = env.kestrel(&["exec", "call the tool from the second page"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = env.requests();
    let tools = offered_tools(&requests[1]);
    for name in ["mcp__paged__first_page_tool", "mcp__paged__second_page_tool"] {
        assert!(tools.contains(&name.to_string()), "{name} not in {tools:?}");
    }
    assert!(body_text(&requests[1]).contains("called second_page_tool"));
}

#[test]
fn a_servers_list_changed_notification_brings_its_new_tools() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("mcp__paged__add_tool", json!({})),
            Step::tool_call("mcp__paged__added_tool", json!({})),
            Step::text("Added and called."),
        ]),
    );
    let script = env.home.path().join("paged.js");
    std::fs::write(&script, PAGED_SERVER).unwrap();
    with_servers(&env, &[server_table("paged", "node", &[&script.display().to_string()], "")]);
    let output = env.kestrel(&["exec", "add a tool and call it"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = env.requests();
    let tools = offered_tools(&requests[2]);
    assert!(tools.contains(&"mcp__paged__added_tool".to_string()), "{tools:?}");
    assert!(body_text(&requests[2]).contains("called added_tool"));
}

#[test]
fn a_call_past_its_timeout_is_cancelled_on_the_server() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("mcp__paged__never_answers", json!({})),
            Step::text("It was cancelled."),
        ]),
    );
    let script = env.home.path().join("paged.js");
    std::fs::write(&script, PAGED_SERVER).unwrap();
    let log = env.home.path().join("cancelled.jsonl");
    let extra = format!("tool_timeout_sec = 1\nenv = {{ CANCELLED_LOG = {} }}\n", json!(log));
    with_servers(&env, &[server_table("paged", "node", &[&script.display().to_string()], &extra)]);
    let output = env.kestrel(&["exec", "call the tool that never answers"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let second = body_text(&env.requests()[1]);
    assert!(second.contains("did not answer within 1 s"), "{}", env.requests()[1].body["messages"]);
    // The server was told (the notification is written before the session ends).
    let deadline = Instant::now() + LIMIT;
    let cancelled = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if !text.is_empty() || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let params: Value = serde_json::from_str(cancelled.lines().next().unwrap_or("null")).unwrap();
    assert!(params["requestId"].is_number() || params["requestId"].is_string(), "{params}");
}

/// The prefix a server gets when its name clashes with another's: `mcp__<cleaned>_<FNV-1a
/// of its name>__` (docs/mcp.md).
fn hashed_prefix(cleaned: &str, name: &str) -> String {
    let hash = name
        .bytes()
        .fold(0x811c_9dc5_u32, |hash, byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193));
    format!("mcp__{cleaned}_{hash:08x}__")
}

#[test]
fn servers_whose_names_clash_are_reported_and_both_keep_their_tools() {
    let dotted = format!("{}echo", hashed_prefix("my_server", "my.server"));
    let underscored = format!("{}echo", hashed_prefix("my_server", "my_server"));
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call(&dotted, json!({"message": "to the dotted one"})),
            Step::tool_call(&underscored, json!({"message": "to the other one"})),
            Step::text("done"),
        ]),
    );
    let program = bin("mcp-server-everything").display().to_string();
    with_servers(
        &env,
        &[
            server_table("\"my.server\"", &program, &["stdio"], ""),
            server_table("my_server", &program, &["stdio"], ""),
        ],
    );
    let output = env.kestrel(&["exec", "call both"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stderr(&output);
    assert!(text.contains("`my.server`, `my_server`") && text.contains("own prefix"), "{text}");
    let last = body_text(&env.requests()[2]);
    assert!(last.contains("Echo: to the dotted one") && last.contains("Echo: to the other one"));
    let tools = offered_tools(&env.requests()[2]);
    assert!(tools.contains(&dotted) && tools.contains(&underscored), "{tools:?}");
}

/// A stdio MCP server whose `picture` tool returns an image of the type its `type`
/// argument names (an SVG for `image/svg+xml`, else a 1×1 PNG's bytes).
const PICTURE_SERVER: &str = r#"
const readline = require("readline");
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAACklEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg==";
readline.createInterface({input: process.stdin}).on("line", (line) => {
  const message = JSON.parse(line);
  if (message.id === undefined) return;
  const reply = (result) => send({jsonrpc: "2.0", id: message.id, result});
  switch (message.method) {
    case "initialize":
      return reply({protocolVersion: message.params.protocolVersion,
                    capabilities: {tools: {}}, serverInfo: {name: "pictures", version: "1"}});
    case "tools/list":
      return reply({tools: [{name: "picture", description: "a picture",
                             inputSchema: {type: "object"}, annotations: {readOnlyHint: true}}]});
    case "tools/call":
      const type = message.params.arguments.type;
      const data = type === "image/svg+xml" ? Buffer.from("<svg/>").toString("base64") : PNG;
      return reply({content: [{type: "image", mimeType: type, data}]});
    default:
      send({jsonrpc: "2.0", id: message.id, error: {code: -32601, message: "no"}});
  }
});
"#;

#[test]
fn an_mcp_image_of_a_type_the_provider_refuses_becomes_a_note_and_the_session_goes_on() {
    let env = TestEnv::new(
        Wire::Anthropic,
        Script::new([
            Step::tool_calls(vec![
                kestrel_testkit::ScriptedToolCall::new(
                    "mcp__pictures__picture",
                    json!({"type": "image/svg+xml"}),
                ),
                kestrel_testkit::ScriptedToolCall::new(
                    "mcp__pictures__picture",
                    json!({"type": "image/jpg"}),
                ),
                kestrel_testkit::ScriptedToolCall::new(
                    "mcp__pictures__picture",
                    json!({"type": "image/png"}),
                ),
            ]),
            Step::text("One picture came through."),
        ]),
    );
    vision_catalog(&env);
    let script = env.home.path().join("pictures.js");
    std::fs::write(&script, PICTURE_SERVER).unwrap();
    with_servers(&env, &[server_table("pictures", "node", &[&script.display().to_string()], "")]);
    let output = env.kestrel(&["exec", "show me the pictures"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let second = body_text(&model_requests(&env)[1]);
    assert!(second.contains("image/svg+xml, not shown: "), "{second}");
    // A PNG declared `image/jpg` goes as what its bytes are.
    assert_eq!(second.matches(r#""content":"[image: image/png]""#).count(), 2, "{second}");
    assert!(second.contains("iVBORw0KGgo"), "the PNG is sent: {second}");
    assert_eq!(second.matches(r#""type":"image""#).count(), 2, "{second}");
    assert_eq!(second.matches(r#""media_type":"image/png""#).count(), 2, "{second}");
}

/// A loopback "MCP server" that answers every HTTP request with `status` and a body
/// that never ends (until the client hangs up). Returns its URL.
fn endless_http_server(status: &str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let status = status.to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let status = status.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let start = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
                );
                if stream.write_all(start.as_bytes()).is_err() {
                    return;
                }
                let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, " ".repeat(64 * 1024));
                // Bounded only so that a client that never hangs up cannot keep it forever.
                for _ in 0..(1 << 16) {
                    if stream.write_all(chunk.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

#[test]
fn an_http_server_that_sends_without_end_is_refused_at_the_message_limit() {
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_calls(vec![
                kestrel_testkit::ScriptedToolCall::new("mcp__endless__x", json!({})),
                kestrel_testkit::ScriptedToolCall::new("mcp__failing__x", json!({})),
            ]),
            Step::text("Carried on."),
        ]),
    );
    let endless = endless_http_server("200 OK");
    let failing = endless_http_server("500 Internal Server Error");
    let tables = [
        format!("\n[mcp_servers.endless]\nurl = {}\n", json!(endless)),
        format!("\n[mcp_servers.failing]\nurl = {}\n", json!(failing)),
    ];
    with_servers(&env, &tables);
    let output = env.kestrel(&["exec", "call them"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("sent a message larger than 16777216 bytes"), "{err}");
    assert!(err.contains("answered HTTP 500 Internal Server Error"), "{err}");
}
