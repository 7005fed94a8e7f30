//! `kestrel sessions` and `kestrel fork`: thin views over the store's session index.
//! A listed session's tokens and cost include its subagents' (`total_usage`); the table
//! shows subagents under their parent.

use clap::Args;
use kestrel_protocol::Usage;
use kestrel_store::{KestrelHome, SessionIndex, SessionSummary, StoreError};
use std::process::ExitCode;

#[derive(Args)]
pub struct SessionsArgs {
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Show at most this many sessions.
    #[arg(long, short = 'n', default_value_t = 50)]
    limit: usize,
}

#[derive(Args)]
pub struct ForkArgs {
    /// The session to copy (id or unique prefix).
    id: String,
    /// Copy only the first N items (default: all).
    #[arg(long)]
    at: Option<u64>,
}

pub fn sessions(args: SessionsArgs) -> ExitCode {
    let listed = KestrelHome::from_env().and_then(|home| SessionIndex::list(&home));
    let sessions = match listed {
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
        if args.json {
            match serde_json::to_string(session) {
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
                "{indent}{}  {}  {tokens:>9}  {cost:>9}  {}  {}",
                session.id, session.updated_at, session.cwd, prompt
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

pub fn fork(args: ForkArgs) -> ExitCode {
    let forked = KestrelHome::from_env().and_then(|home| {
        let source = SessionIndex::find(&home, &args.id)?;
        kestrel_store::fork(&home, &source.id, args.at)
    });
    match forked {
        Ok(header) => {
            println!("{}", header.id);
            ExitCode::SUCCESS
        }
        Err(error) => fail(&error),
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
