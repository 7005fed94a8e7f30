//! Checks a whole patch against the file system and computes every resulting file in
//! memory before anything is written. Operations see the effects of earlier ones in
//! the same patch (add then update, delete then add), as if applied in order.

use super::error::{FileAction, PatchError};
use super::parser::{FileOperation, Patch, parse_patch};
use super::update::update_text;
use super::write::{Write, write_all};
use crate::ChangeText;
use crate::workspace::{WriteScope, normalize};
use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Parses `text` and applies it under `root` (relative paths join it; absolute
/// paths and `..` are taken as written: use [`apply_patch_with`] to confine them).
///
/// Atomic: every section is checked and every new file computed first; an error
/// before the writes leaves the tree untouched, and a failed write restores the
/// files already written (see [`PatchError::WriteFailed`]).
pub fn apply_patch(root: &Path, text: &str) -> Result<PatchSummary, PatchError> {
    apply_patch_with(text, |path| Ok(root.join(path)))
}

/// Like [`apply_patch`], with `resolve` turning each path of the patch (sources and
/// `Move to` destinations, as written) into the file to use, or refusing it with a
/// reason ([`PatchError::PathRefused`]). Every path is resolved before any write.
pub fn apply_patch_with(
    text: &str,
    resolve: impl FnMut(&str) -> Result<PathBuf, String>,
) -> Result<PatchSummary, PatchError> {
    let patch = parse_patch(text)?;
    PatchPlan::new(&patch, resolve)?.commit()
}

/// Like [`apply_patch_with`], every write kept within `scope` by the kernel (a path
/// changed into a symlink after `resolve` checked it cannot lead out).
pub(crate) fn apply_patch_beneath(
    text: &str,
    scope: &WriteScope,
    resolve: impl FnMut(&str) -> Result<PathBuf, String>,
) -> Result<PatchSummary, PatchError> {
    let patch = parse_patch(text)?;
    PatchPlan::new(&patch, resolve)?.commit_beneath(scope)
}

/// How a file changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    /// Renamed from `from` (as written in the patch), possibly also edited.
    Moved {
        from: String,
    },
}

/// One file a patch changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedFile {
    pub kind: ChangeKind,
    /// As written in the patch (the destination of a move).
    pub path: String,
    /// Where it is on disk.
    pub absolute: PathBuf,
    /// Unified diff of the change (`a/`, `b/` names, `/dev/null` for added and
    /// deleted files); `None` when the file is not UTF-8 text.
    pub diff: Option<String>,
    /// The whole text before and after; `None` when either side is not UTF-8 text.
    pub text: Option<ChangeText>,
}

/// The files a patch changes, in the order the patch first names them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PatchSummary {
    pub files: Vec<ChangedFile>,
}

impl fmt::Display for PatchSummary {
    /// One line per file: `A path`, `M path`, `D path` or `R from -> to`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, file) in self.files.iter().enumerate() {
            if index > 0 {
                f.write_str("\n")?;
            }
            match &file.kind {
                ChangeKind::Added => write!(f, "A {}", file.path)?,
                ChangeKind::Modified => write!(f, "M {}", file.path)?,
                ChangeKind::Deleted => write!(f, "D {}", file.path)?,
                ChangeKind::Moved { from } => write!(f, "R {from} -> {}", file.path)?,
            }
        }
        Ok(())
    }
}

/// What is at a path, before or after the patch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Missing,
    Directory,
    File(Vec<u8>),
}

#[derive(Debug)]
struct Entry {
    /// The path as the patch first wrote it.
    shown: String,
    path: PathBuf,
    before: State,
    after: State,
    /// Mode bits the written file gets: its own, or its source's for a move.
    permissions: Option<fs::Permissions>,
    moved_from: Option<usize>,
}

/// A checked patch with every new file computed, ready to [`commit`](Self::commit).
/// Holds the contents in memory; nothing has been written.
#[derive(Debug)]
pub struct PatchPlan {
    entries: Vec<Entry>,
}

