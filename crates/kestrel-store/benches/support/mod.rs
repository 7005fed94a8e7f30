//! What the store benches share: flags, medians, peak memory read from /proc, one child
//! process per measured run (so each run's memory is its own), and session records
//! generated through the store's own API, so they are always in the current format.

#![allow(dead_code)] // each bench uses a different part

use kestrel_protocol::{
    RECORD_VERSION, RecordEntry, RecordHeader, RecordItem, SessionId, StopReason, Timestamp, Usage,
};
use kestrel_store::{KestrelHome, SessionRecord, StoreError};
use std::error::Error;
use std::process::Command;

pub type BenchResult<T> = Result<T, Box<dyn Error>>;

/// Flags every store bench understands; the rest are left in `rest` in order.
pub struct Flags {
    pub runs: usize,
    pub json: bool,
    pub rest: Vec<String>,
}

impl Flags {
    /// Parses `std::env::args`, dropping the `--bench` that `cargo bench` adds.
    pub fn parse(default_runs: usize) -> BenchResult<Flags> {
        let mut flags = Flags { runs: default_runs, json: false, rest: Vec::new() };
        let mut arguments = std::env::args().skip(1);
        while let Some(argument) = arguments.next() {
            match argument.as_str() {
                "--bench" => {}
                "--json" => flags.json = true,
                "--runs" => {
                    let value = arguments.next().ok_or("--runs needs a number")?;
                    flags.runs =
                        value.parse().map_err(|_| format!("--runs {value:?}: not a number"))?;
                    if flags.runs == 0 {
                        return Err("--runs must be at least 1".into());
                    }
                }
                _ => flags.rest.push(argument),
            }
        }
        Ok(flags)
    }

    /// The value after `name` in the remaining arguments, if given.
    pub fn value(&self, name: &str) -> Option<&str> {
        let position = self.rest.iter().position(|argument| argument == name)?;
        self.rest.get(position + 1).map(String::as_str)
    }

    /// A comma-separated list of counts after `name`, or `default`.
    pub fn counts(&self, name: &str, default: &[usize]) -> BenchResult<Vec<usize>> {
        match self.value(name) {
            None => Ok(default.to_vec()),
            Some(text) => text
                .split(',')
                .map(|part| {
                    part.trim()
                        .parse()
                        .map_err(|_| format!("{name} {text:?}: not a list of counts").into())
                })
                .collect(),
        }
    }
}

/// Prints one measurement: a JSON line (`bench/run.py` collects these) or a readable line.
pub fn report(json: bool, name: &str, param: &str, unit: &str, mut values: Vec<f64>) {
    values.sort_by(f64::total_cmp);
    let (Some(&min), Some(&max)) = (values.first(), values.last()) else { return };
    let median = median_of_sorted(&values);
    if json {
        let line = serde_json::json!({
            "bench": name, "param": param, "unit": unit, "runs": values.len(),
            "median": median, "min": min, "max": max, "values": values,
        });
        println!("{line}");
    } else {
        println!(
            "{name:<28} {param:<16} median {median:>10.3} {unit:<3} (min {min:.3}, max {max:.3}, {} runs)",
            values.len()
        );
    }
}

fn median_of_sorted(values: &[f64]) -> f64 {
    let middle = values.len() / 2;
    if values.len() % 2 == 1 { values[middle] } else { (values[middle - 1] + values[middle]) / 2.0 }
}

/// A field of /proc/self/status in kB (`VmRSS`, `VmHWM`); `None` off Linux.
pub fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|line| line.starts_with(field) && line[field.len()..].starts_with(':'))?;
    line[field.len() + 1..].split_whitespace().next()?.parse().ok()
}

/// What a child run reports: the time of the measured call and its memory.
pub struct ChildRun {
    pub millis: f64,
    /// Resident memory when the call started, in MB.
    pub rss_before_mb: f64,
    /// The process's peak resident memory after the call, in MB.
    pub peak_mb: f64,
}

