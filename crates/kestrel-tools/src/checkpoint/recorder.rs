//! The session's side of checkpoints: around each call that may change files, capture
//! what it may change before and turn the difference into a `checkpoint` item after.

use super::blobs::BlobStore;
use super::snapshot::{Snapshotter, TreeEntry};
use super::state::{self, FileState};
use super::{CHECKPOINT_VERSION, CheckpointError, CheckpointFiles, PathChange, session_dir};
use crate::ToolContext;
use crate::permission::{analyze, written_paths};
use kestrel_protocol::{Mode, Notice, NoticeKind, RecordItem};
use kestrel_store::KestrelHome;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// What was captured before a call.
#[derive(Debug)]
pub enum Capture {
    /// The call cannot change files (a known read-only command, read-only mode).
    Nothing,
    /// The paths a file tool will write, with their saved states.
    Files(Vec<(PathBuf, FileState)>),
    /// A snapshot of the workspace (tree id).
    Snapshot(String),
    /// No snapshot could be taken: the call's changes will not be undoable.
    Uncovered(String),
}

/// Makes one session's checkpoints.
#[derive(Debug)]
pub struct Checkpointer {
    session: String,
    dir: PathBuf,
    home: PathBuf,
    blobs: BlobStore,
    /// Opened on the first snapshot; a failure is kept so it is reported, not retried.
    snapshotter: Option<Result<Snapshotter, String>>,
}

impl Checkpointer {
    /// The checkpointer of session `session`, keeping its files under
    /// `$KESTREL_HOME/checkpoints/<session>/`. Nothing is created until needed.
    pub fn new(home: &KestrelHome, session: &str) -> Self {
        let dir = session_dir(home, session);
        Self {
            session: session.to_string(),
            blobs: BlobStore::new(&dir),
            dir,
            home: home.root().to_path_buf(),
            snapshotter: None,
        }
    }

