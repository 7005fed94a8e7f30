//! `kestrel` with no subcommand, and `kestrel resume [ID|--last]`: the interactive UI
//! in the current directory.

use clap::Args;
use kestrel_tui::{ResumeTarget, StartOptions, TuiError};
use std::io::Write;
use std::process::ExitCode;

/// What the UI's new sessions use (ARCHITECTURE §7: over KESTREL_MODE/KESTREL_MODEL
/// and the config).
#[derive(Args, Default)]
pub struct TuiOptions {
    /// read-only, ask, auto or yolo for the sessions this UI creates.
    #[arg(long, value_parser = ["read-only", "ask", "auto", "yolo"])]
    mode: Option<String>,
    /// The model as PROVIDER/MODEL for the sessions this UI creates.
    #[arg(long, short = 'm', value_parser = provider_model)]
    model: Option<String>,
}

fn provider_model(value: &str) -> Result<String, String> {
    match value.split_once('/') {
        Some((provider, model)) if !provider.is_empty() && !model.is_empty() => {
            Ok(value.to_owned())
        }
        _ => Err(format!("`{value}` is not PROVIDER/MODEL (e.g. anthropic/claude-sonnet-4-5)")),
    }
}

/// `kestrel resume` arguments.
#[derive(Args)]
pub struct ResumeArgs {
    /// The session to resume (an id or a unique prefix of one).
    #[arg(conflicts_with = "last", required_unless_present = "last")]
    id: Option<String>,
    /// Resume the newest session of the current directory.
    #[arg(long)]
    last: bool,
    #[command(flatten)]
    options: TuiOptions,
}

/// Runs the UI (on `resume`'s session if given) with `options`, or those of `resume`.
pub fn run(resume: Option<ResumeArgs>, options: TuiOptions) -> ExitCode {
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(error) => return fail(&error, 1),
    };
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(error) => return fail(&error, 1),
    };
    let (resume, TuiOptions { mode, model }) = match resume {
        Some(args) => {
            let target = match args.id {
                Some(id) => ResumeTarget::Id(id),
                None => ResumeTarget::Last,
            };
            (Some(target), args.options)
        }
        None => (None, options),
    };
    match kestrel_tui::run(StartOptions { program, cwd, resume, mode, model }) {
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
        Err(error @ (TuiError::Home(_) | TuiError::BadEnv { .. })) => fail(&error, 2),
        Err(error) => fail(&error, 1),
    }
}

fn fail(error: &dyn std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("kestrel: {error}");
    ExitCode::from(code)
}
