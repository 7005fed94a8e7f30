//! Parity of the two hosts of a session (ARCHITECTURE §8): one scripted conversation in
//! ask mode — a read, a command and an MCP tool call (a real npm server, tests/mcp) that
//! both need approval, a turn that fills half the context, and a second prompt that
//! compacts first — run through `kestrel exec` (in-process) and through the daemon over
//! ACP (a worker). The provider requests, as the scripted server logs them (the MCP
//! server's tools included), and the record (header and items) are the same once ids,
//! times, durations and the temp paths are normalised; any change that makes one path
//! differ fails here.
//!
//! The approvals. Over ACP the client answers each permission request "allow once".
//! `exec` has no one to ask (it refuses what needs approval: checked first), so there
//! the user's rules give the same answer: `allow` naming exactly the command and
//! `allow_tools` naming exactly the MCP tool. That is the same decision: in ask mode the
//! policy asks for both calls with `run_as = ask`; "allow once" runs the call as `ask`
//! and remembers nothing, and a rule covering the call makes the policy allow it with
//! `run_as = ask` too, while covering nothing else the conversation does. Neither host
//! records the decision itself, so what the model and the record see must not differ.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use common::{TestEnv, Wire, read_lines, stderr, stdout};
use daemon_support::DaemonTest;
use kestrel_testkit::{LoggedRequest, Script, ScriptedUsage, Step};
use serde_json::{Value, json};
use std::path::Path;

/// A command `ask` does not run without approval (`touch` writes), and the rule that
/// allows it in `exec`.
const APPROVED: &str = "touch approved.txt && echo approved";
const RULE: &str = "touch approved.txt";
/// An MCP tool: ask mode asks before any (a server's read-only claim is not trusted).
const MCP_TOOL: &str = "mcp__everything__echo";

fn used(input: u64, output: u64) -> ScriptedUsage {
    ScriptedUsage {
        input_tokens: input,
        cached_input_tokens: 0,
        output_tokens: output,
        reasoning_tokens: 0,
    }
}

fn script() -> Script {
    Script::new([
        Step::tool_call("read_file", json!({"path": "notes.txt"})).with_usage(used(1_000, 20)),
        Step::tool_call("shell", json!({"command": APPROVED})).with_usage(used(1_500, 20)),
        Step::tool_call(MCP_TOOL, json!({"message": "parity"})).with_usage(used(1_800, 20)),
        // The context is now past half the (unknown model's 128k) window...
        Step::text("Read the notes and ran it.").with_usage(used(100_000, 10)),
        // ...so the second prompt first asks for a summary, then answers.
        Step::text("SUMMARY: notes read, approved.txt made.").with_usage(used(5_000, 50)),
        Step::text("Second answer.").with_usage(used(3_000, 10)),
    ])
}

/// Where the MCP server's answers are copied (in the test's home), to see it is up.
fn server_answers(env: &TestEnv) -> std::path::PathBuf {
    env.home.path().join("everything.out")
}

/// The pinned npm MCP server (`npm ci --prefix tests/mcp`), its answers also copied to
/// [`server_answers`].
fn everything_server(env: &TestEnv) -> String {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/node_modules/.bin/mcp-server-everything");
    assert!(bin.exists(), "{} is missing: run npm ci --prefix tests/mcp", bin.display());
    let args = json!(["-c", "\"$0\" stdio | tee -a \"$1\"", bin, server_answers(env)]);
    format!("\n[mcp_servers.everything]\ncommand = \"bash\"\nargs = {args}\n")
}

/// The workspace and config both runs share; `extra` is added to the config.
fn prepare(env: &TestEnv, extra: &str) {
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    let servers = everything_server(env);
    env.write_config(&format!("{config}\n{extra}\n[agent]\ncompact_at = 0.5\n{servers}"));
    std::fs::write(env.work_path().join("notes.txt"), "alpha\nbeta\n").unwrap();
}

/// The user's rules that answer for `exec` what the ACP client answers "allow once".
fn exec_rules(env: &TestEnv) -> String {
    format!(
        "[[permissions.project]]\npath = {}\nallow = [{}]\nallow_tools = [{}]\n",
        json!(env.work_path()),
        json!(RULE),
        json!(MCP_TOOL)
    )
}

/// What one run left: the provider requests and the record (header first).
struct Run {
    requests: Vec<Value>,
    record: Vec<Value>,
}

impl Run {
    fn of(env: &TestEnv, session_id: &str) -> Run {
        let record_path = env
            .records()
            .into_iter()
            .find(|path| path.file_stem().is_some_and(|stem| stem == session_id))
            .expect("the session's record");
        let home = env.home.path().canonicalize().unwrap();
        let mut needles = vec![
            (session_id.to_owned(), "<session>".to_owned()),
            (env.work_path().display().to_string(), "<workspace>".to_owned()),
            (home.display().to_string(), "<home>".to_owned()),
            (env.home.path().display().to_string(), "<home>".to_owned()),
            (env.server.base_url(), "<server>".to_owned()),
        ];
        // Tool call ids are the provider's: named by their order in the record.
        let items = read_lines(&record_path);
        let calls = items.iter().filter(|item| item["type"] == "tool_call");
        for (number, call) in calls.enumerate() {
            needles.push((call["id"].as_str().unwrap().to_owned(), format!("<call {number}>")));
        }
        let requests = env.requests().iter().map(|request| logged(request, &needles)).collect();
        let record = items.iter().map(|item| normalised(item, &needles)).collect();
        Run { requests, record }
    }
}

