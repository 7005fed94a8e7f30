//! The `kestrel` binary: parses arguments and hands each subcommand to its crate.

// The binary is the one place that writes to the terminal.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod acp_command;
mod apply_patch_command;
mod daemon_command;
mod doctor_command;
mod exec_command;
mod first_run;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod math;
mod models_command;
mod session_commands;
mod show_command;
mod storage_upkeep;
mod swarm_command;
mod tui_command;
mod undo_command;
mod worker_command;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "kestrel", version, about = "A terminal coding agent")]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    tui: tui_command::TuiOptions,
}

#[derive(Subcommand)]
enum Command {
    /// Run one prompt headless: the final answer on stdout (or JSONL events with --json).
    Exec(Box<exec_command::ExecArgs>),
    /// List sessions, the one used last first.
    Sessions(session_commands::SessionsArgs),
    /// Print a session's transcript (prompts, answers, tool calls, notices); --json: its record.
    Show(show_command::ShowArgs),
    /// Copy a session (up to item N) into a new session and print its id.
    Fork(session_commands::ForkArgs),
    /// Put back the files the last turn(s) of a session changed.
    Undo(undo_command::UndoArgs),
    /// Apply a `*** Begin Patch` patch from stdin to the current directory.
    ApplyPatch,
    /// Serve one session over ACP on stdin/stdout (started by the daemon; internal).
    #[command(hide = true)]
    Worker,
    /// Serve the Agent Client Protocol on stdio for editors (through the daemon).
    Acp,
    /// List the providers' models with context window, output limit and prices.
    Models(models_command::ModelsArgs),
    /// Run the daemon in the foreground, or `start`, `stop` or show the `status` of it.
    Daemon(daemon_command::DaemonArgs),
    /// Open the interactive UI on an earlier session (an id, or --last in this directory).
    Resume(tui_command::ResumeArgs),
    /// Check the set-up: config, model, keys (set or not, never shown), providers,
    /// sandbox, daemon and disk used.
    Doctor,
    /// What a first run with no model would use, as JSON lines (for the UI; internal).
    #[command(hide = true, name = "first-run-offer")]
    FirstRunOffer,
    /// Build with many agents: a task graph through implementer, reviewer and verifier.
    Swarm(swarm_command::SwarmArgs),
}

fn main() -> ExitCode {
    // Relocation is over: the table only process start read leaves every process's
    // resident memory (~0.7 MB each; the TUI, daemon and worker live all day).
    kestrel_platform::release_relocation_table();
    // Bare `kestrel` opens the UI: its first frame waits for neither the whole CLI's
    // parser nor TLS (the UI makes no HTTPS request).
    if std::env::args_os().len() == 1 {
        return tui_command::run(None, tui_command::TuiOptions::default());
    }
    kestrel_model::install_crypto_provider();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Exec(args)) => exec_command::run(*args),
        Some(Command::Sessions(args)) => session_commands::sessions(args),
        Some(Command::Show(args)) => show_command::run(args),
        Some(Command::Fork(args)) => session_commands::fork(args),
        Some(Command::Undo(args)) => undo_command::run(args),
        Some(Command::ApplyPatch) => apply_patch_command::run(),
        Some(Command::Worker) => worker_command::run(),
        Some(Command::Acp) => acp_command::run(),
        Some(Command::Models(args)) => models_command::run(args),
        Some(Command::Daemon(args)) => daemon_command::run(args),
        Some(Command::Resume(args)) => tui_command::run(Some(args), cli.tui),
        Some(Command::Doctor) => doctor_command::run(),
        Some(Command::FirstRunOffer) => first_run::print_offer(),
        Some(Command::Swarm(args)) => swarm_command::run(args),
        None => tui_command::run(None, cli.tui),
    }
}
