//! MCP servers through the tool registry, against the real npm servers pinned in
//! tests/mcp (`npm ci --prefix tests/mcp`): stdio and streamable HTTP, tool names and
//! schemas, result mapping (text, image, structured), a server that fails to start,
//! one that dies mid-session, tool timeouts, cancellation, a call that waits for a
//! starting server, and the processes killed when the session's servers are dropped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{err, ok};
use kestrel_protocol::Mode;
use kestrel_store::{McpServerSettings, McpTransport};
use kestrel_tools::mcp::{McpServerState, McpServers};
use kestrel_tools::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Every wait of these tests is bounded by this.
const LIMIT: Duration = Duration::from_secs(60);

fn bin(name: &str) -> PathBuf {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/node_modules/.bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run npm ci --prefix tests/mcp (the MCP tests need the pinned npm servers)",
        path.display()
    );
    path
}

fn stdio(command: &Path, args: &[&str]) -> McpServerSettings {
    McpServerSettings {
        transport: McpTransport::Stdio {
            command: command.display().to_string(),
            args: args.iter().map(|arg| arg.to_string()).collect(),
            env: BTreeMap::new(),
            cwd: None,
        },
        tool_timeout_sec: None,
        enabled: true,
    }
}

/// `bash -c SCRIPT`: for servers that must note their pid or wait before starting.
fn script(text: &str) -> McpServerSettings {
    stdio(Path::new("bash"), &["-c", text])
}

fn context(root: &Path) -> ToolContext {
    common::context(root, Mode::Auto)
}

struct Session {
    servers: Arc<McpServers>,
    registry: ToolRegistry,
    dir: tempfile::TempDir,
}

impl Session {
    fn start(servers: Vec<(&str, McpServerSettings)>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let servers: BTreeMap<String, McpServerSettings> =
            servers.into_iter().map(|(name, settings)| (name.to_string(), settings)).collect();
        let servers = Arc::new(McpServers::start(&servers, dir.path()));
        let mut registry = kestrel_tools::builtin_tools();
        registry.add_source(servers.clone());
        Self { servers, registry, dir }
    }

    async fn started(&self) -> &Self {
        tokio::time::timeout(LIMIT, self.servers.wait_until_started())
            .await
            .expect("servers settle");
        self
    }

    async fn call(&self, name: &str, arguments: Value) -> ToolOutput {
        self.call_with(name, arguments, &context(self.dir.path())).await
    }

    async fn call_with(&self, name: &str, arguments: Value, context: &ToolContext) -> ToolOutput {
        let arguments = arguments.to_string();
        let call = self.registry.call(name, &arguments, context);
        tokio::time::timeout(LIMIT, call).await.expect("the call ends")
    }

    fn state(&self, name: &str) -> McpServerState {
        let statuses = self.servers.statuses();
        statuses.into_iter().find(|(server, _)| server == name).expect("server known").1
    }

    fn tool_names(&self) -> Vec<String> {
        self.registry.definitions().into_iter().map(|d| d.name).collect()
    }

