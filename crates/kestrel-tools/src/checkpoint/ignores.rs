//! Which files of the workspace count as ignored for a snapshot, decided by Kestrel
//! alone: the `.gitignore` files inside the workspace and its repository's
//! `.git/info/exclude`, nothing above it, no `.ignore`, no global excludes. Each file
//! is read here (never by the `ignore` crate): opened without following a symlink and
//! without blocking, regular files only, at most 1 MiB, so a committed `.gitignore ->
//! /dev/zero` or a FIFO cannot crash or hang a snapshot. A file the repository's index
//! tracks is never ignored: a model writing `*` into an ignore file cannot make tracked
//! files vanish from the snapshot.

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use kestrel_platform::read_small_regular;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An ignore file larger than this is not read (its rules do not apply).
const MAX_IGNORE_FILE_BYTES: u64 = 1024 * 1024;
/// An index larger than this is not read (nothing counts as tracked).
pub(crate) const MAX_INDEX_BYTES: u64 = 512 * 1024 * 1024;

/// The ignore rules of one workspace, read lazily per directory.
#[derive(Debug)]
pub(crate) struct Ignores {
    root: PathBuf,
    /// Tracked files and every directory holding one, absolute.
    tracked: HashSet<PathBuf>,
    /// Each directory's own `.gitignore` (the root's with `info/exclude`), once read.
    rules: Mutex<HashMap<PathBuf, Option<Arc<Gitignore>>>>,
}

impl Ignores {
    /// The rules for `root`, with the tracked paths of the repository whose `.git`
    /// directory is `root/.git` (object ids of `hash_len` bytes), if any.
    pub(crate) fn new(root: &Path, hash_len: usize) -> Self {
        let mut tracked = HashSet::new();
        for relative in index_paths(&root.join(".git").join("index"), hash_len) {
            let mut path = root.join(relative);
            while path.starts_with(root) && path != root && tracked.insert(path.clone()) {
                path.pop();
            }
        }
        Self { root: root.to_path_buf(), tracked, rules: Mutex::new(HashMap::new()) }
    }

    /// Whether `path` (beneath the root) is ignored: the deepest rule that matches it
    /// decides, and tracked paths never are.
    pub(crate) fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        if self.tracked.contains(path) {
            return false;
        }
        let mut dir = path.parent();
        while let Some(current) = dir {
            if !current.starts_with(&self.root) {
                break;
            }
            if let Some(rules) = self.rules_of(current) {
                match rules.matched(path, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            dir = current.parent();
        }
        false
    }

    fn rules_of(&self, dir: &Path) -> Option<Arc<Gitignore>> {
        let mut cache = self.rules.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(rules) = cache.get(dir) {
            return rules.clone();
        }
        let mut builder = GitignoreBuilder::new(dir);
        let mut any = false;
        // Later lines win: the root's `.gitignore` over `info/exclude`.
        let mut sources = Vec::new();
        if dir == self.root {
            sources.push(dir.join(".git").join("info").join("exclude"));
        }
        sources.push(dir.join(".gitignore"));
        for source in sources {
            let Some(text) = read_small_regular(&source, MAX_IGNORE_FILE_BYTES) else { continue };
            for line in String::from_utf8_lossy(&text).lines() {
                any |= builder.add_line(None, line).is_ok();
            }
        }
        let rules = any.then(|| builder.build().ok().map(Arc::new)).flatten();
        cache.insert(dir.to_path_buf(), rules.clone());
        rules
    }
}

/// The paths a git index lists (versions 2 to 4); none when it cannot be read.
fn index_paths(index: &Path, hash_len: usize) -> Vec<PathBuf> {
    let Some(bytes) = read_small_regular(index, MAX_INDEX_BYTES) else { return Vec::new() };
    let entries = index_entries(&bytes, hash_len).unwrap_or_default();
    entries.into_iter().map(|(path, _)| path).collect()
}

/// The paths of a git index's entries (versions 2 to 4; object ids of `hash_len`
/// bytes), each with its mode (`0o160000` for a submodule), or `None` when `bytes`
/// are not such an index.
pub(crate) fn index_entries(bytes: &[u8], hash_len: usize) -> Option<Vec<(PathBuf, u32)>> {
    use std::os::unix::ffi::OsStrExt;
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    if bytes.get(..4)? != b"DIRC" {
        return None;
    }
    let version = word(4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = usize::try_from(word(8)?).ok()?;
    let mut paths = Vec::with_capacity(count.min(1 << 20));
    let mut at = 12;
    let mut previous: Vec<u8> = Vec::new();
    // ctime, mtime (8 each), dev, ino, mode, uid, gid, size (4 each), the id, flags.
    let fixed = 40 + hash_len + 2;
    for _ in 0..count {
        let start = at;
        let mode = word(start + 24)?;
        let flags =
            u16::from_be_bytes(bytes.get(start + fixed - 2..start + fixed)?.try_into().ok()?);
        at = start + fixed;
        if version >= 3 && flags & 0x4000 != 0 {
            at += 2;
        }
        let name = if version == 4 {
            // The number of bytes to drop from the previous name, then the rest.
            let mut byte = *bytes.get(at)?;
            at += 1;
            let mut strip = usize::from(byte & 0x7f);
            while byte & 0x80 != 0 {
                byte = *bytes.get(at)?;
                at += 1;
                strip = ((strip + 1) << 7) | usize::from(byte & 0x7f);
            }
            let end = at + bytes.get(at..)?.iter().position(|&b| b == 0)?;
            let mut name = previous.get(..previous.len().checked_sub(strip)?)?.to_vec();
            name.extend_from_slice(&bytes[at..end]);
            at = end + 1;
            name
        } else {
            let end = at + bytes.get(at..)?.iter().position(|&b| b == 0)?;
            let name = bytes[at..end].to_vec();
            // Padded with 1 to 8 NULs to a multiple of 8 from the entry's start.
            at = start + (end - start + 8) / 8 * 8;
            name
        };
        paths.push((PathBuf::from(std::ffi::OsStr::from_bytes(&name)), mode));
        previous = name;
    }
    Some(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_git_writes_is_read_in_every_version() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let status = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(dir.path())
                .env_remove("GIT_DIR")
                .env_remove("GIT_INDEX_FILE")
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        for name in ["a.txt", "src/deep/b.rs", "src/deep/c.rs", "zz/long-name-here.txt"] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, name).unwrap();
        }
        git(&["add", "."]);
        for version in ["2", "3", "4"] {
            git(&["update-index", "--index-version", version]);
            let paths = index_paths(&dir.path().join(".git/index"), 20);
            let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            assert_eq!(
                paths,
                ["a.txt", "src/deep/b.rs", "src/deep/c.rs", "zz/long-name-here.txt"],
                "version {version}"
            );
        }
    }
}
