//! Workspace snapshots for calls that may change any file (`shell`, MCP tools): every
//! file's blob id (content kept in the private object store of [`super::objects`]),
//! every symlink's target, and what was left out and why. Comparing two snapshots gives
//! the files a call changed. A snapshot reuses the last one's ids for files whose stat
//! data has not changed, so only new or changed files are read: a second snapshot of a
//! large repository costs a walk, not a read of every file.

use super::objects::ObjectStore;
use super::walk::{self, Found, Stamp};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Files larger than this are snapshotted only when git holds their content already
/// (tracked and unchanged): copying them is not worth a call's time and space.
pub(crate) const MAX_COPIED_BYTES: u64 = 16 * 1024 * 1024;
/// Files larger than this are not even read.
pub(crate) const MAX_HASHED_BYTES: u64 = 256 * 1024 * 1024;
/// At most this much new content is copied into the store by one snapshot.
pub(crate) const MAX_COPIED_PER_SNAPSHOT: u64 = 1024 * 1024 * 1024;
/// At most this much new content is copied into the store by all of a session's
/// snapshots: a command rewriting large files in a loop must not fill the disk.
pub(crate) const MAX_COPIED_PER_SESSION: u64 = 4 * 1024 * 1024 * 1024;
/// A file modified this close to the last snapshot may have changed again within the
/// same timestamp: its stat data is not trusted.
const RACY_NS: i128 = 2_000_000_000;

/// A snapshot of a workspace, taken before a call (see [`super::Capture`]).
#[derive(Debug, Clone)]
pub struct Snapshot {
    inner: Arc<Entries>,
}

#[derive(Debug)]
struct Entries {
    entries: BTreeMap<PathBuf, Entry>,
    /// The stamps of directories not walked (see [`walk::Found::Unwalked`]).
    unwalked: HashMap<PathBuf, Stamp>,
    /// When the walk started (ns since the epoch).
    started_ns: i128,
}

#[derive(Debug, Clone)]
enum Entry {
    Blob {
        id: String,
        stamp: Stamp,
    },
    Link {
        target: PathBuf,
    },
    /// Seen, its content not kept: a file (with its stamp) or a directory.
    Unkept {
        stamp: Option<Stamp>,
        reason: String,
    },
}

/// What a changed path held in the earlier snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Prior {
    Absent,
    Blob { id: String, mode: u32 },
    Link { target: PathBuf },
    Unkept { reason: String },
}

/// One path that differs between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeChange {
    /// Absolute.
    pub path: PathBuf,
    pub before: Prior,
}

/// Takes and compares snapshots of one workspace.
#[derive(Debug)]
pub(crate) struct Snapshotter {
    store: ObjectStore,
    workspace: PathBuf,
    /// Left out of every walk: Kestrel's own directory when it is inside the workspace.
    excluded: Option<PathBuf>,
    /// The workspace repository's object directory.
    user_objects: Option<PathBuf>,
    /// The last snapshot: its ids are reused for files whose stamp did not change.
    last: Option<Snapshot>,
    /// More files than this and no snapshot is taken.
    max_files: usize,
    /// Content copied into the store by this session's snapshots, and the cap on it.
    copied_total: u64,
    max_copied_total: u64,
    /// Why snapshots were given up for this session (a workspace with too many files:
    /// walking it again for every call would cost seconds each time).
    given_up: Option<String>,
}

impl Snapshotter {
    /// Opens the private object store in `session_dir` for `workspace`.
    ///
    /// Fails when git is missing or the store cannot be created.
    pub(crate) async fn open(
        workspace: &Path,
        session_dir: &Path,
        home: &Path,
    ) -> Result<Self, String> {
        let workspace = workspace
            .canonicalize()
            .map_err(|error| format!("{}: {error}", workspace.display()))?;
        super::blobs::create_private_dir(session_dir)
            .map_err(|error| format!("{}: {error}", session_dir.display()))?;
        let (store, user_objects) =
            ObjectStore::open(&session_dir.join("snapshots.git"), &workspace).await?;
        let excluded = home.canonicalize().ok().filter(|home| home.starts_with(&workspace));
        Ok(Self {
            store,
            workspace,
            excluded,
            user_objects,
            last: None,
            max_files: walk::MAX_FILES,
            copied_total: 0,
            max_copied_total: MAX_COPIED_PER_SESSION,
            given_up: None,
        })
    }

