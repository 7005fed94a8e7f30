//! The verifier (no model): a fresh clone of a commit runs the graph's `setup` commands
//! (network allowed), then each acceptance command (network as `[sandbox] network` says),
//! all inside the OS sandbox (writes only in the clone and the temp dirs), without the
//! variables that look secret, each within the timeout; nothing a command starts
//! outlives it. Everything printed goes to a log in the run directory; a failure's head
//! and tail go back to the implementer.

use crate::SwarmError;
use crate::git::Git;
use kestrel_platform::{Sandbox, SandboxPolicy, Signal, remove_secret_variables, spawn_group};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How much of a failure's output the implementer is shown: its start and its end.
const HEAD_BYTES: u64 = 3 * 1024;
const TAIL_BYTES: u64 = 6 * 1024;

/// What to check and how.
#[derive(Debug, Clone)]
pub struct VerifySpec<'a> {
    pub commit: &'a str,
    pub setup: &'a [String],
    pub acceptance: &'a [String],
    pub timeout: Duration,
    /// Whether acceptance commands may use the network (`[sandbox] network`).
    pub network: bool,
}

/// How a verification went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// `None`: every command passed. Else the command that failed and why.
    pub failure: Option<String>,
    /// The failing command's output, head and tail (empty when it passed).
    pub output: String,
    /// The whole log.
    pub log: PathBuf,
}

/// Clones `repo` at the commit into `scratch` (removed afterwards) and runs the
/// commands, logging to `log`. Fails only when the clone or the log cannot be made; a
/// command that fails or hangs is a failed verification, not an error.
pub async fn verify(
    repo: &Git,
    spec: &VerifySpec<'_>,
    scratch: &Path,
    log: &Path,
) -> Result<Verification, SwarmError> {
    let _ = std::fs::remove_dir_all(scratch);
    if let Some(parent) = scratch.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| SwarmError::io("cannot create", parent, error))?;
    }
    let result = run_all(repo, spec, scratch, log).await;
    let _ = std::fs::remove_dir_all(scratch);
    result
}

async fn run_all(
    repo: &Git,
    spec: &VerifySpec<'_>,
    clone: &Path,
    log: &Path,
) -> Result<Verification, SwarmError> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|error| SwarmError::io("cannot open the log", log, error))?;
    repo.clone_at(clone, spec.commit).await?;
    let passed =
        |log: &Path| Verification { failure: None, output: String::new(), log: log.into() };
    let sandbox = Sandbox::detect(spec.network).map_err(|error| {
        SwarmError::Usage(format!(
            "the verifier runs setup and acceptance commands in the OS sandbox, and {error} \
             (KESTREL_SANDBOX picks a backend)"
        ))
    })?;
    let steps = spec
        .setup
        .iter()
        .map(|command| (command, Step::Setup))
        .chain(spec.acceptance.iter().map(|command| (command, Step::Acceptance)));
    for (command, step) in steps {
        if command.trim().is_empty() {
            continue;
        }
        let (kind, network) = match step {
            Step::Setup => ("setup", true),
            Step::Acceptance => ("acceptance", spec.network),
        };
        let start =
            header(&mut file, log, &format!("$ {command}   ({kind}, commit {})", spec.commit))?;
        // The tree is the model's: setup runs confined like the acceptance commands.
        let policy = SandboxPolicy::workspace_write(clone, network);
        let outcome = match sandbox.command(command, &policy) {
            Ok(process) => run_one(process, clone, None, &file, log, spec.timeout).await?,
            Err(error) if network => {
                Err(format!("cannot sandbox it with the network allowed: {error}"))
            }
            Err(error) => Err(format!("cannot sandbox it: {error}")),
        };
        if let Err(why) = outcome {
            header(&mut file, log, &format!("=> {why}"))?;
            let output = excerpt(log, start)?;
            return Ok(Verification {
                failure: Some(format!("{kind} command `{command}` {why}")),
                output,
                log: log.to_path_buf(),
            });
        }
        header(&mut file, log, "=> exit 0")?;
    }
    Ok(passed(log))
}

