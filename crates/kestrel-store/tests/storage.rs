//! Giving disk back: removing sessions (never a live one) and cleaning up checkpoint
//! data by age and by size, with the index kept consistent.

// Helpers outside #[test] fns are test code too: a failed set-up should panic.
#![allow(clippy::unwrap_used)]

mod common;

use common::{at, header, home};
use kestrel_protocol::{RecordEntry, RecordItem, Timestamp};
use kestrel_store::{
    KestrelHome, SessionIndex, SessionRecord, StorageSettings, StoreError, clean_checkpoints,
    remove_sessions, session_disk, sessions_older_than,
};
use std::path::PathBuf;

const DAY: i64 = 24 * 3600 * 1000;

/// A closed session created at `created_at` with a prompt and `bytes` of checkpoint data.
fn session(home: &KestrelHome, id: &str, created_at: Timestamp, bytes: usize) -> PathBuf {
    let mut record = SessionRecord::create(home, header(id, created_at, "/w")).unwrap();
    let ts = Timestamp { millis: created_at.millis + 1 };
    record
        .append(&RecordEntry { ts, item: RecordItem::UserMessage { text: "hello".into() } })
        .unwrap();
    let path = record.path().to_path_buf();
    let blobs = checkpoints(home, id).join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::write(blobs.join("a"), vec![7u8; bytes]).unwrap();
    path
}

fn checkpoints(home: &KestrelHome, id: &str) -> PathBuf {
    home.checkpoints_dir().join(id)
}

fn listed(home: &KestrelHome) -> Vec<String> {
    let mut ids: Vec<String> =
        SessionIndex::list(home).unwrap().into_iter().map(|s| s.id.to_string()).collect();
    ids.sort();
    ids
}

fn rebuilt(home: &KestrelHome) -> Vec<String> {
    std::fs::remove_file(home.index_file()).unwrap();
    let mut ids: Vec<String> =
        SessionIndex::rebuild(home).unwrap().into_iter().map(|s| s.id.to_string()).collect();
    ids.sort();
    ids
}

#[test]
fn a_removed_session_leaves_no_record_checkpoints_or_listing() {
    let (_dir, home) = home();
    let record = session(&home, "gone", at(0), 1000);
    session(&home, "kept", at(1), 10);
    let before = SessionIndex::find(&home, "gone").unwrap();
    assert!(session_disk(&home, &before).total() > 1000);
    let removed = remove_sessions(&home, &["gon".to_owned()]).unwrap();
    assert_eq!(removed.len(), 1);
    assert!(removed[0].bytes > 1000, "{removed:?}");
    assert!(!record.exists());
    assert!(!checkpoints(&home, "gone").exists());
    assert!(checkpoints(&home, "kept").exists());
    assert_eq!(listed(&home), ["kept"]);
    // The index agrees with the records.
    assert_eq!(rebuilt(&home), ["kept"]);
}

