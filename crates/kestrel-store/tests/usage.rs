//! Usage and cost in the session index: each request's usage item notes the session's
//! own running total, resume continues it, forks leave out what they copied, rebuilds agree,
//! and a parent's total includes its descendants'.

// Helpers outside #[test] fns are test code too: a failed set-up should panic.
#![allow(clippy::unwrap_used)]

mod common;

use common::{at, header, home, marked_home, user};
use kestrel_protocol::{RecordEntry, RecordItem, SessionId, StopReason, Usage};
use kestrel_store::{KestrelHome, SessionIndex, SessionRecord, SessionSummary};

fn spent(input: u64, output: u64, cost: f64) -> Usage {
    Usage { input_tokens: input, output_tokens: output, cost, ..Usage::default() }
}

fn usage_item(usage: Usage) -> RecordEntry {
    RecordEntry { ts: at(3), item: RecordItem::Usage { usage } }
}

fn turn_completed() -> RecordEntry {
    RecordEntry {
        ts: at(4),
        item: RecordItem::TurnCompleted { stop_reason: StopReason::EndTurn, error: None },
    }
}

/// One turn: a prompt, one usage item per request, the end.
fn turn(record: &mut SessionRecord, prompt: &str, requests: &[Usage]) {
    record.append(&user(prompt)).unwrap();
    for usage in requests {
        record.append(&usage_item(*usage)).unwrap();
    }
    record.append(&turn_completed()).unwrap();
}

fn summary(home: &KestrelHome, id: &str) -> SessionSummary {
    SessionIndex::find(home, id).unwrap()
}

fn assert_usage(actual: Usage, input: u64, output: u64, cost: f64) {
    assert_eq!((actual.input_tokens, actual.output_tokens), (input, output), "{actual:?}");
    assert!((actual.cost - cost).abs() < 1e-12, "{actual:?}");
}

#[test]
fn each_turn_notes_the_running_total_and_the_latest_line_wins() {
    let (_dir, home) = marked_home();
    let mut record = SessionRecord::create(&home, header("s", at(0), "/w")).unwrap();
    turn(&mut record, "one", &[spent(100, 10, 0.5), spent(200, 20, 0.25)]);
    assert_usage(summary(&home, "s").usage, 300, 30, 0.75);
    turn(&mut record, "two", &[spent(50, 5, 0.125)]);
    assert_usage(record.usage(), 350, 35, 0.875);
    assert_usage(summary(&home, "s").usage, 350, 35, 0.875);

    let text = std::fs::read_to_string(home.index_file()).unwrap();
    let usage_lines: Vec<_> = text.lines().filter(|line| line.contains("\"usage\"")).collect();
    assert_eq!(usage_lines.len(), 3, "one line per request that spent something: {text}");
}

#[test]
fn a_turn_without_requests_writes_no_usage_line() {
    let (_dir, home) = home();
    let mut record = SessionRecord::create(&home, header("s", at(0), "/w")).unwrap();
    turn(&mut record, "nothing spent", &[]);
    let text = std::fs::read_to_string(home.index_file()).unwrap();
    assert!(!text.contains("\"usage\""), "{text}");
    assert_eq!(summary(&home, "s").usage, Usage::default());
}

#[test]
fn a_resumed_session_continues_its_total() {
    let (_dir, home) = home();
    let mut record = SessionRecord::create(&home, header("s", at(0), "/w")).unwrap();
    turn(&mut record, "one", &[spent(100, 10, 1.0)]);
    drop(record);
    let (mut record, _) = SessionRecord::open(&home, &SessionId::from_string("s")).unwrap();
    assert_usage(record.usage(), 100, 10, 1.0);
    turn(&mut record, "two", &[spent(1, 1, 0.5)]);
    assert_usage(summary(&home, "s").usage, 101, 11, 1.5);
}

