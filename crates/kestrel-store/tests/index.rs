//! The session index through the public API: listing without opening records, rebuild,
//! lookup by id prefix, `--last`, and a home that moved.

// Helpers outside #[test] fns are test code too: a failed set-up should panic.
#![allow(clippy::unwrap_used)]

mod common;

use common::{assistant, at, header, home, user};
use kestrel_protocol::SessionId;
use kestrel_store::{KestrelHome, SessionIndex, SessionRecord, StoreError};
use std::path::Path;

/// Creates a session with the given first prompt (if any) and closes it.
fn session(home: &KestrelHome, id: &str, offset_millis: i64, cwd: &str, prompt: Option<&str>) {
    let mut record = SessionRecord::create(home, header(id, at(offset_millis), cwd)).unwrap();
    if let Some(prompt) = prompt {
        record.append(&user(prompt)).unwrap();
        record.append(&assistant("ok")).unwrap();
        record.append(&user("a later prompt")).unwrap();
    }
}

fn ids(home: &KestrelHome) -> Vec<String> {
    SessionIndex::list(home).unwrap().into_iter().map(|summary| summary.id.to_string()).collect()
}

#[test]
fn lists_newest_first_with_the_first_prompt() {
    let (_dir, home) = home();
    session(&home, "old", 0, "/w", Some("first task"));
    session(&home, "new", 1_000, "/w", Some("second task"));
    session(&home, "quiet", 500, "/w", None);

    let listed = SessionIndex::list(&home).unwrap();
    let names: Vec<_> = listed.iter().map(|summary| summary.id.as_str()).collect();
    assert_eq!(names, ["new", "quiet", "old"]);
    assert_eq!(listed[0].first_prompt.as_deref(), Some("second task"));
    assert_eq!(listed[1].first_prompt, None);
    assert_eq!(listed[2].created_at, at(0));
    assert_eq!(
        (listed[2].model.as_str(), listed[2].provider.as_str()),
        ("claude-sonnet-4-5", "anthropic")
    );
    assert_eq!(listed[2].path, home.sessions_dir().join("2026/03/04/old.jsonl"));
}

#[test]
fn the_index_gets_a_creation_line_and_one_for_the_first_prompt() {
    let (_dir, home) = home();
    session(&home, "s1", 0, "/w", Some("hello"));
    let text = std::fs::read_to_string(home.index_file()).unwrap();
    let lines: Vec<serde_json::Value> =
        text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    // The answer and the second prompt, within a second of the first, add none.
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["id"], "s1");
    assert_eq!(lines[0]["path"], "sessions/2026/03/04/s1.jsonl", "stored relative to the home");
    let first_prompt = serde_json::json!({
        "id": "s1", "first_prompt": "hello", "updated_at": "2026-03-04T05:06:07.001Z"
    });
    assert_eq!(lines[1], first_prompt);
}

#[test]
fn listing_reads_the_index_not_the_records() {
    let (_dir, home) = home();
    session(&home, "s1", 0, "/w", Some("hello"));
    let path = SessionIndex::find(&home, "s1").unwrap().path;
    std::fs::remove_file(&path).unwrap();
    let listed = SessionIndex::list(&home).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].first_prompt.as_deref(), Some("hello"));
}

#[test]
fn a_deleted_index_is_rebuilt_from_the_records() {
    let (_dir, home) = home();
    session(&home, "a", 0, "/w", Some("alpha"));
    session(&home, "b", 1_000, "/x", None);
    let before = SessionIndex::list(&home).unwrap();
    std::fs::remove_file(home.index_file()).unwrap();

    let after = SessionIndex::list(&home).unwrap();
    assert_eq!(after, before);
    assert!(home.index_file().is_file(), "the rebuilt index is written back");
    // Appends after a rebuild merge with it.
    let (mut record, _) = SessionRecord::open(&home, &SessionId::from_string("b")).unwrap();
    record.append(&user("beta")).unwrap();
    assert_eq!(SessionIndex::find(&home, "b").unwrap().first_prompt.as_deref(), Some("beta"));
}

#[test]
fn an_explicit_rebuild_compacts_the_index_to_one_line_per_session() {
    let (_dir, home) = home();
    session(&home, "a", 0, "/w", Some("alpha"));
    session(&home, "b", 1_000, "/w", Some("beta"));
    let before = SessionIndex::list(&home).unwrap();
    assert_eq!(SessionIndex::rebuild(&home).unwrap(), before);
    let text = std::fs::read_to_string(home.index_file()).unwrap();
    assert_eq!(text.lines().count(), 3, "a marker, then one line per session: {text}");
    assert_eq!(SessionIndex::list(&home).unwrap(), before);
}

#[test]
fn rebuild_leaves_out_files_that_are_not_records() {
    let (_dir, home) = home();
    session(&home, "a", 0, "/w", None);
    let day = home.sessions_dir().join("2026/03/04");
    std::fs::write(day.join("junk.jsonl"), "not a record\n").unwrap();
    let rebuilt = SessionIndex::rebuild(&home).unwrap();
    assert_eq!(rebuilt.len(), 1);
}

