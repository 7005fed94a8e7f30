//! One experiment, from its worktree to its decision: the implementer's turn (and the
//! reviewer's with `--review`), the checks, then — alone on this machine, no turn
//! running — the baseline merged in if it moved, the metric interleaved with the
//! baseline's, the decision, and for a kept one the merge and the new baseline. Each
//! step starts from what the events say, so a resumed run never measures twice.

use super::measure::{Bench, Side};
use super::stats::{Verdict, compare};
use super::{Climb, prompts};
use crate::SwarmError;
use crate::git::{Git, MergeOutcome};
use crate::turn::{TurnResult, TurnSpec, run_turn};
use kestrel_protocol::StopReason;
use kestrel_protocol::swarm::{
    Decision, DiffSize, MERGE_TRAILER, RunKind, SwarmEvent, SwarmRole, SwarmSessionTag, TaskSpec,
    TaskState, TaskView, task_branch,
};
use std::path::PathBuf;

/// What a measurement adds to a decision.
#[derive(Default)]
struct Measured {
    commit: Option<String>,
    baseline_commit: Option<String>,
    baseline: Vec<f64>,
    values: Vec<f64>,
    p_value: Option<f64>,
    diff: Option<DiffSize>,
}

pub struct Experiment<'a> {
    climb: &'a Climb,
    id: String,
    path: PathBuf,
    worktree: Git,
}

/// `false`: the driver stops here (the run stops); `true`: go on.
type Step = Result<bool, SwarmError>;

