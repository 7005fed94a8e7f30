//! `kestrel show ID [--json] [--full]`: a session's record as a transcript people read
//! (turns numbered as `kestrel fork --at N` counts them, prompts, answers, tool calls with
//! their outcome, notices, turn ends), or with `--json` the record's own lines. Reads the file without its lock, so a live session
//! can be shown while it works; a torn last line (a write in progress) is left out.

use clap::Args;
use kestrel_protocol::{Notice, RecordEntry, RecordHeader, RecordItem, StopReason};
use kestrel_store::{KestrelHome, Replay, SessionIndex, StoreError, read_record};
use kestrel_tools::checkpoint::CheckpointFiles;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

/// Lines of a tool's output shown before the rest is counted (`--full` shows all).
const OUTPUT_LINES: usize = 12;

#[derive(Args)]
pub struct ShowArgs {
    /// The session (id or unique prefix; `kestrel sessions` lists them).
    id: String,
    /// Print the record's JSON lines as stored (header first) instead of a transcript.
    #[arg(long)]
    json: bool,
    /// Show tool outputs, arguments and reasoning whole instead of their first lines.
    #[arg(long)]
    full: bool,
}

pub fn run(args: ShowArgs) -> ExitCode {
    let found = KestrelHome::from_env().and_then(|home| SessionIndex::find(&home, &args.id));
    let summary = match found {
        Ok(summary) => summary,
        Err(error) => return fail(&error),
    };
    let text = if args.json {
        match raw_lines(&summary.path) {
            Ok(text) => text,
            Err(error) => return fail(&error),
        }
    } else {
        match read_record(&summary.path) {
            Ok(replay) => transcript(&replay, args.full),
            Err(error) => return fail(&error),
        }
    };
    // A closed pipe (`kestrel show ID | head`) is not an error worth a message.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    ExitCode::SUCCESS
}

/// The record's complete lines as they are on disk (unknown item types included).
fn raw_lines(path: &Path) -> Result<String, StoreError> {
    let bytes = std::fs::read(path).map_err(|source| StoreError::Io {
        action: "read the record",
        path: path.to_path_buf(),
        source,
    })?;
    let complete = bytes.iter().rposition(|byte| *byte == b'\n').map_or(0, |end| end + 1);
    Ok(String::from_utf8_lossy(&bytes[..complete]).into_owned())
}

/// The whole record as readable text.
fn transcript(replay: &Replay, full: bool) -> String {
    let mut out = header_lines(&replay.header);
    let mut seen = Seen { tool_names: HashMap::new(), turns: 0 };
    for entry in &replay.entries {
        entry_lines(&mut out, entry, &mut seen, &replay.header.cwd, full);
    }
    if replay.skipped > 0 {
        let _ = writeln!(
            out,
            "\n({} item(s) this Kestrel cannot read were left out; --json shows them)",
            replay.skipped
        );
    }
    out
}

fn header_lines(header: &RecordHeader) -> String {
    let mut out = format!(
        "session {}  {}  {}/{}\ncwd {}\n",
        header.id, header.created_at, header.provider, header.model, header.cwd
    );
    if let Some(parent) = &header.parent_id {
        let _ = writeln!(out, "subagent of {parent}");
    }
    if let Some(fork) = &header.forked_from {
        let _ = writeln!(out, "forked from {} (its first {} items)", fork.session_id, fork.items);
    }
    if let Some(tag) = &header.swarm {
        let _ = writeln!(
            out,
            "swarm run {} task {} role {} attempt {}",
            tag.run,
            tag.task,
            tag.role.as_str(),
            tag.attempt
        );
    }
    out
}

/// What the transcript has passed so far.
struct Seen<'a> {
    /// Tool call ids and their tool's name, for the results.
    tool_names: HashMap<&'a str, &'a str>,
    /// Turns started: numbered as `kestrel fork --at N` counts them.
    turns: u64,
}

