//! Keeping the session index small and true: a turn writes about one line per model
//! request, a listing compacts an index grown past a few lines per session into one
//! merged line each without losing what workers append meanwhile, an index written
//! before activity was kept is rebuilt once, and a rebuilt index agrees with the live
//! one whatever the items and their times (an undo's checkpoint after a turn included).

// Helpers outside #[test] fns are test code too: a failed set-up should panic.
#![allow(clippy::unwrap_used)]

mod common;

use common::{at, header, home, marked_home};
use kestrel_protocol::{RecordEntry, RecordItem, SessionId, StopReason, Usage};
use kestrel_store::{KestrelHome, SessionIndex, SessionRecord, SessionSummary};
use std::path::Path;

fn entry(ts: i64, item: RecordItem) -> RecordEntry {
    RecordEntry { ts: at(ts), item }
}

fn prompt(text: &str) -> RecordItem {
    RecordItem::UserMessage { text: text.into() }
}

fn answer() -> RecordItem {
    RecordItem::AssistantMessage { text: "ok".into(), reasoning: None, reasoning_opaque: None }
}

fn spent(tokens: u64) -> RecordItem {
    RecordItem::Usage {
        usage: Usage { input_tokens: tokens, output_tokens: 1, ..Usage::default() },
    }
}

fn completed() -> RecordItem {
    RecordItem::TurnCompleted { stop_reason: StopReason::EndTurn, error: None }
}

fn checkpoint() -> RecordItem {
    RecordItem::Checkpoint { files: serde_json::json!([]) }
}

fn index_lines(home: &KestrelHome) -> usize {
    std::fs::read_to_string(home.index_file()).unwrap().lines().count()
}

/// Ids and last activity (milliseconds after `at(0)`), in listing order.
fn activity(summaries: &[SessionSummary]) -> Vec<(String, i64)> {
    let base = at(0).millis;
    summaries.iter().map(|s| (s.id.to_string(), s.updated_at.millis - base)).collect()
}

#[test]
fn a_turn_writes_a_line_per_model_request_and_none_for_an_end_within_a_second() {
    let (_dir, home) = marked_home();
    let mut record = SessionRecord::create(&home, header("s", at(0), "/w")).unwrap();
    let created = index_lines(&home);
    record.append(&entry(1_000, prompt("go"))).unwrap();
    record.append(&entry(1_100, answer())).unwrap();
    record.append(&entry(1_500, spent(10))).unwrap();
    record.append(&entry(1_900, answer())).unwrap();
    record.append(&entry(2_300, spent(20))).unwrap();
    record.append(&entry(2_700, completed())).unwrap();
    assert_eq!(index_lines(&home), created + 3, "the prompt and two model requests");
    let listed = SessionIndex::list(&home).unwrap();
    assert_eq!(activity(&listed), [("s".to_owned(), 2_300)]);
    assert_eq!(listed[0].usage.input_tokens, 30);
    // The next turn's prompt, a while later, is noted.
    record.append(&entry(60_000, prompt("again"))).unwrap();
    assert_eq!(index_lines(&home), created + 4);
    assert_eq!(activity(&SessionIndex::list(&home).unwrap()), [("s".to_owned(), 60_000)]);
}

#[test]
fn an_undo_checkpoint_after_the_turn_is_activity_live_and_rebuilt_alike() {
    let (_dir, home) = home();
    let mut record = SessionRecord::create(&home, header("s", at(0), "/w")).unwrap();
    record.append(&entry(1_000, prompt("edit it"))).unwrap();
    record.append(&entry(2_000, spent(10))).unwrap();
    record.append(&entry(3_000, completed())).unwrap();
    // `_kestrel/session/undo`, seconds later: no turn, one checkpoint item.
    record.append(&entry(8_000, checkpoint())).unwrap();
    drop(record);
    let live = SessionIndex::list(&home).unwrap();
    assert_eq!(activity(&live), [("s".to_owned(), 8_000)]);
    assert_eq!(SessionIndex::rebuild(&home).unwrap(), live);
}

