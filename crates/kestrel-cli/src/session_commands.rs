//! `kestrel sessions` and `kestrel fork`: thin views over the store's session index.
//! A listed session's tokens and cost include its subagents' (`total_usage`); the table
//! shows subagents under their parent, and the disk each session uses (its record and
//! checkpoint data). `kestrel sessions rm` removes sessions for good.

use clap::{Args, Subcommand};
use kestrel_protocol::{Timestamp, Usage};
use kestrel_store::{KestrelHome, SessionIndex, SessionSummary, StoreError};
use std::process::ExitCode;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SessionsArgs {
    #[command(subcommand)]
    action: Option<SessionsAction>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Show at most this many sessions.
    #[arg(long, short = 'n', default_value_t = 50)]
    limit: usize,
}

#[derive(Subcommand)]
enum SessionsAction {
    /// Remove sessions for good: records, checkpoint data (undo) and index entries. A
    /// session open in a worker is refused.
    Rm(RmArgs),
}

#[derive(Args)]
struct RmArgs {
    /// Session ids (or unique prefixes).
    #[arg(required_unless_present = "older_than", conflicts_with = "older_than")]
    ids: Vec<String>,
    /// Instead of ids: every session not used for more than DAYS days (live ones kept).
    #[arg(long, value_name = "DAYS")]
    older_than: Option<u32>,
}

#[derive(Args)]
pub struct ForkArgs {
    /// The session to copy (id or unique prefix).
    id: String,
    /// Copy only the first N turns: N prompts with everything they led to (default: all).
    #[arg(long)]
    at: Option<u64>,
}

pub fn sessions(args: SessionsArgs) -> ExitCode {
    let home = match KestrelHome::from_env() {
        Ok(home) => home,
        Err(error) => return fail(&error),
    };
    if let Some(SessionsAction::Rm(rm)) = args.action {
        return remove(&home, rm);
    }
    let sessions = match SessionIndex::list(&home) {
        Ok(sessions) => sessions,
        Err(error) => return fail(&error),
    };
    let mut out = String::new();
    let rows: Vec<(usize, &SessionSummary)> = if args.json {
        sessions.iter().map(|session| (0, session)).collect()
    } else {
        nested(&sessions)
    };
    for (depth, session) in rows.into_iter().take(args.limit) {
        let disk = kestrel_store::session_disk(&home, session).total();
        if args.json {
            let line = serde_json::to_value(session).and_then(|mut value| {
                value["disk_bytes"] = disk.into();
                serde_json::to_string(&value)
            });
            match line {
                Ok(line) => out.push_str(&line),
                Err(error) => {
                    eprintln!("kestrel: {error}");
                    return ExitCode::from(1);
                }
            }
        } else {
            let prompt = session.first_prompt.as_deref().unwrap_or("").replace('\n', " ");
            let prompt: String = prompt.chars().take(60).collect();
            let (tokens, cost) = usage_columns(&session.total_usage);
            let indent =
                if depth == 0 { String::new() } else { format!("{}└ ", "  ".repeat(depth)) };
            out.push_str(&format!(
                "{indent}{}  {}  {tokens:>9}  {cost:>9}  {:>8}  {}  {}",
                session.id,
                session.updated_at,
                size(disk),
                session.cwd,
                prompt
            ));
        }
        out.push('\n');
    }
    print!("{out}");
    ExitCode::SUCCESS
}

/// Sessions in listing order (used last first), each followed by its subagents (oldest
/// first, as they were started) with their depth. A subagent whose parent is not listed
/// stands on its own.
fn nested(sessions: &[SessionSummary]) -> Vec<(usize, &SessionSummary)> {
    // One pass to index children by parent (linear; 10k sessions must list fast).
    let listed: std::collections::HashSet<&kestrel_protocol::SessionId> =
        sessions.iter().map(|s| &s.id).collect();
    let mut children: std::collections::HashMap<
        &kestrel_protocol::SessionId,
        Vec<&SessionSummary>,
    > = std::collections::HashMap::new();
    for session in sessions {
        if let Some(parent) = session.parent_id.as_ref().filter(|p| listed.contains(p)) {
            children.entry(parent).or_default().push(session);
        }
    }
    let mut rows = Vec::with_capacity(sessions.len());
    let mut stack: Vec<(usize, &SessionSummary)> = sessions
        .iter()
        .rev()
        .filter(|s| s.parent_id.as_ref().is_none_or(|parent| !listed.contains(parent)))
        .map(|s| (0, s))
        .collect();
    while let Some((depth, session)) = stack.pop() {
        rows.push((depth, session));
        // Newest first in `sessions`: pushed in that order, the oldest child pops first.
        if let Some(kids) = children.get(&session.id) {
            stack.extend(kids.iter().map(|child| (depth + 1, *child)));
        }
    }
    rows
}

