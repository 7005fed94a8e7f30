//! The disk sessions use, and giving it back: `kestrel sessions rm`, and the clean-up of
//! checkpoint data (`checkpoints/<session>/`) past `[storage] checkpoint_days` or over
//! `[storage] checkpoint_max_mb`. A session open in a worker holds its record's lock
//! (record.rs) and one a daemon serves is held by the daemon even between workers
//! (session_hold.rs): nothing of a live session is ever removed, and a removal holds
//! both itself while it works, so no worker or daemon takes the session up meanwhile.
//! Checkpoint data the index does not know is judged by its files' times: kept while
//! any of them is recent.

use crate::file_lock;
use crate::index::{self, SessionIndex, SessionSummary};
use crate::paths::KestrelHome;
use crate::session_hold::{self, Claim};
use crate::{StorageSettings, StoreError};
use kestrel_protocol::{SessionId, Timestamp};
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A clean-up runs at most this often (the stamp file's age says when it last ran).
const CLEAN_UP_EVERY: Duration = Duration::from_secs(3600);

/// `checkpoints/.cleaned`: touched by each clean-up.
const STAMP: &str = ".cleaned";

const DAY_MILLIS: i64 = 24 * 3600 * 1000;

/// Bytes one session uses on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionDisk {
    /// Its record file.
    pub record: u64,
    /// Its checkpoint directory (what undo puts back).
    pub checkpoints: u64,
}

impl SessionDisk {
    pub fn total(&self) -> u64 {
        self.record + self.checkpoints
    }
}

/// What one session uses on disk (a missing file or directory counts 0).
pub fn session_disk(home: &KestrelHome, session: &SessionSummary) -> SessionDisk {
    SessionDisk {
        record: std::fs::metadata(&session.path).map_or(0, |metadata| metadata.len()),
        checkpoints: dir_size(&home.checkpoints_dir().join(session.id.as_str())),
    }
}

/// Bytes of the files under `path`, symlinks not followed; 0 when it is missing.
pub fn dir_size(path: &Path) -> u64 {
    let Ok(metadata) = std::fs::symlink_metadata(path) else { return 0 };
    if !metadata.is_dir() {
        return metadata.len();
    }
    let Ok(entries) = std::fs::read_dir(path) else { return 0 };
    entries.flatten().map(|entry| dir_size(&entry.path())).sum()
}

/// A session [`remove_sessions`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedSession {
    pub id: SessionId,
    /// The bytes given back (record and checkpoints).
    pub bytes: u64,
}

