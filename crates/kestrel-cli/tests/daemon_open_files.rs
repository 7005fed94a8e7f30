//! The daemon under a small open-file limit: it raises its soft limit to the hard one
//! (and says so in its log), gives its workers the limit it started with, and once
//! another worker would not fit refuses `session/new` and a `session/load` that needs a
//! worker with an error naming the limit, the count and the fix, while the sessions
//! already open keep working (prompts answered, a crashed worker restarted).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use daemon_support::{DaemonTest, kill};
use kestrel_testkit::{Script, Step};
use serde_json::json;
use std::os::unix::process::CommandExt;

const SOFT: u64 = 40;
const HARD: u64 = 64;

/// `kestrel daemon start` with RLIMIT_NOFILE at SOFT:HARD: the daemon it starts
/// (detached) inherits it.
fn start_daemon_under_low_limit(test: &DaemonTest) {
    let mut command = test.command(&["daemon", "start"]);
    // SAFETY: setrlimit is async-signal-safe and touches only the struct passed.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: SOFT, rlim_max: HARD };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// "Max open files" of `pid`: (soft, hard).
fn open_files_limit(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|line| line.starts_with("Max open files")).unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[3].to_owned(), fields[4].to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_open_file_limit_new_sessions_are_refused_and_open_ones_keep_working() {
    let test = DaemonTest::new(Script::new([
        Step::text("from exec"),
        Step::text("still answering"),
        Step::text("after the restart"),
    ]));
    let cwd = test.env.work_path();
    // A session on disk that no daemon runs: its load will need a worker.
    let exec = test.command(&["exec", "--json", "say something"]).output().unwrap();
    assert!(exec.status.success(), "{}", String::from_utf8_lossy(&exec.stderr));
    let stored = String::from_utf8_lossy(&exec.stdout)
        .lines()
        .find_map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).ok()?;
            event["session_id"].as_str().map(str::to_owned)
        })
        .expect("exec names its session");

    start_daemon_under_low_limit(&test);
    let daemon = test.daemon_pid().unwrap();
    assert_eq!(open_files_limit(daemon), (HARD.to_string(), HARD.to_string()));
    let log = std::fs::read_to_string(test.env.home.path().join("logs/daemon.log")).unwrap();
    assert!(log.contains(&format!("soft limit raised from {SOFT} to {HARD}")), "{log}");

    let client = test.client().await;
    let mut sessions = Vec::new();
    let refusal = loop {
        assert!(sessions.len() < HARD as usize, "no refusal under a limit of {HARD}");
        match client.request("session/new", json!({"cwd": cwd, "mcpServers": []})).await {
            Ok(answer) => sessions.push(answer["sessionId"].as_str().unwrap().to_owned()),
            Err(error) => break error,
        }
    };
    let message = refusal.message;
    assert!(sessions.len() >= 3, "some sessions fit: {} ({message})", sessions.len());
    assert!(message.contains(&format!("its limit is {HARD}")), "{message}");
    assert!(message.contains(&format!("{} live sessions", sessions.len())), "{message}");
    assert!(message.contains("ulimit -n") && message.contains("LimitNOFILE"), "{message}");
    assert!(message.contains(&format!("raised from {SOFT}")), "{message}");

    // A load that needs a worker is refused the same way.
    let load = client.load(&stored, &cwd).await.unwrap_err();
    assert!(load.message.contains(&format!("its limit is {HARD}")), "{}", load.message);

    // The open sessions are unaffected: the first answers, a crashed one restarts.
    let answer = client.prompt(&sessions[0], "still there?").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    let worker = test.wait_worker_pid(&sessions[1], None);
    assert_eq!(
        open_files_limit(worker as u32).0,
        SOFT.to_string(),
        "workers get the limit the daemon started with"
    );
    kill(worker as u32, libc::SIGKILL);
    test.wait_worker_pid(&sessions[1], Some(worker));
    let answer = client.prompt(&sessions[1], "and you?").await.unwrap().unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    assert!(!test.status()["sessions"].as_array().unwrap().is_empty(), "status still answers");
}