fn logged(request: &LoggedRequest, needles: &[(String, String)]) -> Value {
    normalised(&json!({"path": request.path, "body": request.body}), needles)
}

/// `value` without what differs between any two runs: times, durations, ids and paths.
fn normalised(value: &Value, needles: &[(String, String)]) -> Value {
    match value {
        Value::String(text) => {
            let mut text = text.clone();
            for (needle, placeholder) in needles {
                text = text.replace(needle.as_str(), placeholder.as_str());
            }
            Value::String(text)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| normalised(v, needles)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| !matches!(key.as_str(), "ts" | "created_at" | "duration_ms"))
                .map(|(key, v)| (key.clone(), normalised(v, needles)))
                .collect(),
        ),
        Value::Null | Value::Bool(_) | Value::Number(_) => value.clone(),
    }
}

/// Equal lists, or a failure naming the first item that differs.
fn assert_same(what: &str, exec: &[Value], daemon: &[Value]) {
    for (index, (one, other)) in exec.iter().zip(daemon).enumerate() {
        assert_eq!(one, other, "{what} #{index} differs (left: exec, right: daemon)");
    }
    assert_eq!(exec.len(), daemon.len(), "{what}: exec {exec:#?}\ndaemon {daemon:#?}");
}

/// Without the rules, `exec` refuses both calls: they need approval there too.
fn exec_refuses_without_the_rules() {
    let env = TestEnv::new(Wire::Chat, script());
    prepare(&env, "");
    let run = env.kestrel(&["exec", "--mode", "ask", "first task"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let results = env.tool_results();
    assert!(!results[0].1, "the read runs: {results:?}");
    for (output, is_error) in &results[1..] {
        assert!(*is_error && output.contains("approval"), "{results:?}");
    }
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(!env.work_path().join("approved.txt").exists());
}

fn run_exec() -> Run {
    exec_refuses_without_the_rules();
    let env = TestEnv::new(Wire::Chat, script());
    prepare(&env, &exec_rules(&env));
    let first = env.kestrel(&["exec", "--mode", "ask", "--json", "first task"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let started = stdout(&first).lines().next().map(str::to_owned).unwrap_or_default();
    let session: Value = serde_json::from_str(&started).unwrap();
    let session = session["session_id"].as_str().expect("a session id").to_owned();
    let second = env.kestrel(&["exec", "resume", "--mode", "ask", &session, "second task"]);
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(stdout(&second), "Second answer.\n");
    let run = Run::of(&env, &session);
    assert!(env.work_path().join("approved.txt").exists(), "{:#?}", run.record);
    run
}

async fn run_daemon() -> Run {
    let test = DaemonTest::new(script());
    prepare(&test.env, "");
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let session = client.new_session(&cwd).await;
    // `exec` waits for its MCP servers before the first request; an interactive host does
    // not (it answers at once, tools join when their server is up). So the client waits
    // here until the server has listed its tools, for the first request to offer them.
    let answers = server_answers(&test.env);
    daemon_support::eventually("the MCP server to list its tools", || {
        std::fs::read_to_string(&answers).is_ok_and(|text| text.contains("\"name\":\"echo\""))
    })
    .await;
    let first = client.prompt(&session, "first task");
    // Asked for the command, then for the MCP tool.
    for asked_for in [RULE, MCP_TOOL] {
        let asked = client.wait_permission().await;
        assert!(asked.params.to_string().contains(asked_for), "{asked_for}: {}", asked.params);
        let options = asked.params["options"].as_array().unwrap();
        let once = options.iter().find(|option| option["kind"] == "allow_once").unwrap();
        client.answer(asked.id.clone(), once["optionId"].as_str().unwrap()).await;
    }
    assert_eq!(first.await.unwrap().unwrap()["stopReason"], "end_turn");
    let second = client.prompt(&session, "second task").await.unwrap().unwrap();
    assert_eq!(second["stopReason"], "end_turn");
    assert!(Path::new(&cwd.join("approved.txt")).exists());
    Run::of(&test.env, &session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_and_the_daemon_send_the_same_requests_and_record_the_same_items() {
    let exec = run_exec();
    let daemon = run_daemon().await;
    // The scenario did what it says: a compaction (a request without tools) happened.
    let summarising =
        |request: &Value| request["body"]["tools"].as_array().is_none_or(Vec::is_empty);
    assert_eq!(exec.requests.iter().filter(|r| summarising(r)).count(), 1, "{:#?}", exec.requests);
    assert!(exec.record.iter().any(|item| item["type"] == "compaction"), "{:#?}", exec.record);
    // The MCP server's tools were offered from the first request, and its call answered.
    let offered = exec.requests[0]["body"]["tools"].to_string();
    assert!(offered.contains(MCP_TOOL), "{offered}");
    let echoed = exec.record.iter().any(|item| {
        item["type"] == "tool_result"
            && item["output"].as_str().is_some_and(|o| o.contains("parity"))
    });
    assert!(echoed, "{:#?}", exec.record);
    assert_same("provider request", &exec.requests, &daemon.requests);
    assert_same("record line", &exec.record, &daemon.record);
}
