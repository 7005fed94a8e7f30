//! `kestrel undo [SESSION] [--turns N] [--force] [--dry-run]`: puts back the files the
//! last turns of a session changed (kestrel_tools::checkpoint::undo). A session the
//! daemon runs is undone by its worker (`_kestrel/session/undo`); any other session is
//! undone here, holding its record. Exit 1 when files changed since refuse it (listed),
//! there is nothing to undo, or another process holds the session; exit 2 on `--turns 0`.

use clap::Args;
use kestrel_daemon::client;
use kestrel_protocol::acp::kestrel::{SESSION_UNDO, UndoAction, UndoSessionResponse};
use kestrel_protocol::jsonrpc::{Connection, RpcError};
use kestrel_store::{KestrelHome, SessionIndex, SessionRecord, StoreError};
use kestrel_tools::checkpoint::{UndoError, UndoOptions, undo};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// How long an undo through the daemon may take (it waits for a restarting worker).
const DAEMON_WAIT: Duration = Duration::from_secs(60);

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
    if args.turns == 0 {
        eprintln!("kestrel: {}", UndoError::NoTurns);
        return ExitCode::from(2);
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let found = KestrelHome::from_env().and_then(|home| {
        let summary = match &args.session {
            Some(query) => SessionIndex::find(&home, query)?,
            None => SessionIndex::latest(&home, Some(&cwd))?,
        };
        Ok((home, summary.id))
    });
    let (home, id) = match found {
        Ok(found) => found,
        Err(error) => return fail(&error),
    };
    let options = UndoOptions { turns: args.turns, force: args.force, dry_run: args.dry_run };
    // Every refusal names the session looked at: the default is only "the newest here".
    let in_session = |error: &dyn std::fmt::Display| fail(&format!("session {id}: {error}"));
    let response = match SessionRecord::open(&home, &id) {
        Ok((mut record, _replay)) => match undo(&home, &mut record, &options) {
            Ok(report) => report.into_response(),
            Err(error) => return in_session(&error),
        },
        Err(StoreError::Locked { .. }) => match through_daemon(&home, id.as_str(), &options) {
            Ok(response) => response,
            Err(code) => return code,
        },
        Err(error) => return in_session(&error),
    };
    let saved = kestrel_tools::checkpoint::checkpoints_dir(&home).join(id.as_str()).join("blobs");
    print!("{}", describe(&response, id.as_str(), &cwd, &saved));
    ExitCode::SUCCESS
}

/// Asks the daemon's worker of session `id` to undo; the exit code when it does not.
fn through_daemon(
    home: &KestrelHome,
    id: &str,
    options: &UndoOptions,
) -> Result<UndoSessionResponse, ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| fail(&error))?;
    runtime.block_on(async {
        let elsewhere = || {
            fail(&format!(
                "session {id} is open in another process that is not the daemon (a `kestrel \
                 exec` still running?): undo it once that process has finished"
            ))
        };
        let status = client::status(home).await.map_err(|error| fail(&error))?;
        let Some(status) = status else { return Err(elsewhere()) };
        if !status.sessions.iter().any(|session| session.session_id == id) {
            return Err(elsewhere());
        }
        let stream = client::connect(home).await.map_err(|error| fail(&error))?;
        let (read, write) = stream.into_split();
        let (connection, _incoming) = Connection::start(read, write);
        let params = json!({
            "sessionId": id,
            "turns": options.turns,
            "force": options.force,
            "dryRun": options.dry_run,
        });
        let answer = tokio::time::timeout(DAEMON_WAIT, connection.request(SESSION_UNDO, params))
            .await
            .map_err(|_| fail(&format!("the daemon did not answer within {DAEMON_WAIT:?}")))?;
        match answer {
            Ok(value) => serde_json::from_value(value)
                .map_err(|error| fail(&format!("the daemon's answer is not an undo: {error}"))),
            Err(error) => Err(refused(id, &error)),
        }
    })
}

/// The exit for an undo the worker refused (files changed since, nothing to undo, a
/// turn running: 1; bad params: 2).
fn refused(id: &str, error: &RpcError) -> ExitCode {
    eprintln!("kestrel: session {id}: {}", error.message);
    ExitCode::from(if error.code == RpcError::INVALID_PARAMS { 2 } else { 1 })
}

/// What was (or would be) undone, for people.
fn describe(response: &UndoSessionResponse, id: &str, cwd: &Path, saved: &Path) -> String {
    let turns: Vec<String> = response.turns.iter().map(u64::to_string).collect();
    let verb = if response.dry_run { "would undo" } else { "undid" };
    let mut out = format!(
        "{verb} turn{} {} of session {id}\n",
        if turns.len() == 1 { "" } else { "s" },
        turns.join(", "),
    );
    for file in &response.files {
        let action = match (file.action, response.dry_run) {
            (UndoAction::Removed, false) => "removed",
            (UndoAction::Removed, true) => "would remove",
            (UndoAction::Restored, false) => "restored",
            (UndoAction::Restored, true) => "would restore",
        };
        let overwritten = if response.overwritten.contains(&file.path) {
            " (overwriting changes made since; saved in the record)"
        } else {
            ""
        };
        out.push_str(&format!("  {action} {}{overwritten}\n", shown(cwd, &file.path)));
    }
    for skipped in &response.skipped {
        out.push_str(&format!("  left alone {}: {}\n", shown(cwd, &skipped.path), skipped.reason));
    }
    if !response.dry_run && !response.files.is_empty() {
        // An edit made while a command ran looks like the command's: whatever undo
        // replaced stays recoverable, and the user must be able to find it.
        out.push_str(&format!(
            "what these files held before the undo is saved in {} (named by SHA-256 in the \
             undo's checkpoint item of the session record)\n",
            saved.display()
        ));
    }
    out
}

fn fail(error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("kestrel: {error}");
    ExitCode::from(1)
}

fn shown(cwd: &Path, path: &Path) -> String {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    match path.strip_prefix(&cwd) {
        Ok(relative) => relative.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}
