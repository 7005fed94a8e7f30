//! One task, driven through its attempts: implementer → commit → reviewer → verifier →
//! merge. Each step starts from what the event log says (so a resumed run continues
//! where it stopped) and ends by writing the event that moves the task on.

use crate::SwarmError;
use crate::context::Run;
use crate::git::Git;
use crate::merge::merge_task;
use crate::prompts;
use crate::turn::{TurnResult, TurnSpec, run_turn};
use kestrel_protocol::swarm::{
    AttemptFailure, FailedStage, SwarmEvent, SwarmRole, SwarmSessionTag, TaskSpec, TaskState,
    TaskView, task_branch,
};
use kestrel_protocol::{SessionId, StopReason};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// How a task's driver ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskEnd {
    Merged,
    Failed,
    Cancelled,
    /// The run stops (budget, Ctrl+C): the task stays where it is, for a resume.
    Stopped,
}

/// What to do next, read from the task's state.
enum Step {
    NewAttempt,
    Implement,
    Review,
    Verify,
    Merge,
    End(TaskEnd),
}

fn next_step(view: &TaskView) -> Step {
    match view.working_state() {
        TaskState::Waiting | TaskState::Ready => Step::NewAttempt,
        TaskState::Implementing => {
            let current_failed =
                view.last_failure.as_ref().is_some_and(|failure| failure.attempt == view.attempt);
            if view.attempt == 0 || current_failed { Step::NewAttempt } else { Step::Implement }
        }
        TaskState::Reviewing => Step::Review,
        TaskState::Verifying => Step::Verify,
        TaskState::Merging => Step::Merge,
        TaskState::Merged => Step::End(TaskEnd::Merged),
        TaskState::Failed | TaskState::Blocked => Step::End(TaskEnd::Failed),
        TaskState::Cancelled => Step::End(TaskEnd::Cancelled),
        // working_state never answers needs-input.
        TaskState::NeedsInput => Step::Implement,
    }
}

/// Drives `task` until it is merged, fails, is cancelled or the run stops.
pub async fn drive(run: &Run, id: &str) -> Result<TaskEnd, SwarmError> {
    let graph = run.graph();
    let Some(spec) = graph.task(id).cloned() else {
        return Err(SwarmError::Usage(format!("the graph has no task `{id}`")));
    };
    let cancel = run.task_cancel(id);
    let worktree = run.workdir.join(id);
    let driver = Driver { run, spec, worktree: Git::new(&worktree), path: worktree, cancel };
    loop {
        if run.halted.is_cancelled() {
            return Ok(TaskEnd::Stopped);
        }
        if driver.cancel.is_cancelled() {
            run.emit(SwarmEvent::TaskCancelled { task: id.to_string() })?;
            return Ok(TaskEnd::Cancelled);
        }
        let Some(view) = run.task(id) else {
            return Err(SwarmError::Usage(format!("the run has no task `{id}`")));
        };
        let step = next_step(&view);
        let outcome = match step {
            Step::End(end) => return Ok(end),
            Step::NewAttempt => driver.new_attempt(&view).await?,
            Step::Implement => driver.implement(&view).await?,
            Step::Review => driver.review(&view).await?,
            Step::Verify => driver.verify(&view).await?,
            Step::Merge => merge_task(run, &driver.spec, &view, &driver.worktree).await?,
        };
        if let Some(end) = outcome {
            if end == TaskEnd::Cancelled {
                run.emit(SwarmEvent::TaskCancelled { task: id.to_string() })?;
            }
            return Ok(end);
        }
    }
}

struct Driver<'a> {
    run: &'a Run,
    spec: TaskSpec,
    worktree: Git,
    path: PathBuf,
    cancel: CancellationToken,
}

/// `None`: go on with the next step; `Some`: the driver ends.
type StepResult = Result<Option<TaskEnd>, SwarmError>;

