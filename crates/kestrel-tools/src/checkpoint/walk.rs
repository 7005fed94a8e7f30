//! The walk a snapshot starts from: every file and symlink of the workspace, with the
//! stat data that tells a later walk whether it changed. Files `.gitignore` hides are
//! walked too, within a budget (a `.env` or a small `build/` matters to the user as much
//! as tracked code); an ignored directory too large for it (`target/`, `node_modules/`)
//! is listed as one entry whose content is not kept, with a stamp (mtime and entry
//! count) that tells a later walk it changed. `.git` directories are never entered.
//! What is ignored is decided by [`Ignores`] (no ignore file is opened by the `ignore`
//! crate); the walk gives up after [`WALK_DEADLINE`].

use super::ignores::Ignores;
use ignore::WalkState;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A walk taking longer than this is given up (the call gets no snapshot).
pub(crate) const WALK_DEADLINE: Duration = Duration::from_secs(60);

/// More files than this (not counting ignored ones) and no snapshot is taken.
pub(crate) const MAX_FILES: usize = 200_000;
/// An ignored directory holding more files than this is not snapshotted.
pub(crate) const MAX_IGNORED_DIR_FILES: usize = 1_000;
/// Ignored files snapshotted in all.
pub(crate) const MAX_IGNORED_FILES: usize = 10_000;

/// What a file's metadata says, enough to tell it has not changed since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub inode: u64,
    /// Permission bits (`mode & 0o7777`): undo puts them back as they were.
    pub mode: u32,
}

impl Stamp {
    pub(crate) fn of(metadata: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Self {
                size: metadata.size(),
                mtime_ns: i128::from(metadata.mtime()) * 1_000_000_000
                    + i128::from(metadata.mtime_nsec()),
                ctime_ns: i128::from(metadata.ctime()) * 1_000_000_000
                    + i128::from(metadata.ctime_nsec()),
                inode: metadata.ino(),
                mode: metadata.mode() & 0o7777,
            }
        }
        #[cfg(not(unix))]
        {
            let mtime_ns = metadata
                .modified()
                .ok()
                .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |elapsed| elapsed.as_nanos() as i128);
            Self { size: metadata.len(), mtime_ns, ctime_ns: 0, inode: 0, mode: 0o644 }
        }
    }
}

/// One thing the walk found.
#[derive(Debug, Clone)]
pub(crate) enum Found {
    File {
        path: PathBuf,
        stamp: Stamp,
    },
    Symlink {
        path: PathBuf,
        target: PathBuf,
    },
    /// A directory whose files are not snapshotted, and why.
    Unwalked {
        path: PathBuf,
        reason: String,
        /// The directory's own stamp, its `size` the number of its entries: files
        /// added, removed or renamed right in it change it.
        stamp: Option<Stamp>,
    },
    /// A file left out (the ignored files' budget is spent), and why.
    Unkept {
        path: PathBuf,
        stamp: Stamp,
        reason: String,
    },
}

/// An entry the (parallel) walk visited: not ignored.
enum Visited {
    Dir(PathBuf),
    Link(PathBuf),
    File(PathBuf, Option<std::fs::Metadata>),
    /// A socket, a FIFO, a device: never snapshotted.
    Other(PathBuf),
}

/// The result of a walk.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    pub found: Vec<Found>,
}