#[test]
fn a_live_session_is_not_removed_and_nothing_else_is_either() {
    let (_dir, home) = home();
    let live_path = session(&home, "live", at(0), 10);
    let other = session(&home, "other", at(1), 10);
    let (_live, _replay) =
        SessionRecord::open(&home, &kestrel_protocol::SessionId::from_string("live")).unwrap();
    let error = remove_sessions(&home, &["other".to_owned(), "live".to_owned()]).unwrap_err();
    assert!(matches!(error, StoreError::SessionLive { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("session live is open in a worker"), "{message}");
    assert!(message.contains("nothing was removed"), "{message}");
    assert!(live_path.exists() && other.exists());
    assert!(checkpoints(&home, "live").exists() && checkpoints(&home, "other").exists());
    assert_eq!(listed(&home), ["live", "other"]);
}

#[test]
fn an_unknown_id_is_an_error_and_removes_nothing() {
    let (_dir, home) = home();
    let record = session(&home, "known", at(0), 10);
    let error = remove_sessions(&home, &["known".to_owned(), "nope".to_owned()]).unwrap_err();
    assert!(matches!(error, StoreError::SessionNotFound { .. }), "{error}");
    assert!(error.to_string().contains("no session matches `nope`"), "{error}");
    assert!(record.exists());
    assert_eq!(listed(&home), ["known"]);
}

#[test]
fn older_than_picks_idle_sessions_but_not_live_ones() {
    let (_dir, home) = home();
    session(&home, "old", at(-40 * DAY), 10);
    session(&home, "old-live", at(-40 * DAY), 10);
    session(&home, "new", at(-DAY), 10);
    let (_live, _replay) =
        SessionRecord::open(&home, &kestrel_protocol::SessionId::from_string("old-live")).unwrap();
    let old = sessions_older_than(&home, 30, at(0)).unwrap();
    let ids: Vec<String> = old.iter().map(|s| s.id.to_string()).collect();
    assert_eq!(ids, ["old"]);
}

#[test]
fn clean_up_removes_old_checkpoints_and_keeps_recent_and_live_ones() {
    let (_dir, home) = home();
    let old_record = session(&home, "old", at(-40 * DAY), 10);
    session(&home, "old-live", at(-40 * DAY), 10);
    session(&home, "recent", at(-DAY), 10);
    let (_live, _replay) =
        SessionRecord::open(&home, &kestrel_protocol::SessionId::from_string("old-live")).unwrap();
    let settings = StorageSettings { checkpoint_days: 30, ..StorageSettings::default() };
    let report = clean_checkpoints(&home, &settings, at(0)).unwrap();
    assert_eq!(report.removed.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["old"]);
    assert_eq!(report.live, 1);
    assert!(!checkpoints(&home, "old").exists());
    assert!(checkpoints(&home, "old-live").exists());
    assert!(checkpoints(&home, "recent").exists());
    // The session itself stays: it can be resumed, not undone.
    assert!(old_record.exists());
    assert_eq!(listed(&home), ["old", "old-live", "recent"]);
}

#[test]
fn clean_up_over_the_size_cap_removes_the_least_recently_used_first() {
    let (_dir, home) = home();
    session(&home, "a", at(-3 * DAY), 600_000);
    session(&home, "b", at(-2 * DAY), 600_000);
    session(&home, "c", at(-DAY), 600_000);
    let settings = StorageSettings { checkpoint_days: 30, checkpoint_max_mb: 1 };
    let report = clean_checkpoints(&home, &settings, at(0)).unwrap();
    let removed: Vec<&str> = report.removed.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(removed, ["a", "b"]);
    assert!(checkpoints(&home, "c").exists());
}

/// Sets the modification time of `path` and of everything under it.
fn backdate(path: &std::path::Path, when: std::time::SystemTime) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            backdate(&entry.unwrap().path(), when);
        }
    }
    std::fs::File::open(path).unwrap().set_modified(when).unwrap();
}

/// A daemon serves a session between two workers (a restart): no worker has its record
/// open, yet it is live. Neither clean-up (by age or size), nor `--older-than`, nor a
/// removal by id touches it while the daemon holds it; once released, it goes.
#[test]
fn a_session_the_daemon_holds_is_live_even_with_no_worker() {
    let (_dir, home) = home();
    let record = session(&home, "held", at(-40 * DAY), 2_000_000);
    let hold = kestrel_store::SessionHold::take(&home, "held").unwrap();
    let settings = StorageSettings { checkpoint_days: 30, checkpoint_max_mb: 1 };
    let report = clean_checkpoints(&home, &settings, at(0)).unwrap();
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.live, 1);
    assert!(sessions_older_than(&home, 30, at(0)).unwrap().is_empty());
    let error = remove_sessions(&home, &["held".to_owned()]).unwrap_err();
    assert!(matches!(error, StoreError::SessionLive { .. }), "{error}");
    assert!(error.to_string().contains("a daemon serves it"), "{error}");
    assert!(record.exists() && checkpoints(&home, "held").exists());

    drop(hold);
    let report = clean_checkpoints(&home, &settings, at(0)).unwrap();
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert_eq!(remove_sessions(&home, &["held".to_owned()]).unwrap().len(), 1);
    assert!(!record.exists());
}

