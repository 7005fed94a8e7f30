//! Undo: the files the last N turns changed go back to what they were before the
//! earliest of those turns. Files the user changed since (their content differs from
//! what the turn left) are refused, all of them listed, and nothing is touched, unless
//! forced; then what they held is saved first, so even a forced undo loses nothing. The
//! undo is recorded (a `checkpoint` with `undo` set, and a notice): the record stays
//! append-only, and an undone turn is not undone twice.

use super::blobs::BlobStore;
use super::state::{self, FileState};
use super::{CHECKPOINT_VERSION, CheckpointFiles, PathChange, UndoMarker, session_dir};
use kestrel_protocol::{Notice, NoticeKind, RecordEntry, RecordItem};
use kestrel_store::{KestrelHome, SessionRecord, StoreError};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

/// What to undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UndoOptions {
    /// How many of the latest turns that changed files (and are not undone yet).
    pub turns: usize,
    /// Overwrite files changed since (their content is saved in the record first).
    pub force: bool,
    /// Only say what would be done.
    pub dry_run: bool,
}

impl Default for UndoOptions {
    fn default() -> Self {
        Self { turns: 1, force: false, dry_run: false }
    }
}

/// What an undo did (or, dry, would do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoReport {
    /// The turns undone (1-based, oldest first).
    pub turns: Vec<u64>,
    /// Each file put back: `before` is what it held just before the undo, `after` what
    /// it holds now (`absent`: removed).
    pub files: Vec<PathChange>,
    /// Files changed since the turn that `force` overwrote.
    pub overwritten: Vec<PathBuf>,
    /// Files that could not be put back because their old content was not saved.
    pub skipped: Vec<Conflict>,
    pub dry_run: bool,
}

/// A file undo will not touch, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub path: PathBuf,
    pub reason: String,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.path.display(), self.reason)
    }
}

