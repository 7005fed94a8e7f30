//! A session's last activity in the index: what `session/list` answers as `updatedAt`
//! and sorts by. The first prompt and model requests note it; other prompts, finished
//! turns and items between turns (an undo's checkpoint) unless the last note is under a
//! second old; other items at most once a minute. A rebuilt index applies the same rule
//! to the records, so it says what the live one said.

// Helpers outside #[test] fns are test code too: a failed set-up should panic.
#![allow(clippy::unwrap_used)]

mod common;

use common::{at, header, home};
use kestrel_protocol::{RecordEntry, RecordItem, SessionId, StopReason, Usage};
use kestrel_store::{KestrelHome, SessionIndex, SessionRecord};
use std::io::Write;

fn prompt(ts: i64, text: &str) -> RecordEntry {
    RecordEntry { ts: at(ts), item: RecordItem::UserMessage { text: text.into() } }
}

fn answer(ts: i64) -> RecordEntry {
    RecordEntry {
        ts: at(ts),
        item: RecordItem::AssistantMessage {
            text: "ok".into(),
            reasoning: None,
            reasoning_opaque: None,
        },
    }
}

fn usage(ts: i64) -> RecordEntry {
    let usage = Usage { input_tokens: 10, output_tokens: 2, ..Usage::default() };
    RecordEntry { ts: at(ts), item: RecordItem::Usage { usage } }
}

fn completed(ts: i64) -> RecordEntry {
    RecordEntry {
        ts: at(ts),
        item: RecordItem::TurnCompleted { stop_reason: StopReason::EndTurn, error: None },
    }
}

fn index_lines(home: &KestrelHome) -> usize {
    std::fs::read_to_string(home.index_file()).unwrap().lines().count()
}

fn listed(home: &KestrelHome) -> Vec<(String, i64)> {
    let base = at(0).millis;
    SessionIndex::list(home)
        .unwrap()
        .into_iter()
        .map(|summary| (summary.id.to_string(), summary.updated_at.millis - base))
        .collect()
}

#[test]
fn a_session_used_last_is_listed_first_with_its_last_activity() {
    let (_dir, home) = home();
    let mut old = SessionRecord::create(&home, header("old", at(0), "/w")).unwrap();
    old.append(&prompt(10, "first")).unwrap();
    old.append(&completed(2_000)).unwrap();
    drop(old);
    let mut new = SessionRecord::create(&home, header("new", at(3_000), "/w")).unwrap();
    new.append(&prompt(3_010, "second")).unwrap();
    new.append(&completed(5_000)).unwrap();
    drop(new);
    assert_eq!(listed(&home), [("new".to_owned(), 5_000), ("old".to_owned(), 2_000)]);

    // The older session is resumed and used again: it moves to the top.
    let (mut old, _) = SessionRecord::open(&home, &SessionId::from_string("old")).unwrap();
    old.append(&prompt(8_000, "again")).unwrap();
    assert_eq!(listed(&home)[0], ("old".to_owned(), 8_000), "a prompt is activity");
    old.append(&usage(9_000)).unwrap();
    assert_eq!(listed(&home)[0], ("old".to_owned(), 9_000), "a model request is activity");
    old.append(&answer(9_500)).unwrap();
    old.append(&completed(10_000)).unwrap();
    assert_eq!(listed(&home), [("old".to_owned(), 10_000), ("new".to_owned(), 5_000)]);
    let summary = SessionIndex::find(&home, "old").unwrap();
    assert_eq!(summary.created_at, at(0), "the creation time stays what it was");
}

#[test]
fn a_session_without_activity_lists_its_creation_time() {
    let (_dir, home) = home();
    drop(SessionRecord::create(&home, header("quiet", at(300), "/w")).unwrap());
    assert_eq!(listed(&home), [("quiet".to_owned(), 300)]);
}