/// A small deterministic generator (xorshift), so a failure repeats.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % sides
    }
}

#[test]
fn a_rebuilt_index_says_what_the_live_one_said_whatever_the_items_and_their_times() {
    let (_dir, home) = home();
    let mut dice = Dice(0x9E37_79B9_7F4A_7C15);
    for session in 0..12 {
        let id = format!("s{session:02}");
        let created = session as i64 * 1_000;
        let mut record = SessionRecord::create(&home, header(&id, at(created), "/w")).unwrap();
        let mut now = created;
        for step in 0..40 {
            // Gaps from a few milliseconds to over a minute.
            now += match dice.roll(4) {
                0 => dice.roll(300) as i64,
                1 => 500 + dice.roll(1_000) as i64,
                2 => 1_000 + dice.roll(5_000) as i64,
                _ => 30_000 + dice.roll(60_000) as i64,
            };
            let item = match dice.roll(7) {
                0 => prompt("p"),
                1 => spent(dice.roll(3)),
                2 => completed(),
                3 => checkpoint(),
                _ => answer(),
            };
            record.append(&entry(now, item)).unwrap();
            // A worker restart now and then: the next writer goes on from the record.
            if step % 15 == 14 {
                drop(record);
                record = SessionRecord::open(&home, &SessionId::from_string(&id)).unwrap().0;
            }
        }
    }
    let live = SessionIndex::list(&home).unwrap();
    std::fs::remove_file(home.index_file()).unwrap();
    let rebuilt = SessionIndex::rebuild(&home).unwrap();
    assert_eq!(activity(&rebuilt), activity(&live));
    assert_eq!(rebuilt, live);
}

/// Three sessions, each with `turns` turns of two model requests a minute apart.
fn busy_sessions(home: &KestrelHome, turns: i64) {
    for (number, id) in ["a", "b", "c"].into_iter().enumerate() {
        let created = number as i64 * 10_000;
        let mut record = SessionRecord::create(home, header(id, at(created), "/w")).unwrap();
        for turn in 0..turns {
            let start = created + turn * 60_000;
            record.append(&entry(start, prompt("go"))).unwrap();
            record.append(&entry(start + 2_000, spent(5))).unwrap();
            record.append(&entry(start + 4_000, spent(5))).unwrap();
            record.append(&entry(start + 6_000, completed())).unwrap();
        }
    }
}

#[test]
fn an_index_grown_past_a_few_lines_per_session_is_compacted_by_a_listing() {
    let (_dir, home) = marked_home();
    busy_sessions(&home, 40);
    let grown = index_lines(&home);
    assert!(grown > 300, "{grown} lines");
    let listed = SessionIndex::list(&home).unwrap();
    assert_eq!(index_lines(&home), 4, "the marker, then one merged line per session");
    assert_eq!(SessionIndex::list(&home).unwrap(), listed, "the same listing from it");
    assert_eq!(listed[0].usage.input_tokens, 40 * 10);
    assert_eq!(listed[0].first_prompt.as_deref(), Some("go"));
    std::fs::remove_file(home.index_file()).unwrap();
    assert_eq!(SessionIndex::rebuild(&home).unwrap(), listed, "and what a rebuild says");
}

