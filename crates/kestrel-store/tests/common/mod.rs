//! Helpers shared by the store's behaviour tests.
// Helpers outside #[test] fns are test code too: a failed set-up should panic.
#![allow(dead_code, clippy::unwrap_used)]

use kestrel_protocol::{
    RECORD_VERSION, RecordEntry, RecordHeader, RecordItem, SessionId, Timestamp,
};
use kestrel_store::{KestrelHome, SessionIndex};

/// A home in a fresh temp dir (kept alive by the returned guard).
pub fn home() -> (tempfile::TempDir, KestrelHome) {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path().join("kestrel-home"));
    (dir, home)
}

/// A home whose index a rewrite wrote (starts with its marker), so a listing reads the
/// lines appended to it from then on as they are: one the first appends created would be
/// rebuilt by the first listing.
pub fn marked_home() -> (tempfile::TempDir, KestrelHome) {
    let (dir, home) = home();
    std::fs::create_dir_all(home.sessions_dir()).unwrap();
    SessionIndex::rebuild(&home).unwrap();
    (dir, home)
}

/// 2026-03-04T05:06:07Z plus `offset_millis`.
pub fn at(offset_millis: i64) -> Timestamp {
    Timestamp { millis: Timestamp::parse("2026-03-04T05:06:07Z").unwrap().millis + offset_millis }
}

pub fn header(id: &str, created_at: Timestamp, cwd: &str) -> RecordHeader {
    RecordHeader {
        id: SessionId::from_string(id),
        version: RECORD_VERSION,
        created_at,
        cwd: cwd.into(),
        provider: "anthropic".into(),
        model: "claude-sonnet-4-5".into(),
        parent_id: None,
        forked_from: None,
        swarm: None,
        repository: None,
    }
}

pub fn user(text: &str) -> RecordEntry {
    RecordEntry { ts: at(1), item: RecordItem::UserMessage { text: text.into() } }
}

pub fn assistant(text: &str) -> RecordEntry {
    RecordEntry {
        ts: at(2),
        item: RecordItem::AssistantMessage {
            text: text.into(),
            reasoning: None,
            reasoning_opaque: None,
        },
    }
}
