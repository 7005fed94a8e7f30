//! `kestrel` with no subcommand, and `kestrel resume [ID|--last]`: the interactive UI
//! in the current directory.

use clap::Args;
use kestrel_tui::{ResumeTarget, StartOptions, TuiError};
use std::io::Write;
use std::process::ExitCode;

/// `kestrel resume` arguments.
#[derive(Args)]
pub struct ResumeArgs {
    /// The session to resume (an id or a unique prefix of one).
    #[arg(conflicts_with = "last", required_unless_present = "last")]
    id: Option<String>,
    /// Resume the newest session of the current directory.
    #[arg(long)]
    last: bool,
}

pub fn run(resume: Option<ResumeArgs>) -> ExitCode {
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(error) => return fail(&error, 1),
    };
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(error) => return fail(&error, 1),
    };
    let resume = resume.map(|args| match args.id {
        Some(id) => ResumeTarget::Id(id),
        None => ResumeTarget::Last,
    });
    match kestrel_tui::run(StartOptions { program, cwd, resume }) {
        Ok(exit) => {
            // Said on SIGTERM/SIGHUP too; a hung-up terminal may refuse it (ignored).
            if let Some(id) = exit.session_id {
                let mut stdout = std::io::stdout();
                let _ = writeln!(stdout, "Session {id}: continue it with `kestrel resume {id}`");
            }
            if let Some(signal) = exit.signal {
                return ExitCode::from(128u8.saturating_add(u8::try_from(signal).unwrap_or(0)));
            }
            ExitCode::SUCCESS
        }
        Err(error @ TuiError::NotATerminal) => fail(&error, 2),
        Err(error @ TuiError::Home(_)) => fail(&error, 2),
        Err(error) => fail(&error, 1),
    }
}

fn fail(error: &dyn std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("kestrel: {error}");
    ExitCode::from(code)
}
