//! Everything a running orchestrator shares between its task drivers: the run's
//! identity and places, the models, the event log, the daemon, and the limits (turn
//! slots, the merge lock, the budget, a rate-limit pause).

use crate::SwarmError;
use crate::client::Daemon;
use crate::events::EventLog;
use crate::git::Git;
use crate::ray::RayExecutor;
use crate::verify::{Verification, VerifySpec, verify};
use kestrel_protocol::swarm::{
    NOTHING_TO_LAND, RunView, SwarmEntry, SwarmEvent, SwarmGraph, TaskSpec, TaskView,
};
use kestrel_store::KestrelHome;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The model of each role, `provider/model`.
#[derive(Debug, Clone)]
pub struct Models {
    pub planner: String,
    pub implementer: String,
    pub reviewer: String,
}

/// One run, as its orchestrator holds it.
pub struct Run {
    pub home: KestrelHome,
    pub id: String,
    /// The user's repository (its top). Only branches and worktrees are added to it.
    pub repo: Git,
    /// `<[swarm] workdir>/<run>`: worktrees, the integration worktree, verifier clones.
    pub workdir: PathBuf,
    pub branch: String,
    pub goal: Option<String>,
    pub models: Models,
    pub verify_timeout: Duration,
    /// `[sandbox] network`, for acceptance commands.
    pub network: bool,
    pub max_cost: Option<f64>,
    pub daemon: Daemon,
    /// The `ray` executor's cluster; `None`: everything runs on this machine.
    pub ray: Option<RayExecutor>,
    log: Mutex<EventLog>,
    /// Role turns at once (`max_parallel`); verifications have as many slots of their own.
    pub turns: Semaphore,
    pub verifications: Semaphore,
    /// One merge into the integration branch at a time.
    pub merging: tokio::sync::Mutex<()>,
    /// No new turn starts once cancelled (budget, cancel, Ctrl+C, a failed write).
    pub stop: CancellationToken,
    /// Nothing more happens once cancelled — no turn, no verification, no merge: an
    /// event could not be written, or a driver failed (see [`Run::halt`]).
    pub halted: CancellationToken,
    /// Cancels every task (`kestrel swarm cancel RUN`).
    pub cancel: CancellationToken,
    task_cancels: Mutex<HashMap<String, CancellationToken>>,
    cost: Mutex<f64>,
    paused_until: Mutex<Option<Instant>>,
}

/// The parts of a [`Run`] that the caller decides.
pub struct RunParts {
    pub home: KestrelHome,
    pub id: String,
    pub repo: Git,
    pub workdir: PathBuf,
    pub goal: Option<String>,
    pub models: Models,
    pub verify_timeout: Duration,
    pub network: bool,
    pub max_cost: Option<f64>,
    pub max_parallel: usize,
    pub daemon: Daemon,
    pub ray: Option<RayExecutor>,
    pub log: EventLog,
}

impl Run {
    pub fn new(parts: RunParts) -> Run {
        let cost = parts.log.view().usage().cost_usd;
        let slots = parts.max_parallel.max(1);
        Run {
            branch: kestrel_protocol::swarm::integration_branch(&parts.id),
            home: parts.home,
            id: parts.id,
            repo: parts.repo,
            workdir: parts.workdir,
            goal: parts.goal,
            models: parts.models,
            verify_timeout: parts.verify_timeout,
            network: parts.network,
            max_cost: parts.max_cost,
            daemon: parts.daemon,
            ray: parts.ray,
            log: Mutex::new(parts.log),
            turns: Semaphore::new(slots),
            verifications: Semaphore::new(slots),
            merging: tokio::sync::Mutex::new(()),
            stop: CancellationToken::new(),
            halted: CancellationToken::new(),
            cancel: CancellationToken::new(),
            task_cancels: Mutex::new(HashMap::new()),
            cost: Mutex::new(cost),
            paused_until: Mutex::new(None),
        }
    }

    /// Stops everything: nothing is merged past the last recorded event.
    pub fn halt(&self) {
        self.halted.cancel();
        self.stop.cancel();
    }

    /// Whether a turn may start now: not stopped, within the budget, not paused.
    pub fn may_start_turn(&self) -> Result<bool, SwarmError> {
        Ok(!self.stop.is_cancelled() && self.within_budget()? && !self.paused())
    }

    fn paused(&self) -> bool {
        let until = *self.paused_until.lock().unwrap_or_else(PoisonError::into_inner);
        until.is_some_and(|until| until > Instant::now())
    }

    /// The log itself. Private: a guard taken inside an argument of [`Run::emit`] lives
    /// to the end of the statement and `emit` takes it again (a deadlock); the accessors
    /// below return owned values.
    fn log(&self) -> MutexGuard<'_, EventLog> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes an event; a failure stops the run (no new turn, nothing more merged).
    pub fn emit(&self, event: SwarmEvent) -> Result<(), SwarmError> {
        let result = self.log().emit(event);
        if result.is_err() {
            self.halt();
        }
        result
    }