/// Removes sessions for good: each one's record, checkpoint data and index entry. Every
/// query (an id or unique prefix) is resolved and every record locked before anything
/// is removed, so an unknown id or a live session removes nothing.
///
/// Fails with [`StoreError::SessionNotFound`] or [`StoreError::AmbiguousSession`] for a
/// query, [`StoreError::SessionLive`] when a worker has one of them open or a daemon
/// serves it, or an I/O error (what was removed before it stays removed).
pub fn remove_sessions(
    home: &KestrelHome,
    queries: &[String],
) -> Result<Vec<RemovedSession>, StoreError> {
    let mut sessions = Vec::new();
    for query in queries {
        let session = SessionIndex::find(home, query)?;
        if !sessions.iter().any(|known: &SessionSummary| known.id == session.id) {
            sessions.push(session);
        }
    }
    let held = sessions
        .iter()
        .map(|session| hold(home, session).map(|locks| (session, locks)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut removed = Vec::with_capacity(held.len());
    for (session, _locks) in held {
        let bytes = session_disk(home, session).total();
        remove_dir(&home.checkpoints_dir().join(session.id.as_str()))?;
        match std::fs::remove_file(&session.path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(StoreError::io("remove the record", &session.path, source)),
        }
        index::record_removed(home, &session.id)?;
        removed.push(RemovedSession { id: session.id.clone(), bytes });
    }
    Ok(removed)
}

/// Sessions last active more than `days` days before `now` that no worker has open and
/// no daemon serves (live ones are left out), oldest first: what `sessions rm
/// --older-than` removes.
pub fn sessions_older_than(
    home: &KestrelHome,
    days: u32,
    now: Timestamp,
) -> Result<Vec<SessionSummary>, StoreError> {
    let cutoff = now.millis - i64::from(days) * DAY_MILLIS;
    let mut old: Vec<SessionSummary> = SessionIndex::list(home)?
        .into_iter()
        .filter(|session| session.updated_at.millis < cutoff)
        .filter(|session| !file_lock::is_locked_exclusively(&session.path))
        .filter(|session| session_hold::claim(home, session.id.as_str()).is_ok())
        .collect();
    old.reverse();
    Ok(old)
}

/// What a checkpoint clean-up did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CleanUp {
    /// The sessions whose checkpoint data was removed, with its bytes.
    pub removed: Vec<(String, u64)>,
    /// Checkpoint data left in place because its session is open in a worker or
    /// served by a daemon.
    pub live: usize,
}

/// [`clean_checkpoints`], unless one ran in the last hour: `None` then.
pub fn clean_checkpoints_if_due(
    home: &KestrelHome,
    settings: &StorageSettings,
) -> Option<Result<CleanUp, StoreError>> {
    let stamp = home.checkpoints_dir().join(STAMP);
    let last = std::fs::metadata(&stamp).and_then(|metadata| metadata.modified()).ok();
    if last.is_some_and(|last| {
        SystemTime::now().duration_since(last).is_ok_and(|age| age < CLEAN_UP_EVERY)
    }) {
        return None;
    }
    if !home.checkpoints_dir().is_dir() {
        return None;
    }
    // Stamped first: two sessions starting together do not both walk the directory.
    if File::create(&stamp).is_err() {
        return None;
    }
    Some(clean_checkpoints(home, settings, Timestamp::now()))
}

/// Removes the checkpoint data of sessions last active more than `checkpoint_days` days
/// before `now`, then, while the rest is over `checkpoint_max_mb`, that of the least
/// recently active sessions. The data of a live session (its record locked by a worker,
/// or held by a daemon) is never touched; a session's record stays (it can still be
/// resumed, but not undone). Data whose session the index does not list counts as last
/// active when its newest file last changed, and is removed only once that is past
/// `checkpoint_days` (never for the size cap: it may belong to a session just starting).
pub fn clean_checkpoints(
    home: &KestrelHome,
    settings: &StorageSettings,
    now: Timestamp,
) -> Result<CleanUp, StoreError> {
    let dir = home.checkpoints_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(CleanUp::default());
        }
        Err(source) => return Err(StoreError::io("read the directory", &dir, source)),
    };
    let sessions: HashMap<String, SessionSummary> = SessionIndex::list(home)?
        .into_iter()
        .map(|session| (session.id.to_string(), session))
        .collect();
    let mut report = CleanUp::default();
    let mut candidates = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_dir() {
            continue;
        }
        let session = sessions.get(&name).cloned();
        let last_active = match &session {
            Some(session) => session.updated_at.millis,
            None => newest_millis(&entry.path()).unwrap_or(now.millis),
        };
        let bytes = dir_size(&entry.path());
        candidates.push(Candidate { name, path: entry.path(), session, last_active, bytes });
    }
    candidates.sort_by_key(|candidate| candidate.last_active);
    let cutoff = now.millis - i64::from(settings.checkpoint_days) * DAY_MILLIS;
    let cap = settings.checkpoint_max_mb.saturating_mul(1_000_000);
    let mut total: u64 = candidates.iter().map(|candidate| candidate.bytes).sum();
    for candidate in candidates {
        let recent = candidate.last_active >= cutoff;
        if recent && (total <= cap || candidate.session.is_none()) {
            continue;
        }
        // Only what is about to go is locked, and only while it goes: a session being
        // opened right now meets the lock for a moment at most.
        let locks = match &candidate.session {
            Some(session) => hold(home, session),
            None => session_hold::claim(home, &candidate.name).map(|claim| (claim, None)),
        };
        let Ok(_locks) = locks else {
            report.live += 1;
            continue;
        };
        remove_dir(&candidate.path)?;
        total -= candidate.bytes;
        report.removed.push((candidate.name, candidate.bytes));
    }
    session_hold::remove_stale(home, |id| !sessions.contains_key(id) && !dir.join(id).exists());
    Ok(report)
}

/// A session's checkpoint directory.
struct Candidate {
    name: String,
    path: PathBuf,
    /// Its session, when the index still lists it.
    session: Option<SessionSummary>,
    last_active: i64,
    bytes: u64,
}

/// Claims a session from the daemon and locks its record, so that neither takes it up
/// while it is removed (the record's lock is `None` when the record is gone). Fails with
/// [`StoreError::SessionLive`] when a daemon holds it or a worker has it open.
fn hold(home: &KestrelHome, session: &SessionSummary) -> Result<(Claim, Option<File>), StoreError> {
    let claim = session_hold::claim(home, session.id.as_str())?;
    let file = match File::open(&session.path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok((claim, None)),
        Err(source) => return Err(StoreError::io("open the record", &session.path, source)),
    };
    if file_lock::try_lock_exclusive(&file, &session.path)? {
        Ok((claim, Some(file)))
    } else {
        Err(StoreError::SessionLive { id: session.id.to_string() })
    }
}

fn remove_dir(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StoreError::io("remove", path, source)),
    }
}

/// When anything under `path` (itself included, symlinks not followed) last changed.
fn newest_millis(path: &Path) -> Option<i64> {
    let metadata = std::fs::symlink_metadata(path).ok()?;
    let since = metadata.modified().ok()?.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    let own = i64::try_from(since.as_millis()).ok()?;
    if !metadata.is_dir() {
        return Some(own);
    }
    let entries = std::fs::read_dir(path).ok()?;
    Some(entries.flatten().filter_map(|entry| newest_millis(&entry.path())).fold(own, i64::max))
}