/// Checkpoint data the index does not list (a session just starting, one a daemon is
/// loading) is judged by its newest file: kept while that is recent, even over the size
/// cap, and while a daemon holds it; removed once every file is old.
#[test]
fn checkpoint_data_of_an_unknown_session_is_kept_while_any_file_is_recent() {
    let (_dir, home) = home();
    let now = std::time::SystemTime::now();
    let old = now - std::time::Duration::from_secs(40 * 24 * 3600);
    for name in ["recent-file", "all-old", "held"] {
        let blobs = checkpoints(&home, name).join("blobs");
        std::fs::create_dir_all(&blobs).unwrap();
        std::fs::write(blobs.join("a"), vec![1u8; 2_000_000]).unwrap();
        backdate(&checkpoints(&home, name), old);
    }
    // One recent file deep inside; the directories above it look old.
    let fresh = checkpoints(&home, "recent-file").join("blobs").join("new");
    std::fs::write(&fresh, "x").unwrap();
    backdate(&checkpoints(&home, "recent-file").join("blobs"), old);
    std::fs::File::open(&fresh).unwrap().set_modified(now).unwrap();
    let _hold = kestrel_store::SessionHold::take(&home, "held").unwrap();

    let settings = StorageSettings { checkpoint_days: 30, checkpoint_max_mb: 1 };
    let report = clean_checkpoints(&home, &settings, Timestamp::now()).unwrap();
    let removed: Vec<&str> = report.removed.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(removed, ["all-old"], "{report:?}");
    assert_eq!(report.live, 1);
    assert!(checkpoints(&home, "recent-file").exists());
    assert!(checkpoints(&home, "held").exists());
}

/// Two holds of one session (a daemon's two handles, or two daemons): releasing one
/// leaves the session live; a removal waits for the last.
#[test]
fn a_session_held_twice_stays_live_until_both_holds_are_released() {
    let (_dir, home) = home();
    let record = session(&home, "held", at(-40 * DAY), 1_000);
    let first = kestrel_store::SessionHold::take(&home, "held").unwrap();
    let second = kestrel_store::SessionHold::take(&home, "held").unwrap();
    drop(first);
    let error = remove_sessions(&home, &["held".to_owned()]).unwrap_err();
    assert!(matches!(error, StoreError::SessionLive { .. }), "{error}");
    assert!(record.exists());
    drop(second);
    assert_eq!(remove_sessions(&home, &["held".to_owned()]).unwrap().len(), 1);
    assert!(!record.exists());
}

/// While a removal holds a session's lock file (taken exclusively, as `claim` does),
/// `try_take` answers at once that it cannot hold it, so async code never blocks on
/// it; once the removal is done, it holds the session.
#[test]
fn try_take_does_not_wait_for_a_removal() {
    let (_dir, home) = home();
    session(&home, "busy", at(-40 * DAY), 1_000);
    let path = home.run_dir().join("live").join("busy");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let removal = std::fs::File::create(&path).unwrap();
    removal.lock().unwrap();
    assert!(kestrel_store::SessionHold::try_take(&home, "busy").unwrap().is_none());
    removal.unlock().unwrap();
    let hold = kestrel_store::SessionHold::try_take(&home, "busy").unwrap();
    assert!(hold.is_some());
    let error = remove_sessions(&home, &["busy".to_owned()]).unwrap_err();
    assert!(matches!(error, StoreError::SessionLive { .. }), "{error}");
}

/// The lock files a daemon's holds leave in `run/live` go with the clean-up once their
/// session's data is gone; a held one, or one of a session that still has data, stays.
#[test]
fn clean_up_removes_the_lock_files_of_sessions_whose_data_is_gone() {
    let (_dir, home) = home();
    session(&home, "kept", at(0), 10);
    drop(kestrel_store::SessionHold::take(&home, "kept").unwrap());
    drop(kestrel_store::SessionHold::take(&home, "gone").unwrap());
    let held = kestrel_store::SessionHold::take(&home, "held").unwrap();
    let live = home.run_dir().join("live");
    let settings = StorageSettings::default();
    clean_checkpoints(&home, &settings, at(0)).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(&live)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["held", "kept"]);
    drop(held);
}