/// Walks `workspace`, leaving out `excluded` (our own directory, when inside it);
/// `hash_len`: the byte length of the repository's object ids (for its index).
///
/// Fails when the workspace holds more than `max_files` files that are not ignored, or
/// the walk takes longer than [`WALK_DEADLINE`].
pub(crate) fn walk(
    workspace: &Path,
    excluded: Option<&Path>,
    max_files: usize,
    hash_len: usize,
) -> Result<Walk, String> {
    let deadline = Instant::now() + WALK_DEADLINE;
    let late = std::sync::Arc::new(AtomicBool::new(false));
    let excluded_owned = excluded.map(Path::to_path_buf);
    let ignores = std::sync::Arc::new(Ignores::new(workspace, hash_len));
    let mut builder = ignore::WalkBuilder::new(workspace);
    let (filter_ignores, filter_late) = (ignores.clone(), late.clone());
    builder.standard_filters(false).follow_links(false).filter_entry(move |entry| {
        if Instant::now() > deadline {
            filter_late.store(true, Ordering::Relaxed);
            return false;
        }
        let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
        entry.file_name() != OsStr::new(".git")
            && excluded_owned.as_deref() != Some(entry.path())
            && (entry.depth() == 0 || !filter_ignores.ignored(entry.path(), is_dir))
    });
    // Two threads: the walk is mostly `statx`, which the kernel serves in parallel.
    let visited: Mutex<Vec<Visited>> = Mutex::new(Vec::new());
    let files = AtomicUsize::new(0);
    builder.threads(2).build_parallel().run(|| {
        let (visited, files) = (&visited, &files);
        Box::new(move |entry| {
            let Ok(entry) = entry else { return WalkState::Continue };
            let Some(kind) = entry.file_type() else { return WalkState::Continue };
            let path = entry.path().to_path_buf();
            let item = if kind.is_dir() {
                Visited::Dir(path)
            } else if kind.is_symlink() {
                Visited::Link(path)
            } else if kind.is_file() {
                if files.fetch_add(1, Ordering::Relaxed) >= max_files {
                    return WalkState::Quit;
                }
                Visited::File(path, entry.metadata().ok())
            } else {
                Visited::Other(path)
            };
            visited.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(item);
            WalkState::Continue
        })
    });
    let too_late =
        || format!("walking the workspace took longer than {} s", WALK_DEADLINE.as_secs());
    if late.load(Ordering::Relaxed) {
        return Err(too_late());
    }
    if files.load(Ordering::Relaxed) > max_files {
        return Err(format!("the workspace has more than {max_files} files: too many to snapshot"));
    }
    let mut walk = Walk::default();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut dirs = Vec::new();
    for item in visited.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner()) {
        match item {
            Visited::Dir(path) => {
                dirs.push(path.clone());
                seen.insert(path);
            }
            Visited::Link(path) => {
                seen.insert(path.clone());
                if let Ok(target) = std::fs::read_link(&path) {
                    walk.found.push(Found::Symlink { path, target });
                }
            }
            Visited::File(path, metadata) => {
                seen.insert(path.clone());
                if let Some(metadata) = metadata {
                    walk.found.push(Found::File { path, stamp: Stamp::of(&metadata) });
                }
            }
            Visited::Other(path) => {
                seen.insert(path);
            }
        }
    }
    // What the walk left out under each directory it entered is ignored.
    let mut budget = MAX_IGNORED_FILES;
    for dir in dirs {
        if Instant::now() > deadline {
            return Err(too_late());
        }
        let Ok(children) = std::fs::read_dir(&dir) else { continue };
        let mut ignored: Vec<PathBuf> = children
            .flatten()
            .map(|child| child.path())
            .filter(|path| {
                !seen.contains(path)
                    && path.file_name() != Some(OsStr::new(".git"))
                    && excluded != Some(path.as_path())
            })
            .collect();
        ignored.sort();
        for path in ignored {
            ignored_entry(path, excluded, &mut budget, &mut walk);
        }
    }
    Ok(walk)
}

/// Adds an ignored file, or an ignored directory's files when they fit the budget.
fn ignored_entry(path: PathBuf, excluded: Option<&Path>, budget: &mut usize, walk: &mut Walk) {
    let Ok(metadata) = std::fs::symlink_metadata(&path) else { return };
    let kind = metadata.file_type();
    if kind.is_symlink() {
        if let Ok(target) = std::fs::read_link(&path) {
            walk.found.push(Found::Symlink { path, target });
        }
    } else if kind.is_file() {
        let stamp = Stamp::of(&metadata);
        if *budget == 0 {
            let reason = budget_spent();
            walk.found.push(Found::Unkept { path, stamp, reason });
        } else {
            *budget -= 1;
            walk.found.push(Found::File { path, stamp });
        }
    } else if kind.is_dir() {
        let limit = MAX_IGNORED_DIR_FILES.min(*budget);
        match small_dir(&path, excluded, limit) {
            Some(found) => {
                *budget -= found.iter().filter(|found| matches!(found, Found::File { .. })).count();
                walk.found.extend(found);
            }
            None => {
                let reason = if limit < MAX_IGNORED_DIR_FILES {
                    budget_spent()
                } else {
                    format!(
                        "an ignored directory of more than {MAX_IGNORED_DIR_FILES} files, not \
                         snapshotted"
                    )
                };
                let stamp = dir_stamp(&path, &metadata);
                walk.found.push(Found::Unwalked { path, reason, stamp });
            }
        }
    }
}

/// A cheap stamp of a directory not walked: its own times and inode, and how many
/// entries it holds.
fn dir_stamp(path: &Path, metadata: &std::fs::Metadata) -> Option<Stamp> {
    let entries = std::fs::read_dir(path).ok()?.count();
    Some(Stamp { size: u64::try_from(entries).unwrap_or(u64::MAX), ..Stamp::of(metadata) })
}

fn budget_spent() -> String {
    format!("ignored, and the snapshot already holds {MAX_IGNORED_FILES} ignored files")
}

/// The files and symlinks under `dir` (not entering `.git`), or `None` when there are
/// more than `limit` files.
fn small_dir(dir: &Path, excluded: Option<&Path>, limit: usize) -> Option<Vec<Found>> {
    let mut found = Vec::new();
    let mut files = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(children) = std::fs::read_dir(&dir) else { continue };
        for child in children.flatten() {
            let path = child.path();
            let Ok(kind) = child.file_type() else { continue };
            if kind.is_dir() {
                if child.file_name() != OsStr::new(".git") && excluded != Some(path.as_path()) {
                    stack.push(path);
                }
            } else if kind.is_symlink() {
                if let Ok(target) = std::fs::read_link(&path) {
                    found.push(Found::Symlink { path, target });
                }
            } else if kind.is_file() {
                files += 1;
                if files > limit {
                    return None;
                }
                if let Ok(metadata) = std::fs::symlink_metadata(&path) {
                    found.push(Found::File { path, stamp: Stamp::of(&metadata) });
                }
            }
        }
    }
    Some(found)
}