    /// Before a call of `tool` that is not read-only: saves what it may change.
    /// `context` is the one the call will run with.
    ///
    /// Fails when a file the call names cannot be saved; the call must then not run,
    /// so that nothing it changes is lost.
    pub async fn before_call(
        &mut self,
        tool: &str,
        arguments: &str,
        context: &ToolContext,
    ) -> Result<Capture, CheckpointError> {
        if context.mode == Mode::ReadOnly {
            return Ok(Capture::Nothing);
        }
        let arguments: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
        // Through symlinks: the file tools write the file a link points to.
        let paths: Vec<PathBuf> = written_paths(tool, &arguments, &context.cwd)
            .into_iter()
            .map(|path| path.canonicalize().unwrap_or(path))
            .collect();
        if !paths.is_empty() {
            let blobs = self.blobs.clone();
            let saved = tokio::task::spawn_blocking(move || {
                paths
                    .into_iter()
                    .map(|path| match state::capture(&path, Some(&blobs)) {
                        Ok(state) => Ok((path, state)),
                        Err(error) => Err(CheckpointError::save(&path, error)),
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .await
            .map_err(|error| CheckpointError::save(&self.dir, std::io::Error::other(error)))??;
            return Ok(Capture::Files(saved));
        }
        if matches!(tool, "write_file" | "edit_file" | "apply_patch") {
            // Arguments the tool will refuse: nothing will change.
            return Ok(Capture::Nothing);
        }
        if tool == "shell" {
            let command = arguments.get("command").and_then(Value::as_str).unwrap_or_default();
            let dir = match arguments.get("workdir").and_then(Value::as_str) {
                Some(dir) => context.cwd.join(dir),
                None => context.cwd.clone(),
            };
            if analyze(command, &dir).is_read_only() {
                return Ok(Capture::Nothing);
            }
        }
        Ok(match self.snapshot(&context.workspace).await {
            Ok(tree) => Capture::Snapshot(tree),
            Err(reason) => Capture::Uncovered(reason),
        })
    }

    /// After the call: the record item describing what it changed (a `checkpoint`), a
    /// notice when its changes could not be captured, or nothing when nothing changed.
    pub async fn after_call(&mut self, capture: Capture, call_id: &str) -> Option<RecordItem> {
        let changes = match capture {
            Capture::Nothing => return None,
            Capture::Uncovered(reason) => {
                return Some(notice(format!(
                    "no checkpoint for call {call_id}: {reason}; undo cannot restore what it changed"
                )));
            }
            Capture::Files(saved) => {
                let found = tokio::task::spawn_blocking(move || {
                    saved
                        .into_iter()
                        .filter_map(|(path, before)| {
                            let after = state::capture(&path, None).unwrap_or_else(|error| {
                                FileState::Unsaved { reason: format!("unreadable: {error}") }
                            });
                            (after != before).then_some(PathChange { path, before, after })
                        })
                        .collect::<Vec<_>>()
                })
                .await;
                match found {
                    Ok(changes) => changes,
                    Err(error) => {
                        return Some(notice(format!("no checkpoint for call {call_id}: {error}")));
                    }
                }
            }
            Capture::Snapshot(before) => match self.snapshot_changes(&before).await {
                Ok(changes) => changes,
                Err(reason) => {
                    return Some(notice(format!(
                        "no checkpoint for call {call_id}: {reason}; undo cannot restore what it changed"
                    )));
                }
            },
        };
        if changes.is_empty() {
            return None;
        }
        let files = CheckpointFiles {
            version: CHECKPOINT_VERSION,
            session: self.session.clone(),
            call_id: Some(call_id.to_string()),
            undo: None,
            changes,
        };
        match serde_json::to_value(files) {
            Ok(files) => Some(RecordItem::Checkpoint { files }),
            Err(error) => Some(notice(format!("no checkpoint for call {call_id}: {error}"))),
        }
    }

    async fn snapshot(&mut self, workspace: &Path) -> Result<String, String> {
        if self.snapshotter.is_none() {
            self.snapshotter = Some(Snapshotter::open(workspace, &self.dir, &self.home).await);
        }
        match &self.snapshotter {
            Some(Ok(snapshotter)) => snapshotter.tree().await,
            Some(Err(reason)) => Err(reason.clone()),
            None => Err("no snapshot".into()),
        }
    }

    /// Compares the workspace now with snapshot `before`, saving the old content of
    /// every file that changed.
    async fn snapshot_changes(&mut self, before: &str) -> Result<Vec<PathChange>, String> {
        let Some(Ok(snapshotter)) = &self.snapshotter else {
            return Err("no snapshot".into());
        };
        let after = snapshotter.tree().await?;
        let mut changes = Vec::new();
        for change in snapshotter.changes(before, &after).await? {
            let before = match change.before {
                None => FileState::Absent,
                Some(TreeEntry { mode, blob }) => {
                    let content = snapshotter.blob(&blob).await?;
                    if mode == 0o120000 {
                        FileState::Symlink { target: bytes_to_path(&content) }
                    } else {
                        let sha256 = self.blobs.put(&content).map_err(|error| {
                            format!("cannot save {}: {error}", change.path.display())
                        })?;
                        FileState::File {
                            sha256,
                            mode: if mode & 0o111 != 0 { 0o755 } else { 0o644 },
                        }
                    }
                }
            };
            let after = state::capture(&change.path, None).unwrap_or_else(|error| {
                FileState::Unsaved { reason: format!("unreadable: {error}") }
            });
            changes.push(PathChange { path: change.path, before, after });
        }
        Ok(changes)
    }
}

fn notice(message: String) -> RecordItem {
    RecordItem::Notice {
        notice: Notice { kind: NoticeKind::Error, message, model: None, mode: None },
    }
}

#[cfg(unix)]
fn bytes_to_path(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

#[cfg(not(unix))]
fn bytes_to_path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}