/// Runs this bench binary again with `arguments` (a `--child ...` mode) and reads the
/// JSON line it prints.
pub fn run_child(arguments: &[&str]) -> BenchResult<ChildRun> {
    let output = Command::new(std::env::current_exe()?).args(arguments).output()?;
    if !output.status.success() {
        return Err(format!(
            "child {arguments:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let text = String::from_utf8(output.stdout)?;
    let line = text.lines().last().ok_or("child printed nothing")?;
    let value: serde_json::Value = serde_json::from_str(line)?;
    let number =
        |key: &str| value.get(key).and_then(serde_json::Value::as_f64).ok_or(key.to_owned());
    Ok(ChildRun {
        millis: number("millis")?,
        rss_before_mb: number("rss_before_kb")? / 1024.0,
        peak_mb: number("peak_kb")? / 1024.0,
    })
}

/// In a child: times `call`, then prints the line [`run_child`] reads.
pub fn child_measure<T>(call: impl FnOnce() -> BenchResult<T>) -> BenchResult<T> {
    let rss_before = status_kb("VmRSS").unwrap_or(0);
    let started = std::time::Instant::now();
    let value = call()?;
    let millis = started.elapsed().as_secs_f64() * 1000.0;
    let peak = status_kb("VmHWM").unwrap_or(0);
    println!(
        "{}",
        serde_json::json!({"millis": millis, "rss_before_kb": rss_before, "peak_kb": peak})
    );
    Ok(value)
}

/// Deterministic filler text: words from a small vocabulary, with the quotes, braces
/// and newlines real code output has (so JSON escaping costs what it really costs).
pub struct Filler {
    state: u64,
}

const WORDS: &[&str] = &[
    "the",
    "session",
    "record",
    "fn",
    "main()",
    "let",
    "x",
    "=",
    "{",
    "}",
    "\"value\"",
    "\n",
    "result",
    "error:",
    "src/lib.rs:42",
    "match",
    "Some(item)",
    "=>",
    "return",
    "Ok(())",
    "tokio::spawn",
    "impl",
    "for",
    "self",
    "// why",
    "\t",
    "path",
    "replay",
    "index",
    "0x1f",
];

impl Filler {
    pub fn new(seed: u64) -> Filler {
        Filler { state: seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) }
    }

    /// About `bytes` bytes of text.
    pub fn text(&mut self, bytes: usize) -> String {
        let mut text = String::with_capacity(bytes + 16);
        while text.len() < bytes {
            self.state =
                self.state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let word = WORDS[(self.state >> 33) as usize % WORDS.len()];
            text.push_str(word);
            text.push(' ');
        }
        text
    }
}

/// The `index`-th item of a session made of 8-item turns (turn markers, a prompt, a
/// tool call and its result, two assistant messages, usage), about 250 bytes an item on
/// disk on average, like a coding session.
pub fn turn_item(index: usize, filler: &mut Filler) -> RecordItem {
    let turn = index / 8;
    match index % 8 {
        0 => RecordItem::TurnStarted {},
        1 => RecordItem::UserMessage { text: filler.text(120) },
        2 => RecordItem::AssistantMessage {
            text: filler.text(160),
            reasoning: None,
            reasoning_opaque: None,
        },
        3 => RecordItem::ToolCall {
            id: format!("call_{turn:08}"),
            name: "read_file".to_owned(),
            arguments: format!("{{\"path\":\"src/module_{turn}.rs\",\"limit\":200}}"),
        },
        4 => RecordItem::ToolResult {
            id: format!("call_{turn:08}"),
            output: filler.text(900),
            is_error: false,
            duration_ms: 3,
        },
        5 => RecordItem::AssistantMessage {
            text: filler.text(400),
            reasoning: None,
            reasoning_opaque: None,
        },
        6 => RecordItem::Usage {
            usage: Usage {
                input_tokens: 12_000 + turn as u64,
                cached_input_tokens: 11_000,
                output_tokens: 300,
                reasoning_tokens: 0,
                cost: 0.0,
            },
        },
        _ => RecordItem::TurnCompleted { stop_reason: StopReason::EndTurn, error: None },
    }
}

/// Creates a session in `home` through [`SessionRecord`] with `items` items of
/// [`turn_item`], created at `created_at`, and returns its id.
/// The header of a generated session (a new id, the bench's project and model).
pub fn bench_header(created_at: Timestamp) -> RecordHeader {
    RecordHeader {
        id: SessionId::new(),
        version: RECORD_VERSION,
        created_at,
        cwd: "/work/project".to_owned(),
        provider: "scripted".to_owned(),
        model: "test-model".to_owned(),
        parent_id: None,
        forked_from: None,
        swarm: None,
        repository: None,
    }
}

pub fn write_session(
    home: &KestrelHome,
    created_at: Timestamp,
    items: usize,
    seed: u64,
) -> Result<SessionId, StoreError> {
    let mut record = SessionRecord::create(home, bench_header(created_at))?;
    let mut filler = Filler::new(seed);
    for index in 0..items {
        let ts = Timestamp { millis: created_at.millis + index as i64 * 50 };
        record.append(&RecordEntry { ts, item: turn_item(index, &mut filler) })?;
    }
    Ok(record.id().clone())
}
