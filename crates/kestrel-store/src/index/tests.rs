//! The index's internals: rebuilds racing appends, compactions and edits of the file.

use super::*;
use kestrel_protocol::RecordItem;

#[test]
fn labels_are_trimmed_and_cut_on_a_char_boundary() {
    assert_eq!(label("  hi \n"), "hi");
    let long = "é".repeat(FIRST_PROMPT_CHARS + 5);
    let cut = label(&long);
    assert_eq!(cut.chars().count(), FIRST_PROMPT_CHARS + 1);
    assert!(cut.ends_with('…'));
}

#[test]
fn later_lines_fill_in_earlier_ones() {
    let mut line = IndexLine::bare(SessionId::from_string("a"));
    line.cwd = Some("/w".into());
    let mut later = IndexLine::bare(SessionId::from_string("a"));
    later.first_prompt = Some("hello".into());
    line.merge(later);
    assert_eq!(line.cwd.as_deref(), Some("/w"));
    assert_eq!(line.first_prompt.as_deref(), Some("hello"));
}

/// A session with a usage line in the index and a record.
fn session_with_usage(home: &KestrelHome, id: &str, tokens: u64) -> SessionId {
    let header = RecordHeader {
        id: SessionId::from_string(id),
        version: kestrel_protocol::RECORD_VERSION,
        created_at: Timestamp { millis: 1_000 },
        cwd: "/w".into(),
        provider: "p".into(),
        model: "m".into(),
        parent_id: None,
        forked_from: None,
        swarm: None,
        repository: None,
    };
    let mut record = crate::SessionRecord::create(home, header).unwrap();
    let usage = Usage { input_tokens: tokens, ..Usage::default() };
    let entry = RecordEntry { ts: Timestamp { millis: 2_000 }, item: RecordItem::Usage { usage } };
    record.append(&entry).unwrap();
    SessionId::from_string(id)
}

fn usage_line(home: &KestrelHome, id: &SessionId, tokens: u64) {
    let update = IndexUpdate {
        usage: Some(Usage { input_tokens: tokens, ..Usage::default() }),
        updated_at: Some(Timestamp { millis: 3_000 }),
        ..IndexUpdate::default()
    };
    record_update(home, id, update).unwrap();
}

#[test]
fn a_line_appended_while_a_rebuild_scans_the_records_wins_over_what_the_scan_read() {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path());
    let id = session_with_usage(&home, "s", 1);
    for index_before in [true, false] {
        if !index_before {
            std::fs::remove_file(home.index_file()).unwrap();
        }
        // A worker's later request: its line lands after the scan read the record.
        let (summaries, written) = scan_and_rebuild(&home, || usage_line(&home, &id, 7)).unwrap();
        written.unwrap();
        assert_eq!(summaries[0].usage.input_tokens, 7, "index there: {index_before}");
        let listed = SessionIndex::list(&home).unwrap();
        assert_eq!(listed[0].usage.input_tokens, 7, "index there: {index_before}");
    }
}

fn index_text(home: &KestrelHome) -> String {
    std::fs::read_to_string(home.index_file()).unwrap()
}

#[test]
fn a_rebuild_forgets_what_the_old_index_said_of_records_gone_since() {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path());
    session_with_usage(&home, "kept", 1);
    session_with_usage(&home, "gone", 1);
    let files = record_files(&home).unwrap();
    let gone = files.iter().find(|path| path.to_string_lossy().contains("gone")).unwrap();
    std::fs::remove_file(gone).unwrap();
    // The index (appends only: unmarked) still lists it; the rebuild reads only what
    // was appended since its scan began.
    let listed = SessionIndex::list(&home).unwrap();
    assert_eq!(listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["kept"]);
    assert!(!index_text(&home).contains("gone"));
}

