//! One implementer or reviewer turn as a Ray job. The task's branch is pushed as it
//! stands here (the node starts from exactly that commit), the job's spec with it; the
//! job's `session.started` event announces the turn; afterwards the task's session
//! records come back into this home (so the outcome, `status` and the TUI read them as
//! for a local turn) and the implementer's commit is fast-forwarded into the worktree.

use super::RayExecutor;
use super::follow::JobEnd;
use super::remote::{commit_files, fetch, push, read_file};
use super::spec::{JobSpec, JobWork, records_ref, spec_ref};
use crate::SwarmError;
use crate::context::Run;
use crate::git::Git;
use crate::outcome::{RecordedTurn, recorded_turn};
use crate::turn::{
    MAX_RATE_LIMITED, TurnResult, TurnSpec, finish, finished, is_transient, record_finished,
    take_slot,
};
use kestrel_protocol::swarm::{SwarmEvent, SwarmRole, SwarmSessionTag, task_branch};
use kestrel_protocol::{RecordHeaderLine, SessionId, StopReason};
use kestrel_store::StoreError;
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

/// How often a running turn's pushed record is brought in.
const RECORD_REFRESH: std::time::Duration = std::time::Duration::from_secs(5);

pub async fn run_turn(
    run: &Run,
    ray: &RayExecutor,
    spec: TurnSpec<'_>,
    cancel: &CancellationToken,
) -> Result<TurnResult, SwarmError> {
    let tag = &spec.tag;
    let line = tag.prompt_line();
    let worktree = Git::new(spec.cwd);
    let branch = format!("refs/heads/{}", task_branch(&run.id, &tag.task));
    let implementer = tag.role == SwarmRole::Implementer;
    // What a job pushed while no orchestrator followed it (a resume) comes in first: the
    // branch is never pushed over work it does not have.
    if implementer {
        take_branch(run, ray, &worktree, &branch, tag).await?;
    }
    import_records(run, ray, tag).await?;
    // A turn the record already has (a resumed run) is taken as it stands.
    if let Some(session) = &spec.session
        && let Some(recorded) = recorded_here(run, session, &line)?
        && recorded.prompted
        && finished(&recorded)
    {
        return finish(run, tag, session, recorded);
    }
    let Some(_slot) = take_slot(run).await? else { return Ok(TurnResult::Stopped) };
    if cancel.is_cancelled() {
        return Ok(TurnResult::Cancelled);
    }
    if implementer && worktree.is_dirty().await? {
        // The integration branch merged in with conflicts: the node resolves them from
        // this commit, markers and all.
        worktree
            .commit_all(&format!("{}: merge {} (conflicts to resolve)", tag.task, run.branch))
            .await?;
    }
    let job = format!("kestrel-{}-{}-{}-{}", run.id, tag.task, tag.attempt, tag.role.as_str());
    let mut session = spec.session.clone();
    let mut rate_limited = 0;
    loop {
        // A turn failed on a rate limit or a provider's outage is sent again in the same
        // session after a pause of the whole run, as locally: a job of its own each time.
        let name = if rate_limited == 0 { job.clone() } else { format!("{job}-r{rate_limited}") };
        let (end, started) =
            submit_turn(run, ray, &spec, &worktree, &name, session.clone(), cancel).await?;
        session = started.or(session);
        import_records(run, ray, tag).await?;
        if implementer {
            take_branch(run, ray, &worktree, &branch, tag).await?;
        }
        let current = session.clone().unwrap_or_else(|| SessionId::from_string(&name));
        let failed = |message: String| Ok(TurnResult::Failed { session: current.clone(), message });
        let result = match end {
            JobEnd::Cancelled => {
                if let Some(recorded) = recorded_here(run, &current, &line)? {
                    record_finished(run, tag, &current, &recorded, "cancelled")?;
                }
                return Ok(TurnResult::Cancelled);
            }
            JobEnd::TimedOut => {
                return failed(format!(
                    "the Ray job ran past [swarm.ray] job_timeout_s ({} s) and was stopped",
                    ray.settings.job_timeout_s
                ));
            }
            JobEnd::Lost(why) => return failed(format!("the Ray job was lost twice: {why}")),
            JobEnd::Done(result) => result,
        };
        if let Some(error) = result.error {
            return failed(format!("the Ray job failed on its node: {error}"));
        }
        let Some(id) = result.session else {
            return failed("the Ray job named no session".to_string());
        };
        let current = SessionId::from_string(&id);
        let recorded = recorded_here(run, &current, &line)?.unwrap_or_default();
        let transient = recorded.ended == Some(StopReason::Failed)
            && recorded.error.as_deref().is_some_and(is_transient);
        if transient && rate_limited < MAX_RATE_LIMITED {
            rate_limited += 1;
            session = Some(current);
            let wait = std::time::Duration::from_secs(1u64 << rate_limited.min(5));
            run.pause_until(tokio::time::Instant::now() + wait);
            let until = kestrel_protocol::Timestamp {
                millis: kestrel_protocol::Timestamp::now().millis
                    + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX),
            };
            run.emit(SwarmEvent::RateLimited { task: tag.task.clone(), until })?;
            run.wait_for_pause().await;
            continue;
        }
        if recorded.prompted && finished(&recorded) {
            return finish(run, tag, &current, recorded);
        }
        record_finished(run, tag, &current, &recorded, "interrupted")?;
        return Ok(TurnResult::Failed {
            session: current,
            message: "the turn did not finish on its node (its record has no end)".to_string(),
        });
    }
}