impl PatchPlan {
    /// Resolves every path, reads the files the patch touches and applies every
    /// section in memory. Fails on a refused path, a Delete/Update source that is
    /// missing or a directory, an Add/Move destination that is a directory, an
    /// update of a non-UTF-8 file, a hunk that does not apply, or a read error.
    pub fn new(
        patch: &Patch,
        mut resolve: impl FnMut(&str) -> Result<PathBuf, String>,
    ) -> Result<Self, PatchError> {
        let mut plan =
            Planner { entries: Vec::new(), index: HashMap::new(), resolve: &mut resolve };
        for operation in &patch.operations {
            plan.operation(operation)?;
        }
        Ok(PatchPlan { entries: plan.entries })
    }

    /// What [`commit`](Self::commit) will change, with diffs.
    pub fn summary(&self) -> PatchSummary {
        let files = self.entries.iter().enumerate().filter_map(|(index, entry)| {
            let kind = self.kind(index)?;
            let (old, old_name) = match &kind {
                ChangeKind::Moved { from } => {
                    let source = entry.moved_from.and_then(|source| self.entries.get(source));
                    (source.map_or(&State::Missing, |source| &source.before), format!("a/{from}"))
                }
                ChangeKind::Added => (&State::Missing, "/dev/null".to_string()),
                ChangeKind::Modified | ChangeKind::Deleted => {
                    (&entry.before, format!("a/{}", entry.shown))
                }
            };
            let new_name = match kind {
                ChangeKind::Deleted => "/dev/null".to_string(),
                ChangeKind::Added | ChangeKind::Modified | ChangeKind::Moved { .. } => {
                    format!("b/{}", entry.shown)
                }
            };
            Some(ChangedFile {
                diff: unified_diff(old, &entry.after, &old_name, &new_name),
                text: change_text(old, &entry.after),
                kind,
                path: entry.shown.clone(),
                absolute: entry.path.clone(),
            })
        });
        PatchSummary { files: files.collect() }
    }

    /// Writes the plan: removals, then each new file through a temporary file renamed
    /// into place. On a failed step the steps before it are undone and
    /// [`PatchError::WriteFailed`] says whether that fully worked.
    pub fn commit(self) -> Result<PatchSummary, PatchError> {
        self.commit_beneath(&WriteScope::Anywhere)
    }

    fn commit_beneath(self, scope: &WriteScope) -> Result<PatchSummary, PatchError> {
        let summary = self.summary();
        let mut removals = Vec::new();
        let mut writes = Vec::new();
        for entry in &self.entries {
            let previous = match &entry.before {
                State::File(content) => Some(content.as_slice()),
                State::Missing | State::Directory => None,
            };
            match &entry.after {
                State::Missing if previous.is_some() => removals.push(Write {
                    shown: &entry.shown,
                    path: &entry.path,
                    content: None,
                    previous,
                    permissions: entry.permissions.as_ref(),
                }),
                State::File(content) if previous != Some(content.as_slice()) => {
                    writes.push(Write {
                        shown: &entry.shown,
                        path: &entry.path,
                        content: Some(content.as_slice()),
                        previous,
                        permissions: entry.permissions.as_ref(),
                    })
                }
                State::Missing | State::Directory | State::File(_) => {}
            }
        }
        removals.extend(writes);
        write_all(scope, &removals)?;
        Ok(summary)
    }

    fn kind(&self, index: usize) -> Option<ChangeKind> {
        let entry = &self.entries[index];
        let moved_from =
            entry.moved_from.and_then(|source| self.entries.get(source)).filter(|source| {
                matches!(source.before, State::File(_)) && source.after == State::Missing
            });
        let file = |state: &State| matches!(state, State::File(_));
        match (file(&entry.before), file(&entry.after)) {
            (_, true) => Some(match moved_from {
                Some(source) => ChangeKind::Moved { from: source.shown.clone() },
                None if file(&entry.before) => ChangeKind::Modified,
                None => ChangeKind::Added,
            }),
            (true, false) => {
                // A source whose move target still exists shows as the move.
                let absorbed = self
                    .entries
                    .iter()
                    .any(|candidate| candidate.moved_from == Some(index) && file(&candidate.after));
                (!absorbed).then_some(ChangeKind::Deleted)
            }
            (false, false) => None,
        }
    }
}

struct Planner<'r, R> {
    entries: Vec<Entry>,
    index: HashMap<PathBuf, usize>,
    resolve: &'r mut R,
}