/// Why nothing was undone.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error("--turns must be at least 1")]
    NoTurns,
    #[error("nothing to undo: no turn of this session changed files{}", if *.undone > 0 { " that is not undone already" } else { "" })]
    NothingToUndo { undone: usize },
    #[error("{}", refusal(turns, files, unrestorable))]
    Conflicts {
        turns: Vec<u64>,
        /// Changed since (or outside the session between the turns): `--force` overwrites them.
        files: Vec<Conflict>,
        /// What no option puts back: content before the turn not saved, or a path that
        /// cannot be written safely now (a directory on its way is a symlink, a directory
        /// where a file was). `--force` leaves them as they are.
        unrestorable: Vec<Conflict>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot save {} before undoing: {source}", path.display())]
    Save {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("undo failed at {} ({source}); the files already put back were restored as they were", path.display())]
    Restore {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The refusal for people: what `--force` would overwrite, and apart from it what no
/// option can restore (suggesting `--force` for those would promise what it cannot do).
fn refusal(turns: &[u64], files: &[Conflict], unsaved: &[Conflict]) -> String {
    let one = unsaved.len() == 1;
    let count = |n: usize| if n == 1 { "1 file".to_string() } else { format!("{n} files") };
    let list =
        |files: &[Conflict]| files.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let mut parts = Vec::new();
    if !files.is_empty() {
        parts.push(format!(
            "{} changed since turn{} {} ({}); rerun with --force to overwrite {} (what {} now is saved in the session record first)",
            count(files.len()),
            if turns.len() == 1 { "" } else { "s" },
            join_turns(turns),
            list(files),
            if files.len() == 1 { "it" } else { "them" },
            if files.len() == 1 { "it holds" } else { "they hold" },
        ));
    }
    if !unsaved.is_empty() {
        parts.push(format!(
            "{} cannot be put back ({}): no option restores {}; --force undoes the rest and leaves {} as {} now",
            count(unsaved.len()),
            list(unsaved),
            if one { "it" } else { "them" },
            if one { "it" } else { "them" },
            if one { "it is" } else { "they are" },
        ));
    }
    format!("nothing was undone: {}", parts.join("; "))
}

fn join_turns(turns: &[u64]) -> String {
    turns.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

/// One file's way through the undone turns.
#[derive(Debug, Clone)]
struct Planned {
    /// Before the earliest undone turn touched it, and the session holding its content.
    before: FileState,
    before_session: String,
    /// What the latest undone turn left.
    after: FileState,
    /// The turn that last changed it, and the first.
    turn: u64,
    first_turn: u64,
    /// Set when one change's `before` is not what the previous change left: the file
    /// was changed outside the session between those turns (first, latest).
    outside: Option<(u64, u64)>,
}

/// Undoes the last `options.turns` turns of the session whose record is `record`
/// (open, so this process is its only writer), and records the undo in it.
///
/// Fails, changing nothing, when there is nothing to undo or files changed since
/// (without `force`); fails when the record cannot be read or written, or a file cannot
/// be saved or put back (files already put back are then restored).
pub fn undo(
    home: &KestrelHome,
    record: &mut SessionRecord,
    options: &UndoOptions,
) -> Result<UndoReport, UndoError> {
    if options.turns == 0 {
        return Err(UndoError::NoTurns);
    }
    let replay = kestrel_store::read_record(record.path())?;
    let (turns, planned) = plan(&replay.entries, options.turns)?;
    let mut conflicts = Vec::new();
    let mut skipped = Vec::new();
    let mut work = Vec::new();
    for (path, file) in planned {
        let now = match state::capture(&path, None) {
            Ok(now) => now,
            Err(error) => {
                skipped.push(Conflict { path, reason: format!("unreadable now: {error}") });
                continue;
            }
        };
        if now == file.before {
            continue; // Already as it was.
        }
        if let FileState::Unsaved { reason } = &file.before {
            let turn = file.first_turn;
            let reason = format!("its content before turn {turn} was not saved: {reason}");
            skipped.push(Conflict { path, reason });
            continue;
        }
        if let FileState::Unsaved { reason } = &now {
            // A directory or the like where the turn left a file: never written over.
            skipped.push(Conflict { path, reason: format!("{reason} now") });
            continue;
        }
        let changed_since = now != file.after || file.outside.is_some();
        if changed_since {
            let reason = match (&now, file.outside) {
                (_, Some((first, second))) if first == second => {
                    format!("changed outside the session during turn {first}, between two calls")
                }
                (_, Some((first, second))) => {
                    format!("changed outside the session between turn {first} and turn {second}")
                }
                (FileState::Absent, None) => format!("deleted since turn {}", file.turn),
                (
                    FileState::File { .. } | FileState::Symlink { .. } | FileState::Unsaved { .. },
                    None,
                ) => {
                    format!("changed since turn {}", file.turn)
                }
            };
            conflicts.push(Conflict { path: path.clone(), reason });
        }
        work.push((path, file, now, changed_since));
    }
    if (!conflicts.is_empty() || !skipped.is_empty()) && !options.force {
        return Err(UndoError::Conflicts { turns, files: conflicts, unrestorable: skipped });
    }
    let overwritten: Vec<PathBuf> =
        work.iter().filter(|(_, _, _, changed)| *changed).map(|(path, ..)| path.clone()).collect();
    let session = record.id().to_string();
    let own_blobs = BlobStore::new(&session_dir(home, &session));
    let mut files = Vec::new();
    if !options.dry_run {
        // Save what is there now, so that the undo itself can be undone.
        for (path, ..) in &work {
            let saved = state::capture(path, Some(&own_blobs))
                .map_err(|source| UndoError::Save { path: path.clone(), source })?;
            files.push(PathChange { path: path.clone(), before: saved, after: FileState::Absent });
        }
        for (index, (path, planned, ..)) in work.iter().enumerate() {
            let blobs = BlobStore::new(&session_dir(home, &planned.before_session));
            if let Err(source) = state::restore(path, &planned.before, &blobs) {
                // Put back what was already changed, then report.
                for change in files.iter().take(index) {
                    let _ = state::restore(&change.path, &change.before, &own_blobs);
                }
                return Err(UndoError::Restore { path: path.clone(), source });
            }
            files[index].after = planned.before.clone();
        }
        let checkpoint = CheckpointFiles {
            version: CHECKPOINT_VERSION,
            session,
            call_id: None,
            undo: Some(UndoMarker { turns: turns.clone() }),
            changes: files.clone(),
        };
        let value = serde_json::to_value(&checkpoint).map_err(|error| UndoError::Save {
            path: record.path().to_path_buf(),
            source: std::io::Error::other(error),
        })?;
        record.append(&RecordEntry::now(RecordItem::Checkpoint { files: value }))?;
        let message = format!(
            "undo: turn{} {} put back {} file{}{}",
            if turns.len() == 1 { "" } else { "s" },
            join_turns(&turns),
            files.len(),
            if files.len() == 1 { "" } else { "s" },
            if overwritten.is_empty() {
                String::new()
            } else {
                format!(
                    ", overwriting changes made since to {} (saved in this record)",
                    overwritten.len()
                )
            }
        );
        record.append(&RecordEntry::now(RecordItem::Notice {
            notice: Notice { kind: NoticeKind::Info, message, model: None, mode: None },
        }))?;
    } else {
        files = work
            .iter()
            .map(|(path, planned, now, _)| PathChange {
                path: path.clone(),
                before: now.clone(),
                after: planned.before.clone(),
            })
            .collect();
    }
    Ok(UndoReport { turns, files, overwritten, skipped, dry_run: options.dry_run })
}

/// The turns to undo and, per file, its state before them and after them.
fn plan(
    entries: &[RecordEntry],
    count: usize,
) -> Result<(Vec<u64>, BTreeMap<PathBuf, Planned>), UndoError> {
    let mut turn = 0u64;
    let mut by_turn: BTreeMap<u64, Vec<CheckpointFiles>> = BTreeMap::new();
    let mut undone = BTreeSet::new();
    for entry in entries {
        match &entry.item {
            RecordItem::TurnStarted {} => turn += 1,
            RecordItem::Checkpoint { files } => {
                // A checkpoint this Kestrel cannot read is skipped, not fatal.
                let Ok(files) = serde_json::from_value::<CheckpointFiles>(files.clone()) else {
                    continue;
                };
                match &files.undo {
                    Some(marker) => undone.extend(marker.turns.iter().copied()),
                    None if turn > 0 && !files.changes.is_empty() => {
                        by_turn.entry(turn).or_default().push(files)
                    }
                    None => {}
                }
            }
            _ => {}
        }
    }
    let candidates: Vec<u64> =
        by_turn.keys().copied().filter(|turn| !undone.contains(turn)).collect();
    if candidates.is_empty() {
        return Err(UndoError::NothingToUndo { undone: undone.len() });
    }
    let turns = candidates[candidates.len().saturating_sub(count)..].to_vec();
    let mut planned: BTreeMap<PathBuf, Planned> = BTreeMap::new();
    for turn in &turns {
        for files in by_turn.get(turn).into_iter().flatten() {
            for change in &files.changes {
                planned
                    .entry(change.path.clone())
                    .and_modify(|file| {
                        if file.outside.is_none() && file.after != change.before {
                            file.outside = Some((file.turn, *turn));
                        }
                        file.after = change.after.clone();
                        file.turn = *turn;
                    })
                    .or_insert_with(|| Planned {
                        before: change.before.clone(),
                        before_session: files.session.clone(),
                        after: change.after.clone(),
                        turn: *turn,
                        first_turn: *turn,
                        outside: None,
                    });
            }
        }
    }
    Ok((turns, planned))
}
