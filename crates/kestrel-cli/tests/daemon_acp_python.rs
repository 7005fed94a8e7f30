//! `kestrel acp` driven by a second, independent ACP client implementation: the Python
//! package `agent-client-protocol` (pinned in tests/acp-py/requirements.txt, speaking
//! protocol v1; `scripts/test` installs it into tests/acp-py/.venv). As a plain editor
//! (no `session.notices`): initialize, session/new, a prompt with a tool call and a
//! permission request, cancel, session/list and session/load — and it receives no
//! `_kestrel/*` notification and no `notice` update. The daemon, workers and scripted
//! model are all real.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use daemon_support::DaemonTest;
use kestrel_testkit::{Script, Step};
use serde_json::json;
use std::path::PathBuf;

fn python() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/acp-py/.venv/bin/python")
}

#[test]
fn the_python_acp_client_drives_kestrel_acp_and_hears_standard_acp_only() {
    let python = python();
    assert!(
        python.exists(),
        "the pinned Python ACP client is not installed: run scripts/test (it makes tests/acp-py/.venv)"
    );
    let test = DaemonTest::new(Script::new([
        Step::tool_call(
            "write_file",
            json!({"path": "py.txt", "content": "written through Python\n"}),
        ),
        Step::text("wrote py.txt"),
        Step::tool_call("shell", json!({"command": "sleep 30; echo too-late"})),
    ]));
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/acp-py/drive.py");
    let mut command = std::process::Command::new(&python);
    // The same environment as the test's own `kestrel` runs (home, model, daemon idle).
    for (name, value) in test.command(&["--version"]).get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let output = command
        .arg(driver)
        .env("KESTREL_BIN", env!("CARGO_BIN_EXE_kestrel"))
        .env("KESTREL_TEST_CWD", test.env.work_path())
        .current_dir(test.env.work_path())
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the Python client's run failed:\n{stdout}\n{stderr}");
    let findings: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(findings["ok"], true);
    assert_eq!(findings["permissions"], 1, "write_file asked: {findings}");
    assert_eq!(findings["extensions"], json!([]), "no _kestrel/* to a plain client: {findings}");
    assert_eq!(findings["notices"], json!([]), "no notice to a plain client: {findings}");
    let items = test.record_items(findings["sessionId"].as_str().unwrap());
    let cancelled = items
        .iter()
        .any(|item| item["type"] == "turn_completed" && item["stop_reason"] == "cancelled");
    assert!(cancelled, "the cancelled turn is recorded as such: {items:#?}");
}
