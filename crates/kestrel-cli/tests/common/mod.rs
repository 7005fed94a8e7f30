//! Shared set-up for end-to-end tests: a temp $KESTREL_HOME and workspace, a scripted
//! model server, and the real `kestrel` binary run against them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use kestrel_testkit::{LoggedRequest, Script, ScriptedServer};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const API_KEY_VAR: &str = "KESTREL_TEST_SCRIPTED_KEY";

/// Which wire API the scripted provider speaks.
#[derive(Debug, Clone, Copy)]
pub enum Wire {
    Chat,
    Responses,
    Anthropic,
}

impl Wire {
    pub const ALL: [Wire; 3] = [Wire::Chat, Wire::Responses, Wire::Anthropic];

    pub fn name(self) -> &'static str {
        match self {
            Wire::Chat => "chat",
            Wire::Responses => "responses",
            Wire::Anthropic => "anthropic",
        }
    }
}

pub struct TestEnv {
    pub home: tempfile::TempDir,
    pub work: tempfile::TempDir,
    pub server: ScriptedServer,
}

impl TestEnv {
    /// A home whose config points the `scripted` provider at a fresh server.
    pub fn new(wire: Wire, script: Script) -> Self {
        let server = ScriptedServer::start(script).expect("scripted server starts");
        let env = Self::with_server(server);
        env.write_config(&format!(
            "model = \"scripted/test-model\"\n\n[providers.scripted]\nbase_url = \"{}\"\nwire_api = \"{}\"\napi_key_env = \"{API_KEY_VAR}\"\nrequest_max_retries = 2\n",
            env.server.base_url(),
            wire.name()
        ));
        env
    }

    pub fn with_server(server: ScriptedServer) -> Self {
        let home = tempfile::tempdir().expect("temp home");
        let work = tempfile::tempdir().expect("temp workspace");
        Self { home, work, server }
    }

    pub fn write_config(&self, text: &str) {
        std::fs::write(self.home.path().join("config.toml"), text).expect("config written");
    }

    pub fn work_path(&self) -> PathBuf {
        self.work.path().canonicalize().expect("workspace path")
    }

    /// `kestrel ARGS` in the workspace, with the test key set; stdin is empty.
    pub fn kestrel(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("kestrel runs")
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kestrel"));
        command
            .args(args)
            .current_dir(self.work.path())
            .env("KESTREL_HOME", self.home.path())
            // Tests reach loopback only: no catalog fetch from the internet.
            .env("KESTREL_CATALOG_URL", "off")
            .env(API_KEY_VAR, "sk-test-secret-key")
            .env_remove("KESTREL_MODEL")
            .env_remove("KESTREL_MODE")
            .env_remove("HTTPS_PROXY")
            .env_remove("HTTP_PROXY")
            .env_remove("https_proxy")
            .env_remove("http_proxy")
            .stdin(Stdio::null());
        command
    }

    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.server.requests()
    }

    /// Every session record file under the home.
    pub fn records(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        collect_jsonl(&self.home.path().join("sessions"), &mut found);
        found.retain(|path| path.file_name().is_some_and(|name| name != "index.jsonl"));
        found.sort();
        found
    }

    /// The items (header excluded) of the only record, as JSON values.
    pub fn record_items(&self) -> Vec<serde_json::Value> {
        let records = self.records();
        assert_eq!(records.len(), 1, "expected one record, found {records:?}");
        read_lines(&records[0]).into_iter().skip(1).collect()
    }

    /// The tool results of the only record, in order: (output, is_error).
    pub fn tool_results(&self) -> Vec<(String, bool)> {
        self.record_items()
            .iter()
            .filter(|item| item["type"] == "tool_result")
            .map(|item| {
                let output = item["output"].as_str().unwrap_or_default().to_string();
                (output, item["is_error"] == serde_json::Value::Bool(true))
            })
            .collect()
    }
}

pub fn read_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .expect("record readable")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect()
}

fn collect_jsonl(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_jsonl(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "jsonl") {
            found.push(path);
        }
    }
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The text of the whole request body, to look for tool outputs in it.
pub fn body_text(request: &LoggedRequest) -> String {
    request.body.to_string()
}