/// Which list a command comes from.
#[derive(Debug, Clone, Copy)]
enum Step {
    Setup,
    Acceptance,
}

/// Runs one command with its output appended to the log (its stdout to `stdout` when
/// given: a climb's metric); `Err(why)` when it did not exit 0 in time. Whatever is left
/// of its process group afterwards is killed.
pub(crate) async fn run_one(
    mut command: tokio::process::Command,
    cwd: &Path,
    stdout: Option<File>,
    log: &File,
    log_path: &Path,
    timeout: Duration,
) -> Result<Result<(), String>, SwarmError> {
    let out = match stdout {
        Some(file) => file,
        None => log
            .try_clone()
            .map_err(|error| SwarmError::io("cannot use the log", log_path, error))?,
    };
    let err =
        log.try_clone().map_err(|error| SwarmError::io("cannot use the log", log_path, error))?;
    command
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .env("CI", "true");
    // The output goes to the log, the run's events and the implementer's next prompt.
    remove_secret_variables(&mut command);
    let mut group = match spawn_group(&mut command) {
        Ok(group) => group,
        Err(error) => return Ok(Err(format!("could not start: {error}"))),
    };
    let waited = tokio::time::timeout(timeout, group.wait()).await;
    // Background jobs of a command that exited, or the whole tree of one that timed out.
    let _ = group.signal(Signal::Kill);
    match waited {
        Ok(Ok(status)) if status.success() => Ok(Ok(())),
        Ok(Ok(status)) => Ok(Err(match status.code() {
            Some(code) => format!("exited with {code}"),
            None => "was killed by a signal".to_string(),
        })),
        Ok(Err(error)) => Ok(Err(format!("could not be waited for: {error}"))),
        Err(_) => {
            let _ = group.terminate(Duration::from_secs(2)).await;
            Ok(Err(format!("timed out after {} s (verify_timeout_s)", timeout.as_secs())))
        }
    }
}

/// Writes a line of the verifier's own to the log; returns the log's length before it.
fn header(file: &mut File, path: &Path, line: &str) -> Result<u64, SwarmError> {
    let start = file
        .seek(SeekFrom::End(0))
        .map_err(|error| SwarmError::io("cannot use the log", path, error))?;
    writeln!(file, "{line}")
        .map_err(|error| SwarmError::io("cannot write the log", path, error))?;
    Ok(start)
}

/// The log from `start` on: whole when short, else its head and tail with the cut said.
fn excerpt(path: &Path, start: u64) -> Result<String, SwarmError> {
    let mut file = File::open(path).map_err(|error| SwarmError::io("cannot read", path, error))?;
    let length = file.metadata().map_err(|error| SwarmError::io("cannot read", path, error))?.len();
    let span = length.saturating_sub(start);
    let read = |file: &mut File, from: u64, count: u64| -> Result<String, SwarmError> {
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(from))
            .map_err(|error| SwarmError::io("cannot read", path, error))?;
        file.take(count)
            .read_to_end(&mut bytes)
            .map_err(|error| SwarmError::io("cannot read", path, error))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    if span <= HEAD_BYTES + TAIL_BYTES {
        return read(&mut file, start, span);
    }
    let head = read(&mut file, start, HEAD_BYTES)?;
    let tail = read(&mut file, length - TAIL_BYTES, TAIL_BYTES)?;
    let cut = span - HEAD_BYTES - TAIL_BYTES;
    Ok(format!(
        "{head}\n[... {cut} bytes cut; the whole output is in {} ...]\n{tail}",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_output_keeps_its_head_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let text = format!("{}{}{}", "H".repeat(4000), "M".repeat(20_000), "T".repeat(7000));
        std::fs::write(&log, format!("before\n{text}")).unwrap();
        let excerpt = excerpt(&log, 7).unwrap();
        assert!(excerpt.starts_with(&"H".repeat(3072)));
        assert!(excerpt.ends_with(&"T".repeat(6144)));
        assert!(excerpt.contains("bytes cut"));
        assert!(!excerpt.contains("before"));
        assert!(super::excerpt(&log, 0).unwrap().len() < 10_000);
    }
}