/// The record item where turn `turns + 1` starts (the record's end after the last
/// turn), or how many turns there are when it has fewer: `fork --at` counts turns, what
/// the user sees, not record items.
fn item_after_turns(source: &SessionSummary, turns: u64) -> Result<Result<u64, u64>, StoreError> {
    let replay = kestrel_store::read_record(&source.path)?;
    let starts: Vec<usize> = replay
        .entries
        .iter()
        .enumerate()
        .filter(|(_, entry)| matches!(entry.item, kestrel_protocol::RecordItem::TurnStarted {}))
        .map(|(index, _)| index)
        .collect();
    let count = starts.len() as u64;
    Ok(match usize::try_from(turns).ok().and_then(|turns| starts.get(turns)) {
        Some(index) => Ok(*index as u64),
        None if turns == count => Ok(replay.entries.len() as u64),
        None => Err(count),
    })
}

pub fn fork(args: ForkArgs) -> ExitCode {
    let forked = KestrelHome::from_env().and_then(|home| {
        let source = SessionIndex::find(&home, &args.id)?;
        let at = match args.at.map(|turns| item_after_turns(&source, turns)).transpose()? {
            Some(Err(count)) => return Ok(Err((source.id, count))),
            Some(Ok(item)) => Some(item),
            None => None,
        };
        kestrel_store::fork(&home, &source.id, at).map(Ok)
    });
    match forked {
        Ok(Ok(header)) => {
            println!("{}", header.id);
            ExitCode::SUCCESS
        }
        Ok(Err((id, count))) => {
            let at = args.at.unwrap_or_default();
            let turns = if count == 1 { "turn" } else { "turns" };
            eprintln!("kestrel: cannot fork session {id} after turn {at}: it has {count} {turns}");
            ExitCode::from(2)
        }
        Err(error) => fail(&error),
    }
}

/// `kestrel sessions rm`: the ids given (all or none removed), or every idle session
/// older than `--older-than` (one by one: one that became live meanwhile is kept).
fn remove(home: &KestrelHome, args: RmArgs) -> ExitCode {
    let removed = match args.older_than {
        None => match kestrel_store::remove_sessions(home, &args.ids) {
            Ok(removed) => removed,
            Err(error) => return fail(&error),
        },
        Some(days) => {
            let old = match kestrel_store::sessions_older_than(home, days, Timestamp::now()) {
                Ok(old) => old,
                Err(error) => return fail(&error),
            };
            let mut removed = Vec::new();
            for session in old {
                match kestrel_store::remove_sessions(home, &[session.id.to_string()]) {
                    Ok(gone) => removed.extend(gone),
                    Err(error @ StoreError::SessionLive { .. }) => eprintln!("kestrel: {error}"),
                    Err(error) => return fail(&error),
                }
            }
            if removed.is_empty() {
                println!("no session unused for more than {days} days");
            }
            removed
        }
    };
    let mut total = 0;
    for session in &removed {
        total += session.bytes;
        println!("removed {} ({})", session.id, size(session.bytes));
    }
    if removed.len() > 1 {
        println!("{} sessions removed, {} freed", removed.len(), size(total));
    }
    ExitCode::SUCCESS
}

/// `512 B`, `12.3 kB`, `1.2 MB`, `3.4 GB`.
fn size(bytes: u64) -> String {
    let value = bytes as f64;
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", value / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", value / 1e6),
        _ => format!("{:.1} GB", value / 1e9),
    }
}

/// A session's tokens (input + output) and cost, subagents included: `12.3k tok`,
/// `$0.0421`; `-` for a session that has not spent anything.
fn usage_columns(usage: &Usage) -> (String, String) {
    let tokens = usage.input_tokens + usage.output_tokens;
    if tokens == 0 && usage.cost == 0.0 {
        return ("-".into(), "-".into());
    }
    let tokens = match tokens {
        0..1_000 => format!("{tokens} tok"),
        1_000..1_000_000 => format!("{:.1}k tok", tokens as f64 / 1e3),
        _ => format!("{:.1}M tok", tokens as f64 / 1e6),
    };
    let cost = if usage.cost < 1.0 {
        format!("${:.4}", usage.cost)
    } else {
        format!("${:.2}", usage.cost)
    };
    (tokens, cost)
}

fn fail(error: &StoreError) -> ExitCode {
    eprintln!("kestrel: {error}");
    ExitCode::from(if error.is_usage() { 2 } else { 1 })
}