    /// A snapshot of the workspace now.
    ///
    /// Fails when the workspace is too large or git fails.
    pub(crate) async fn take(&mut self) -> Result<Snapshot, String> {
        if let Some(reason) = &self.given_up {
            return Err(reason.clone());
        }
        let started_ns = now_ns();
        let (workspace, excluded, max_files) =
            (self.workspace.clone(), self.excluded.clone(), self.max_files);
        let hash_len = self.store.format.hash_len();
        let walked = tokio::task::spawn_blocking(move || {
            walk::walk(&workspace, excluded.as_deref(), max_files, hash_len)
        })
        .await
        .map_err(|error| error.to_string())?;
        let walked = match walked {
            Ok(walked) => walked,
            Err(reason) => {
                let reason = format!("{reason} (not tried again in this session)");
                self.given_up = Some(reason.clone());
                return Err(reason);
            }
        };
        // Only the workspace repository's own store, and only while the alternates
        // files git would read from it are regular files: a FIFO there blocks git. The
        // content of repositories nested inside is copied like untracked content.
        let alternates: Vec<PathBuf> = self
            .user_objects
            .iter()
            .filter(|objects| super::objects::alternates_are_regular(objects))
            .cloned()
            .collect();
        self.store.set_alternates(&alternates)?;

        let mut entries = BTreeMap::new();
        let mut unwalked = HashMap::new();
        let mut to_hash = Vec::new();
        let last = self.last.as_ref().map(|last| last.inner.clone());
        for found in walked.found {
            match found {
                Found::File { path, stamp } => {
                    // What the last snapshot knew of an unchanged file holds still.
                    let reused = last.as_ref().and_then(|last| {
                        let entry = last.entries.get(&path)?;
                        let known = match entry {
                            Entry::Blob { stamp, .. }
                            | Entry::Unkept { stamp: Some(stamp), .. } => stamp,
                            Entry::Link { .. } | Entry::Unkept { stamp: None, .. } => return None,
                        };
                        (*known == stamp && stamp.mtime_ns < last.started_ns - RACY_NS)
                            .then(|| entry.clone())
                    });
                    match reused {
                        Some(entry) => {
                            entries.insert(path, entry);
                        }
                        None if stamp.size > MAX_HASHED_BYTES => {
                            let reason = format!(
                                "a file over {} MiB, not snapshotted",
                                MAX_HASHED_BYTES >> 20
                            );
                            entries.insert(path, Entry::Unkept { stamp: Some(stamp), reason });
                        }
                        None => to_hash.push((path, stamp)),
                    }
                }
                Found::Symlink { path, target } => {
                    entries.insert(path, Entry::Link { target });
                }
                Found::Unwalked { path, reason, stamp } => {
                    if let Some(stamp) = stamp {
                        unwalked.insert(path.clone(), stamp);
                    }
                    entries.insert(path, Entry::Unkept { stamp: None, reason });
                }
                Found::Unkept { path, stamp, reason } => {
                    entries.insert(path, Entry::Unkept { stamp: Some(stamp), reason });
                }
            }
        }

        // Hash what is new or changed, then copy in what no store holds yet.
        let format = self.store.format;
        let hashed = tokio::task::spawn_blocking(move || {
            // Two threads: a first snapshot reads every file.
            let half = to_hash.len().div_ceil(2);
            std::thread::scope(|scope| {
                let chunks: Vec<_> = to_hash
                    .chunks(half.max(1))
                    .map(|chunk| {
                        scope.spawn(move || {
                            chunk
                                .iter()
                                .map(|(path, stamp)| {
                                    (path.clone(), *stamp, format.file_blob_id(path, stamp.size))
                                })
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                chunks
                    .into_iter()
                    .map(|chunk| chunk.join().map_err(|_| "a hashing thread panicked".to_string()))
                    .collect::<Result<Vec<_>, _>>()
                    .map(|chunks| chunks.into_iter().flatten().collect::<Vec<_>>())
            })
        })
        .await
        .map_err(|error| error.to_string())??;
        let mut new = Vec::new();
        for (path, stamp, id) in hashed {
            match id {
                Ok(Some(id)) => new.push((path, stamp, id)),
                Ok(None) => {
                    let reason = "it changed while the snapshot was taken".to_string();
                    entries.insert(path, Entry::Unkept { stamp: Some(stamp), reason });
                }
                // Gone since the walk: not part of the snapshot.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                // Unreadable: seen, and said to be not kept.
                Err(error) => {
                    let reason = format!("unreadable ({error}), not snapshotted");
                    entries.insert(path, Entry::Unkept { stamp: Some(stamp), reason });
                }
            }
        }
        let ids: Vec<String> = new.iter().map(|(_, _, id)| id.clone()).collect();
        let missing = self.store.missing(&ids).await?;
        let mut copied = 0u64;
        let mut batch = Vec::new();
        let mut single = Vec::new();
        for (path, stamp, id) in new {
            if !missing.contains(&id) {
                entries.insert(path, Entry::Blob { id, stamp });
                continue;
            }
            if stamp.size > MAX_COPIED_BYTES {
                let reason = format!(
                    "a file over {} MiB that git does not hold, not snapshotted",
                    MAX_COPIED_BYTES >> 20
                );
                entries.insert(path, Entry::Unkept { stamp: Some(stamp), reason });
            } else if copied + stamp.size > MAX_COPIED_PER_SNAPSHOT {
                let reason = format!(
                    "not snapshotted: the snapshot had copied {} MiB already",
                    MAX_COPIED_PER_SNAPSHOT >> 20
                );
                entries.insert(path, Entry::Unkept { stamp: Some(stamp), reason });
            } else if self.copied_total + copied + stamp.size > self.max_copied_total {
                let reason = format!(
                    "not snapshotted: this session's snapshots had copied {} MiB already",
                    self.max_copied_total >> 20
                );
                entries.insert(path, Entry::Unkept { stamp: Some(stamp), reason });
            } else {
                copied += stamp.size;
                if path.as_os_str().as_encoded_bytes().contains(&b'\n') {
                    single.push((path, stamp));
                } else {
                    batch.push((path, stamp));
                }
            }
        }
        self.copied_total += copied;
        let paths: Vec<PathBuf> = batch.iter().map(|(path, _)| path.clone()).collect();
        let written = self.store.write_files(&paths).await?;
        for ((path, stamp), id) in batch.into_iter().zip(written) {
            entries.insert(path, Entry::Blob { id, stamp });
        }
        for (path, stamp) in single {
            let id = self.store.write_file(&path).await?;
            entries.insert(path, Entry::Blob { id, stamp });
        }
        let snapshot = Snapshot { inner: Arc::new(Entries { entries, unwalked, started_ns }) };
        self.last = Some(snapshot.clone());
        Ok(snapshot)
    }

    /// The paths that differ between snapshots `before` and `after`.
    pub(crate) fn changes(&self, before: &Snapshot, after: &Snapshot) -> Vec<TreeChange> {
        let mut found = changes(&before.inner.entries, &after.inner.entries);
        // A directory not walked whose stamp changed: what changed in it is not known,
        // and undo must say so rather than miss it.
        for (path, stamp) in &before.inner.unwalked {
            let changed = after.inner.unwalked.get(path).is_some_and(|now| now != stamp);
            if changed && !found.iter().any(|change| change.path == *path) {
                let reason = match before.inner.entries.get(path) {
                    Some(Entry::Unkept { reason, .. }) => reason.clone(),
                    Some(Entry::Blob { .. } | Entry::Link { .. }) | None => String::new(),
                };
                let reason = format!("{reason}; files were added, removed or renamed in it");
                found.push(TreeChange { path: path.clone(), before: Prior::Unkept { reason } });
            }
        }
        found.sort_by(|a, b| a.path.cmp(&b.path));
        found
    }

    /// Reads the blobs `ids`, calling `take` with each id and its checked content.
    pub(crate) async fn read_blobs(
        &self,
        ids: &[String],
        take: impl FnMut(&str, Result<Vec<u8>, String>) -> Result<(), String>,
    ) -> Result<(), String> {
        self.store.read_blobs(ids, take).await
    }
}

fn changes(before: &BTreeMap<PathBuf, Entry>, after: &BTreeMap<PathBuf, Entry>) -> Vec<TreeChange> {
    let unwalked = |entries: &BTreeMap<PathBuf, Entry>| -> Vec<PathBuf> {
        entries
            .iter()
            .filter(|(_, entry)| matches!(entry, Entry::Unkept { stamp: None, .. }))
            .map(|(path, _)| path.clone())
            .collect()
    };
    let (unwalked_before, unwalked_after) = (unwalked(before), unwalked(after));
    let under =
        |path: &Path, dirs: &[PathBuf]| dirs.iter().any(|dir| path != dir && path.starts_with(dir));
    let mut paths: Vec<&PathBuf> = before.keys().chain(after.keys()).collect();
    paths.sort();
    paths.dedup();
    let mut changes = Vec::new();
    for path in paths {
        let (old, new) = (before.get(path), after.get(path));
        if under(path, &unwalked_before) {
            // Inside a directory the first snapshot did not walk: unknown before.
            continue;
        }
        if under(path, &unwalked_after) {
            // The directory grew too large to walk: compare this file directly.
            if let Some(old) = old
                && !still_there(path, old)
            {
                changes.push(TreeChange { path: path.clone(), before: prior(old) });
            }
            continue;
        }
        let changed = match (old, new) {
            (None, None) => false,
            // A large ignored directory that appeared: its files are not listed.
            (None, Some(Entry::Unkept { stamp: None, .. })) => false,
            (None, Some(_)) => true,
            (Some(Entry::Unkept { stamp: None, .. }), _) => {
                std::fs::symlink_metadata(path).map_or(true, |metadata| !metadata.is_dir())
            }
            (Some(_), None) => true,
            (Some(old), Some(new)) => !same(old, new),
        };
        if changed {
            let before = old.map_or(Prior::Absent, prior);
            changes.push(TreeChange { path: path.clone(), before });
        }
    }
    changes
}

fn same(old: &Entry, new: &Entry) -> bool {
    match (old, new) {
        (Entry::Blob { id: a, stamp: sa }, Entry::Blob { id: b, stamp: sb }) => {
            a == b && sa.mode == sb.mode
        }
        (Entry::Link { target: a }, Entry::Link { target: b }) => a == b,
        (Entry::Unkept { stamp: Some(a), .. }, Entry::Blob { stamp: b, .. })
        | (Entry::Unkept { stamp: Some(a), .. }, Entry::Unkept { stamp: Some(b), .. }) => a == b,
        (Entry::Unkept { stamp: None, .. }, Entry::Unkept { stamp: None, .. }) => true,
        (Entry::Blob { .. } | Entry::Link { .. } | Entry::Unkept { .. }, _) => false,
    }
}

/// Whether the file `entry` describes is still there, unchanged (by its stamp).
fn still_there(path: &Path, entry: &Entry) -> bool {
    let Ok(metadata) = std::fs::symlink_metadata(path) else { return false };
    match entry {
        Entry::Blob { stamp, .. } => metadata.is_file() && Stamp::of(&metadata) == *stamp,
        Entry::Link { target } => std::fs::read_link(path).is_ok_and(|now| now == *target),
        Entry::Unkept { stamp: Some(stamp), .. } => Stamp::of(&metadata) == *stamp,
        Entry::Unkept { stamp: None, .. } => metadata.is_dir(),
    }
}

fn prior(entry: &Entry) -> Prior {
    match entry {
        Entry::Blob { id, stamp } => Prior::Blob { id: id.clone(), mode: stamp.mode },
        Entry::Link { target } => Prior::Link { target: target.clone() },
        Entry::Unkept { reason, .. } => Prior::Unkept { reason: reason.clone() },
    }
}

fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as i128)
}

/// Blob ids of the changes whose old content must be copied out, deduplicated.
pub(crate) fn blob_ids(changes: &[TreeChange]) -> Vec<String> {
    let mut seen = HashMap::new();
    for change in changes {
        if let Prior::Blob { id, .. } = &change.before {
            seen.entry(id.clone()).or_insert(());
        }
    }
    seen.into_keys().collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::Snapshotter;

    #[tokio::test]
    async fn a_workspace_with_too_many_files_is_not_walked_again() {
        let work = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        for index in 0..5 {
            std::fs::write(work.path().join(format!("{index}.txt")), "x").unwrap();
        }
        let mut snapshotter =
            Snapshotter::open(work.path(), &home.path().join("s"), home.path()).await.unwrap();
        snapshotter.max_files = 3;
        let error = snapshotter.take().await.unwrap_err();
        assert!(error.contains("more than 3 files"), "{error}");
        for index in 0..4 {
            std::fs::remove_file(work.path().join(format!("{index}.txt"))).unwrap();
        }
        let error = snapshotter.take().await.unwrap_err();
        assert!(error.contains("not tried again in this session"), "{error}");
    }

    #[tokio::test]
    async fn a_session_copies_no_more_than_its_cap_into_the_store() {
        let work = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut snapshotter =
            Snapshotter::open(work.path(), &home.path().join("s"), home.path()).await.unwrap();
        snapshotter.max_copied_total = 2 << 20;
        std::fs::write(work.path().join("a.bin"), vec![1u8; 1 << 20]).unwrap();
        let first = snapshotter.take().await.unwrap();
        std::fs::write(work.path().join("a.bin"), vec![2u8; 1 << 20]).unwrap();
        let second = snapshotter.take().await.unwrap();
        // The third new content would pass the session's 2 MiB.
        std::fs::write(work.path().join("a.bin"), vec![3u8; 1 << 20]).unwrap();
        let third = snapshotter.take().await.unwrap();
        let kept = |snapshot: &super::Snapshot| {
            matches!(snapshot.inner.entries.values().next(), Some(super::Entry::Blob { .. }))
        };
        assert!(kept(&first) && kept(&second));
        let Some(super::Entry::Unkept { reason, .. }) = third.inner.entries.values().next() else {
            panic!("{third:?}")
        };
        assert!(reason.contains("this session's snapshots had copied 2 MiB"), "{reason}");
    }
}
