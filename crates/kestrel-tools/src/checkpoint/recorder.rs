//! The session's side of checkpoints: around each call that may change files, capture
//! what it may change before and turn the difference into a `checkpoint` item after.

use super::blobs::BlobStore;
use super::snapshot::{Prior, Snapshot, Snapshotter, blob_ids};
use super::state::{self, FileState};
use super::{CHECKPOINT_VERSION, CheckpointError, CheckpointFiles, PathChange, session_dir};
use crate::ToolContext;
use crate::permission::written_paths;
use kestrel_protocol::{Mode, Notice, NoticeKind, RecordItem};
use kestrel_store::KestrelHome;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// What was captured before a call.
#[derive(Debug)]
pub enum Capture {
    /// The call cannot change files (read-only mode, a file tool that will refuse).
    Nothing,
    /// The paths a file tool will write, with their saved states.
    Files(Vec<(PathBuf, FileState)>),
    /// A snapshot of the workspace.
    Snapshot(Snapshot),
    /// No snapshot could be taken: the call's changes will not be undoable.
    Uncovered(String),
}

impl Capture {
    /// For a call with no snapshot: the line its tool result ends with, so that the
    /// model (and whoever reads the transcript) knows undo cannot restore what it did.
    pub fn uncovered_note(&self) -> Option<String> {
        match self {
            Capture::Uncovered(reason) => Some(format!(
                "[kestrel: no checkpoint could be made before this call ({reason}); undo cannot \
                 restore what it changed]"
            )),
            Capture::Nothing | Capture::Files(_) | Capture::Snapshot(_) => None,
        }
    }
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
    /// The last snapshot taken after a call, and the files file tools changed since:
    /// the next snapshot before a call tells what changed in between, not by a call.
    last_after: Option<Snapshot>,
    tool_changed: HashSet<PathBuf>,
    /// A notice about such changes, for [`Checkpointer::take_notice`].
    pending: Option<String>,
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
            last_after: None,
            tool_changed: HashSet::new(),
            pending: None,
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
        // Through symlinks: the file tools write the file a link points to. A file not
        // there yet is named by its real parent, as capture and undo refuse symlinks on
        // the way.
        let paths: Vec<PathBuf> = written_paths(tool, &arguments, &context.cwd)
            .into_iter()
            .map(|path| crate::workspace::resolve_existing(&crate::workspace::normalize(&path)))
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
        // Every shell command gets a snapshot, even one judged read-only: a misjudged
        // command must not lose work, and a snapshot of an unchanged tree is a walk.
        Ok(match self.snapshot(&context.workspace).await {
            Ok(tree) => {
                self.note_changes_between_calls(&tree);
                Capture::Snapshot(tree)
            }
            Err(reason) => Capture::Uncovered(reason),
        })
    }

    /// A notice (at most one, taken once) that files changed between two calls, not by
    /// one: a background process a command left running, or someone else. Undo does not
    /// restore those changes; the notice says so, so they do not go unseen.
    pub fn take_notice(&mut self) -> Option<RecordItem> {
        self.pending.take().map(|message| RecordItem::Notice {
            notice: Notice { kind: NoticeKind::Info, message, model: None, mode: None },
        })
    }

    fn note_changes_between_calls(&mut self, now: &Snapshot) {
        let Some(last) = self.last_after.take() else { return };
        let tool_changed = std::mem::take(&mut self.tool_changed);
        let Some(Ok(snapshotter)) = &self.snapshotter else { return };
        let paths: Vec<PathBuf> = snapshotter
            .changes(&last, now)
            .into_iter()
            .map(|change| change.path)
            .filter(|path| !tool_changed.contains(path))
            .collect();
        if paths.is_empty() {
            return;
        }
        const SHOWN: usize = 10;
        let mut list: Vec<String> =
            paths.iter().take(SHOWN).map(|path| path.display().to_string()).collect();
        if paths.len() > SHOWN {
            list.push(format!("and {} more", paths.len() - SHOWN));
        }
        self.pending = Some(format!(
            "files changed between tool calls, not by one (a background process a command \
             left running, or someone else): {}; undo does not restore these changes",
            list.join(", ")
        ));
    }

    /// After the call: the record item describing what it changed (a `checkpoint`), a
    /// notice when its changes could not be captured, or nothing when nothing changed.
    pub async fn after_call(&mut self, capture: Capture, call_id: &str) -> Option<RecordItem> {
        let changes = match capture {
            Capture::Nothing => return None,
            Capture::Uncovered(reason) => {
                // What this call changed is unknown: not "between calls" either.
                self.last_after = None;
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
                    Ok(changes) => {
                        if self.last_after.is_some() {
                            self.tool_changed.extend(changes.iter().map(|c| c.path.clone()));
                        }
                        changes
                    }
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

    async fn snapshot(&mut self, workspace: &Path) -> Result<Snapshot, String> {
        if self.snapshotter.is_none() {
            self.snapshotter = Some(Snapshotter::open(workspace, &self.dir, &self.home).await);
        }
        match &mut self.snapshotter {
            Some(Ok(snapshotter)) => snapshotter.take().await,
            Some(Err(reason)) => Err(reason.clone()),
            None => Err("no snapshot".into()),
        }
    }

    /// Compares the workspace now with snapshot `before`, saving the old content of
    /// every file that changed.
    async fn snapshot_changes(&mut self, before: &Snapshot) -> Result<Vec<PathChange>, String> {
        self.last_after = None;
        let Some(Ok(snapshotter)) = &mut self.snapshotter else {
            return Err("no snapshot".into());
        };
        let after = snapshotter.take().await?;
        let changes = snapshotter.changes(before, &after);
        self.last_after = Some(after);
        self.tool_changed.clear();
        // Copy the old content out of the snapshot store, all in one read.
        let mut saved: HashMap<String, Result<String, String>> = HashMap::new();
        let blobs = self.blobs.clone();
        snapshotter
            .read_blobs(&blob_ids(&changes), |id, content| {
                let sha256 = content.and_then(|content| {
                    blobs.put(&content).map_err(|error| format!("cannot save it: {error}"))
                });
                saved.insert(id.to_string(), sha256);
                Ok(())
            })
            .await?;
        let mut found = Vec::new();
        for change in changes {
            let before = match change.before {
                Prior::Absent => FileState::Absent,
                Prior::Link { target } => FileState::Symlink { target },
                Prior::Unkept { reason } => FileState::Unsaved { reason },
                Prior::Blob { id, mode } => match saved.get(&id) {
                    Some(Ok(sha256)) => FileState::File { sha256: sha256.clone(), mode },
                    Some(Err(reason)) => FileState::Unsaved { reason: reason.clone() },
                    None => FileState::Unsaved { reason: "missing from the snapshot".into() },
                },
            };
            found.push((change.path, before));
        }
        let changes = tokio::task::spawn_blocking(move || {
            found
                .into_iter()
                .map(|(path, before)| {
                    let after = state::capture(&path, None).unwrap_or_else(|error| {
                        FileState::Unsaved { reason: format!("unreadable: {error}") }
                    });
                    PathChange { path, before, after }
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|error| error.to_string())?;
        Ok(changes)
    }
}

fn notice(message: String) -> RecordItem {
    RecordItem::Notice {
        notice: Notice { kind: NoticeKind::Error, message, model: None, mode: None },
    }
}