/// One job of a turn, from the worktree's commit: the branch, the integration branch
/// and the spec pushed, the job followed to its end (its record brought in as it grows).
/// Returns how it ended and the session its node announced.
async fn submit_turn(
    run: &Run,
    ray: &RayExecutor,
    spec: &TurnSpec<'_>,
    worktree: &Git,
    job: &str,
    session: Option<SessionId>,
    cancel: &CancellationToken,
) -> Result<(JobEnd, Option<SessionId>), SwarmError> {
    let tag = &spec.tag;
    let branch = format!("refs/heads/{}", task_branch(&run.id, &tag.task));
    let commit = worktree.head().await?;
    push(worktree, ray.remote(), &commit, &branch, true).await?;
    // The reviewer's range names the integration branch: the node makes it from this.
    let integration = format!("refs/heads/{}", run.branch);
    push(&run.repo, ray.remote(), &run.branch, &integration, true).await?;
    let title = run.graph().task(&tag.task).map(|task| task.title.clone()).unwrap_or_default();
    let implementer = tag.role == SwarmRole::Implementer;
    let job_spec = JobSpec {
        fetch: branch.clone(),
        commit,
        env_file: ray.settings.env_file.clone(),
        integration: Some(run.branch.clone()),
        work: JobWork::Turn {
            tag: tag.clone(),
            model: spec.model.to_string(),
            prompt: spec.prompt.clone(),
            session: session.as_ref().map(ToString::to_string),
            push_branch: implementer.then(|| branch.clone()),
            message: format!("{}: {} (attempt {})", tag.task, title, tag.attempt),
        },
    };
    let spec_ref = publish_spec(run, ray, job, &job_spec).await?;
    let mut started: Option<SessionId> = None;
    let mut emit_error = None;
    let mut on_event = |event: &serde_json::Value| {
        if event["type"] != "session.started" {
            return;
        }
        let Some(id) = event["session_id"].as_str() else { return };
        let session = SessionId::from_string(id);
        started = Some(session.clone());
        if let Err(error) = announce(run, tag, &session, spec.model) {
            emit_error = Some(error);
        }
    };
    // While the job runs, its node pushes the record now and then: brought in here so
    // `status` shows the turn's spend as it grows.
    let ended = CancellationToken::new();
    let job_run = async {
        let metadata = metadata(tag);
        let end = ray.run_job(job, &spec_ref, metadata, &mut on_event, cancel, &run.stop).await;
        ended.cancel();
        end
    };
    let refresh = async {
        loop {
            tokio::select! {
                () = ended.cancelled() => break,
                () = tokio::time::sleep(RECORD_REFRESH) => {
                    let _ = import_records(run, ray, tag).await;
                }
            }
        }
    };
    let (end, ()) = tokio::join!(job_run, refresh);
    let end = end?;
    if let Some(error) = emit_error {
        return Err(error);
    }
    Ok((end, started))
}