    /// The run as its events tell it now.
    pub fn view(&self) -> RunView {
        self.log().view()
    }

    /// Every event the log holds, copied (a climb folds its own view from them).
    pub fn entries(&self) -> Vec<SwarmEntry> {
        self.log().entries().to_vec()
    }

    /// Whether an event the log holds matches `check`.
    pub fn any_event(&self, check: impl Fn(&SwarmEvent) -> bool) -> bool {
        self.log().entries().iter().any(|entry| check(&entry.event))
    }

    /// The planner's graph: stored as the run's `graph.toml`, then used.
    pub fn set_graph(&self, graph: &SwarmGraph) -> Result<(), SwarmError> {
        let mut log = self.log();
        log.dir().write_graph(graph)?;
        log.set_graph(graph.clone());
        Ok(())
    }

    /// The base branch the run started from.
    pub fn base(&self) -> Option<String> {
        self.log().entries().iter().find_map(|entry| match &entry.event {
            SwarmEvent::RunStarted { base, .. } => Some(base.clone()),
            _ => None,
        })
    }

    /// The command that brings the integration branch into the base branch, or
    /// [`NOTHING_TO_LAND`] when no task (no experiment) was merged into it: it is still
    /// the commit the run started from.
    pub fn land(&self) -> String {
        if !self.any_event(|event| matches!(event, SwarmEvent::Merged { .. })) {
            return NOTHING_TO_LAND.to_string();
        }
        let repo = self.repo.dir().display();
        let base = self.base().unwrap_or_else(|| "main".into());
        format!("git -C {repo} checkout {base} && git -C {repo} merge {}", self.branch)
    }

    /// Runs `task`'s acceptance commands on `commit` in a fresh clone (one of the
    /// verification slots), logged as `<task>-<attempt>-<kind>.log`.
    pub async fn verify_commit(
        &self,
        task: &TaskSpec,
        commit: &str,
        kind: &str,
        attempt: u32,
    ) -> Result<Verification, SwarmError> {
        let Ok(_slot) = self.verifications.acquire().await else {
            return Err(SwarmError::Usage("the run is stopping".into()));
        };
        let graph = self.graph();
        let spec = VerifySpec {
            commit,
            setup: &graph.setup,
            acceptance: &task.acceptance,
            timeout: self.verify_timeout,
            network: self.network,
        };
        let name = format!("{}-{attempt}-{kind}", task.id);
        if let Some(ray) = &self.ray {
            return crate::ray::verify_commit(self, ray, task, commit, &name).await;
        }
        let scratch = self.workdir.join(".verify").join(&name);
        let log = self.logs_dir().join(format!("{name}.log"));
        verify(&self.repo, &spec, &scratch, &log).await
    }

    /// Where verifications write their logs.
    pub fn logs_dir(&self) -> PathBuf {
        self.log().dir().logs_dir()
    }

    /// Requests other processes appended since (see [`EventLog::read_foreign`]).
    pub fn read_foreign(&self) -> Result<Vec<SwarmEvent>, SwarmError> {
        self.log().read_foreign()
    }

    pub fn graph(&self) -> SwarmGraph {
        self.log().graph().clone()
    }

    pub fn task(&self, id: &str) -> Option<TaskView> {
        self.log().task(id)
    }

    /// The token that cancels `task` (and is cancelled with the whole run).
    pub fn task_cancel(&self, task: &str) -> CancellationToken {
        let mut cancels = self.task_cancels.lock().unwrap_or_else(PoisonError::into_inner);
        cancels.entry(task.to_string()).or_insert_with(|| self.cancel.child_token()).clone()
    }

    pub fn cost(&self) -> f64 {
        *self.cost.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn add_cost(&self, usd: f64) {
        *self.cost.lock().unwrap_or_else(PoisonError::into_inner) += usd;
    }

    /// Whether `--max-cost` allows another turn; the first refusal is recorded and stops
    /// the run from starting more.
    pub fn within_budget(&self) -> Result<bool, SwarmError> {
        let Some(max) = self.max_cost else { return Ok(true) };
        let cost = self.cost();
        if cost < max {
            return Ok(true);
        }
        if !self.stop.is_cancelled() {
            self.stop.cancel();
            self.emit(SwarmEvent::BudgetReached { cost_usd: cost, max_cost_usd: max })?;
        }
        Ok(false)
    }

    /// No turn starts before `until` (a provider's 429 slows the whole run).
    pub fn pause_until(&self, until: Instant) {
        let mut paused = self.paused_until.lock().unwrap_or_else(PoisonError::into_inner);
        if paused.is_none_or(|current| current < until) {
            *paused = Some(until);
        }
    }

    /// Waits out a rate-limit pause.
    pub async fn wait_for_pause(&self) {
        loop {
            let until = *self.paused_until.lock().unwrap_or_else(PoisonError::into_inner);
            match until {
                Some(until) if until > Instant::now() => tokio::time::sleep_until(until).await,
                _ => return,
            }
        }
    }
}
