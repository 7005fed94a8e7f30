//! Git and Kestrel metadata in a workspace: what programs outside the sandbox act on
//! later (git runs hooks, `core.fsmonitor` and filters from a repository's config;
//! Kestrel starts MCP servers from `.kestrel/config.toml`). Existing ones are kept
//! read-only by the sandbox, but no backend can forbid creating one name in a
//! writable directory without leaving a mount point in the user's tree, so a caller
//! takes a [`MetadataWatch`] before a confined command and asks it afterwards which
//! such entries the command created, to say so plainly.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// How many directory levels below the workspace are searched for `.git`
/// (`<workspace>/a/b/c/.git` is found, one level deeper is not).
pub const METADATA_DEPTH: usize = 3;

/// Directory entries looked at per search at most, so a huge tree costs a bounded
/// time; what lies beyond is not searched.
const MAX_ENTRIES: usize = 20_000;

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
    let mut budget = MAX_ENTRIES;
    while let Some((directory, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&directory) else { continue };
        for entry in entries.flatten() {
            if budget == 0 {
                return found;
            }
            budget -= 1;
            let Ok(kind) = entry.file_type() else { continue };
            if entry.file_name() == REPOSITORY {
                found.insert(entry.path());
            } else if kind.is_dir() && depth < METADATA_DEPTH {
                queue.push_back((entry.path(), depth + 1));
            }
        }
    }
    found
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
}
