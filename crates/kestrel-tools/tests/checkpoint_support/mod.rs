//! Checkpoint tests' harness: a session record in a temp `$KESTREL_HOME`, a workspace in
//! a temp dir, and tool calls run as the session runs them (capture, call, record the
//! checkpoint). Every wait is bounded.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use kestrel_protocol::{
    Mode, RECORD_VERSION, RecordEntry, RecordHeader, RecordItem, SessionId, Timestamp,
};
use kestrel_store::{KestrelHome, SessionRecord};
use kestrel_tools::checkpoint::{
    Capture, CheckpointFiles, Checkpointer, UndoError, UndoOptions, UndoReport, undo,
};
use kestrel_tools::{ToolContext, builtin_tools};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The bound on a capture or a checkpoint (a snapshot of a large tree takes a while).
const SNAPSHOT_WAIT: Duration = Duration::from_secs(120);
/// The bound on one tool call.
const CALL_WAIT: Duration = Duration::from_secs(60);

/// A session with its record, checkpointer and a tool context on its workspace.
pub struct Fixture {
    pub home_dir: tempfile::TempDir,
    _work: tempfile::TempDir,
    pub home: KestrelHome,
    pub record: SessionRecord,
    pub checkpointer: Checkpointer,
    pub context: ToolContext,
    calls: u32,
}

/// A record header for a session in `cwd`.
pub fn header(cwd: &Path) -> RecordHeader {
    RecordHeader {
        id: SessionId::new(),
        version: RECORD_VERSION,
        created_at: Timestamp::now(),
        cwd: cwd.display().to_string(),
        provider: "p".into(),
        model: "m".into(),
        parent_id: None,
        forked_from: None,
        swarm: None,
        repository: None,
    }
}

impl Fixture {
    /// A fresh session on an empty workspace, its tools in `mode`.
    pub fn new(mode: Mode) -> Self {
        let home_dir = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let home = KestrelHome::at(home_dir.path());
        let record = SessionRecord::create(&home, header(work.path())).unwrap();
        let checkpointer = Checkpointer::new(&home, record.id().as_str());
        let root = work.path().canonicalize().unwrap();
        let context = common::context(&root, mode);
        Self { home_dir, _work: work, home, record, checkpointer, context, calls: 0 }
    }

    /// The workspace (the tools' cwd).
    pub fn root(&self) -> PathBuf {
        self.context.cwd.clone()
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.root().join(relative)
    }

    /// Writes a file of the workspace, creating its parents (as the user would).
    pub fn write(&self, relative: &str, bytes: impl AsRef<[u8]>) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    pub fn read(&self, relative: &str) -> Option<String> {
        std::fs::read_to_string(self.path(relative)).ok()
    }

    /// This session's directory under `$KESTREL_HOME/checkpoints`.
    pub fn checkpoint_dir(&self) -> PathBuf {
        self.home_dir.path().join("checkpoints").join(self.record.id().as_str())
    }

    /// Where the content with this hash is saved.
    pub fn blob(&self, sha256: &str) -> PathBuf {
        self.checkpoint_dir().join("blobs").join(&sha256[..2]).join(&sha256[2..])
    }

    /// Records the start of a turn.
    pub fn turn(&mut self) {
        self.record.append(&RecordEntry::now(RecordItem::TurnStarted {})).unwrap();
    }

    /// Runs one call as the session does: capture, call, record the checkpoint. The call
    /// must succeed; `None` when it changed nothing.
    pub async fn call(
        &mut self,
        tool: &str,
        arguments: serde_json::Value,
    ) -> Option<CheckpointFiles> {
        let arguments = arguments.to_string();
        let capture = self.capture(tool, &arguments).await;
        self.finish(tool, &arguments, capture).await
    }

    /// Runs one shell command as the session does, which must be snapshotted.
    pub async fn shell(&mut self, command: &str) -> Option<CheckpointFiles> {
        let arguments = json!({ "command": command }).to_string();
        let capture = self.capture("shell", &arguments).await;
        assert!(matches!(capture, Capture::Snapshot(_)), "{capture:?}");
        self.finish("shell", &arguments, capture).await
    }

    async fn capture(&mut self, tool: &str, arguments: &str) -> Capture {
        let before = self.checkpointer.before_call(tool, arguments, &self.context);
        tokio::time::timeout(SNAPSHOT_WAIT, before).await.unwrap().unwrap()
    }

    async fn finish(
        &mut self,
        tool: &str,
        arguments: &str,
        capture: Capture,
    ) -> Option<CheckpointFiles> {
        self.calls += 1;
        let registry = builtin_tools();
        let call = registry.call(tool, arguments, &self.context);
        let output = tokio::time::timeout(CALL_WAIT, call).await.unwrap();
        assert!(!output.is_error, "{tool} {arguments}: {}", output.content);
        let call_id = format!("call_{}", self.calls);
        let after = self.checkpointer.after_call(capture, &call_id);
        let item = tokio::time::timeout(SNAPSHOT_WAIT, after).await.unwrap()?;
        self.record.append(&RecordEntry::now(item.clone())).unwrap();
        match item {
            RecordItem::Checkpoint { files } => Some(serde_json::from_value(files).unwrap()),
            other => panic!("expected a checkpoint, got {other:?}"),
        }
    }

    /// Undoes the last `turns` turns.
    pub fn undo(&mut self, turns: usize, force: bool) -> Result<UndoReport, UndoError> {
        undo(&self.home, &mut self.record, &UndoOptions { turns, force, dry_run: false })
    }

    /// The record's items, as written.
    pub fn items(&self) -> Vec<RecordItem> {
        kestrel_store::read_record(self.record.path())
            .unwrap()
            .entries
            .into_iter()
            .map(|entry| entry.item)
            .collect()
    }

    /// The paths of `files`, relative to the workspace, sorted.
    pub fn relative(&self, files: &CheckpointFiles) -> Vec<String> {
        let root = self.root();
        let mut paths: Vec<String> = files
            .changes
            .iter()
            .map(|change| change.path.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        paths.sort();
        paths
    }

    /// Makes the workspace a repository with one commit of `tracked.txt`.
    pub fn repository(&self) {
        let root = self.root();
        git(&root, &["init", "-q"]);
        self.write("tracked.txt", "tracked\n");
        git(&root, &["add", "."]);
        git(&root, &["commit", "-q", "-m", "init"]);
    }
}

/// Runs git in `dir` (ignoring any repository the test runner is in); it must succeed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}
