//! `kestrel apply-patch`: the patch on stdin, applied in the cwd. Prints the summary
//! (`A path`, `M path`, `D path`, `R from -> to`) on stdout and exits 0; on failure
//! prints `kestrel apply-patch: <reason>` on stderr and exits 1 with nothing written.

use kestrel_tools::apply_patch::apply_patch;
use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;

pub fn run() -> ExitCode {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!(
            "kestrel apply-patch: reads the patch from standard input; pipe it in, e.g. \
             `kestrel apply-patch < change.patch`"
        );
        return ExitCode::from(2);
    }
    match apply(stdin) {
        Ok(summary) => {
            let mut stdout = std::io::stdout().lock();
            // A closed stdout does not undo the patch; the exit code still says it applied.
            let _ = writeln!(stdout, "{summary}");
            ExitCode::SUCCESS
        }
        Err(reason) => {
            eprintln!("kestrel apply-patch: {reason}");
            ExitCode::from(1)
        }
    }
}

fn apply(mut stdin: std::io::Stdin) -> Result<String, String> {
    let mut patch = String::new();
    stdin
        .read_to_string(&mut patch)
        .map_err(|error| format!("cannot read the patch from standard input: {error}"))?;
    let cwd = std::env::current_dir()
        .map_err(|error| format!("cannot determine the current directory: {error}"))?;
    apply_patch(&cwd, &patch).map(|summary| summary.to_string()).map_err(|error| error.to_string())
}
