//! Session records through the public API: create, lock, append, open, replay, fork.

// Helpers outside #[test] fns are test code too: a failed set-up should panic.
#![allow(clippy::unwrap_used)]

mod common;

use common::{assistant, at, header, home, user};
use kestrel_protocol::{RecordItem, SessionId};
use kestrel_store::{SessionIndex, SessionRecord, StoreError, fork, read_record};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

#[cfg(unix)]
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn append_raw(path: &Path, bytes: &[u8]) {
    OpenOptions::new().append(true).open(path).unwrap().write_all(bytes).unwrap();
}

#[test]
fn create_writes_the_header_first_in_a_dated_path() {
    let (_dir, home) = home();
    let record = SessionRecord::create(&home, header("s1", at(0), "/w")).unwrap();
    assert_eq!(record.path(), home.sessions_dir().join("2026/03/04/s1.jsonl"));
    assert_eq!(record.id().as_str(), "s1");
    assert_eq!(record.header(), &header("s1", at(0), "/w"));
    assert_eq!(record.items_written(), 0);
    let text = std::fs::read_to_string(record.path()).unwrap();
    assert!(text.starts_with(r#"{"type":"session","id":"s1","version":1,"#), "{text}");
    assert!(text.ends_with('\n') && text.lines().count() == 1, "{text}");
}

#[cfg(unix)]
#[test]
fn directories_are_0700_and_files_0600() {
    let (_dir, home) = home();
    let record = SessionRecord::create(&home, header("s1", at(0), "/w")).unwrap();
    for dir in
        [home.root().to_path_buf(), home.sessions_dir(), home.sessions_dir().join("2026/03/04")]
    {
        assert_eq!(mode_of(&dir), 0o700, "{}", dir.display());
    }
    assert_eq!(mode_of(record.path()), 0o600);
    assert_eq!(mode_of(&home.index_file()), 0o600);
}

#[cfg(unix)]
#[test]
fn ensure_dir_creates_missing_parents_private() {
    let (_dir, home) = home();
    let nested = home.run_dir().join("a/b");
    kestrel_store::ensure_dir(&nested).unwrap();
    assert_eq!(mode_of(&home.run_dir()), 0o700);
    assert_eq!(mode_of(&nested), 0o700);
    kestrel_store::ensure_dir(&nested).unwrap();
}

#[test]
fn a_second_writer_is_refused_while_the_first_lives() {
    let (_dir, home) = home();
    let id = SessionId::from_string("s1");
    let first = SessionRecord::create(&home, header("s1", at(0), "/w")).unwrap();
    let error = SessionRecord::open(&home, &id).unwrap_err();
    assert!(matches!(error, StoreError::Locked { .. }), "{error}");
    assert!(error.to_string().contains("session s1 is already open"), "{error}");
    drop(first);
    let (second, _) = SessionRecord::open(&home, &id).unwrap();
    let error = SessionRecord::open(&home, &id).unwrap_err();
    assert!(matches!(error, StoreError::Locked { .. }), "{error}");
    drop(second);
}

#[test]
fn creating_an_existing_session_is_refused() {
    let (_dir, home) = home();
    drop(SessionRecord::create(&home, header("s1", at(0), "/w")).unwrap());
    let error = SessionRecord::create(&home, header("s1", at(0), "/w")).unwrap_err();
    assert!(matches!(error, StoreError::SessionExists { .. }), "{error}");
}

#[test]
fn an_id_that_is_not_a_file_name_is_refused() {
    let (_dir, home) = home();
    let error = SessionRecord::create(&home, header("../escape", at(0), "/w")).unwrap_err();
    assert!(matches!(error, StoreError::InvalidSessionId { .. }), "{error}");
    let error = SessionRecord::open(&home, &SessionId::from_string("a/b")).unwrap_err();
    assert!(matches!(error, StoreError::InvalidSessionId { .. }), "{error}");
}

#[test]
fn opening_an_unknown_session_names_it() {
    let (_dir, home) = home();
    let error = SessionRecord::open(&home, &SessionId::from_string("nope")).unwrap_err();
    assert!(matches!(error, StoreError::SessionNotFound { .. }), "{error}");
    assert!(error.to_string().contains("`nope`"), "{error}");
}

#[test]
fn appended_items_replay_in_order_after_reopening() {
    let (_dir, home) = home();
    let id = SessionId::from_string("s1");
    let mut record = SessionRecord::create(&home, header("s1", at(0), "/w")).unwrap();
    let items = [user("hello"), assistant("hi"), user("again")];
    for item in &items {
        record.append(item).unwrap();
    }
    record.sync().unwrap();
    assert_eq!(record.items_written(), 3);
    drop(record);

    let (mut record, replay) = SessionRecord::open(&home, &id).unwrap();
    assert_eq!(replay.header.id, id);
    assert_eq!(replay.entries, items);
    assert_eq!((replay.skipped, replay.torn_tail), (0, false));
    assert_eq!(record.items_written(), 3);
    record.append(&assistant("back")).unwrap();
    assert_eq!(record.items_written(), 4);
    assert_eq!(read_record(record.path()).unwrap().entries.len(), 4);
}

#[test]
fn torn_last_line_is_skipped_on_read_and_cut_on_open() {
    let (_dir, home) = home();
    let id = SessionId::from_string("s1");
    let mut record = SessionRecord::create(&home, header("s1", at(0), "/w")).unwrap();
    record.append(&user("hello")).unwrap();
    let path = record.path().to_path_buf();
    drop(record);
    let complete_len = std::fs::metadata(&path).unwrap().len();
    append_raw(&path, br#"{"ts":"2026-03-04T05:06:08.000Z","type":"assistant_mess"#);

    let replay = read_record(&path).unwrap();
    assert_eq!(replay.entries, vec![user("hello")]);
    assert!(replay.torn_tail);

    let (mut record, replay) = SessionRecord::open(&home, &id).unwrap();
    assert!(replay.torn_tail);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), complete_len);
    record.append(&assistant("whole")).unwrap();
    let replay = read_record(&path).unwrap();
    assert_eq!(replay.entries, vec![user("hello"), assistant("whole")]);
    assert_eq!((replay.skipped, replay.torn_tail), (0, false));
}

#[test]
fn unknown_item_types_and_corrupt_lines_are_skipped_and_counted() {
    let (_dir, home) = home();
    let mut record = SessionRecord::create(&home, header("s1", at(0), "/w")).unwrap();
    record.append(&user("hello")).unwrap();
    let path = record.path().to_path_buf();
    drop(record);
    append_raw(&path, b"{\"ts\":\"2026-03-04T05:06:08.000Z\",\"type\":\"telepathy\",\"x\":1}\n");
    append_raw(&path, b"{\"ts\":\"2026-03-04T05:06:08.000Z\",\"type\":\"tool_call\",\"id\":5}\n");
    append_raw(
        &path,
        b"{\"ts\":\"2026-03-04T05:06:08.000Z\",\"type\":\"user_message\",\"text\":\"later\"}\n",
    );

    let replay = read_record(&path).unwrap();
    assert_eq!(
        replay.entries,
        vec![
            user("hello"),
            kestrel_protocol::RecordEntry {
                ts: kestrel_protocol::Timestamp::parse("2026-03-04T05:06:08Z").unwrap(),
                item: RecordItem::UserMessage { text: "later".into() },
            }
        ]
    );
    assert_eq!(replay.skipped, 2);
    assert_eq!(replay.item_count(), 4);
    let (record, _) = SessionRecord::open(&home, &SessionId::from_string("s1")).unwrap();
    assert_eq!(record.items_written(), 4);
}

#[test]
fn a_file_without_a_session_header_is_an_error_naming_it() {
    let (dir, _home) = home();
    let path = dir.path().join("bogus.jsonl");
    std::fs::write(&path, "{\"type\":\"user_message\",\"text\":\"x\"}\n").unwrap();
    let error = read_record(&path).unwrap_err();
    assert!(matches!(error, StoreError::InvalidHeader { .. }), "{error}");
    assert!(error.to_string().contains("bogus.jsonl"), "{error}");
    std::fs::write(&path, "").unwrap();
    assert!(read_record(&path).unwrap_err().to_string().contains("empty"));
}

#[test]
fn fork_copies_the_first_n_items_into_a_new_session() {
    let (_dir, home) = home();
    let source_id = SessionId::from_string("source");
    let mut source = SessionRecord::create(&home, header("source", at(0), "/w")).unwrap();
    let items = [user("one"), assistant("two"), user("three")];
    for item in &items {
        source.append(item).unwrap();
    }
    // The source stays open and locked: fork only reads it.
    let forked = fork(&home, &source_id, Some(2)).unwrap();
    assert_ne!(forked.id, source_id);
    let from = forked.forked_from.clone().unwrap();
    assert_eq!((from.session_id, from.items), (source_id.clone(), 2));
    assert_eq!((forked.cwd.as_str(), forked.provider.as_str()), ("/w", "anthropic"));

    let (record, replay) = SessionRecord::open(&home, &forked.id).unwrap();
    assert_eq!(replay.header, forked);
    assert_eq!(replay.entries, items[..2]);
    assert_eq!(record.items_written(), 2);

    let listed = SessionIndex::find(&home, forked.id.as_str()).unwrap();
    assert_eq!(listed.first_prompt.as_deref(), Some("one"));
}

#[test]
fn fork_without_at_copies_everything_and_ignores_a_torn_tail() {
    let (_dir, home) = home();
    let mut source = SessionRecord::create(&home, header("source", at(0), "/w")).unwrap();
    source.append(&user("one")).unwrap();
    source.append(&assistant("two")).unwrap();
    append_raw(source.path(), b"{\"ts\":");
    let forked = fork(&home, &SessionId::from_string("source"), None).unwrap();
    assert_eq!(forked.forked_from.unwrap().items, 2);
    let summary = SessionIndex::find(&home, forked.id.as_str()).unwrap();
    let replay = read_record(&summary.path).unwrap();
    assert_eq!(replay.entries, vec![user("one"), assistant("two")]);
    assert!(!replay.torn_tail);
}

#[test]
fn fork_at_zero_and_at_the_end_are_allowed_but_past_the_end_is_not() {
    let (_dir, home) = home();
    let id = SessionId::from_string("source");
    let mut source = SessionRecord::create(&home, header("source", at(0), "/w")).unwrap();
    source.append(&user("one")).unwrap();
    assert_eq!(fork(&home, &id, Some(0)).unwrap().forked_from.unwrap().items, 0);
    assert_eq!(fork(&home, &id, Some(1)).unwrap().forked_from.unwrap().items, 1);
    let before = SessionIndex::list(&home).unwrap().len();
    let error = fork(&home, &id, Some(2)).unwrap_err();
    assert!(matches!(error, StoreError::ForkOutOfRange { at: 2, items: 1, .. }), "{error}");
    assert!(error.to_string().contains("only 1 items"), "{error}");
    assert_eq!(SessionIndex::list(&home).unwrap().len(), before, "no session is left behind");
}

#[test]
fn a_large_record_replays_completely() {
    let (_dir, home) = home();
    let id = SessionId::from_string("big");
    let record = SessionRecord::create(&home, header("big", at(0), "/w")).unwrap();
    let path = record.path().to_path_buf();
    drop(record);
    // About 50 MB of tool output, written in bulk to keep the test quick.
    let output = "x".repeat(10_000);
    let line = format!(
        "{{\"ts\":\"2026-03-04T05:06:08.000Z\",\"type\":\"tool_result\",\"id\":\"c\",\"output\":\"{output}\",\"is_error\":false,\"duration_ms\":1}}\n"
    );
    let lines = 5_000;
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    let chunk = line.repeat(100);
    for _ in 0..lines / 100 {
        file.write_all(chunk.as_bytes()).unwrap();
    }
    drop(file);
    assert!(std::fs::metadata(&path).unwrap().len() > 50_000_000);

    let (record, replay) = SessionRecord::open(&home, &id).unwrap();
    assert_eq!(replay.entries.len(), lines);
    assert_eq!(record.items_written(), lines as u64);
    assert!(
        matches!(&replay.entries[lines - 1].item, RecordItem::ToolResult { output: o, .. } if o.len() == 10_000)
    );
}