#[test]
fn lines_appended_to_a_file_renamed_over_the_index_during_the_scan_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path());
    let id = session_with_usage(&home, "s", 1);
    let padding: String = (0..50).map(|n| format!("{{\"id\":\"pad{n}\"}}\n")).collect();
    std::fs::write(home.index_file(), padding + &index_text(&home)).unwrap();
    let (summaries, written) = scan_and_rebuild(&home, || {
        // Another listing's rewrite, then a worker's line: both after the scan.
        let fresh = format!("{MARKER}\n");
        std::fs::write(home.sessions_dir().join("fresh"), fresh).unwrap();
        std::fs::rename(home.sessions_dir().join("fresh"), home.index_file()).unwrap();
        usage_line(&home, &id, 9);
    })
    .unwrap();
    written.unwrap();
    assert_eq!(summaries[0].usage.input_tokens, 9);
}

#[test]
fn a_torn_last_line_does_not_bring_back_what_the_old_index_said() {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path());
    session_with_usage(&home, "kept", 1);
    // A session whose record is gone, then a line cut short (a full disk).
    let ghost = r#"{"id":"ghost","created_at":"2026-01-01T00:00:00Z","cwd":"/w","model":"m","provider":"p","path":"sessions/x.jsonl","updated_at":"2026-01-01T00:00:00Z"}"#;
    let text = format!("{}{ghost}\n{{\"id\":\"kept\",\"usa", index_text(&home));
    std::fs::write(home.index_file(), text).unwrap();
    let listed = SessionIndex::list(&home).unwrap();
    assert_eq!(listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["kept"]);
}

#[test]
fn an_index_emptied_during_the_scan_is_read_from_its_start_however_long_it_grew_since() {
    for padding_lines in [0, 50] {
        let dir = tempfile::tempdir().unwrap();
        let home = KestrelHome::at(dir.path());
        let id = session_with_usage(&home, "s", 1);
        let (summaries, written) = scan_and_rebuild(&home, || {
            std::fs::write(home.index_file(), "").unwrap();
            usage_line(&home, &id, 5);
            // Past the old length: only the bytes before it tell a refill.
            let padding: String =
                (0..padding_lines).map(|n| format!("{{\"id\":\"pad{n}\"}}\n")).collect();
            let mut file = paths::open_shared_append(&home.index_file()).unwrap();
            file.write_all(padding.as_bytes()).unwrap();
        })
        .unwrap();
        written.unwrap();
        assert_eq!(summaries[0].usage.input_tokens, 5, "{padding_lines} lines after");
    }
}

#[test]
#[cfg(unix)]
fn a_rebuild_that_cannot_read_what_was_appended_leaves_the_index_alone() {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path());
    session_with_usage(&home, "s", 1);
    let index = home.index_file();
    let (summaries, written) = scan_and_rebuild(&home, || {
        // Unreadable from now on (a symlink to itself), but a rename would replace it.
        std::fs::remove_file(&index).unwrap();
        std::os::unix::fs::symlink("index.jsonl", &index).unwrap();
    })
    .unwrap();
    assert!(written.is_err(), "replaced what it could not read");
    assert!(std::fs::symlink_metadata(&index).unwrap().file_type().is_symlink());
    assert_eq!(summaries.len(), 1, "the scan is still listed");
}

#[test]
fn a_compaction_of_an_index_no_rewrite_wrote_rebuilds_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path());
    for id in ["a", "b", "c"] {
        session_with_usage(&home, id, 1);
    }
    // What a listing that decided to compact may find once it holds the lock: the
    // index deleted and created anew by one session's line.
    let id = SessionId::from_string("c");
    std::fs::remove_file(home.index_file()).unwrap();
    usage_line(&home, &id, 3);
    let listed = compact_index(&home).unwrap();
    assert_eq!(listed.len(), 3, "every record's session");
    assert!(index_text(&home).starts_with(MARKER));
}

#[test]
fn orphan_events_without_a_creation_line_are_not_listed() {
    let mut line = IndexLine::bare(SessionId::from_string("a"));
    line.first_prompt = Some("hello".into());
    assert!(line.into_summary(&KestrelHome::at("/k")).is_none());
}
