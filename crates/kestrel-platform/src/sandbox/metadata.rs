//! Git and Kestrel metadata in a workspace: what programs outside the sandbox act on
//! later (git runs hooks, `core.fsmonitor` and filters from a repository's config;
//! Kestrel starts MCP servers from `.kestrel/config.toml`). Existing ones are kept
//! read-only by the sandbox, but no backend can forbid creating one name in a
//! writable directory without leaving a mount point in the user's tree, so a caller
//! takes a [`MetadataWatch`] before a confined command and asks it afterwards which
//! such entries the command created, to say so plainly.

use crate::files::read_small_regular;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How many directory levels below the workspace are searched for `.git`
/// (`<workspace>/a/b/c/.git` is found, one level deeper is not).
pub const METADATA_DEPTH: usize = 3;

/// Directories listed per search at most, so a huge tree costs a bounded time. Files
/// do not count: however many there are, a listed directory's `.git` is found. When a
/// search stops early, the entries an earlier search of the workspace found stay in
/// the result while they exist, so a command cannot switch protection off by creating
/// many directories.
const MAX_DIRECTORIES: usize = 20_000;

/// A `.git` file or `commondir` longer than this names no directory.
const MAX_POINTER_BYTES: u64 = 4096;

/// The entries each workspace's last search found, for a search that stops early.
static LAST_FOUND: Mutex<BTreeMap<PathBuf, BTreeSet<PathBuf>>> = Mutex::new(BTreeMap::new());

/// Names that are metadata wherever they are within [`METADATA_DEPTH`].
const REPOSITORY: &str = ".git";
/// Names that are metadata only directly in the workspace.
pub(super) const TOP_LEVEL: [&str; 2] = [".git", ".kestrel"];

/// The metadata entries of a workspace at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataWatch {
    workspace: PathBuf,
    before: BTreeSet<PathBuf>,
}

impl MetadataWatch {
    /// Notes the metadata entries (`.git` and `.kestrel` in `workspace`, `.git` up to
    /// [`METADATA_DEPTH`] levels below it; files and symlinks count too). Unreadable
    /// directories are skipped.
    pub fn start(workspace: &Path) -> Self {
        Self { workspace: workspace.to_path_buf(), before: metadata_entries(workspace) }
    }

    /// The metadata entries that exist now but did not at [`MetadataWatch::start`],
    /// sorted.
    pub fn created(&self) -> Vec<PathBuf> {
        metadata_entries(&self.workspace).difference(&self.before).cloned().collect()
    }
}

/// Every metadata entry of `workspace` (see [`MetadataWatch::start`]).
pub(super) fn metadata_entries(workspace: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    for name in TOP_LEVEL {
        let path = workspace.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            found.insert(path);
        }
    }
    let mut queue = VecDeque::from([(workspace.to_path_buf(), 0)]);
    let mut budget = MAX_DIRECTORIES;
    let mut complete = true;
    while let Some((directory, depth)) = queue.pop_front() {
        if budget == 0 {
            complete = false;
            break;
        }
        budget -= 1;
        let Ok(entries) = std::fs::read_dir(&directory) else { continue };
        for entry in entries.flatten() {
            if entry.file_name() == REPOSITORY {
                found.insert(entry.path());
            } else if depth < METADATA_DEPTH && entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                queue.push_back((entry.path(), depth + 1));
            }
        }
    }
    let mut last = LAST_FOUND.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !complete && let Some(earlier) = last.get(workspace) {
        for path in earlier {
            if std::fs::symlink_metadata(path).is_ok() {
                found.insert(path.clone());
            }
        }
    }
    last.insert(workspace.to_path_buf(), found.clone());
    found
}

/// The git directories that the `.git` files among `entries` name (`gitdir: DIR`, as
/// a linked worktree or `--separate-git-dir` writes), and their `commondir`, when they
/// exist; never the workspace or a directory holding it. A `.git` file that is not a
/// small regular file names nothing.
pub(super) fn named_git_dirs(workspace: &Path, entries: &BTreeSet<PathBuf>) -> Vec<PathBuf> {
    let Ok(workspace) = workspace.canonicalize() else { return Vec::new() };
    let mut dirs = Vec::new();
    for entry in entries {
        let Some(parent) = entry.parent() else { continue };
        let Some(text) = read_pointer(entry) else { continue };
        let Some(target) = text.trim().strip_prefix("gitdir:") else { continue };
        let Ok(git_dir) = parent.join(target.trim()).canonicalize() else { continue };
        let mut named = vec![git_dir.clone()];
        if let Some(common) = read_pointer(&git_dir.join("commondir"))
            && let Ok(common) = git_dir.join(common.trim()).canonicalize()
        {
            named.push(common);
        }
        for dir in named {
            if !workspace.starts_with(&dir) && !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs
}

/// The text of `path` if it is a regular file of at most [`MAX_POINTER_BYTES`] (see
/// [`read_small_regular`]).
fn read_pointer(path: &Path) -> Option<String> {
    let bytes = read_small_regular(path, MAX_POINTER_BYTES)?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_metadata_within_the_depth_is_reported_and_old_or_deeper_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("old/.git")).unwrap();
        std::fs::create_dir_all(root.join("a/b/c/d")).unwrap();
        let watch = MetadataWatch::start(root);
        assert!(watch.created().is_empty());
        for made in [".git", ".kestrel", "a/b/c/.git", "a/b/c/d/.git"] {
            std::fs::create_dir_all(root.join(made)).unwrap();
        }
        std::fs::write(root.join("a/.git"), "gitdir: /elsewhere\n").unwrap();
        let created = watch.created();
        let expected: Vec<PathBuf> =
            [".git", ".kestrel", "a/.git", "a/b/c/.git"].iter().map(|p| root.join(p)).collect();
        assert_eq!(created, expected);
    }

    #[test]
    fn a_search_cut_short_by_many_directories_keeps_what_an_earlier_one_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("z/sub/.git")).unwrap();
        assert!(metadata_entries(root).contains(&root.join("z/sub/.git")));
        // More directories one level down than a search lists: `z/sub` is not reached.
        for index in 0..MAX_DIRECTORIES {
            std::fs::create_dir(root.join(format!("d{index}"))).unwrap();
        }
        assert!(metadata_entries(root).contains(&root.join("z/sub/.git")));
        // Gone is gone.
        std::fs::remove_dir(root.join("z/sub/.git")).unwrap();
        assert!(!metadata_entries(root).contains(&root.join("z/sub/.git")));
    }
}
