//! `kestrel swarm node REMOTE SPEC_REF`: what a Ray job runs on a node. It clones the
//! run's remote, reads its spec, and either plays one role turn (`kestrel exec --json`
//! with the role's tag, its events on stdout — the job's log — then the implementer's
//! commit pushed and the session record pushed with it) or verifies a commit in the
//! sandbox as the local verifier does. Its last line is a [`JobResult`].

use super::remote::{commit_files, fetch, push, read_file};
use super::spec::{JobResult, JobSpec, JobWork, RESULT_TYPE, records_ref};
use crate::SwarmError;
use crate::git::Git;
use crate::verify::{VerifySpec, verify};
use kestrel_protocol::swarm::SwarmSessionTag;
use kestrel_protocol::{RecordHeaderLine, SessionId};
use kestrel_store::{KestrelHome, export_record, import_record};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Runs the job; the exit code is 0 when the node did its part (a failed turn or
/// verification included: the result line says so), 1 when it could not.
pub async fn node(program: &Path, remote: &str, spec_ref: &str) -> i32 {
    let scratch = std::env::temp_dir().join(format!(
        "kestrel-node-{}-{}",
        std::process::id(),
        SessionId::new()
    ));
    // Ray stops a job with SIGTERM to its process group (SIGKILL 3 s later): the clone
    // is removed before that.
    let Ok(mut terminate) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        return 1;
    };
    let result = tokio::select! {
        result = run_node(program, remote, spec_ref, &scratch) => result,
        _ = terminate.recv() => Err(SwarmError::Ray("stopped (SIGTERM)".to_string())),
    };
    let result = match result {
        Ok(result) => result,
        Err(error) => JobResult { error: Some(error.to_string()), ..JobResult::default() },
    };
    let _ = std::fs::remove_dir_all(&scratch);
    let failed = result.error.is_some();
    print_result(result);
    i32::from(failed)
}

fn print_result(mut result: JobResult) {
    result.kind = RESULT_TYPE.to_string();
    let line = serde_json::to_string(&result).unwrap_or_default();
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

async fn run_node(
    program: &Path,
    remote: &str,
    spec_ref: &str,
    scratch: &Path,
) -> Result<JobResult, SwarmError> {
    std::fs::create_dir_all(scratch)
        .map_err(|error| SwarmError::io("cannot create", scratch, error))?;
    let repo_dir = scratch.join("repo");
    let target = repo_dir.to_string_lossy().into_owned();
    Git::new(scratch).run(&["clone", "--quiet", "--no-checkout", remote, &target]).await?;
    let repo = Git::new(&repo_dir);
    let Some(spec_commit) = fetch(&repo, remote, spec_ref, "refs/kestrel/spec").await? else {
        return Err(SwarmError::Ray(format!("{remote} has no {spec_ref}")));
    };
    let text = read_file(&repo, &spec_commit, "spec.json").await?.unwrap_or_default();
    let spec: JobSpec = serde_json::from_slice(&text)
        .map_err(|error| SwarmError::Ray(format!("{spec_ref}: spec.json: {error}")))?;
    if fetch(&repo, remote, &spec.fetch, "refs/kestrel/work").await?.is_none() {
        return Err(SwarmError::Ray(format!("{remote} has no {}", spec.fetch)));
    }
    if let Some(branch) = &spec.integration {
        let tracked = format!("refs/remotes/origin/{branch}");
        if repo.resolve(&tracked).await?.is_some() {
            repo.run(&["branch", "--quiet", "--force", branch, &tracked]).await?;
        }
    }
    match &spec.work {
        JobWork::Turn { .. } => {
            repo.run(&["checkout", "--quiet", "--detach", &spec.commit]).await?;
            turn(program, remote, &repo, &spec).await
        }
        JobWork::Verify { setup, acceptance, timeout_s, network } => {
            let verify_spec = VerifySpec {
                commit: &spec.commit,
                setup,
                acceptance,
                timeout: Duration::from_secs(*timeout_s),
                network: *network,
            };
            let log = scratch.join("verify.log");
            let verification = verify(&repo, &verify_spec, &scratch.join("clone"), &log).await?;
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            Ok(JobResult {
                verify_failure: verification.failure,
                verify_output: Some(verification.output),
                verify_log: Some(text),
                ..JobResult::default()
            })
        }
    }
}

async fn turn(
    program: &Path,
    remote: &str,
    repo: &Git,
    spec: &JobSpec,
) -> Result<JobResult, SwarmError> {
    let JobWork::Turn { tag, model, prompt, session, push_branch, message } = &spec.work else {
        return Err(SwarmError::Ray("not a turn".into()));
    };
    let home = KestrelHome::from_env()?;
    let records = records_ref(&tag.run, &tag.task);
    let mut records_tip = fetch(repo, remote, &records, "refs/kestrel/records").await?;
    // The session travels with the task: a retry on any node continues it — the one the
    // spec names, else the one a lost node of this very turn pushed while it worked. One
    // whose record was never pushed starts again as a new session.
    let mut session = session.clone();
    let shipped = match (&records_tip, &session) {
        (None, _) => None,
        (Some(tip), Some(id)) => {
            read_file(repo, tip, &format!("{id}.jsonl")).await?.map(|bytes| (id.clone(), bytes))
        }
        (Some(tip), None) => record_of_turn(repo, tip, tag).await?,
    };
    match shipped {
        Some((id, bytes)) => {
            import_record(&home, &bytes)?;
            session = Some(id);
        }
        None => session = None,
    }
    let session = &session;
    let mut command = tokio::process::Command::new(program);
    command.arg("exec");
    // `exec resume` takes its own flags: they go after `resume`.
    if session.is_some() {
        command.arg("resume");
    }
    command.arg("--json").arg("--quiet").arg("--cd").arg(repo.dir()).arg("--model").arg(model);
    match session {
        Some(session) => command.arg(session),
        None => command.arg("--swarm-role").arg(serde_json::to_string(tag).unwrap_or_default()),
    };
    command.arg("-");
    if let Some(file) = &spec.env_file {
        for (name, value) in read_env_file(Path::new(file))? {
            command.env(name, value);
        }
    }
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|error| SwarmError::Ray(format!("cannot start {}: {error}", program.display())))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(prompt.as_bytes()).await;
    }
    let mut session_id = session.clone();
    let mut pushes = tokio::time::interval(RECORD_PUSH);
    pushes.tick().await;
    if let Some(stdout) = child.stdout.take() {
        let mut lines = BufReader::new(stdout).lines();
        loop {
            tokio::select! {
                line = lines.next_line() => {
                    let Ok(Some(line)) = line else { break };
                    // Passed on as it comes: the job's log is how the orchestrator follows it.
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                    if session_id.is_none()
                        && let Ok(event) = serde_json::from_str::<serde_json::Value>(&line)
                        && event["type"] == "session.started"
                    {
                        session_id = event["session_id"].as_str().map(str::to_string);
                    }
                }
                _ = pushes.tick() => {
                    // The record so far: the orchestrator shows its spend, and a retry
                    // after this node is lost continues the session from here.
                    if let Some(id) = &session_id
                        && let Ok(tip) = push_record(&home, repo, remote, records_tip.as_deref(), tag, id).await
                    {
                        records_tip = Some(tip);
                        let mut out = std::io::stdout().lock();
                        let _ = writeln!(out, "{{\"type\":\"kestrel.swarm.record_pushed\",\"session\":\"{id}\"}}");
                        let _ = out.flush();
                    }
                }
            }
        }
    }
    let _ = child.wait().await;
    let Some(session_id) = session_id else {
        return Err(SwarmError::Ray("kestrel exec ended before its session started".into()));
    };
    let mut commit = None;
    if let Some(branch) = push_branch {
        if repo.is_dirty().await? {
            repo.commit_all(message).await?;
        }
        let head = repo.head().await?;
        if head != spec.commit {
            push(repo, remote, "HEAD", branch, false).await?;
        }
        commit = Some(head);
    }
    push_record(&home, repo, remote, records_tip.as_deref(), tag, &session_id).await?;
    Ok(JobResult { session: Some(session_id), commit, ..JobResult::default() })
}