/// The turn as this home's copy of the session's record has it; `None` when no copy
/// came back yet (the job runs, or its node was lost before it pushed).
fn recorded_here(
    run: &Run,
    session: &SessionId,
    line: &str,
) -> Result<Option<RecordedTurn>, SwarmError> {
    match recorded_turn(&run.home, session, line) {
        Ok(recorded) => Ok(Some(recorded)),
        Err(SwarmError::Store(StoreError::SessionNotFound { .. })) => Ok(None),
        Err(error) => Err(error),
    }
}

/// `turn_started`, once per session and attempt (a resumed run following its job again
/// says nothing new).
fn announce(
    run: &Run,
    tag: &SwarmSessionTag,
    session: &SessionId,
    model: &str,
) -> Result<(), SwarmError> {
    let announced = run.any_event(|event| {
        matches!(event, SwarmEvent::TurnStarted { task, role, attempt, session: s, .. }
            if *task == tag.task && *role == tag.role && *attempt == tag.attempt && s == session)
    });
    if announced {
        return Ok(());
    }
    run.emit(SwarmEvent::TurnStarted {
        task: tag.task.clone(),
        role: tag.role,
        attempt: tag.attempt,
        session: session.clone(),
        model: model.to_string(),
    })
}

/// What the cluster's job list shows of the job (never a key: those stay on the nodes).
fn metadata(tag: &SwarmSessionTag) -> BTreeMap<String, String> {
    [
        ("kestrel_run", tag.run.clone()),
        ("kestrel_task", tag.task.clone()),
        ("kestrel_role", tag.role.as_str().to_string()),
        ("kestrel_attempt", tag.attempt.to_string()),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), value))
    .collect()
}

/// The job's spec as a commit on the remote; returns its ref.
pub(super) async fn publish_spec(
    run: &Run,
    ray: &RayExecutor,
    job: &str,
    spec: &JobSpec,
) -> Result<String, SwarmError> {
    let json = serde_json::to_vec_pretty(spec)
        .map_err(|error| SwarmError::Ray(format!("cannot write the job's spec: {error}")))?;
    let commit = commit_files(&run.repo, None, &[("spec.json".to_string(), json)], job).await?;
    let target = spec_ref(&run.id, job);
    push(&run.repo, ray.remote(), &commit, &target, true).await?;
    Ok(target)
}

/// The task's session records from the remote into this home. Only records of this
/// run's task, each under its own id, are taken (anyone who can push to the remote could
/// otherwise replace any session here); one open here (a person attached to it) is left
/// as it is.
async fn import_records(
    run: &Run,
    ray: &RayExecutor,
    tag: &SwarmSessionTag,
) -> Result<(), SwarmError> {
    let source = records_ref(&tag.run, &tag.task);
    let Some(tip) = fetch(&run.repo, ray.remote(), &source, &source).await? else { return Ok(()) };
    let listed = run.repo.run(&["ls-tree", "--name-only", "-z", &tip]).await?.stdout;
    for name in listed.split('\0').filter(|name| name.ends_with(".jsonl")) {
        let Some(bytes) = read_file(&run.repo, &tip, name).await? else { continue };
        let first = bytes.split(|byte| *byte == b'\n').next().unwrap_or_default();
        let Ok(line) = serde_json::from_slice::<RecordHeaderLine>(first) else { continue };
        let header = line.header;
        let ours = header.swarm.as_ref().is_some_and(|t| t.run == tag.run && t.task == tag.task);
        if !ours || format!("{}.jsonl", header.id) != name {
            continue;
        }
        match kestrel_store::import_record(&run.home, &bytes) {
            Ok(_) | Err(StoreError::Locked { .. }) => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// The implementer's pushed commit into the task's worktree (a fast-forward: the node
/// started from the worktree's commit).
async fn take_branch(
    run: &Run,
    ray: &RayExecutor,
    worktree: &Git,
    branch: &str,
    tag: &SwarmSessionTag,
) -> Result<(), SwarmError> {
    let local = format!("refs/kestrel/fetched/{}/{}", run.id, tag.task);
    let Some(tip) = fetch(&run.repo, ray.remote(), branch, &local).await? else { return Ok(()) };
    // Only work this worktree does not have yet: a tip it is ahead of stays behind.
    let (newer, _) = worktree.output(&["merge-base", "--is-ancestor", "HEAD", &tip]).await?;
    if newer {
        worktree.run(&["merge", "--ff-only", "--quiet", &tip]).await?;
    }
    Ok(())
}