impl<'a> Experiment<'a> {
    pub fn new(climb: &'a Climb, id: &str) -> Experiment<'a> {
        let path = climb.run.workdir.join(id);
        Experiment { climb, id: id.to_string(), worktree: Git::new(&path), path }
    }

    /// Drives the experiment until it is decided (and merged, if kept) or the run stops.
    pub async fn drive(&self) -> Result<(), SwarmError> {
        let run = &self.climb.run;
        loop {
            if run.halted.is_cancelled() || run.cancel.is_cancelled() {
                return Ok(());
            }
            let Some(view) = run.task(&self.id) else { return Ok(()) };
            let decided = self.climb.view().experiment(&self.id).and_then(|e| e.result.clone());
            if let Some(result) = decided {
                if result.decision == Decision::Kept && view.state != TaskState::Merged {
                    let _exclusive = self.climb.gate.write().await;
                    self.keep(result.attempt).await?;
                }
                return Ok(());
            }
            let go_on = match view.working_state() {
                TaskState::Waiting | TaskState::Ready => self.start(&view).await?,
                TaskState::Implementing if view.attempt == 0 => self.start(&view).await?,
                TaskState::Implementing | TaskState::NeedsInput => self.implement(&view).await?,
                TaskState::Reviewing if self.climb.settings.review => self.review(&view).await?,
                TaskState::Reviewing | TaskState::Verifying => self.evaluate(&view).await?,
                TaskState::Merging
                | TaskState::Merged
                | TaskState::Failed
                | TaskState::Blocked
                | TaskState::Cancelled => return Ok(()),
            };
            if !go_on {
                return Ok(());
            }
        }
    }

    fn tag(&self, role: SwarmRole, attempt: u32) -> SwarmSessionTag {
        SwarmSessionTag {
            run: self.climb.run.id.clone(),
            task: self.id.clone(),
            role,
            attempt,
            kind: RunKind::Climb,
        }
    }

    fn spec(&self) -> Result<kestrel_protocol::swarm::ExperimentSpec, SwarmError> {
        self.climb
            .view()
            .experiment(&self.id)
            .map(|e| e.spec.clone())
            .ok_or_else(|| SwarmError::Usage(format!("the climb has no experiment `{}`", self.id)))
    }

    fn decide(&self, attempt: u32, decision: Decision, reason: String, measured: Measured) -> Step {
        self.climb.run.emit(SwarmEvent::ExperimentDecided {
            task: self.id.clone(),
            attempt,
            decision,
            reason,
            commit: measured.commit,
            baseline_commit: measured.baseline_commit,
            baseline: measured.baseline,
            values: measured.values,
            p_value: measured.p_value,
            diff: measured.diff,
        })?;
        self.climb.write_report();
        Ok(true)
    }

    /// A worktree from the current baseline (the integration branch's tip).
    async fn start(&self, view: &TaskView) -> Step {
        let run = &self.climb.run;
        if run.stop.is_cancelled() {
            return Ok(false);
        }
        let branch = task_branch(&run.id, &self.id);
        run.repo.add_worktree(&self.path, &branch, &run.branch).await?;
        crate::merge::clear_stale_lock(&self.worktree).await;
        let base = self.worktree.head().await?;
        run.emit(SwarmEvent::AttemptStarted {
            task: self.id.clone(),
            attempt: view.attempt + 1,
            branch,
            worktree: self.path.display().to_string(),
            base_commit: base,
        })?;
        Ok(true)
    }

    async fn implement(&self, view: &TaskView) -> Step {
        let run = &self.climb.run;
        let settings = &self.climb.settings;
        let tag = self.tag(SwarmRole::Implementer, view.attempt);
        let baseline = self.climb.view().baseline().map(|point| point.median);
        let prompt = prompts::implementer(
            &tag,
            &self.spec()?,
            &settings.metric,
            settings.direction.as_str(),
            &settings.checks,
            baseline,
        );
        let spec = TurnSpec {
            tag,
            cwd: &self.path,
            model: &run.models.implementer,
            prompt,
            session: view.implementer_session().cloned(),
        };
        let cancel = run.task_cancel(&self.id);
        let turn = {
            let _lease = self.climb.gate.read().await;
            run_turn(run, spec, &cancel).await?
        };
        let failed = |reason: String| {
            self.decide(view.attempt, Decision::BuildFailed, reason, Measured::default())
        };
        match turn {
            TurnResult::Stopped => return Ok(false),
            TurnResult::Cancelled => {
                run.emit(SwarmEvent::TaskCancelled { task: self.id.clone() })?;
                return Ok(false);
            }
            TurnResult::Failed { message, .. } => {
                return failed(format!("the implementer's turn failed: {message}"));
            }
            TurnResult::Ended { turn, .. } if turn.ended == Some(StopReason::MaxTurns) => {
                return failed(
                    "the implementer's turn ran out of model requests (max_turns)".into(),
                );
            }
            TurnResult::Ended { .. } => {}
        }
        crate::merge::clear_stale_lock(&self.worktree).await;
        if self.worktree.is_dirty().await? {
            let spec = self.spec()?;
            let message = format!("{}: {} (experiment)", self.id, one_line(&spec.hypothesis));
            self.worktree.commit_all(&message).await?;
        }
        let head = self.worktree.head().await?;
        if view.attempt_base.as_deref() == Some(head.as_str()) {
            return failed("the experiment changed nothing".into());
        }
        run.emit(SwarmEvent::Committed {
            task: self.id.clone(),
            attempt: view.attempt,
            commit: head,
        })?;
        Ok(true)
    }

    async fn review(&self, view: &TaskView) -> Step {
        let run = &self.climb.run;
        let Some(commit) = view.commit.clone() else { return self.evaluate(view).await };
        let spec = self.spec()?;
        let task = experiment_task(&spec, &self.climb.settings.checks, &self.climb.settings.metric);
        let range = format!("{}...{commit}", run.branch);
        let diff = self.worktree.diff_since(&run.branch, &commit).await?;
        let tag = self.tag(SwarmRole::Reviewer, view.attempt);
        let prompt = crate::prompts::reviewer(&tag, &task, &diff, &range);
        let session = view
            .sessions
            .iter()
            .rev()
            .find(|s| s.role == SwarmRole::Reviewer && s.attempt == view.attempt)
            .map(|s| s.session.clone());
        let spec = TurnSpec { tag, cwd: &self.path, model: &run.models.reviewer, prompt, session };
        let cancel = run.task_cancel(&self.id);
        let result = {
            let _lease = self.climb.gate.read().await;
            run_turn(run, spec, &cancel).await?
        };
        let (approve, findings) = match result {
            TurnResult::Stopped | TurnResult::Cancelled => return Ok(false),
            TurnResult::Failed { message, .. } => {
                (false, vec![format!("the reviewer's turn failed: {message}")])
            }
            TurnResult::Ended { turn, .. } => turn.verdict.unwrap_or_else(|| {
                (false, vec!["no verdict: the reviewer ended without calling swarm_review".into()])
            }),
        };
        run.emit(SwarmEvent::Reviewed {
            task: self.id.clone(),
            attempt: view.attempt,
            approve,
            findings: findings.clone(),
        })?;
        if approve {
            return Ok(true);
        }
        let reason = format!("the reviewer rejected it: {}", findings.join("; "));
        let measured = Measured { commit: Some(commit), ..Measured::default() };
        self.decide(view.attempt, Decision::Rejected, reason, measured)
    }

    /// Checks, then (alone) the measurement against the current baseline and the decision.
    async fn evaluate(&self, view: &TaskView) -> Step {
        let run = &self.climb.run;
        let Some(mut commit) = view.commit.clone() else {
            return Err(SwarmError::Usage(format!("experiment `{}` has no commit", self.id)));
        };
        let attempt = view.attempt;
        // A cancelled experiment is neither measured nor merged.
        if run.task_cancel(&self.id).is_cancelled() {
            run.emit(SwarmEvent::TaskCancelled { task: self.id.clone() })?;
            return Ok(false);
        }
        let failed_check = |commit: &str, reason: String| {
            let measured = Measured { commit: Some(commit.to_string()), ..Measured::default() };
            self.decide(attempt, Decision::CheckFailed, reason, measured)
        };
        {
            let _lease = self.climb.gate.read().await;
            if let Some(reason) = self.climb.check(&self.id, &commit, "check").await? {
                return failed_check(&commit, reason);
            }
        }
        let _exclusive = self.climb.gate.write().await;
        if run.halted.is_cancelled() || run.cancel.is_cancelled() {
            return Ok(false);
        }
        let Some(baseline) = self.climb.view().baseline().cloned() else {
            return Err(SwarmError::Usage("the climb has no baseline".into()));
        };
        // A baseline that moved since the experiment started is merged into it first.
        let (holds, _) =
            run.repo.output(&["merge-base", "--is-ancestor", &baseline.commit, &commit]).await?;
        if !holds {
            let message = format!("Merge the new baseline into {}", self.id);
            match self.worktree.merge(&run.branch, &message).await? {
                MergeOutcome::Merged(merged) => commit = merged,
                MergeOutcome::Conflict(files) => {
                    self.worktree.merge_abort().await?;
                    let reason = format!(
                        "it conflicts with the new baseline {} in {}",
                        short(&baseline.commit),
                        files.join(", ")
                    );
                    let measured = Measured { commit: Some(commit), ..Measured::default() };
                    return self.decide(attempt, Decision::BuildFailed, reason, measured);
                }
            }
            run.emit(SwarmEvent::Committed {
                task: self.id.clone(),
                attempt,
                commit: commit.clone(),
            })?;
            if let Some(reason) = self.climb.check(&self.id, &commit, "check-rebased").await? {
                return failed_check(&commit, reason);
            }
        }
        let diff = self.climb.diff(&self.id, &baseline.commit, &commit).await?;
        let bench = Bench::new(run, &self.climb.settings.metric, &self.id);
        let measured =
            bench.interleaved(&baseline.commit, &commit, self.climb.settings.runs).await?;
        let mut record = Measured {
            commit: Some(commit.clone()),
            baseline_commit: Some(baseline.commit.clone()),
            diff: Some(diff),
            ..Measured::default()
        };
        let (a, b) = match measured {
            Ok(values) => values,
            Err((Side::Experiment, why)) => {
                return self.decide(attempt, Decision::CheckFailed, why, record);
            }
            Err((Side::Baseline, why)) => {
                let reason = format!("the baseline could not be measured again: {why}");
                return self.decide(attempt, Decision::BuildFailed, reason, record);
            }
        };
        let comparison = compare(self.climb.settings.direction, &baseline.values, &a, &b);
        let decision = match comparison.verdict {
            Verdict::Better => Decision::Kept,
            Verdict::Worse => Decision::Worse,
            Verdict::Neutral => Decision::Neutral,
        };
        record.baseline = a;
        record.values = b;
        record.p_value = comparison.p_value;
        self.decide(attempt, decision, comparison.reason, record)?;
        crate::failpoint::hit("climb-measured");
        if decision == Decision::Kept {
            self.keep(attempt).await?;
        }
        Ok(true)
    }

    /// Merges a kept experiment into the integration branch (once: git's trailers say
    /// whether it is there) and measures the new baseline. The caller holds the gate.
    async fn keep(&self, attempt: u32) -> Result<(), SwarmError> {
        let run = &self.climb.run;
        let integration = crate::merge::prepare_integration(run).await?;
        let merges = integration.swarm_merges(&run.branch, &run.id).await?;
        let commit = match merges.iter().find(|(task, ..)| *task == self.id) {
            Some((_, _, commit)) => commit.clone(),
            None => {
                let spec = self.spec()?;
                let message = format!(
                    "{}: {}\n\n{MERGE_TRAILER}: {}/{}/{attempt}",
                    self.id,
                    one_line(&spec.hypothesis),
                    run.id,
                    self.id
                );
                match integration.merge(&task_branch(&run.id, &self.id), &message).await? {
                    MergeOutcome::Merged(commit) => commit,
                    MergeOutcome::Conflict(files) => {
                        integration.merge_abort().await?;
                        return Err(SwarmError::Usage(format!(
                            "the kept experiment `{}` did not merge into {} (conflicts in {})",
                            self.id,
                            run.branch,
                            files.join(", ")
                        )));
                    }
                }
            }
        };
        run.emit(SwarmEvent::Merged { task: self.id.clone(), attempt, commit })?;
        if let Err(reason) = self.climb.ensure_baseline().await? {
            run.halt();
            return Err(SwarmError::Usage(format!(
                "the new baseline could not be measured: {reason}"
            )));
        }
        self.climb.write_report();
        Ok(())
    }
}

/// An experiment as a task of `graph.toml`.
pub fn experiment_task(
    spec: &kestrel_protocol::swarm::ExperimentSpec,
    checks: &[String],
    metric: &str,
) -> TaskSpec {
    TaskSpec {
        id: spec.id.clone(),
        title: one_line(&spec.hypothesis),
        description: spec.description.clone(),
        depends_on: Vec::new(),
        acceptance: if checks.is_empty() { vec![metric.to_string()] } else { checks.to_vec() },
        files: spec.files.clone(),
    }
}

fn one_line(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or("");
    if line.chars().count() > 100 {
        return line.chars().take(100).collect::<String>() + "…";
    }
    line.to_string()
}

fn short(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}