    /// Polls until `check` holds, failing after the limit.
    async fn until(&self, what: &str, check: impl Fn(&Self) -> bool) {
        let deadline = tokio::time::Instant::now() + LIMIT;
        while !check(self) {
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn pid_alive(pid: i32) -> bool {
    // Signal 0 checks existence; a zombie counts as gone for us.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    !status.is_empty()
        && !status.lines().any(|line| line.starts_with("State:") && line.contains('Z'))
}

async fn read_pid(path: &Path) -> i32 {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(tokio::time::Instant::now() < deadline, "no pid in {}", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_server_tools_are_listed_and_called_with_faithful_results() {
    let session =
        Session::start(vec![("everything", stdio(&bin("mcp-server-everything"), &["stdio"]))]);
    session.started().await;
    let names = session.tool_names();
    for expected in ["read_file", "mcp__everything__echo", "mcp__everything__get-tiny-image"] {
        assert!(names.contains(&expected.to_string()), "{expected} missing from {names:?}");
    }
    let echo = session.registry.get("mcp__everything__echo").unwrap();
    let definition = echo.definition();
    assert_eq!(definition.description, "Echoes back the input string");
    assert_eq!(definition.parameters["properties"]["message"]["type"], "string");
    // readOnlyHint is the server's claim: no MCP tool skips the permission policy.
    assert!(!echo.is_read_only(), "echo is annotated readOnlyHint, which is not trusted");
    assert!(!session.registry.is_read_only("mcp__everything__toggle-simulated-logging"));

    let output = session.call("mcp__everything__echo", json!({"message": "hi from kestrel"})).await;
    assert_eq!(ok(&output), "Echo: hi from kestrel");

    let sum = session.call("mcp__everything__get-sum", json!({"a": 2, "b": 40})).await;
    assert!(ok(&sum).contains("42"), "{}", sum.content);

    let image = session.call("mcp__everything__get-tiny-image", json!({})).await;
    assert_eq!(
        ok(&image),
        "Here's the image you requested:\n[image: image/png]\nThe image above is the MCP logo."
    );
    assert_eq!(image.images.len(), 1);
    assert_eq!(image.images[0].media_type, "image/png");
    assert!(image.images[0].data.starts_with("iVBORw0KGgo"), "base64 PNG data");

    let weather = session
        .call("mcp__everything__get-structured-content", json!({"location": "Chicago"}))
        .await;
    let parsed: Value = serde_json::from_str(ok(&weather)).expect("structured content as JSON");
    assert_eq!(parsed["conditions"], "Light rain / drizzle");

    // Invalid arguments come back from the server as an error result.
    let bad = session.call("mcp__everything__get-sum", json!({"a": "two"})).await;
    assert!(!err(&bad).is_empty());
    assert!(session.registry.take_reports().is_empty(), "nothing to report");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_server_reads_and_writes_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "kestrel was here\n").unwrap();
    let root_text = root.display().to_string();
    let session = Session::start(vec![("fs", stdio(&bin("mcp-server-filesystem"), &[&root_text]))]);
    session.started().await;
    assert!(!session.registry.is_read_only("mcp__fs__read_text_file"), "hints are not trusted");
    assert!(!session.registry.is_read_only("mcp__fs__write_file"));

    let path = root.join("notes.txt").display().to_string();
    let read = session.call("mcp__fs__read_text_file", json!({"path": path})).await;
    assert_eq!(ok(&read).trim_end(), "kestrel was here");

    let target = root.join("new.txt").display().to_string();
    let written =
        session.call("mcp__fs__write_file", json!({"path": target, "content": "x"})).await;
    assert!(ok(&written).contains("Successfully wrote"), "{}", written.content);
    assert_eq!(std::fs::read_to_string(root.join("new.txt")).unwrap(), "x");

    let outside = session.call("mcp__fs__read_text_file", json!({"path": "/etc/hostname"})).await;
    assert!(
        err(&outside).contains("denied") || outside.content.contains("outside"),
        "{}",
        outside.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_reported_once_and_its_calls_fail() {
    let session = Session::start(vec![
        ("missing", stdio(Path::new("/nonexistent/kestrel-mcp-server"), &[])),
        ("crashing", script("echo 'config file is broken' >&2; exit 3")),
    ]);
    session.started().await;
    let McpServerState::Failed { reason } = session.state("missing") else {
        panic!("missing should have failed: {:?}", session.state("missing"))
    };
    assert!(reason.contains("/nonexistent/kestrel-mcp-server"), "{reason}");
    let McpServerState::Failed { reason } = session.state("crashing") else {
        panic!("crashing should have failed: {:?}", session.state("crashing"))
    };
    assert!(reason.contains("status 3") && reason.contains("config file is broken"), "{reason}");

    let reports = session.registry.take_reports();
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert!(reports.iter().any(|r| r.starts_with("MCP server `missing` failed to start")));
    assert!(reports.iter().any(|r| r.starts_with("MCP server `crashing` failed to start")));
    assert!(session.registry.take_reports().is_empty(), "reported once");

    assert!(!session.tool_names().iter().any(|name| name.starts_with("mcp__")));
    let call = session.call("mcp__missing__anything", json!({})).await;
    assert!(err(&call).contains("failed to start"), "{}", call.content);
    let unknown = session.call("mcp__nobody__tool", json!({})).await;
    assert!(err(&unknown).contains("unknown tool"), "{}", unknown.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_mid_session_is_reported_and_its_tools_vanish() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("server.pid");
    let command = format!(
        "echo $$ > '{}'; exec '{}' stdio",
        pid_file.display(),
        bin("mcp-server-everything").display()
    );
    let session = Session::start(vec![("everything", script(&command))]);
    session.started().await;
    let echo = session.call("mcp__everything__echo", json!({"message": "alive"})).await;
    assert_eq!(ok(&echo), "Echo: alive");
    // The tool as the session saw it before the death.
    let stale = session.registry.get("mcp__everything__echo").unwrap();

    let pid = read_pid(&pid_file).await;
    // SAFETY: sending SIGKILL to the server process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    session
        .until("the server to be reported stopped", |s| {
            matches!(s.state("everything"), McpServerState::Stopped { .. })
        })
        .await;
    let McpServerState::Stopped { reason } = session.state("everything") else { unreachable!() };
    assert!(reason.contains("signal 9") || reason.contains("closed"), "{reason}");
    let reports = session.registry.take_reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(reports[0].starts_with("MCP server `everything` stopped"), "{reports:?}");
    assert!(!session.tool_names().iter().any(|name| name.starts_with("mcp__")));

    let after = session.call("mcp__everything__echo", json!({"message": "dead?"})).await;
    assert!(err(&after).contains("not running"), "{}", after.content);
    let context = context(session.dir.path());
    let stale_call =
        tokio::time::timeout(LIMIT, stale.run(json!({"message": "x"}), &context)).await.unwrap();
    assert!(err(&stale_call).contains("not running"), "{}", stale_call.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tool_times_out_with_the_servers_limit_and_a_cancelled_call_ends() {
    let mut settings = stdio(&bin("mcp-server-everything"), &["stdio"]);
    settings.tool_timeout_sec = Some(1);
    let session = Session::start(vec![("everything", settings)]);
    session.started().await;
    let slow = json!({"duration": 30, "steps": 30});
    let output =
        session.call("mcp__everything__trigger-long-running-operation", slow.clone()).await;
    assert!(err(&output).contains("did not answer within 1 s"), "{}", output.content);
    assert!(output.content.contains("tool_timeout_sec"), "{}", output.content);
    // The server is still fine afterwards.
    let echo = session.call("mcp__everything__echo", json!({"message": "still here"})).await;
    assert_eq!(ok(&echo), "Echo: still here");

    let cancelled = context(session.dir.path());
    let cancel = cancelled.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let output = session
        .call_with("mcp__everything__trigger-long-running-operation", slow, &cancelled)
        .await;
    assert!(err(&output).contains("cancelled"), "{}", output.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_starting_server_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let command = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; exec '{}' stdio",
        go.display(),
        bin("mcp-server-everything").display()
    );
    let session = Session::start(vec![("slow", script(&command))]);
    // Not up yet: listed tools have none of it, and nothing blocked.
    assert_eq!(session.state("slow"), McpServerState::Starting);
    assert!(!session.tool_names().iter().any(|name| name.starts_with("mcp__")));
    let call = session.call("mcp__slow__echo", json!({"message": "waited"}));
    let release = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        std::fs::write(&go, "").unwrap();
    };
    let (output, ()) = tokio::join!(call, release);
    assert_eq!(ok(&output), "Echo: waited");
    assert!(session.tool_names().contains(&"mcp__slow__echo".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settling_a_name_waits_for_its_server_so_read_only_is_known() {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let command = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; exec '{}' stdio",
        go.display(),
        bin("mcp-server-everything").display()
    );
    let session = Session::start(vec![("slow", script(&command))]);
    // Before the server is up, nothing is known about the tool: not read-only.
    assert!(!session.registry.is_read_only("mcp__slow__echo"));
    let settle = session.registry.settle("mcp__slow__echo");
    let release = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        std::fs::write(&go, "").unwrap();
    };
    let ((), ()) =
        tokio::time::timeout(LIMIT, async { tokio::join!(settle, release) }).await.unwrap();
    assert!(session.tool_names().contains(&"mcp__slow__echo".to_string()));
    assert!(!session.registry.is_read_only("mcp__slow__echo"), "readOnlyHint is not trusted");
    // Names of no server, and built-in tools, settle at once.
    tokio::time::timeout(LIMIT, session.registry.settle("read_file")).await.unwrap();
    tokio::time::timeout(LIMIT, session.registry.settle("mcp__nobody__x")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_processes_are_killed_when_the_session_ends() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("server.pid");
    // A server with a child of its own: the whole process group goes.
    let child_file = dir.path().join("child.pid");
    let command = format!(
        "sleep 600 & echo $! > '{}'; echo $$ > '{}'; exec '{}' stdio",
        child_file.display(),
        pid_file.display(),
        bin("mcp-server-everything").display()
    );
    let session = Session::start(vec![("everything", script(&command))]);
    session.started().await;
    let (server, child) = (read_pid(&pid_file).await, read_pid(&child_file).await);
    assert!(pid_alive(server) && pid_alive(child));
    let Session { servers, registry, dir: _dir } = session;
    drop(registry);
    tokio::time::timeout(LIMIT, servers.shutdown()).await.unwrap();
    drop(servers);
    let deadline = tokio::time::Instant::now() + LIMIT;
    while pid_alive(server) || pid_alive(child) {
        assert!(tokio::time::Instant::now() < deadline, "server processes still alive");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_server_is_called_over_http() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut server = tokio::process::Command::new(bin("mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = tokio::time::Instant::now() + LIMIT;
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "HTTP server did not listen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let settings = McpServerSettings {
        transport: McpTransport::Http {
            url: format!("http://127.0.0.1:{port}/mcp"),
            headers: BTreeMap::from([("X-Kestrel-Test".to_string(), "1".to_string())]),
        },
        tool_timeout_sec: None,
        enabled: true,
    };
    let session = Session::start(vec![("remote", settings)]);
    session.started().await;
    assert!(
        matches!(session.state("remote"), McpServerState::Ready { .. }),
        "{:?}",
        session.state("remote")
    );
    let echo = session.call("mcp__remote__echo", json!({"message": "over http"})).await;
    assert_eq!(ok(&echo), "Echo: over http");
    let image = session.call("mcp__remote__get-tiny-image", json!({})).await;
    assert_eq!(image.images.len(), 1);
    drop(session);
    let _ = server.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_http_server_fails_to_start_with_its_url() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    let settings = McpServerSettings {
        transport: McpTransport::Http { url: url.clone(), headers: BTreeMap::new() },
        tool_timeout_sec: None,
        enabled: true,
    };
    let session = Session::start(vec![("remote", settings)]);
    session.started().await;
    let McpServerState::Failed { reason } = session.state("remote") else {
        panic!("{:?}", session.state("remote"))
    };
    assert!(reason.contains(&url), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_fail_clearly_and_disabled_servers_do_not_start() {
    let mut disabled = stdio(Path::new("/nonexistent/never-run"), &[]);
    disabled.enabled = false;
    let bad_header = McpServerSettings {
        transport: McpTransport::Http {
            url: "http://127.0.0.1:9/mcp".into(),
            headers: BTreeMap::from([("Bad Header".to_string(), "x".to_string())]),
        },
        tool_timeout_sec: None,
        enabled: true,
    };
    let session = Session::start(vec![("off", disabled), ("header", bad_header)]);
    session.started().await;
    let statuses = session.servers.statuses();
    assert_eq!(statuses.len(), 1, "a disabled server is not started: {statuses:?}");
    let McpServerState::Failed { reason } = session.state("header") else { panic!() };
    assert!(reason.contains("`Bad Header` is not a valid HTTP header name"), "{reason}");
}