#[test]
fn lines_appended_while_listings_compact_the_index_are_never_lost() {
    let (_dir, home) = home();
    let sessions = 150;
    let writer = {
        let home = home.clone();
        std::thread::spawn(move || {
            for number in 0..sessions {
                let id = format!("w{number:03}");
                let created = at(number * 100);
                let mut record = SessionRecord::create(&home, header(&id, created, "/w")).unwrap();
                record.append(&entry(number * 100 + 1, prompt(&id))).unwrap();
                for request in 1..=4 {
                    record.append(&entry(number * 100 + 1 + request * 10, spent(1))).unwrap();
                }
            }
        })
    };
    let lister = {
        let home = home.clone();
        std::thread::spawn(move || {
            for _ in 0..2_000 {
                let _ = SessionIndex::list(&home);
            }
        })
    };
    writer.join().unwrap();
    lister.join().unwrap();
    let listed = SessionIndex::list(&home).unwrap();
    assert_eq!(listed.len(), sessions as usize, "every creation line kept");
    for summary in &listed {
        assert_eq!(summary.first_prompt.as_deref(), Some(summary.id.as_str()));
        assert_eq!(summary.usage.input_tokens, 4, "{}: its last usage line kept", summary.id);
    }
}

#[test]
fn an_index_from_before_activity_was_kept_is_rebuilt_once_in_activity_order() {
    let (_dir, home) = home();
    // Sessions used in the opposite order of their creation.
    let mut older = SessionRecord::create(&home, header("older", at(0), "/w")).unwrap();
    let mut newer = SessionRecord::create(&home, header("newer", at(1_000), "/w")).unwrap();
    newer.append(&entry(2_000, prompt("first used"))).unwrap();
    older.append(&entry(9_000, prompt("used last"))).unwrap();
    drop((older, newer));
    // The previous version's index: creation lines and prompts, no `updated_at`.
    let old_format: String = ["older", "newer"]
        .iter()
        .zip([at(0), at(1_000)])
        .map(|(id, created)| {
            let record = kestrel_store::SessionIndex::find(&home, id).unwrap().path;
            let relative = record.strip_prefix(home.root()).unwrap().to_string_lossy().into_owned();
            format!(
                "{}\n{}\n",
                serde_json::json!({"id": id, "created_at": created, "cwd": "/w", "model": "m",
                    "provider": "anthropic", "path": relative}),
                serde_json::json!({"id": id, "first_prompt": "a prompt"}),
            )
        })
        .collect();
    std::fs::write(home.index_file(), old_format).unwrap();
    let listed = SessionIndex::list(&home).unwrap();
    assert_eq!(activity(&listed), [("older".to_owned(), 9_000), ("newer".to_owned(), 2_000)]);
    let index = std::fs::read_to_string(home.index_file()).unwrap();
    assert_eq!(index.lines().next(), Some(r#"{"kestrel_index":1}"#), "{index}");
    assert!(index.lines().skip(1).all(|line| line.contains("updated_at")), "{index}");
    assert_eq!(SessionIndex::list(&home).unwrap(), listed);
}

#[test]
fn a_listing_that_recreates_a_missing_index_never_undoes_lines_appended_meanwhile() {
    let (_dir, home) = home();
    let sessions = 30;
    let mut records: Vec<_> = (0..sessions)
        .map(|number| {
            let id = format!("m{number:02}");
            let mut record = SessionRecord::create(&home, header(&id, at(number), "/w")).unwrap();
            record.append(&entry(number + 1, prompt(&id))).unwrap();
            record
        })
        .collect();
    let mut spent_each = 0;
    for round in 0..20 {
        // The index is a cache: a user may delete it while workers run.
        std::fs::remove_file(home.index_file()).unwrap();
        let lister = {
            let home = home.clone();
            std::thread::spawn(move || SessionIndex::list(&home).map(|listed| listed.len()))
        };
        for record in &mut records {
            for _ in 0..3 {
                record.append(&entry(10_000 + round, spent(1))).unwrap();
            }
        }
        spent_each += 3;
        lister.join().unwrap().unwrap();
        let listed = SessionIndex::list(&home).unwrap();
        assert_eq!(listed.len(), sessions as usize, "round {round}: every session listed");
        for summary in &listed {
            assert_eq!(
                summary.usage.input_tokens, spent_each,
                "round {round}: {} shows what its record spent",
                summary.id
            );
        }
    }
}

/// Sessions `ids` with a record and a first prompt each.
fn sessions_with_prompts(home: &KestrelHome, ids: &[&str]) {
    for (number, id) in (0..).zip(ids) {
        let mut record = SessionRecord::create(home, header(id, at(number * 1_000), "/w")).unwrap();
        record.append(&entry(number * 1_000 + 1, prompt(id))).unwrap();
    }
}

fn listed_ids(home: &KestrelHome) -> Vec<String> {
    let mut ids: Vec<_> =
        SessionIndex::list(home).unwrap().into_iter().map(|s| s.id.to_string()).collect();
    ids.sort();
    ids
}

#[test]
fn an_index_deleted_then_created_anew_by_the_next_session_lists_every_session() {
    let (_dir, home) = marked_home();
    sessions_with_prompts(&home, &["a", "b", "c"]);
    assert_eq!(listed_ids(&home), ["a", "b", "c"]);
    std::fs::remove_file(home.index_file()).unwrap();
    // A new session's appends create the index again, holding only its own lines.
    sessions_with_prompts(&home, &["d"]);
    assert_eq!(listed_ids(&home), ["a", "b", "c", "d"]);
    assert_eq!(listed_ids(&home), ["a", "b", "c", "d"], "and so it stays");
    assert!(SessionIndex::latest(&home, Some(Path::new("/w"))).is_ok());
}

#[test]
fn an_empty_or_unparsable_index_is_rebuilt_from_the_records() {
    let (_dir, home) = marked_home();
    sessions_with_prompts(&home, &["a", "b"]);
    for text in [String::new(), "not json\n".repeat(300)] {
        std::fs::write(home.index_file(), &text).unwrap();
        assert_eq!(listed_ids(&home), ["a", "b"], "from {:?}…", &text[..text.len().min(9)]);
        assert_eq!(listed_ids(&home), ["a", "b"]);
    }
}

#[test]
fn an_index_to_rebuild_that_cannot_be_rewritten_is_listed_from_the_records_still() {
    let (_dir, home) = marked_home();
    sessions_with_prompts(&home, &["a", "b"]);
    // Only `a`'s creation line, as if the rest had been lost, and no lock to be had.
    let index = std::fs::read_to_string(home.index_file()).unwrap();
    let kept: String =
        index.lines().filter(|l| l.contains(r#""a""#)).map(|l| l.to_owned() + "\n").collect();
    std::fs::write(home.index_file(), kept).unwrap();
    let lock = home.sessions_dir().join("index.lock");
    std::fs::remove_file(&lock).unwrap();
    std::fs::create_dir(&lock).unwrap();
    assert_eq!(listed_ids(&home), ["a", "b"]);
    std::fs::remove_dir(&lock).unwrap();
    assert_eq!(listed_ids(&home), ["a", "b"]);
}

#[test]
fn sessions_are_created_and_noted_when_the_index_lock_cannot_be_had() {
    let (_dir, home) = marked_home();
    let lock = home.sessions_dir().join("index.lock");
    std::fs::remove_file(&lock).unwrap();
    std::fs::create_dir(&lock).unwrap();
    sessions_with_prompts(&home, &["a", "b"]);
    let index = std::fs::read_to_string(home.index_file()).unwrap();
    assert!(index.contains(r#""first_prompt":"b""#), "{index}");
    assert_eq!(listed_ids(&home), ["a", "b"]);
}

#[cfg(unix)]
#[test]
fn the_index_lock_is_created_readable_by_all() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, home) = marked_home();
    let mode =
        std::fs::metadata(home.sessions_dir().join("index.lock")).unwrap().permissions().mode();
    // 0644 as the process's umask (Linux says it in /proc) lets it.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let umask = status
        .lines()
        .find_map(|line| line.strip_prefix("Umask:"))
        .map_or(0o022, |m| u32::from_str_radix(m.trim(), 8).unwrap());
    assert_eq!(mode & 0o777, 0o644 & !umask);
}