impl Driver<'_> {
    fn id(&self) -> String {
        self.spec.id.clone()
    }

    fn tag(&self, role: SwarmRole, attempt: u32) -> SwarmSessionTag {
        SwarmSessionTag {
            run: self.run.id.clone(),
            task: self.id(),
            role,
            attempt,
            kind: Default::default(),
        }
    }

    fn fail(
        &self,
        view: &TaskView,
        stage: FailedStage,
        reason: String,
        findings: Vec<String>,
        log: Option<String>,
    ) -> StepResult {
        self.run.emit(SwarmEvent::AttemptFailed {
            task: self.id(),
            attempt: view.attempt,
            stage,
            reason,
            findings,
            log,
        })?;
        Ok(None)
    }

    async fn new_attempt(&self, view: &TaskView) -> StepResult {
        if view.attempt >= view.max_attempts {
            let last = view.last_failure.as_ref().map(|f| f.reason.as_str()).unwrap_or("none");
            self.run.emit(SwarmEvent::TaskFailed {
                task: self.id(),
                reason: format!("{} attempt(s) used; the last failed: {last}", view.attempt),
            })?;
            return Ok(Some(TaskEnd::Failed));
        }
        if self.run.stop.is_cancelled() {
            return Ok(Some(TaskEnd::Stopped));
        }
        let branch = task_branch(&self.run.id, &self.spec.id);
        self.run.repo.add_worktree(&self.path, &branch, &self.run.branch).await?;
        crate::merge::clear_stale_lock(&self.worktree).await;
        let base = self.worktree.head().await?;
        self.run.emit(SwarmEvent::AttemptStarted {
            task: self.id(),
            attempt: view.attempt + 1,
            branch,
            worktree: self.path.display().to_string(),
            base_commit: base,
        })?;
        Ok(None)
    }

    async fn implement(&self, view: &TaskView) -> StepResult {
        let failure: Option<&AttemptFailure> =
            view.last_failure.as_ref().filter(|failure| failure.attempt + 1 == view.attempt);
        let tag = self.tag(SwarmRole::Implementer, view.attempt);
        let prompt = prompts::implementer(&tag, &self.spec, self.run.goal.as_deref(), failure);
        let spec = TurnSpec {
            tag,
            cwd: &self.path,
            model: &self.run.models.implementer,
            prompt,
            session: view.implementer_session().cloned(),
        };
        let turn = run_turn(self.run, spec, &self.cancel).await?;
        let turn = match turn {
            TurnResult::Stopped => return Ok(Some(TaskEnd::Stopped)),
            TurnResult::Cancelled => return Ok(Some(TaskEnd::Cancelled)),
            TurnResult::Failed { message, .. } => {
                let reason = format!("the implementer's turn failed: {message}");
                return self.fail(view, FailedStage::Implement, reason, Vec::new(), None);
            }
            TurnResult::Ended { turn, .. } => turn,
        };
        if turn.ended == Some(StopReason::MaxTurns) {
            let reason = "the implementer's turn ran out of model requests (max_turns)".to_string();
            return self.fail(view, FailedStage::Implement, reason, Vec::new(), None);
        }
        self.commit(view).await
    }

    /// Commits what the implementer changed; an attempt that changed nothing fails.
    async fn commit(&self, view: &TaskView) -> StepResult {
        crate::merge::clear_stale_lock(&self.worktree).await;
        if let Some(files) = self.conflict_markers_left(view).await? {
            let reason = format!("conflict markers are still in {}", files.join(", "));
            return self.fail(view, FailedStage::Merge, reason, files, None);
        }
        if self.worktree.is_dirty().await? {
            let message =
                format!("{}: {} (attempt {})", self.spec.id, self.spec.title, view.attempt);
            self.worktree.commit_all(&message).await?;
            crate::failpoint::hit("commit");
        }
        let head = self.worktree.head().await?;
        if view.attempt_base.as_deref() == Some(head.as_str()) {
            let reason = "the attempt changed nothing".to_string();
            return self.fail(view, FailedStage::Implement, reason, Vec::new(), None);
        }
        self.run.emit(SwarmEvent::Committed {
            task: self.id(),
            attempt: view.attempt,
            commit: head,
        })?;
        Ok(None)
    }

    /// After a conflict, the files that still hold markers (`<<<<<<<` / `>>>>>>>`).
    async fn conflict_markers_left(
        &self,
        view: &TaskView,
    ) -> Result<Option<Vec<String>>, SwarmError> {
        let Some(failure) = view.last_failure.as_ref().filter(|f| f.stage == FailedStage::Merge)
        else {
            return Ok(None);
        };
        let mut left = Vec::new();
        for file in &failure.findings {
            let text = std::fs::read_to_string(self.path.join(file)).unwrap_or_default();
            let marked = text
                .lines()
                .any(|line| line.starts_with("<<<<<<< ") || line.starts_with(">>>>>>> "));
            if marked {
                left.push(file.clone());
            }
        }
        Ok((!left.is_empty()).then_some(left))
    }

    async fn review(&self, view: &TaskView) -> StepResult {
        let Some(commit) = view.commit.clone() else {
            return Err(SwarmError::Usage(format!(
                "task `{}` is in review with no commit",
                self.spec.id
            )));
        };
        let range = format!("{}...{}", self.run.branch, &commit);
        let diff = self.worktree.diff_since(&self.run.branch, &commit).await?;
        let tag = self.tag(SwarmRole::Reviewer, view.attempt);
        let prompt = prompts::reviewer(&tag, &self.spec, &diff, &range);
        // A reviewer session of this attempt already started (a resumed run) is reused;
        // else a fresh one: every attempt gets a fresh context.
        let session: Option<SessionId> = view
            .sessions
            .iter()
            .rev()
            .find(|s| s.role == SwarmRole::Reviewer && s.attempt == view.attempt)
            .map(|s| s.session.clone());
        let spec =
            TurnSpec { tag, cwd: &self.path, model: &self.run.models.reviewer, prompt, session };
        let (session, verdict) = match run_turn(self.run, spec, &self.cancel).await? {
            TurnResult::Stopped => return Ok(Some(TaskEnd::Stopped)),
            TurnResult::Cancelled => return Ok(Some(TaskEnd::Cancelled)),
            TurnResult::Failed { session, message } => {
                (session, Err(format!("the reviewer's turn failed: {message}")))
            }
            TurnResult::Ended { session, turn } => (session, Ok(turn.verdict)),
        };
        if self.run.ray.is_none() {
            self.run.daemon.detach(&session).await;
        }
        let (approve, findings) = match verdict {
            Ok(Some(verdict)) => verdict,
            Ok(None) => {
                (false, vec!["no verdict: the reviewer ended without calling swarm_review".into()])
            }
            Err(reason) => (false, vec![reason]),
        };
        let (task, attempt) = (self.id(), view.attempt);
        let reviewed = self.run.any_event(|event| {
            matches!(event, SwarmEvent::Reviewed { task: t, attempt: a, .. } if *t == task && *a == attempt)
        });
        if !reviewed {
            self.run.emit(SwarmEvent::Reviewed {
                task: self.id(),
                attempt,
                approve,
                findings: findings.clone(),
            })?;
        }
        if approve {
            return Ok(None);
        }
        let reason = format!("the reviewer rejected it: {}", findings.join("; "));
        self.fail(view, FailedStage::Review, reason, findings, None)
    }

    async fn verify(&self, view: &TaskView) -> StepResult {
        let Some(commit) = view.commit.clone() else {
            return Err(SwarmError::Usage(format!(
                "task `{}` is verifying with no commit",
                self.spec.id
            )));
        };
        let result = tokio::select! {
            result = self.run.verify_commit(&self.spec, &commit, "verify", view.attempt) => result?,
            () = self.cancel.cancelled() => return Ok(Some(TaskEnd::Cancelled)),
        };
        let log_text = result.log.display().to_string();
        match result.failure {
            None => {
                self.run.emit(SwarmEvent::Verified {
                    task: self.id(),
                    attempt: view.attempt,
                    log: log_text,
                })?;
                Ok(None)
            }
            Some(reason) => {
                self.fail(view, FailedStage::Verify, reason, vec![result.output], Some(log_text))
            }
        }
    }
}
