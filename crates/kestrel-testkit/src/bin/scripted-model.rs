//! `scripted-model --script FILE.json [--port N] [--log FILE.jsonl]`: runs the scripted
//! model server for tests that drive programs from outside (e2e, benchmarks). Prints
//! exactly one line, `listening http://127.0.0.1:PORT/v1`, then serves until killed, or
//! until stdin closes when stdin is a pipe (so a parent that dies takes it along).

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use kestrel_testkit::{Script, ScriptedServer, ServerOptions};

const USAGE: &str = "usage: scripted-model --script FILE.json [--port N] [--log FILE.jsonl]";

struct Arguments {
    script: PathBuf,
    options: ServerOptions,
}

fn parse_arguments(mut arguments: impl Iterator<Item = String>) -> Result<Arguments, String> {
    let mut script = None;
    let mut options = ServerOptions::default();
    while let Some(argument) = arguments.next() {
        let mut value =
            |name: &str| arguments.next().ok_or_else(|| format!("{name} needs a value"));
        match argument.as_str() {
            "--script" => script = Some(PathBuf::from(value("--script")?)),
            "--port" => {
                let port = value("--port")?;
                options.port =
                    port.parse().map_err(|_| format!("--port {port:?} is not a port number"))?;
            }
            "--log" => options.request_log = Some(PathBuf::from(value("--log")?)),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let script = script.ok_or("--script FILE.json is required")?;
    Ok(Arguments { script, options })
}

fn main() -> ExitCode {
    let arguments = match parse_arguments(std::env::args().skip(1)) {
        Ok(arguments) => arguments,
        Err(message) if message.is_empty() => {
            report(USAGE);
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            report(&format!("scripted-model: {message}\n{USAGE}"));
            return ExitCode::from(2);
        }
    };
    let script = match Script::from_file(&arguments.script) {
        Ok(script) => script,
        Err(error) => {
            report(&format!("scripted-model: {error}"));
            return ExitCode::from(2);
        }
    };
    let server = match ScriptedServer::start_with(script, arguments.options) {
        Ok(server) => server,
        Err(error) => {
            report(&format!("scripted-model: cannot start: {error}"));
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "listening {}", server.base_url()).and_then(|()| stdout.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    drop(stdout);
    wait_for_end_of_input();
    drop(server);
    ExitCode::SUCCESS
}

/// Tells the person or test running us what went wrong (stdout carries only the
/// listening line).
fn report(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// Returns when stdin, if it is a pipe or socket, reaches its end; otherwise (a
/// terminal, /dev/null) never: the process then runs until it is killed.
fn wait_for_end_of_input() {
    if stdin_is_pipe() {
        let mut buffer = [0; 1024];
        let mut stdin = std::io::stdin().lock();
        loop {
            match stdin.read(&mut buffer) {
                Ok(0) => return,
                Ok(_) => continue,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
    }
    loop {
        std::thread::park();
    }
}

#[cfg(unix)]
fn stdin_is_pipe() -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::metadata("/dev/stdin")
        .map(|metadata| metadata.file_type().is_fifo() || metadata.file_type().is_socket())
        .unwrap_or(false)
}

#[cfg(not(unix))]
fn stdin_is_pipe() -> bool {
    false
}
