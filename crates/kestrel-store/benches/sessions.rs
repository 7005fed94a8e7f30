//! Listing many sessions through the store's API: `SessionIndex::list` from the index
//! (what `kestrel sessions` does) and `SessionIndex::rebuild`, which scans every record
//! (what a missing index costs once).
//!
//! `cargo bench -p kestrel-store --bench sessions -- [--runs N] [--sessions 10000] [--json]`
//! `... -- --generate DIR --sessions N` writes such a home and prints nothing else
//! (bench/run.py lists it end to end with `kestrel sessions`).
//! Each run is a fresh child process, so its peak memory is its own.

#![allow(clippy::print_stdout)]

mod support;

use kestrel_protocol::Timestamp;
use kestrel_store::{KestrelHome, SessionIndex};
use std::path::Path;
use support::{BenchResult, Flags, report, run_child, write_session};

/// Items in each generated session: one short finished turn.
const ITEMS_PER_SESSION: usize = 8;
/// Sessions are spread back in time this far apart, so they fill many day directories.
const SPACING_MILLIS: i64 = 47 * 60 * 1000;

fn main() -> BenchResult<()> {
    let flags = Flags::parse(7)?;
    if flags.rest.first().map(String::as_str) == Some("--child") {
        return child(&flags.rest[1..]);
    }
    let counts = flags.counts("--sessions", &[10_000])?;
    if let Some(dir) = flags.value("--generate") {
        let [count] = counts[..] else { return Err("--sessions takes one count here".into()) };
        return generate(Path::new(dir), count);
    }
    for count in counts {
        measure(&flags, count)?;
    }
    Ok(())
}

fn generate(dir: &Path, count: usize) -> BenchResult<()> {
    let home = KestrelHome::at(dir);
    let now = Timestamp::now().millis;
    for index in 0..count {
        let created_at = Timestamp { millis: now - index as i64 * SPACING_MILLIS };
        write_session(&home, created_at, ITEMS_PER_SESSION, index as u64)?;
    }
    Ok(())
}

fn measure(flags: &Flags, count: usize) -> BenchResult<()> {
    let dir = tempfile::tempdir()?;
    generate(dir.path(), count)?;
    let root = dir.path().to_string_lossy().into_owned();
    let param = format!("{count} sessions");
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
