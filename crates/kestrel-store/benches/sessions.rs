//! Listing many sessions through the store's API: `SessionIndex::list` from the index
//! (what `kestrel sessions` does) and `SessionIndex::rebuild`, which scans every record
//! (what a missing index costs once).
//!
//! `cargo bench -p kestrel-store --bench sessions -- [--runs N] [--sessions 10000]
//! [--turns 1] [--json]`; `--turns N` gives every session N realistic turns (a prompt,
//! three model requests with tool calls, the turn's end: what grows the index).
//! `... -- --generate DIR --sessions N [--turns N]` writes such a home and prints nothing
//! else (bench/run.py lists it end to end with `kestrel sessions`).
//! Each run is a fresh child process, so its peak memory is its own.

#![allow(clippy::print_stdout)]

mod support;

use kestrel_protocol::{RecordEntry, RecordItem, StopReason, Timestamp, Usage};
use kestrel_store::{KestrelHome, SessionIndex, SessionRecord};
use std::path::Path;
use support::{BenchResult, Filler, Flags, report, run_child, write_session};

/// Items in each generated session with the default single turn: one short turn.
const ITEMS_PER_SESSION: usize = 8;
/// Sessions are spread back in time this far apart, so they fill many day directories.
const SPACING_MILLIS: i64 = 47 * 60 * 1000;
/// With `--turns`: a turn starts this long after the previous one...
const TURN_SPACING_MILLIS: i64 = 60 * 1000;
/// ...and its items follow each other this far apart.
const ITEM_SPACING_MILLIS: i64 = 700;

fn main() -> BenchResult<()> {
    let flags = Flags::parse(7)?;
    if flags.rest.first().map(String::as_str) == Some("--child") {
        return child(&flags.rest[1..]);
    }
    let counts = flags.counts("--sessions", &[10_000])?;
    let turns = match flags.value("--turns") {
        None => None,
        Some(text) => Some(text.parse::<usize>().map_err(|_| format!("--turns {text:?}"))?),
    };
    if let Some(dir) = flags.value("--generate") {
        let [count] = counts[..] else { return Err("--sessions takes one count here".into()) };
        return generate(Path::new(dir), count, turns);
    }
    for count in counts {
        measure(&flags, count, turns)?;
    }
    Ok(())
}

fn generate(dir: &Path, count: usize, turns: Option<usize>) -> BenchResult<()> {
    let home = KestrelHome::at(dir);
    // A home as a user's: an index a rewrite started (the first listing of a home whose
    // index only appends made would rebuild it), grown by the sessions' appends.
    std::fs::create_dir_all(home.sessions_dir())?;
    SessionIndex::rebuild(&home)?;
    let now = Timestamp::now().millis;
    for index in 0..count {
        let created_at = Timestamp { millis: now - index as i64 * SPACING_MILLIS };
        match turns {
            None => {
                write_session(&home, created_at, ITEMS_PER_SESSION, index as u64)?;
            }
            Some(turns) => write_turns(&home, created_at, turns, index as u64)?,
        }
    }
    Ok(())
}

/// A session of `turns` turns, each a prompt, three model requests (two with a tool
/// call) and its end, written through [`SessionRecord`] as a worker writes them.
fn write_turns(
    home: &KestrelHome,
    created_at: Timestamp,
    turns: usize,
    seed: u64,
) -> BenchResult<()> {
    let mut record = SessionRecord::create(home, support::bench_header(created_at))?;
    let mut filler = Filler::new(seed);
    for turn in 0..turns {
        let start = created_at.millis + turn as i64 * TURN_SPACING_MILLIS;
        let mut items =
            vec![RecordItem::TurnStarted {}, RecordItem::UserMessage { text: filler.text(120) }];
        for request in 0..3 {
            let usage = Usage {
                input_tokens: 12_000 + (turn * 3 + request) as u64,
                cached_input_tokens: 11_000,
                output_tokens: 300,
                reasoning_tokens: 0,
                cost: 0.0,
            };
            items.push(RecordItem::AssistantMessage {
                text: filler.text(200),
                reasoning: None,
                reasoning_opaque: None,
            });
            if request < 2 {
                let id = format!("call_{turn}_{request}");
                items.push(RecordItem::ToolCall {
                    id: id.clone(),
                    name: "read_file".to_owned(),
                    arguments: format!("{{\"path\":\"src/module_{turn}.rs\"}}"),
                });
                items.push(RecordItem::ToolResult {
                    id,
                    output: filler.text(600),
                    is_error: false,
                    duration_ms: 3,
                });
            }
            items.push(RecordItem::Usage { usage });
        }
        items.push(RecordItem::TurnCompleted { stop_reason: StopReason::EndTurn, error: None });
        for (step, item) in items.into_iter().enumerate() {
            let ts = Timestamp { millis: start + step as i64 * ITEM_SPACING_MILLIS };
            record.append(&RecordEntry { ts, item })?;
        }
    }
    Ok(())
}

fn measure(flags: &Flags, count: usize, turns: Option<usize>) -> BenchResult<()> {
    let dir = tempfile::tempdir()?;
    generate(dir.path(), count, turns)?;
    let root = dir.path().to_string_lossy().into_owned();
    let param = match turns {
        None => format!("{count} sessions"),
        Some(turns) => format!("{count} sessions × {turns} turns"),
    };
    for mode in ["list", "rebuild"] {
        let (mut millis, mut peak) = (Vec::new(), Vec::new());
        for _ in 0..flags.runs {
            let run = run_child(&["--child", mode, &root, &count.to_string()])?;
            millis.push(run.millis);
            peak.push(run.peak_mb);
        }
        report(flags.json, &format!("store.sessions_{mode}"), &param, "ms", millis);
        report(flags.json, &format!("store.sessions_{mode}_peak_rss"), &param, "MB", peak);
    }
    Ok(())
}

/// `--child list|rebuild HOME COUNT`: one measured listing.
fn child(arguments: &[String]) -> BenchResult<()> {
    let [mode, root, count] = arguments else {
        return Err(format!("bad child arguments {arguments:?}").into());
    };
    let home = KestrelHome::at(root);
    let expected: usize = count.parse()?;
    let listed = support::child_measure(|| match mode.as_str() {
        "list" => Ok(SessionIndex::list(&home)?),
        "rebuild" => Ok(SessionIndex::rebuild(&home)?),
        other => Err(format!("unknown child mode {other:?}").into()),
    })?;
    if listed.len() != expected {
        return Err(format!("listed {} sessions, expected {expected}", listed.len()).into());
    }
    Ok(())
}