/// How often a running turn's record is pushed.
const RECORD_PUSH: Duration = Duration::from_secs(10);

/// Pushes the session's record as it stands onto the task's records ref (after
/// `parent`, the tip this node last saw or made); returns the new tip.
async fn push_record(
    home: &KestrelHome,
    repo: &Git,
    remote: &str,
    parent: Option<&str>,
    tag: &SwarmSessionTag,
    session: &str,
) -> Result<String, SwarmError> {
    let record = export_record(home, &SessionId::from_string(session))?;
    let files = vec![(format!("{session}.jsonl"), record)];
    let message = format!("records of {} {}", tag.task, tag.role.as_str());
    let tip = commit_files(repo, parent, &files, &message).await?;
    push(repo, remote, &tip, &records_ref(&tag.run, &tag.task), false).await?;
    Ok(tip)
}

/// The record of this very turn (run, task, role and attempt) among the pushed ones.
async fn record_of_turn(
    repo: &Git,
    tip: &str,
    tag: &SwarmSessionTag,
) -> Result<Option<(String, Vec<u8>)>, SwarmError> {
    let listed = repo.run(&["ls-tree", "--name-only", "-z", tip]).await?.stdout;
    for name in listed.split('\0').filter(|name| name.ends_with(".jsonl")) {
        let Some(bytes) = read_file(repo, tip, name).await? else { continue };
        let first = bytes.split(|byte| *byte == b'\n').next().unwrap_or_default();
        let Ok(line) = serde_json::from_slice::<RecordHeaderLine>(first) else { continue };
        if line.header.swarm.as_ref() == Some(tag) {
            return Ok(Some((line.header.id.to_string(), bytes)));
        }
    }
    Ok(None)
}

/// `NAME=value` lines (blank lines and `#` comments skipped, `export ` allowed).
fn read_env_file(path: &Path) -> Result<Vec<(String, String)>, SwarmError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| SwarmError::io("cannot read the env_file", PathBuf::from(path), error))?;
    let mut vars = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        if let Some((name, value)) = line.split_once('=') {
            let value = value.trim().trim_matches('"').trim_matches('\'');
            vars.push((name.trim().to_string(), value.to_string()));
        }
    }
    Ok(vars)
}