impl<R: FnMut(&str) -> Result<PathBuf, String>> Planner<'_, R> {
    fn operation(&mut self, operation: &FileOperation) -> Result<(), PatchError> {
        match operation {
            FileOperation::Add { path, content } => {
                let index = self.entry(path, FileAction::Add)?;
                self.refuse_directory(index, path, FileAction::Add)?;
                self.entries[index].after = State::File(content.as_bytes().to_vec());
            }
            FileOperation::Delete { path } => {
                let index = self.entry(path, FileAction::Delete)?;
                self.existing_file(index, path, FileAction::Delete)?;
                self.entries[index].after = State::Missing;
            }
            FileOperation::Update { path, move_to, hunks } => {
                let index = self.entry(path, FileAction::Update)?;
                let content = self.existing_file(index, path, FileAction::Update)?;
                let content = if hunks.is_empty() {
                    content
                } else {
                    let text = String::from_utf8(content)
                        .map_err(|_| PatchError::NotText { path: path.clone() })?;
                    update_text(path, &text, hunks)?.into_bytes()
                };
                let Some(destination) = move_to else {
                    self.entries[index].after = State::File(content);
                    return Ok(());
                };
                let target = self.entry(destination, FileAction::Move)?;
                self.refuse_directory(target, destination, FileAction::Move)?;
                if target != index {
                    self.entries[index].after = State::Missing;
                    self.entries[target].moved_from = Some(index);
                    self.entries[target].permissions = self.entries[index].permissions.clone();
                }
                self.entries[target].after = State::File(content);
            }
        }
        Ok(())
    }

    fn entry(&mut self, shown: &str, action: FileAction) -> Result<usize, PatchError> {
        let resolved = (self.resolve)(shown)
            .map_err(|reason| PatchError::PathRefused { path: shown.to_string(), reason })?;
        let path = normalize(&resolved);
        if let Some(&index) = self.index.get(&path) {
            return Ok(index);
        }
        let io_error = |source| PatchError::Io { path: shown.to_string(), action, source };
        let (before, permissions) = read_state(&path).map_err(io_error)?;
        self.entries.push(Entry {
            shown: shown.to_string(),
            path: path.clone(),
            after: before.clone(),
            before,
            permissions,
            moved_from: None,
        });
        self.index.insert(path, self.entries.len() - 1);
        Ok(self.entries.len() - 1)
    }

    fn refuse_directory(
        &self,
        index: usize,
        shown: &str,
        action: FileAction,
    ) -> Result<(), PatchError> {
        match self.entries[index].after {
            State::Directory => Err(PatchError::IsDirectory { path: shown.to_string(), action }),
            State::Missing | State::File(_) => Ok(()),
        }
    }

    /// The current content of a file that must exist.
    fn existing_file(
        &self,
        index: usize,
        shown: &str,
        action: FileAction,
    ) -> Result<Vec<u8>, PatchError> {
        let path = shown.to_string();
        match &self.entries[index].after {
            State::File(content) => Ok(content.clone()),
            State::Missing => Err(PatchError::NotFound { path, action }),
            State::Directory => Err(PatchError::IsDirectory { path, action }),
        }
    }
}

/// What is on disk at `path`, following symlinks (a dangling one counts as missing).
fn read_state(path: &Path) -> io::Result<(State, Option<fs::Permissions>)> {
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error)
            if matches!(error.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) =>
        {
            return Ok((State::Missing, None));
        }
        Err(error) => return Err(error),
    };
    if metadata.is_dir() {
        return Ok((State::Directory, None));
    }
    Ok((State::File(fs::read(path)?), Some(metadata.permissions())))
}

fn change_text(old: &State, new: &State) -> Option<ChangeText> {
    crate::diff::change_text(state_text(old)?, state_text(new)?)
}

/// `Some(None)` for no file, `None` for a file that is not UTF-8 text.
fn state_text(state: &State) -> Option<Option<&str>> {
    match state {
        State::File(content) => std::str::from_utf8(content).ok().map(Some),
        State::Missing | State::Directory => Some(None),
    }
}

fn unified_diff(old: &State, new: &State, old_name: &str, new_name: &str) -> Option<String> {
    let text = |state: &State| match state {
        State::File(content) => std::str::from_utf8(content).ok().map(str::to_string),
        State::Missing | State::Directory => Some(String::new()),
    };
    let (old, new) = (text(old)?, text(new)?);
    let diff = similar::TextDiff::from_lines(&old, &new);
    Some(diff.unified_diff().context_radius(3).header(old_name, new_name).to_string())
}
