//! `kestrel sessions` and `kestrel fork`: thin views over the store's session index.

use clap::Args;
use kestrel_store::{KestrelHome, SessionIndex, StoreError};
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
    for session in sessions.iter().take(args.limit) {
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
            out.push_str(&format!(
                "{}  {}  {}  {}",
                session.id, session.created_at, session.cwd, prompt
            ));
        }
        out.push('\n');
    }
    print!("{out}");
    ExitCode::SUCCESS
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

fn fail(error: &StoreError) -> ExitCode {
    eprintln!("kestrel: {error}");
    ExitCode::from(if error.is_usage() { 2 } else { 1 })
}