#[test]
fn items_within_a_turn_note_activity_at_most_once_a_minute() {
    let (_dir, home) = home();
    let mut record = SessionRecord::create(&home, header("s", at(0), "/w")).unwrap();
    record.append(&prompt(1, "go")).unwrap();
    let after_prompt = index_lines(&home);
    for step in 1..=20 {
        record.append(&answer(1 + step * 1_000)).unwrap();
    }
    assert_eq!(index_lines(&home), after_prompt, "20 answers within a minute add no line");
    record.append(&answer(61_001)).unwrap();
    assert_eq!(index_lines(&home), after_prompt + 1, "a minute later one line notes it");
    assert_eq!(listed(&home), [("s".to_owned(), 61_001)]);
    record.append(&answer(62_000)).unwrap();
    assert_eq!(listed(&home), [("s".to_owned(), 61_001)], "not noted yet");
    record.append(&completed(63_000)).unwrap();
    assert_eq!(listed(&home), [("s".to_owned(), 63_000)], "the turn's end is exact");
}

#[test]
fn a_rebuilt_index_takes_the_last_activity_from_the_records() {
    let (_dir, home) = home();
    let mut a = SessionRecord::create(&home, header("a", at(0), "/w")).unwrap();
    a.append(&prompt(1, "one")).unwrap();
    a.append(&completed(9_000)).unwrap();
    drop(a);
    let mut b = SessionRecord::create(&home, header("b", at(1_000), "/w")).unwrap();
    b.append(&prompt(1_001, "two")).unwrap();
    // Within a second of the prompt: no line, live or rebuilt.
    b.append(&completed(2_000)).unwrap();
    drop(b);
    let before = SessionIndex::list(&home).unwrap();
    std::fs::remove_file(home.index_file()).unwrap();
    let rebuilt = SessionIndex::rebuild(&home).unwrap();
    assert_eq!(rebuilt, before);
    assert_eq!(listed(&home), [("a".to_owned(), 9_000), ("b".to_owned(), 1_001)]);
}

#[test]
fn latest_is_the_most_recently_active_top_level_session() {
    let (_dir, home) = home();
    let mut old = SessionRecord::create(&home, header("old", at(0), "/w")).unwrap();
    drop(SessionRecord::create(&home, header("new", at(1_000), "/w")).unwrap());
    old.append(&prompt(2_000, "still going")).unwrap();
    assert_eq!(SessionIndex::latest(&home, None).unwrap().id.as_str(), "old");
}

#[test]
fn json_listings_carry_the_last_activity() {
    let (_dir, home) = home();
    let mut record = SessionRecord::create(&home, header("s1", at(0), "/w")).unwrap();
    record.append(&prompt(1_500, "hello")).unwrap();
    let summary = SessionIndex::find(&home, "s1").unwrap();
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["created_at"], "2026-03-04T05:06:07.000Z");
    assert_eq!(json["updated_at"], "2026-03-04T05:06:08.500Z");
}

#[test]
fn a_reopened_record_notes_a_newer_kestrels_items_as_a_rebuild_does() {
    let (_dir, home) = home();
    let mut record = SessionRecord::create(&home, header("s", at(0), "/w")).unwrap();
    record.append(&prompt(10, "first")).unwrap();
    let path = record.path().to_path_buf();
    drop(record);
    // An item type this Kestrel does not know, written by a newer one a minute later:
    // an item inside a turn, noted once a minute.
    let ts = at(70_000).to_string();
    let line = format!("{{\"ts\":\"{ts}\",\"type\":\"hologram\"}}\n");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(line.as_bytes())
        .unwrap();
    let (mut record, _replay) = SessionRecord::open(&home, &SessionId::from_string("s")).unwrap();
    record.append(&answer(75_000)).unwrap();
    drop(record);
    let live = listed(&home);
    std::fs::remove_file(home.index_file()).unwrap();
    SessionIndex::rebuild(&home).unwrap();
    assert_eq!(listed(&home), live, "the live index says what a rebuild says");
    assert_eq!(live, [("s".to_owned(), 70_000)]);
}
