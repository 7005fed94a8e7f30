//! `kestrel undo [SESSION] [--turns N] [--force] [--dry-run]`: puts back the files the
//! last turns of a session changed (kestrel_tools::checkpoint::undo). Exit 1 when files
//! changed since refuse it (listed), or there is nothing to undo.

use clap::Args;
use kestrel_store::{KestrelHome, SessionIndex, SessionRecord, StoreError};
use kestrel_tools::checkpoint::{FileState, UndoError, UndoOptions, undo};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct UndoArgs {
    /// The session (id or unique prefix); default: the newest session started here.
    session: Option<String>,
    /// How many turns to undo: the latest that changed files and are not undone yet.
    #[arg(long, default_value_t = 1)]
    turns: usize,
    /// Also overwrite files changed since the turn (what they hold is saved in the record).
    #[arg(long)]
    force: bool,
    /// Only show what would be put back.
    #[arg(long)]
    dry_run: bool,
}

pub fn run(args: UndoArgs) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let opened = KestrelHome::from_env().and_then(|home| {
        let summary = match &args.session {
            Some(query) => SessionIndex::find(&home, query)?,
            None => SessionIndex::latest(&home, Some(&cwd))?,
        };
        let (record, _replay) = SessionRecord::open(&home, &summary.id)?;
        Ok((home, record))
    });
    let (home, mut record) = match opened {
        Ok(opened) => opened,
        Err(error @ StoreError::Locked { .. }) => {
            eprintln!("kestrel: {error}; undo it from the client attached to it");
            return ExitCode::from(1);
        }
        Err(error) => {
            eprintln!("kestrel: {error}");
            return ExitCode::from(1);
        }
    };
    let options = UndoOptions { turns: args.turns, force: args.force, dry_run: args.dry_run };
    let report = match undo(&home, &mut record, &options) {
        Ok(report) => report,
        Err(error @ UndoError::NoTurns) => {
            eprintln!("kestrel: {error}");
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("kestrel: {error}");
            return ExitCode::from(1);
        }
    };
    let turns: Vec<String> = report.turns.iter().map(u64::to_string).collect();
    let verb = if report.dry_run { "would undo" } else { "undid" };
    let mut out = format!(
        "{verb} turn{} {} of session {}\n",
        if turns.len() == 1 { "" } else { "s" },
        turns.join(", "),
        record.id()
    );
    for change in &report.files {
        let action = match (&change.after, report.dry_run) {
            (FileState::Absent, false) => "removed",
            (FileState::Absent, true) => "would remove",
            (_, false) => "restored",
            (_, true) => "would restore",
        };
        let overwritten = if report.overwritten.contains(&change.path) {
            " (overwriting changes made since; saved in the record)"
        } else {
            ""
        };
        out.push_str(&format!("  {action} {}{overwritten}\n", shown(&cwd, &change.path)));
    }
    for skipped in &report.skipped {
        out.push_str(&format!("  left alone {}: {}\n", shown(&cwd, &skipped.path), skipped.reason));
    }
    print!("{out}");
    ExitCode::SUCCESS
}

fn shown(cwd: &Path, path: &Path) -> String {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    match path.strip_prefix(&cwd) {
        Ok(relative) => relative.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}
