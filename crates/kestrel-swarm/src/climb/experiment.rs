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
use crate::turn::{TurnResult, TurnSpec, run_turn_in_slot};
use kestrel_protocol::StopReason;
use kestrel_protocol::swarm::short_commit as short;
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
                    let Some(commit) = result.commit.clone() else {
                        return Err(SwarmError::Usage(format!(
                            "the kept experiment `{}` records no commit",
                            self.id
                        )));
                    };
                    self.keep_late().await;
                    let _exclusive = self.exclusive().await;
                    if self.cancelled()? {
                        return Ok(());
                    }
                    self.keep(result.attempt, &commit).await?;
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
        // Git's work is the run's own work too: never during a measurement.
        let _lease = self.climb.gate.read().await;
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
        // The turn and the commit of its work: never during a measurement.
        let Some((_slot, _lease)) = self.climb.turn_lease().await? else { return Ok(false) };
        let turn = run_turn_in_slot(run, spec, &cancel).await?;
        let unfinished = match turn {
            TurnResult::Stopped => return Ok(false),
            TurnResult::Cancelled => {
                run.emit(SwarmEvent::TaskCancelled { task: self.id.clone() })?;
                return Ok(false);
            }
            TurnResult::Failed { message, .. } => {
                Some(format!("the implementer's turn failed: {message}"))
            }
            TurnResult::Ended { turn, .. } if turn.ended == Some(StopReason::MaxTurns) => {
                Some("the implementer's turn ran out of model requests (max_turns)".into())
            }
            TurnResult::Ended { .. } => None,
        };
        // The work is committed either way: an unfinished experiment's diff is kept too.
        crate::merge::clear_stale_lock(&self.worktree).await;
        if self.worktree.is_dirty().await? {
            let spec = self.spec()?;
            let what = if unfinished.is_some() { "unfinished experiment" } else { "experiment" };
            let message = format!("{}: {} ({what})", self.id, one_line(&spec.hypothesis));
            self.worktree.commit_all(&message).await?;
        }
        let head = self.worktree.head().await?;
        let changed = view.attempt_base.as_deref() != Some(head.as_str());
        let failure =
            unfinished.or_else(|| (!changed).then(|| "the experiment changed nothing".into()));
        if let Some(reason) = failure {
            if !changed {
                return self.decide(
                    view.attempt,
                    Decision::BuildFailed,
                    reason,
                    Measured::default(),
                );
            }
            let base = view.attempt_base.as_deref();
            return self.stop_short(view.attempt, Decision::BuildFailed, reason, &head, base).await;
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
        let Some((_slot, _lease)) = self.climb.turn_lease().await? else { return Ok(false) };
        let result = run_turn_in_slot(run, spec, &cancel).await?;
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
        let base = view.attempt_base.as_deref();
        self.stop_short(view.attempt, Decision::Rejected, reason, &commit, base).await
    }

    /// Checks, then (alone) the measurement against the current baseline and the decision.
    async fn evaluate(&self, view: &TaskView) -> Step {
        let run = &self.climb.run;
        let Some(mut commit) = view.commit.clone() else {
            return Err(SwarmError::Usage(format!("experiment `{}` has no commit", self.id)));
        };
        let attempt = view.attempt;
        // A cancelled experiment is neither measured nor merged.
        if self.cancelled()? {
            return Ok(false);
        }
        let built_on = view.attempt_base.clone();
        {
            let _lease = self.climb.gate.read().await;
            if let Some(reason) = self.climb.check(&self.id, &commit, "check").await? {
                let base = built_on.as_deref();
                return self
                    .stop_short(attempt, Decision::CheckFailed, reason, &commit, base)
                    .await;
            }
        }
        let _exclusive = self.exclusive().await;
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
                    let base = built_on.as_deref();
                    return self
                        .stop_short(attempt, Decision::BuildFailed, reason, &commit, base)
                        .await;
                }
            }
            run.emit(SwarmEvent::BaselineMergedIn {
                task: self.id.clone(),
                attempt,
                commit: commit.clone(),
            })?;
            if let Some(reason) = self.climb.check(&self.id, &commit, "check-rebased").await? {
                let base = Some(baseline.commit.as_str());
                return self
                    .stop_short(attempt, Decision::CheckFailed, reason, &commit, base)
                    .await;
            }
        }
        let diff = self.climb.diff(&self.id, &baseline.commit, &commit).await?;
        let settings = &self.climb.settings;
        let bench = Bench::new(run, &settings.metric, &self.id);
        // The looks a killed run recorded are taken as they are, not measured again.
        let (mut a, mut b, mut looks) = self.looks(attempt, &commit, &baseline.commit);
        let comparison = loop {
            if looks > 0 {
                let comparison = compare(settings.direction, &baseline.values, &a, &b, looks);
                if comparison.verdict != Verdict::MeasureMore {
                    break comparison;
                }
            }
            // A cancel (of this experiment or of the run) is heard between looks.
            if self.cancelled()? {
                return Ok(false);
            }
            let done = u32::try_from(b.len()).unwrap_or(u32::MAX);
            match bench.interleaved(&baseline.commit, &commit, done, settings.runs).await? {
                Ok((more_a, more_b)) => {
                    looks += 1;
                    run.emit(SwarmEvent::ExperimentMeasured {
                        task: self.id.clone(),
                        attempt,
                        look: looks,
                        commit: commit.clone(),
                        baseline_commit: baseline.commit.clone(),
                        baseline: more_a.clone(),
                        values: more_b.clone(),
                    })?;
                    crate::failpoint::hit_for("climb-look", &self.id);
                    a.extend(more_a);
                    b.extend(more_b);
                }
                Err((Side::Experiment, why)) => {
                    let record = Measured {
                        commit: Some(commit.clone()),
                        baseline_commit: Some(baseline.commit.clone()),
                        baseline: a,
                        values: b,
                        diff: Some(diff),
                        ..Measured::default()
                    };
                    return self.decide(attempt, Decision::CheckFailed, why, record);
                }
                Err((Side::Baseline, why)) => {
                    return Err(self.baseline_broke(&baseline.commit, &why)?);
                }
            }
        };
        let decision = match comparison.verdict {
            Verdict::Better => Decision::Kept,
            Verdict::Worse => Decision::Worse,
            Verdict::Neutral | Verdict::MeasureMore => Decision::Neutral,
        };
        let record = Measured {
            commit: Some(commit.clone()),
            baseline_commit: Some(baseline.commit.clone()),
            baseline: a,
            values: b,
            p_value: comparison.p_value,
            diff: Some(diff),
        };
        self.decide(attempt, decision, comparison.reason, record)?;
        crate::failpoint::hit_for("climb-measured", &self.id);
        if decision == Decision::Kept {
            if self.cancelled()? {
                return Ok(false);
            }
            self.keep(attempt, &commit).await?;
        }
        Ok(true)
    }

    /// Whether the run or this experiment was cancelled (requests from `kestrel swarm
    /// cancel` read now); a cancelled experiment is recorded so.
    fn cancelled(&self) -> Result<bool, SwarmError> {
        let run = &self.climb.run;
        crate::scheduler::hear_requests(run)?;
        if run.cancel.is_cancelled() || run.halted.is_cancelled() {
            return Ok(true);
        }
        if run.task_cancel(&self.id).is_cancelled() {
            run.emit(SwarmEvent::TaskCancelled { task: self.id.clone() })?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Decides an experiment that stopped short of a measurement; its diff against `base`
    /// (what it was built on, else the current baseline) is kept all the same.
    async fn stop_short(
        &self,
        attempt: u32,
        decision: Decision,
        reason: String,
        commit: &str,
        base: Option<&str>,
    ) -> Step {
        let base = match base {
            Some(base) => base.to_string(),
            None => match self.climb.view().baseline() {
                Some(point) => point.commit.clone(),
                None => self.climb.run.branch.clone(),
            },
        };
        let diff = self.climb.diff(&self.id, &base, commit).await?;
        let measured =
            Measured { commit: Some(commit.to_string()), diff: Some(diff), ..Measured::default() };
        self.decide(attempt, decision, reason, measured)
    }

    /// The runs of each side the events hold for this measurement (same attempt, same
    /// commits), and how many looks they are.
    fn looks(&self, attempt: u32, commit: &str, baseline: &str) -> (Vec<f64>, Vec<f64>, u32) {
        let (mut a, mut b, mut looks) = (Vec::new(), Vec::new(), 0);
        for entry in self.climb.run.entries() {
            if let SwarmEvent::ExperimentMeasured {
                task,
                attempt: at,
                commit: measured,
                baseline_commit,
                baseline: runs_a,
                values: runs_b,
                ..
            } = &entry.event
                && *task == self.id
                && *at == attempt
                && measured == commit
                && baseline_commit == baseline
            {
                a.extend(runs_a);
                b.extend(runs_b);
                looks += 1;
            }
        }
        (a, b, looks)
    }

    /// The baseline failed while this experiment was measured against it: the experiment
    /// is not to blame. Recorded, the run stops (a resume measures it again, with the
    /// looks it has).
    fn baseline_broke(&self, baseline: &str, why: &str) -> Result<SwarmError, SwarmError> {
        let run = &self.climb.run;
        let reason = format!("while `{}` was measured against it: {why}", self.id);
        run.emit(SwarmEvent::BaselineFailed { commit: baseline.to_string(), reason })?;
        run.halt();
        Ok(SwarmError::Stopped(format!(
            "the baseline {} failed while `{}` was measured against it: {why}; `{}` is not \
             decided (not its fault). Make the metric work on the baseline, then: kestrel \
             swarm resume {}",
            short(baseline),
            self.id,
            self.id,
            run.id
        )))
    }

    /// The `climb-keep-late` failpoint: a kept experiment left unmerged lets every other
    /// running experiment be decided first (a test shows the climb merges it before any
    /// other is driven, so nothing is measured against the baseline it replaces).
    async fn keep_late(&self) {
        if !crate::failpoint::is_set_for("climb-keep-late", &self.id) {
            return;
        }
        let run = &self.climb.run;
        loop {
            let driving = self.climb.driving.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let view = self.climb.view();
            let undecided = driving.iter().filter(|id| **id != self.id).any(|id| {
                view.experiment(id).is_some_and(|experiment| experiment.result.is_none())
            });
            if !undecided || run.halted.is_cancelled() || run.cancel.is_cancelled() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// The gate alone, once no role turn of the run is in flight: a turn a killed
    /// orchestrator left running goes on in the daemon until its driver (alive in this
    /// one) takes it over and sees it end.
    async fn exclusive(&self) -> tokio::sync::RwLockWriteGuard<'_, ()> {
        loop {
            let guard = self.climb.gate.write().await;
            if !self.climb.turn_in_flight(&self.id) {
                return guard;
            }
            drop(guard);
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// Merges exactly the measured `commit` of a kept experiment into the integration
    /// branch (once: git's trailers say whether it is there) and measures the new
    /// baseline. The caller holds the gate.
    async fn keep(&self, attempt: u32, measured: &str) -> Result<(), SwarmError> {
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
                match integration.merge(measured, &message).await? {
                    MergeOutcome::Merged(commit) => commit,
                    MergeOutcome::Conflict(files) => {
                        // The branch moved under it (by hand, or by an older run's race):
                        // this experiment is over, the climb goes on.
                        integration.merge_abort().await?;
                        return self.unmergeable(&files);
                    }
                }
            }
        };
        crate::failpoint::hit_for("climb-merge", &self.id);
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

    /// A kept experiment that conflicts with the integration branch: decided again as
    /// `build_failed`, its measurement kept in the record.
    fn unmergeable(&self, files: &[String]) -> Result<(), SwarmError> {
        let Some(result) = self.climb.view().experiment(&self.id).and_then(|e| e.result.clone())
        else {
            return Ok(());
        };
        let reason = format!(
            "measured better ({}), but it conflicts with {} in {}",
            result.reason,
            self.climb.run.branch,
            files.join(", ")
        );
        let measured = Measured {
            commit: result.commit,
            baseline_commit: result.baseline_commit,
            baseline: result.baseline,
            values: result.values,
            p_value: result.p_value,
            diff: result.diff,
        };
        self.decide(result.attempt, Decision::BuildFailed, reason, measured).map(|_| ())
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
    let line = kestrel_protocol::swarm::first_line(text);
    if line.chars().count() > 100 {
        return line.chars().take(100).collect::<String>() + "…";
    }
    line.to_string()
}
