//! `kestrel acp` driven by the official ACP TypeScript SDK (`@agentclientprotocol/sdk`,
//! pinned in tests/acp-sdk/package.json; `.ci/run` installs it with `npm ci`):
//! initialize, session/new, a prompt with a tool call and a permission request, cancel,
//! session/list and session/load — the daemon, workers and scripted model all real. As a
//! plain client it receives no `_kestrel/*` notification and no `notice` (drive.mjs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod daemon_support;

use daemon_support::DaemonTest;
use kestrel_testkit::{Script, Step};
use serde_json::json;
use std::path::PathBuf;

fn sdk_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/acp-sdk")
}

#[test]
fn the_official_typescript_sdk_drives_kestrel_acp() {
    let dir = sdk_dir();
    assert!(
        dir.join("node_modules/@agentclientprotocol/sdk").exists(),
        "the pinned ACP SDK is not installed: run `npm ci --prefix tests/acp-sdk` (as .ci/run does)"
    );
    let test = DaemonTest::new(Script::new([
        Step::tool_call(
            "write_file",
            json!({"path": "sdk.txt", "content": "written through the SDK\n"}),
        ),
        Step::text("wrote sdk.txt"),
        Step::tool_call("shell", json!({"command": "sleep 30; echo too-late"})),
    ]));
    let output = test
        .command(&["--version"])
        .get_envs()
        .fold(std::process::Command::new("node"), |mut command, (name, value)| {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
            command
        })
        .arg(dir.join("drive.mjs"))
        .env("KESTREL_BIN", env!("CARGO_BIN_EXE_kestrel"))
        .env("KESTREL_TEST_CWD", test.env.work_path())
        .current_dir(test.env.work_path())
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the SDK run failed:\n{stdout}\n{stderr}");
    let findings: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(findings["ok"], true);
    assert!(findings["permissions"].as_u64() >= Some(1), "write_file asked: {findings}");
    let items = test.record_items(findings["sessionId"].as_str().unwrap());
    let cancelled = items
        .iter()
        .any(|item| item["type"] == "turn_completed" && item["stop_reason"] == "cancelled");
    assert!(cancelled, "the cancelled turn is recorded as such: {items:#?}");
}