#[test]
fn a_fork_counts_only_what_it_spent_itself() {
    let (_dir, home) = home();
    let mut record = SessionRecord::create(&home, header("source", at(0), "/w")).unwrap();
    turn(&mut record, "one", &[spent(100, 10, 1.0)]);
    drop(record);
    let forked = kestrel_store::fork(&home, &SessionId::from_string("source"), None).unwrap();
    assert_eq!(summary(&home, forked.id.as_str()).usage, Usage::default());

    let (mut record, _) = SessionRecord::open(&home, &forked.id).unwrap();
    assert_eq!(record.usage(), Usage::default(), "copied usage is the source's");
    turn(&mut record, "two", &[spent(7, 3, 0.25)]);
    drop(record);
    assert_usage(summary(&home, forked.id.as_str()).usage, 7, 3, 0.25);
    assert_usage(summary(&home, "source").usage, 100, 10, 1.0);

    // A rebuild from the records reaches the same numbers.
    std::fs::remove_file(home.index_file()).unwrap();
    assert_usage(summary(&home, forked.id.as_str()).usage, 7, 3, 0.25);
    assert_usage(summary(&home, "source").usage, 100, 10, 1.0);
}

#[test]
fn a_rebuilt_index_sums_the_usage_items_of_each_record() {
    let (_dir, home) = home();
    let mut record = SessionRecord::create(&home, header("s", at(0), "/w")).unwrap();
    turn(&mut record, "one", &[spent(100, 10, 0.5)]);
    // The last turn never finished (a crash): its usage is noted all the same.
    record.append(&user("two")).unwrap();
    record.append(&usage_item(spent(1, 2, 0.25))).unwrap();
    drop(record);
    assert_usage(summary(&home, "s").usage, 101, 12, 0.75);

    let rebuilt = SessionIndex::rebuild(&home).unwrap();
    assert_usage(rebuilt[0].usage, 101, 12, 0.75);
    assert_eq!(rebuilt[0].first_prompt.as_deref(), Some("one"));
    assert_eq!(SessionIndex::list(&home).unwrap(), rebuilt);
}

#[test]
fn a_parents_total_includes_its_descendants() {
    let (_dir, home) = home();
    let mut parent = SessionRecord::create(&home, header("parent", at(0), "/w")).unwrap();
    turn(&mut parent, "plan", &[spent(1000, 100, 2.0)]);
    for (id, of, cost) in [("child-a", "parent", 0.5), ("child-b", "parent", 0.25)] {
        let mut child_header = header(id, at(10), "/w");
        child_header.parent_id = Some(SessionId::from_string(of));
        let mut child = SessionRecord::create(&home, child_header).unwrap();
        turn(&mut child, "explore", &[spent(10, 1, cost)]);
    }
    let mut grandchild_header = header("grandchild", at(20), "/w");
    grandchild_header.parent_id = Some(SessionId::from_string("child-a"));
    let mut grandchild = SessionRecord::create(&home, grandchild_header).unwrap();
    turn(&mut grandchild, "look", &[spent(1, 1, 0.125)]);

    let parent = summary(&home, "parent");
    assert_usage(parent.usage, 1000, 100, 2.0);
    assert_usage(parent.total_usage, 1021, 103, 2.875);
    assert_usage(summary(&home, "child-a").total_usage, 11, 2, 0.625);
    assert_usage(summary(&home, "child-b").total_usage, 10, 1, 0.25);
    assert_usage(summary(&home, "grandchild").total_usage, 1, 1, 0.125);

    // Rebuilt from the records, the totals are the same.
    let rebuilt = SessionIndex::rebuild(&home).unwrap();
    let parent = rebuilt.iter().find(|summary| summary.id.as_str() == "parent").unwrap();
    assert_usage(parent.total_usage, 1021, 103, 2.875);
}

#[test]
fn a_cycle_of_parent_ids_does_not_loop() {
    let (_dir, home) = home();
    for (id, parent) in [("a", "b"), ("b", "a")] {
        let mut session_header = header(id, at(0), "/w");
        session_header.parent_id = Some(SessionId::from_string(parent));
        let mut record = SessionRecord::create(&home, session_header).unwrap();
        turn(&mut record, "x", &[spent(1, 1, 1.0)]);
    }
    assert_usage(summary(&home, "a").total_usage, 2, 2, 2.0);
    assert_usage(summary(&home, "b").total_usage, 2, 2, 2.0);
}
