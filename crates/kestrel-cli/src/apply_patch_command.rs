//! `kestrel apply-patch`: the patch on stdin, applied in the cwd.

use std::process::ExitCode;

pub fn run() -> ExitCode {
    eprintln!("kestrel apply-patch: not built yet");
    ExitCode::from(1)
}
