//! Merging a task into the integration branch, one at a time, in the orchestrator's own
//! worktree of it. Every merge commit carries `Kestrel-Swarm: <run>/<task>/<attempt>`,
//! so git — not the event log — says what was merged: a task is never merged twice, and
//! a merge whose event was lost is found and finished on resume. After each merge the
//! task's acceptance commands run on the integration branch; a failure undoes the merge.

use crate::SwarmError;
use crate::context::Run;
use crate::git::{Git, MergeOutcome};
use crate::task::TaskEnd;
use kestrel_protocol::swarm::{
    FailedStage, MERGE_TRAILER, SwarmEvent, TaskSpec, TaskState, TaskView, task_branch,
};
use std::path::PathBuf;

/// The orchestrator's worktree of the integration branch.
pub fn integration_dir(run: &Run) -> PathBuf {
    run.workdir.join(".integration")
}

/// Makes the integration worktree (on the run's branch) unless it exists, and puts it
/// back to the branch's tip: it is the orchestrator's alone, and a killed git command may
/// have left it mid-merge.
pub async fn prepare_integration(run: &Run) -> Result<Git, SwarmError> {
    let dir = integration_dir(run);
    run.repo.add_worktree(&dir, &run.branch, &run.branch).await?;
    let git = Git::new(&dir);
    clear_stale_lock(&git).await;
    git.merge_abort().await?;
    git.reset_hard("HEAD").await?;
    Ok(git)
}

/// Removes an `index.lock` a killed git command left in a worktree only this
/// orchestrator uses (the run's lock guarantees no other orchestrator runs).
pub async fn clear_stale_lock(git: &Git) {
    if let Ok((true, output)) = git.output(&["rev-parse", "--absolute-git-dir"]).await {
        let lock = PathBuf::from(output.stdout.trim()).join("index.lock");
        let _ = std::fs::remove_file(lock);
    }
}

/// Merges `task` (verified) into the integration branch and checks it there.
pub async fn merge_task(
    run: &Run,
    spec: &TaskSpec,
    view: &TaskView,
    worktree: &Git,
) -> Result<Option<TaskEnd>, SwarmError> {
    let _turn = run.merging.lock().await;
    if run.halted.is_cancelled() {
        return Ok(Some(TaskEnd::Stopped));
    }
    let integration = prepare_integration(run).await?;
    // Git first: a merge of this task may exist whose event was lost.
    let merged = integration.swarm_merges(&run.branch, &run.id).await?;
    if let Some((_, attempt, commit)) = merged.iter().find(|(task, ..)| *task == spec.id) {
        return check_merged(run, spec, view, worktree, &integration, *attempt, commit).await;
    }
    let message = format!(
        "{}: {}\n\n{MERGE_TRAILER}: {}/{}/{}",
        spec.id, spec.title, run.id, spec.id, view.attempt
    );
    let branch = task_branch(&run.id, &spec.id);
    match integration.merge(&branch, &message).await? {
        MergeOutcome::Merged(commit) => {
            crate::failpoint::hit("merge");
            check_merged(run, spec, view, worktree, &integration, view.attempt, &commit).await
        }
        MergeOutcome::Conflict(files) => {
            integration.merge_abort().await?;
            // The implementer resolves it in its worktree: the integration branch merged
            // there, markers in place.
            merge_into_worktree(run, spec, worktree).await?;
            let reason = format!("merging into {} conflicted in {}", run.branch, files.join(", "));
            run.emit(SwarmEvent::AttemptFailed {
                task: spec.id.clone(),
                attempt: view.attempt,
                stage: FailedStage::Merge,
                reason,
                findings: files,
                log: None,
            })?;
            Ok(None)
        }
    }
}

/// The acceptance commands on the merged integration branch: passed, the merge is
/// recorded; failed, the merge is undone (while it is still the tip) and the task goes
/// back to its implementer with the integration branch merged into its worktree.
async fn check_merged(
    run: &Run,
    spec: &TaskSpec,
    view: &TaskView,
    worktree: &Git,
    integration: &Git,
    attempt: u32,
    commit: &str,
) -> Result<Option<TaskEnd>, SwarmError> {
    let merged = || {
        run.emit(SwarmEvent::Merged {
            task: spec.id.clone(),
            attempt,
            commit: commit.to_string(),
        })?;
        Ok(Some(TaskEnd::Merged))
    };
    // A merge whose tree is the one just verified (the branch had not moved since the
    // task started) needs no second verification: the same commands ran on the same files.
    if let Some(verified) = view.commit.as_deref()
        && integration.tree(commit).await? == integration.tree(verified).await?
    {
        return merged();
    }
    let result = run.verify_commit(spec, commit, "integrate", attempt).await?;
    let Some(reason) = result.failure else { return merged() };
    if integration.head().await? != commit {
        // Something was merged after it: git is the truth, the merge stays.
        return merged();
    }
    integration.reset_hard(&format!("{commit}^1")).await?;
    if worktree.dir().exists() {
        merge_into_worktree(run, spec, worktree).await?;
    }
    run.emit(SwarmEvent::AttemptFailed {
        task: spec.id.clone(),
        attempt: view.attempt,
        stage: FailedStage::Integrate,
        reason: format!("on {} after the merge: {reason}", run.branch),
        findings: vec![result.output],
        log: Some(result.log.display().to_string()),
    })?;
    Ok(None)
}

/// On resume: tasks git shows merged whose `merged` event is missing are checked and
/// recorded now, before anything else is scheduled.
pub async fn reconcile(run: &Run) -> Result<(), SwarmError> {
    let integration = prepare_integration(run).await?;
    let merges = integration.swarm_merges(&run.branch, &run.id).await?;
    for (task, attempt, commit) in merges {
        let Some(view) = run.task(&task) else { continue };
        if view.state == TaskState::Merged {
            continue;
        }
        let Some(spec) = run.graph().task(&task).cloned() else { continue };
        let worktree = Git::new(run.workdir.join(&task));
        check_merged(run, &spec, &view, &worktree, &integration, attempt, &commit).await?;
    }
    Ok(())
}

/// Merges the integration branch into a task's worktree (conflicts left in place for its
/// implementer). The worktree holds only committed work at this point; what a killed git
/// command or another client left in it is cleared first.
async fn merge_into_worktree(run: &Run, spec: &TaskSpec, worktree: &Git) -> Result<(), SwarmError> {
    clear_stale_lock(worktree).await;
    worktree.merge_abort().await?;
    worktree.reset_hard("HEAD").await?;
    worktree.merge(&run.branch, &format!("Merge {} into {}", run.branch, spec.id)).await?;
    Ok(())
}