#[test]
fn listing_an_empty_home_is_empty_and_creates_nothing() {
    let (_dir, home) = home();
    assert!(SessionIndex::list(&home).unwrap().is_empty());
    assert!(!home.root().exists());
}

#[test]
fn find_by_id_or_unique_prefix() {
    let (_dir, home) = home();
    session(&home, "abc-1", 0, "/w", None);
    session(&home, "abc-2", 1, "/w", None);
    session(&home, "abd-3", 2, "/w", None);
    session(&home, "abd", 3, "/w", None);

    assert_eq!(SessionIndex::find(&home, "abc-1").unwrap().id.as_str(), "abc-1");
    assert_eq!(SessionIndex::find(&home, "abc-2").unwrap().id.as_str(), "abc-2");
    // An exact id wins over being a prefix of another.
    assert_eq!(SessionIndex::find(&home, "abd").unwrap().id.as_str(), "abd");
    assert_eq!(SessionIndex::find(&home, "abd-").unwrap().id.as_str(), "abd-3");

    let error = SessionIndex::find(&home, "abc").unwrap_err();
    assert!(matches!(error, StoreError::AmbiguousSession { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("abc-1") && message.contains("abc-2"), "{message}");

    let error = SessionIndex::find(&home, "zzz").unwrap_err();
    assert!(matches!(error, StoreError::SessionNotFound { .. }), "{error}");
    assert!(error.to_string().contains("`zzz`"), "{error}");
    assert!(SessionIndex::find(&home, "").is_err());
}

#[test]
fn find_falls_back_to_the_records_when_the_index_missed_a_session() {
    let (_dir, home) = home();
    session(&home, "listed", 0, "/w", None);
    // Another session's record exists but its index line was lost (say, a crash).
    session(&home, "unlisted", 1, "/w", None);
    SessionIndex::rebuild(&home).unwrap();
    let index = std::fs::read_to_string(home.index_file()).unwrap();
    let kept: String = index
        .lines()
        .filter(|line| !line.contains("unlisted"))
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(home.index_file(), kept).unwrap();
    assert_eq!(ids(&home), ["listed"]);

    assert_eq!(SessionIndex::find(&home, "unl").unwrap().id.as_str(), "unlisted");
    let (record, _) = SessionRecord::open(&home, &SessionId::from_string("unlisted")).unwrap();
    assert_eq!(record.id().as_str(), "unlisted");
}

#[test]
fn latest_is_the_newest_top_level_session_in_the_directory() {
    let (_dir, home) = home();
    session(&home, "w-old", 0, "/w", None);
    session(&home, "x-new", 2_000, "/x", None);
    session(&home, "w-new", 1_000, "/w", None);
    let mut child = header("w-child", at(3_000), "/w");
    child.parent_id = Some(SessionId::from_string("w-new"));
    drop(SessionRecord::create(&home, child).unwrap());

    assert_eq!(SessionIndex::latest(&home, Some(Path::new("/w"))).unwrap().id.as_str(), "w-new");
    assert_eq!(SessionIndex::latest(&home, Some(Path::new("/w/"))).unwrap().id.as_str(), "w-new");
    assert_eq!(SessionIndex::latest(&home, None).unwrap().id.as_str(), "x-new");
    let error = SessionIndex::latest(&home, Some(Path::new("/elsewhere"))).unwrap_err();
    assert!(matches!(error, StoreError::NoSessions { .. }), "{error}");
    assert!(error.to_string().contains("/elsewhere"), "{error}");
}

#[test]
fn a_moved_home_still_finds_its_sessions() {
    let (dir, home) = home();
    session(&home, "s1", 0, "/w", Some("hello"));
    let moved = KestrelHome::at(dir.path().join("moved"));
    std::fs::rename(home.root(), moved.root()).unwrap();

    let summary = SessionIndex::find(&moved, "s1").unwrap();
    assert!(summary.path.starts_with(moved.root()), "{}", summary.path.display());
    let (_record, replay) = SessionRecord::open(&moved, &SessionId::from_string("s1")).unwrap();
    assert_eq!(replay.entries.len(), 3);
}

#[test]
fn concurrent_writers_never_corrupt_the_index() {
    let (_dir, home) = home();
    let threads: Vec<_> = (0..8)
        .map(|thread| {
            let home = home.clone();
            std::thread::spawn(move || {
                for n in 0..25 {
                    let id = format!("t{thread}-{n}");
                    session(
                        &home,
                        &id,
                        i64::from(thread * 100 + n),
                        "/w",
                        Some(&format!("prompt {id}")),
                    );
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let text = std::fs::read_to_string(home.index_file()).unwrap();
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    let listed = SessionIndex::list(&home).unwrap();
    assert_eq!(listed.len(), 200);
    assert!(
        listed
            .iter()
            .all(|summary| summary.first_prompt.as_deref()
                == Some(&format!("prompt {}", summary.id)))
    );
}

#[test]
fn summaries_serialize_for_json_listings() {
    let (_dir, home) = home();
    session(&home, "s1", 0, "/w", Some("hello"));
    let summary = SessionIndex::find(&home, "s1").unwrap();
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["id"], "s1");
    assert_eq!(json["created_at"], "2026-03-04T05:06:07.000Z");
    assert_eq!(json["first_prompt"], "hello");
}
