//! The `kestrel` binary: parses arguments and hands each subcommand to its crate.

mod apply_patch_command;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "kestrel", version, about = "A terminal coding agent")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Apply a `*** Begin Patch` patch from stdin to the current directory.
    ApplyPatch,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::ApplyPatch) => apply_patch_command::run(),
        None => {
            eprintln!("kestrel: the interactive TUI is not built yet; try `kestrel exec PROMPT`");
            ExitCode::from(2)
        }
    }
}
