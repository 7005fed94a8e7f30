//! Replay (resume) of large session records through the store's API: the time and the
//! memory of `SessionRecord::open`, which takes the writer lock and reads every item
//! back, as `kestrel exec resume` and a restarted worker do before anything else.
//!
//! `cargo bench -p kestrel-store --bench replay -- [--runs N] [--sizes 1000,10000,100000] [--json]`
//! `... -- --generate DIR --items N` writes a home with one such session and prints its id
//! (bench/run.py resumes it end to end with `kestrel exec resume`).
//! Each run is a fresh child process, so its peak memory is its own.

#![allow(clippy::print_stdout)]

mod support;

use kestrel_protocol::{SessionId, Timestamp};
use kestrel_store::{KestrelHome, SessionRecord};
use support::{BenchResult, Flags, report, run_child, write_session};

fn main() -> BenchResult<()> {
    let flags = Flags::parse(7)?;
    if flags.rest.first().map(String::as_str) == Some("--child") {
        return child(&flags.rest[1..]);
    }
    if let Some(dir) = flags.value("--generate") {
        let items = flags.counts("--items", &[10_000])?;
        let [items] = items[..] else { return Err("--items takes one count here".into()) };
        let id = write_session(&KestrelHome::at(dir), Timestamp::now(), items, 7)?;
        println!("{id}");
        return Ok(());
    }
    let sizes = flags.counts("--sizes", &[1_000, 10_000, 100_000])?;
    for items in sizes {
        measure(&flags, items)?;
    }
    Ok(())
}

fn measure(flags: &Flags, items: usize) -> BenchResult<()> {
    let dir = tempfile::tempdir()?;
    let home = KestrelHome::at(dir.path());
    let started = std::time::Instant::now();
    let id = write_session(&home, Timestamp::now(), items, 7)?;
    let append_ms = started.elapsed().as_secs_f64() * 1000.0;
    let (record, _) = SessionRecord::open(&home, &id)?;
    let megabytes = std::fs::metadata(record.path())?.len() as f64 / 1e6;
    drop(record);

    let param = format!("{items} items");
    let root = dir.path().to_string_lossy().into_owned();
    let (mut millis, mut growth, mut peak) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..flags.runs {
        let run = run_child(&["--child", "open", &root, id.as_str()])?;
        millis.push(run.millis);
        growth.push(run.peak_mb - run.rss_before_mb);
        peak.push(run.peak_mb);
    }
    report(flags.json, "store.replay_open", &param, "ms", millis);
    report(flags.json, "store.replay_memory_growth", &param, "MB", growth);
    report(flags.json, "store.replay_peak_rss", &param, "MB", peak);
    report(flags.json, "store.record_size", &param, "MB", vec![megabytes]);
    report(
        flags.json,
        "store.append_per_item",
        &param,
        "us",
        vec![append_ms * 1000.0 / items as f64],
    );
    Ok(())
}

/// `--child open HOME ID`: one measured replay.
fn child(arguments: &[String]) -> BenchResult<()> {
    let [mode, root, id] = arguments else {
        return Err(format!("bad child arguments {arguments:?}").into());
    };
    if mode != "open" {
        return Err(format!("unknown child mode {mode:?}").into());
    }
    let home = KestrelHome::at(root);
    let id = SessionId::from_string(id.as_str());
    support::child_measure(|| {
        let (record, replay) = SessionRecord::open(&home, &id)?;
        if replay.skipped != 0 {
            return Err(format!("{} items were not understood", replay.skipped).into());
        }
        Ok((record, replay))
    })?;
    Ok(())
}