fn entry_lines<'a>(
    out: &mut String,
    entry: &'a RecordEntry,
    seen: &mut Seen<'a>,
    cwd: &str,
    full: bool,
) {
    match &entry.item {
        RecordItem::UserMessage { text } => {
            out.push_str("\n> user\n");
            push_indented(out, text, "  ");
        }
        RecordItem::AssistantMessage { text, reasoning, reasoning_opaque: _ } => {
            if let Some(reasoning) = reasoning.as_deref().filter(|r| !r.trim().is_empty()) {
                out.push_str("\n~ reasoning\n");
                push_indented(out, &shorten(reasoning, full), "  ");
            }
            if !text.trim().is_empty() {
                out.push_str("\n< assistant\n");
                push_indented(out, text, "  ");
            }
        }
        RecordItem::ToolCall { id, name, arguments } => {
            seen.tool_names.insert(id, name);
            let arguments = if full { arguments.clone() } else { one_line(arguments, 200) };
            let _ = writeln!(out, "\n$ {name} {arguments}");
        }
        RecordItem::ToolResult { id, output, is_error, duration_ms } => {
            let name = seen.tool_names.get(id.as_str()).copied().unwrap_or("tool");
            let outcome = if *is_error { "failed" } else { "ok" };
            let _ = writeln!(out, "  {name} {outcome} ({duration_ms} ms)");
            push_indented(out, &shorten(output, full), "  | ");
        }
        RecordItem::Usage { usage } => {
            let _ = writeln!(
                out,
                "  (tokens: {} in, {} out, ${:.4})",
                usage.input_tokens, usage.output_tokens, usage.cost
            );
        }
        RecordItem::TurnStarted {} => {
            seen.turns += 1;
            let _ = writeln!(out, "\n## turn {}  {}", seen.turns, entry.ts);
        }
        RecordItem::TurnCompleted { stop_reason, error } => {
            let reason = stop_reason_text(*stop_reason);
            match error {
                Some(error) => {
                    let _ = writeln!(out, "\n-- turn {reason}: {error}");
                }
                None => {
                    let _ = writeln!(out, "\n-- turn {reason}");
                }
            }
        }
        RecordItem::Compaction { summary, replaces_through } => {
            let _ = writeln!(
                out,
                "\n== compacted (items up to {replaces_through} replaced by this summary)"
            );
            push_indented(out, &shorten(summary, full), "  ");
        }
        RecordItem::Notice { notice } => notice_line(out, notice),
        RecordItem::Checkpoint { files } => {
            // A checkpoint this Kestrel cannot read is only undo's business.
            let Ok(files) = serde_json::from_value::<CheckpointFiles>(files.clone()) else {
                return;
            };
            let paths: Vec<String> = files
                .changes
                .iter()
                .map(|change| {
                    change.path.strip_prefix(cwd).unwrap_or(&change.path).display().to_string()
                })
                .collect();
            if paths.is_empty() {
                return;
            }
            let verb = if files.undo.is_some() { "undo put back" } else { "changed" };
            let _ = writeln!(out, "  {verb}: {}", paths.join(", "));
        }
    }
}

fn notice_line(out: &mut String, notice: &Notice) {
    let kind = serde_json::to_value(notice.kind)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default();
    let _ = writeln!(out, "\n! {kind}: {}", notice.message);
}

fn stop_reason_text(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "ended",
        StopReason::Cancelled => "cancelled",
        StopReason::Interrupted => "interrupted",
        StopReason::Failed => "failed",
        StopReason::MaxTurns => "stopped at --max-turns",
    }
}

fn push_indented(out: &mut String, text: &str, prefix: &str) {
    for line in text.trim_end().lines() {
        out.push_str(prefix);
        out.push_str(line);
        out.push('\n');
    }
}

/// The first lines of `text`, and how many were left out.
fn shorten(text: &str, full: bool) -> String {
    let total = text.trim_end().lines().count();
    if full || total <= OUTPUT_LINES {
        return text.to_owned();
    }
    let mut kept: String =
        text.lines().take(OUTPUT_LINES).map(|line| format!("{line}\n")).collect();
    let _ = write!(kept, "… {} more lines (--full shows them)", total - OUTPUT_LINES);
    kept
}

/// `text` on one line, cut at `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max).collect();
    format!("{cut}…")
}

/// Exit 2 for a usage error (an unknown or ambiguous id), else 1.
fn fail(error: &StoreError) -> ExitCode {
    eprintln!("kestrel: {error}");
    ExitCode::from(if error.is_usage() { 2 } else { 1 })
}
