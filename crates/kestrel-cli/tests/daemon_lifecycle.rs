//! The daemon's life through the real binary: started on demand and detached, one
//! daemon for racing clients, a stale socket replaced, idle exit, status and stop, and
//! clear errors for bad requests. None of these needs a worker to run a turn.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use daemon_support::{DaemonTest, eventually, kill, pid_alive};
use kestrel_protocol::jsonrpc::RpcError;
use kestrel_testkit::{Script, Step};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

fn quiet() -> DaemonTest {
    DaemonTest::new(Script::new([Step::text("hello")]))
}

#[test]
fn start_status_and_stop_through_the_cli() {
    let test = quiet();
    let output = test.command(&["daemon", "status"]).output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "daemon not running\n");

    let output = test.command(&["daemon", "start"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let pid = test.daemon_pid().expect("a daemon holds the pid file");
    assert!(String::from_utf8_lossy(&output.stdout).contains(&format!("pid {pid}")));

    let status = test.status();
    assert_eq!(status["running"], true);
    assert_eq!(status["pid"], pid);
    assert_eq!(status["sessions"], json!([]));
    let run = test.env.home.path().join("run");
    let socket = run.join("daemon.sock");
    assert_eq!(status["socket"], socket.display().to_string());
    assert_eq!(std::fs::metadata(&run).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777, 0o600);

    let text = test.command(&["daemon", "status"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.starts_with(&format!("daemon running (pid {pid})\nsocket: {}", socket.display())),
        "{text}"
    );

    // A second start finds it running.
    let again = test.command(&["daemon", "start"]).output().unwrap();
    assert!(again.status.success());
    assert_eq!(test.daemon_pid(), Some(pid));

    let stopped = test.command(&["daemon", "stop"]).output().unwrap();
    assert!(stopped.status.success());
    assert_eq!(String::from_utf8_lossy(&stopped.stdout), format!("daemon stopped (pid {pid})\n"));
    assert!(!pid_alive(pid) || test.daemon_pid().is_none());
    assert!(!socket.exists(), "the socket is removed on exit");
    let not_running = test.command(&["daemon", "stop"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&not_running.stdout), "daemon not running\n");
}

#[test]
fn the_daemon_is_detached_from_the_client_that_started_it() {
    let test = quiet();
    assert!(test.command(&["daemon", "start"]).output().unwrap().status.success());
    let pid = test.daemon_pid().unwrap();
    // Its own session (setsid): stat's 6th field is the session id.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let session: u32 = after_name.split(' ').nth(3).unwrap().parse().unwrap();
    assert_eq!(session, pid, "the daemon leads its own session");
    for fd in 0..3 {
        let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap();
        assert_eq!(target, std::path::Path::new("/dev/null"), "fd {fd}");
    }
    let log = std::fs::read_to_string(test.env.home.path().join("logs/daemon.log")).unwrap();
    assert!(log.contains("listening on"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_clients_start_exactly_one_daemon() {
    let test = quiet();
    let clients: Vec<_> = (0..4).map(|_| daemon_support::AcpClient::spawn(&test)).collect();
    let mut pids = Vec::new();
    for client in &clients {
        client.initialize().await;
        let status = client.request(kestrel_daemon::DAEMON_STATUS, json!({})).await.unwrap();
        pids.push(status["pid"].as_u64().unwrap());
    }
    assert!(pids.iter().all(|pid| *pid == pids[0]), "one daemon for all: {pids:?}");
    let status = test.status();
    assert_eq!(status["clients"].as_u64(), Some(4 + 1), "four bridges and the status call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_daemons_stale_socket_is_replaced_by_the_next_client() {
    let test = quiet();
    assert!(test.command(&["daemon", "start"]).output().unwrap().status.success());
    let first = test.daemon_pid().unwrap();
    kill(first, libc::SIGKILL);
    eventually("the killed daemon to be gone", || !pid_alive(first) || test.daemon_pid().is_none())
        .await;
    assert!(
        test.env.home.path().join("run/daemon.sock").exists(),
        "kill -9 leaves the socket file"
    );
    let client = test.client().await;
    let status = client.request(kestrel_daemon::DAEMON_STATUS, json!({})).await.unwrap();
    assert_ne!(status["pid"].as_u64(), Some(u64::from(first)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_daemon_exits_by_itself() {
    let test = quiet().with_var("KESTREL_DAEMON_IDLE_SECS", "0.5");
    let client = test.client().await;
    let pid = test.daemon_pid().unwrap();
    // A connected client keeps it alive.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(test.daemon_pid(), Some(pid));
    let status = client.close().await;
    assert!(status.success(), "kestrel acp exits 0 when its editor closes stdin");
    eventually("the idle daemon to exit", || test.daemon_pid().is_none()).await;
    assert!(!test.env.home.path().join("run/daemon.sock").exists());
}

#[test]
fn a_bad_idle_setting_is_named() {
    let test = quiet().with_var("KESTREL_DAEMON_IDLE_SECS", "soon");
    let output = test.command(&["daemon"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("KESTREL_DAEMON_IDLE_SECS") && stderr.contains("soon"), "{stderr}");
    let test = quiet().with_var("KESTREL_WORKER_IDLE_SECS", "-3");
    let output = test.command(&["daemon"]).output().unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("KESTREL_WORKER_IDLE_SECS"));
}

#[test]
fn a_second_foreground_daemon_refuses_to_start() {
    let test = quiet();
    assert!(test.command(&["daemon", "start"]).output().unwrap().status.success());
    let output = test.command(&["daemon"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("already running"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_errors() {
    let test = quiet();
    let client = test.client().await;
    let cwd = test.env.work_path();

    let error = client.load("0000-no-such-session", &cwd).await.unwrap_err();
    assert_eq!(error.code, RpcError::RESOURCE_NOT_FOUND);
    assert!(error.message.contains("no session 0000-no-such-session"), "{error}");

    let error = client.load("../../etc/passwd", &cwd).await.unwrap_err();
    assert_eq!(error.code, RpcError::INVALID_PARAMS, "{error}");

    let prompt = json!({"sessionId": "not-open", "prompt": [{"type": "text", "text": "hi"}]});
    let error = client.request("session/prompt", prompt).await.unwrap_err();
    assert_eq!(error.code, RpcError::RESOURCE_NOT_FOUND);
    assert!(error.message.contains("session/load"), "says what to do: {error}");

    let error = client.request("session/new", json!({"mcpServers": []})).await.unwrap_err();
    assert_eq!(error.code, RpcError::INVALID_PARAMS);
    assert!(error.message.contains("cwd"), "{error}");

    let error = client.request("session/prompt", json!({"prompt": []})).await.unwrap_err();
    assert_eq!(error.code, RpcError::METHOD_NOT_FOUND, "no sessionId: not routable: {error}");

    let error = client.request("_kestrel/nonsense", json!({})).await.unwrap_err();
    assert_eq!(error.code, RpcError::METHOD_NOT_FOUND);

    let error = client.request(kestrel_daemon::SESSION_DETACH, json!({})).await.unwrap_err();
    assert_eq!(error.code, RpcError::INVALID_PARAMS);

    let error = client.request("initialize", json!({"clientCapabilities": 3})).await.unwrap_err();
    assert_eq!(error.code, RpcError::INVALID_PARAMS);
    assert!(error.message.contains("invalid initialize params"), "{error}");
}

#[test]
fn a_home_too_long_for_a_socket_path_gets_a_short_private_socket() {
    let test = quiet();
    let long = test.env.home.path().join("h".repeat(60)).join("o".repeat(60));
    std::fs::create_dir_all(&long).unwrap();
    std::fs::copy(test.env.home.path().join("config.toml"), long.join("config.toml")).unwrap();
    let run = |args: &[&str]| {
        let mut command = test.command(args);
        command.env("KESTREL_HOME", &long);
        command.output().unwrap()
    };
    assert!(run(&["daemon", "start"]).status.success());
    let status: serde_json::Value =
        serde_json::from_slice(&run(&["daemon", "status", "--json"]).stdout).unwrap();
    let socket = std::path::PathBuf::from(status["socket"].as_str().unwrap());
    assert!(socket.as_os_str().len() <= 100, "{}", socket.display());
    let dir = socket.parent().unwrap();
    assert!(dir.to_string_lossy().starts_with("/tmp/kestrel-"), "{}", socket.display());
    assert_eq!(std::fs::metadata(dir).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(long.join("run/daemon.pid").exists(), "the pid file stays in the home's run/");
    assert!(run(&["daemon", "stop"]).status.success());
    assert!(!socket.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_advertises_load_and_list_and_session_list_shows_every_session() {
    let test = quiet();
    // A session made without the daemon (exec runs in-process) is listed too.
    let exec = test.command(&["exec", "say hello"]).output().unwrap();
    assert!(exec.status.success(), "{}", String::from_utf8_lossy(&exec.stderr));
    let client = daemon_support::AcpClient::spawn(&test);
    let init = client.initialize().await;
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(init["agentCapabilities"]["sessionCapabilities"]["list"], json!({}));
    let parsed: kestrel_protocol::acp::InitializeResponse = serde_json::from_value(init).unwrap();
    assert!(parsed.agent_capabilities.load_session);

    let listed = client.request("session/list", json!({})).await.unwrap();
    let sessions = listed["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{listed}");
    assert_eq!(sessions[0]["title"], "say hello");
    assert_eq!(sessions[0]["cwd"], test.env.work_path().display().to_string());
    assert_eq!(sessions[0]["_meta"]["kestrel"]["live"], false);
    let _: kestrel_protocol::acp::ListSessionsResponse =
        serde_json::from_value(listed.clone()).unwrap();

    let elsewhere = client.request("session/list", json!({"cwd": "/nowhere"})).await.unwrap();
    assert_eq!(elsewhere["sessions"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kestrel_acp_exits_when_the_daemon_dies_while_the_editor_keeps_stdin_open() {
    let test = quiet();
    let client = daemon_support::AcpClient::spawn(&test);
    client.initialize().await;
    let bridge = client.pid().expect("kestrel acp runs");
    let daemon = test.daemon_pid().expect("the client started a daemon");
    kill(daemon, libc::SIGKILL);
    // The editor still holds stdin open: the bridge must notice the daemon is gone.
    // (The bridge is this test's child: once it exits it is a zombie until reaped.)
    let exited = || {
        std::fs::read_to_string(format!("/proc/{bridge}/stat"))
            .map_or(true, |stat| stat.split(") ").nth(1).is_some_and(|rest| rest.starts_with('Z')))
    };
    eventually("kestrel acp exits after its daemon died", exited).await;
    test.stop_daemon();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_arriving_while_the_daemon_stops_is_served_by_a_new_one() {
    // A command that ignores SIGTERM keeps its worker (and so the daemon) stopping a while.
    let test = DaemonTest::new(Script::new([
        Step::tool_call("shell", json!({"command": "trap '' TERM; sleep 30"})),
        Step::text("unreachable"),
    ]));
    let mut client = test.client().await;
    let cwd = test.env.work_path();
    let session = client.new_session(&cwd).await;
    client.set_mode(&session, "yolo").await;
    let _turn = client.prompt(&session, "hold on");
    client.wait_update(&session, "tool_call").await;
    let old = test.daemon_pid().unwrap();

    let mut stop = test.command(&["daemon", "stop"]).spawn().unwrap();
    let log_path = test.env.home.path().join("logs/daemon.log");
    eventually("the stop to be requested", || {
        std::fs::read_to_string(&log_path).is_ok_and(|log| log.contains("stop requested"))
    })
    .await;
    // Connects while the old daemon still winds down; served by a new daemon.
    let late = test.client().await;
    let answer = late.request("session/list", json!({})).await;
    assert!(answer.is_ok(), "{answer:?}");
    assert_ne!(test.daemon_pid(), Some(old));
    let _ = stop.wait();
}
