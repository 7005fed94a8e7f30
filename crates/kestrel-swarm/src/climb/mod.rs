//! `kestrel swarm climb`: hill-climbing a number. The baseline (the integration branch)
//! is measured, a planner proposes experiments, each is built by an implementer in its
//! own worktree, checked, and measured against the current baseline — one measurement
//! at a time and never while a role turn or a check runs (the gate) — and only one that
//! beats it beyond noise is merged and becomes the new baseline. Built on the swarm's
//! pieces: role turns, worktrees, the verifier, merges with trailers, the event log.

mod experiment;
mod measure;
mod prompts;
mod propose;
mod stats;

use crate::SwarmError;
use crate::context::Run;
use crate::events::{Console, EventLog};
use crate::git::Git;
use crate::run::{Launch, Roles, choose_models, load_config, reopen};
use experiment::{Experiment, experiment_task};
use kestrel_protocol::SessionId;
use kestrel_protocol::swarm::{
    ClimbSettings, ClimbView, DiffSize, Direction, RunEnd, SwarmEntry, SwarmEvent, SwarmGraph,
    TaskSpec, TaskState, integration_branch,
};
use kestrel_store::{RunLock, SwarmRunDir};
use propose::{Proposed, propose};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{RwLock, RwLockReadGuard, SemaphorePermit};
use tokio::task::JoinSet;

/// `kestrel swarm climb`.
#[derive(Clone)]
pub struct ClimbRequest {
    pub launch: Launch,
    /// Prints the number on its last stdout line.
    pub metric: String,
    pub direction: Direction,
    /// Commands that must pass on the baseline and on every experiment.
    pub checks: Vec<String>,
    /// Experiments in all (the planner is asked again until they are proposed).
    pub experiments: u32,
    /// Runs of the metric per side (>= 2).
    pub runs: u32,
    /// A reviewer looks at each experiment before it is measured.
    pub review: bool,
    /// Start without asking.
    pub yes: bool,
}

/// A running climb: the run, its settings and the gate (role turns and checks share it;
/// a measurement takes it alone).
pub(crate) struct Climb {
    pub run: Arc<Run>,
    pub settings: ClimbSettings,
    pub gate: RwLock<()>,
    /// The experiments whose drivers run now.
    pub driving: Mutex<BTreeSet<String>>,
}

/// Whether `run` is a climb (its log has `climb_started`).
pub(crate) fn is_climb(run: &Run) -> bool {
    run.any_event(|event| matches!(event, SwarmEvent::ClimbStarted { .. }))
}

/// `kestrel swarm climb`: checks everything, creates the run and climbs.
pub async fn climb(request: ClimbRequest) -> Result<i32, SwarmError> {
    let launch = &request.launch;
    if request.metric.trim().is_empty() {
        return Err(SwarmError::Usage(
            "--metric is empty: give a command that prints a number".into(),
        ));
    }
    if !stats::can_decide(request.runs) {
        return Err(SwarmError::Usage(format!(
            "--runs {} is too few: the noise needs at least {} runs a side (default 7)",
            request.runs,
            stats::MIN_RUNS
        )));
    }
    if request.experiments == 0 {
        return Err(SwarmError::Usage("--experiments must be 1 or more".into()));
    }
    if let Some(check) = request.checks.iter().find(|check| check.trim().is_empty()) {
        return Err(SwarmError::Usage(format!("--check `{check}` is empty")));
    }
    Git::check_version().await?;
    let repo = Git::new(Git::new(&launch.cwd).toplevel().await?);
    let config = load_config(&launch.home, repo.dir())?;
    if let kestrel_store::Executor::Ray(_) = config.swarm.executor {
        return Err(local_only());
    }
    choose_models(&config, Roles { planner: true, reviewer: request.review })?;
    kestrel_platform::Sandbox::detect(config.sandbox.network).map_err(|error| {
        SwarmError::Usage(format!("the metric and the checks run in the OS sandbox, and {error}"))
    })?;
    let base = repo.current_branch().await?.ok_or_else(|| {
        SwarmError::Usage("HEAD is not on a branch: check out the branch to climb from".into())
    })?;
    let base_commit = repo.resolve(&base).await?.ok_or_else(|| {
        SwarmError::Usage(format!("the branch `{base}` has no commit yet: commit something first"))
    })?;
    let goal = format!("climb `{}` ({} is better)", request.metric, request.direction.as_str());
    if !request.yes {
        let question = format!(
            "{goal} from {base} ({}), {} run(s) a side, up to {} experiment(s){}. Start?",
            &base_commit[..base_commit.len().min(10)],
            request.runs,
            request.experiments,
            request.checks.iter().map(|c| format!(", check `{c}`")).collect::<String>()
        );
        match launch.console.ask(&question) {
            Some(true) => {}
            Some(false) => return Ok(2),
            None => {
                return Err(SwarmError::Usage(
                    "no terminal to confirm the climb: pass --yes to start it".into(),
                ));
            }
        }
    }
    let run_id = SessionId::new().to_string();
    let graph = SwarmGraph { goal: Some(goal), base: Some(base.clone()), ..SwarmGraph::default() };
    let graph_text = kestrel_store::graph_to_toml(&graph).map_err(SwarmError::Usage)?;
    let dir = SwarmRunDir::create(&launch.home, &run_id, &graph_text)?;
    let lock = dir.lock()?;
    launch.console.note(&format!("run {run_id}"));
    let max_parallel = launch.max_parallel.unwrap_or(config.swarm.max_parallel);
    let workdir = config.swarm.workdir.join(&run_id);
    let branch = integration_branch(&run_id);
    repo.ensure_branch(&branch, &base_commit).await?;
    let mut log = EventLog::new(dir, &run_id, graph.clone(), Vec::new(), launch.console.clone());
    log.emit(SwarmEvent::RunStarted {
        run: run_id.clone(),
        repo: repo.dir().display().to_string(),
        base,
        base_commit,
        branch,
        workdir: workdir.display().to_string(),
        goal: graph.goal.clone(),
        tasks: 0,
        max_parallel,
        max_attempts: 1,
        max_cost_usd: launch.max_cost,
    })?;
    log.emit(SwarmEvent::ClimbStarted {
        metric: request.metric.clone(),
        direction: request.direction,
        checks: request.checks.clone(),
        runs: request.runs,
        max_experiments: request.experiments,
        review: request.review,
    })?;
    drop(log);
    drop(lock);
    // Taken over like a resumed run (its "run" line said once, above).
    let quiet = Launch { console: Arc::new(Quiet(launch.console.clone())), ..launch.clone() };
    let (run, lock) = reopen(&quiet, &run_id).await?;
    go_on(run, lock, launch.console.as_ref()).await
}

fn local_only() -> SwarmError {
    SwarmError::Usage(
        "a climb measures on this machine: set [swarm] executor = \"local\" (or remove it) to climb"
            .into(),
    )
}

/// Climbs `run` (new or resumed) until its experiments are used up or it stops.
pub(crate) async fn go_on(
    run: Arc<Run>,
    lock: RunLock,
    console: &dyn Console,
) -> Result<i32, SwarmError> {
    if run.ray.is_some() {
        return Err(local_only());
    }
    let Some(view) = ClimbView::fold(&run.entries()) else {
        return Err(SwarmError::Usage(format!("run {} is not a climb", run.id)));
    };
    if let Some(base_commit) = run.view().base_commit {
        run.repo.ensure_branch(&run.branch, &base_commit).await?;
    }
    let climb = Arc::new(Climb {
        run: Arc::clone(&run),
        settings: view.settings,
        gate: RwLock::new(()),
        driving: Mutex::new(BTreeSet::new()),
    });
    climb.ensure_graph()?;
    climb.reconcile().await?;
    let outcome = climb_loop(&climb).await;
    climb.write_report();
    let end = match outcome {
        Ok(Some(end)) => end,
        Ok(None) => {
            console.note(&format!(
                "interrupted; role turns in flight go on in the daemon. Continue with: kestrel swarm resume {}",
                run.id
            ));
            return Ok(1);
        }
        Err(error) => {
            // The baseline failed, the planner proposed nothing, a kept experiment would
            // not merge: the climb cannot go on and ends here. Other errors (git, the
            // log, the daemon) leave it interrupted, for a resume.
            if let SwarmError::Usage(_) = error {
                finish(&climb, RunEnd::Failed).await?;
            }
            return Err(error);
        }
    };
    finish(&climb, end).await?;
    drop(lock);
    let view = climb.view();
    let kept = view.experiments.iter().filter(|e| e.merged).count();
    if let (Some(first), Some(last)) = (view.baselines.first(), view.baselines.last()) {
        console.note(&format!(
            "{kept} of {} experiment(s) kept; the baseline went from {} to {}; report: {}",
            view.experiments.len(),
            kestrel_protocol::swarm::number(first.median),
            kestrel_protocol::swarm::number(last.median),
            run.logs_dir().with_file_name("climb.md").display()
        ));
    }
    Ok(if end == RunEnd::Done { 0 } else { 1 })
}

/// The climb's loop: the baseline, then rounds of proposals built and measured.
/// `None`: interrupted (Ctrl+C).
async fn climb_loop(climb: &Arc<Climb>) -> Result<Option<RunEnd>, SwarmError> {
    let run = &climb.run;
    // Ctrl+C at any point stops the run: what is in flight here is dropped (the metric's
    // and the checks' process groups are killed with it), turns go on in the daemon.
    let interrupt = tokio::signal::ctrl_c();
    tokio::pin!(interrupt);
    let baseline = tokio::select! {
        measured = climb.ensure_baseline() => measured?,
        _ = &mut interrupt => return Ok(interrupted(run)),
    };
    if let Err(reason) = baseline {
        return Err(SwarmError::Usage(format!(
            "the baseline could not be measured: {reason}; nothing was merged"
        )));
    }
    // A kill between a keep and its merge left a kept experiment unmerged: it is merged
    // and its baseline measured before any driver starts, or another experiment could be
    // measured against the baseline it is about to replace. (No role turn is in flight
    // then: a keep is decided alone.)
    for id in unmerged_keeps(climb) {
        let experiment = Experiment::new(climb, &id);
        tokio::select! {
            kept = experiment.drive() => kept?,
            _ = &mut interrupt => return Ok(interrupted(run)),
        }
    }
    loop {
        if run.stop.is_cancelled() || run.halted.is_cancelled() {
            break;
        }
        let view = climb.view();
        let pending: Vec<String> = view
            .experiments
            .iter()
            .filter(|e| e.result.is_none() || (e.result.is_some() && !e.merged && kept(e)))
            // A cancelled experiment is over, decided or not.
            .filter(|e| run.task(&e.spec.id).is_none_or(|t| t.state != TaskState::Cancelled))
            .map(|e| e.spec.id.clone())
            .collect();
        if pending.is_empty() {
            let proposed = u32::try_from(view.experiments.len()).unwrap_or(u32::MAX);
            if proposed >= climb.settings.max_experiments {
                break;
            }
            let wanted = climb.settings.max_experiments - proposed;
            let proposal = tokio::select! {
                proposal = propose(climb, view.rounds + 1, wanted) => proposal?,
                _ = &mut interrupt => return Ok(interrupted(run)),
            };
            match proposal {
                Proposed::Experiments => continue,
                Proposed::Stopped => break,
                Proposed::Nothing(reasons) => {
                    if view.experiments.is_empty() {
                        return Err(SwarmError::Usage(format!(
                            "the planner proposed no valid experiment:\n  - {}",
                            reasons.join("\n  - ")
                        )));
                    }
                    break;
                }
            }
        }
        let mut drivers: JoinSet<(String, Result<(), SwarmError>)> = JoinSet::new();
        // Experiments sharing a `files` hint never run at once (as tasks of a plan); one
        // already started goes first (a turn of it may be in flight).
        let mut waiting = pending;
        waiting.sort_by_key(|id| run.task(id).is_none_or(|task| task.attempt == 0));
        let mut running: Vec<(String, Vec<String>)> = Vec::new();
        let mut poll = tokio::time::interval(Duration::from_millis(500));
        let mut failure = None;
        loop {
            // Every driver that may start now is known before any runs (a measurement
            // waits for their turns).
            let starting = startable(climb, &mut waiting, &mut running);
            let starting: Vec<(String, Driving)> =
                starting.into_iter().map(|id| (id.clone(), Driving::new(climb, &id))).collect();
            for (id, driving) in starting {
                let climb = Arc::clone(climb);
                drivers.spawn(async move {
                    let _driving = driving;
                    let result = Experiment::new(&climb, &id).drive().await;
                    (id, result)
                });
            }
            tokio::select! {
                joined = drivers.join_next() => match joined {
                    None => break,
                    Some(Ok((id, result))) => {
                        running.retain(|(running, _)| *running != id);
                        if let Err(error) = result {
                            run.halt();
                            failure.get_or_insert(error);
                        }
                    }
                    Some(Err(error)) => {
                        run.halt();
                        failure.get_or_insert(SwarmError::Daemon(format!("an experiment's driver died: {error}")));
                    }
                },
                _ = poll.tick() => crate::scheduler::hear_requests(run)?,
                _ = &mut interrupt => {
                    drivers.abort_all();
                    while drivers.join_next().await.is_some() {}
                    return Ok(interrupted(run));
                }
            }
        }
        if let Some(error) = failure {
            return Err(error);
        }
    }
    Ok(Some(if run.cancel.is_cancelled() {
        RunEnd::Cancelled
    } else if run.max_cost.is_some() && run.stop.is_cancelled() {
        RunEnd::Budget
    } else {
        RunEnd::Done
    }))
}

/// The waiting experiments that share no `files` hint with a running one (or one taken
/// before them), moved to `running`; none once the run stops.
fn startable(
    climb: &Climb,
    waiting: &mut Vec<String>,
    running: &mut Vec<(String, Vec<String>)>,
) -> Vec<String> {
    if climb.run.halted.is_cancelled() || climb.run.cancel.is_cancelled() {
        waiting.clear();
        return Vec::new();
    }
    let view = climb.view();
    let mut start = Vec::new();
    let mut busy: Vec<String> = running.iter().flat_map(|(_, files)| files.clone()).collect();
    waiting.retain(|id| {
        let files: Vec<String> = view
            .experiment(id)
            .map(|e| e.spec.files.iter().map(|f| crate::scheduler::normal_path(f)).collect())
            .unwrap_or_default();
        let clash = files
            .iter()
            .any(|file| busy.iter().any(|other| crate::scheduler::overlaps(file, other)));
        busy.extend(files.iter().cloned());
        if clash {
            return true;
        }
        running.push((id.clone(), files));
        start.push(id.clone());
        false
    });
    start
}

/// Ctrl+C: nothing more starts.
fn interrupted(run: &Run) -> Option<RunEnd> {
    run.stop.cancel();
    None
}

/// An experiment's driver, in [`Climb::driving`] while it lives (aborted too).
struct Driving {
    climb: Arc<Climb>,
    id: String,
}

impl Driving {
    fn new(climb: &Arc<Climb>, id: &str) -> Driving {
        climb.driving.lock().unwrap_or_else(|e| e.into_inner()).insert(id.to_string());
        Driving { climb: Arc::clone(climb), id: id.to_string() }
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        self.climb.driving.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

/// The kept experiments not merged yet (a cancelled one is over), in the order decided.
fn unmerged_keeps(climb: &Climb) -> Vec<String> {
    let run = &climb.run;
    climb
        .view()
        .experiments
        .iter()
        .filter(|e| kept(e) && !e.merged)
        .filter(|e| run.task(&e.spec.id).is_none_or(|t| t.state != TaskState::Cancelled))
        .map(|e| e.spec.id.clone())
        .collect()
}

fn kept(experiment: &kestrel_protocol::swarm::ExperimentView) -> bool {
    experiment
        .result
        .as_ref()
        .is_some_and(|result| result.decision == kestrel_protocol::swarm::Decision::Kept)
}

/// Writes how the climb ended; a finished one's worktrees go (the branch stays).
async fn finish(climb: &Climb, end: RunEnd) -> Result<(), SwarmError> {
    let run = &climb.run;
    if end == RunEnd::Cancelled {
        for task in run.view().tasks {
            if !task.state.is_final() {
                run.emit(SwarmEvent::TaskCancelled { task: task.id.clone() })?;
            }
        }
    }
    let land = run.land();
    let cost_usd = run.view().usage().cost_usd;
    run.emit(SwarmEvent::RunFinished { state: end, branch: run.branch.clone(), land, cost_usd })?;
    climb.write_report();
    if end == RunEnd::Done {
        crate::cleanup::remove_worktrees(run).await;
        let _ = std::fs::remove_dir_all(run.workdir.join(".measure"));
        let _ = std::fs::remove_dir(&run.workdir);
    }
    Ok(())
}

impl Climb {
    /// The climb as its events tell it now.
    pub fn view(&self) -> ClimbView {
        ClimbView::fold(&self.run.entries()).unwrap_or_else(|| ClimbView {
            settings: self.settings.clone(),
            baselines: Vec::new(),
            baseline_failure: None,
            experiments: Vec::new(),
            rounds: 0,
        })
    }

    /// Every proposed experiment is a task of `graph.toml` (so status, cancel and the
    /// costs see it).
    pub fn ensure_graph(&self) -> Result<(), SwarmError> {
        let mut graph = self.run.graph();
        let mut changed = false;
        for experiment in self.view().experiments {
            if graph.task(&experiment.spec.id).is_none() {
                graph.tasks.push(experiment_task(
                    &experiment.spec,
                    &self.settings.checks,
                    &self.settings.metric,
                ));
                changed = true;
            }
        }
        if changed {
            self.run.set_graph(&graph)?;
        }
        Ok(())
    }

    /// What a role turn holds: a slot (`max_parallel`), then the gate's read lease — in
    /// that order, so that a turn waiting for a slot does not keep a measurement waiting.
    /// `None`: the run stops (or the budget is used up) first.
    pub async fn turn_lease(
        &self,
    ) -> Result<Option<(SemaphorePermit<'_>, RwLockReadGuard<'_, ()>)>, SwarmError> {
        let Some(slot) = crate::turn::take_slot(&self.run).await? else { return Ok(None) };
        Ok(Some((slot, self.gate.read().await)))
    }

    /// Whether a role turn of another experiment is in flight (started, not finished, by
    /// the events) while its driver runs: a measurement waits for it to end.
    pub fn turn_in_flight(&self, except: &str) -> bool {
        let driving = self.driving.lock().unwrap_or_else(|e| e.into_inner()).clone();
        self.run.view().tasks.iter().any(|task| {
            task.id != except
                && driving.contains(&task.id)
                && !task.state.is_final()
                && task.live_session.is_some()
        })
    }

    /// A kept experiment that git shows merged (its trailer) but whose `merged` event a
    /// kill lost is recorded now, before the new tip is measured as the baseline it made.
    pub async fn reconcile(&self) -> Result<(), SwarmError> {
        let run = &self.run;
        let view = self.view();
        if !view.experiments.iter().any(|e| kept(e) && !e.merged) {
            return Ok(());
        }
        let integration = crate::merge::prepare_integration(run).await?;
        for (task, attempt, commit) in integration.swarm_merges(&run.branch, &run.id).await? {
            if view.experiment(&task).is_some_and(|e| !e.merged) {
                run.emit(SwarmEvent::Merged { task, attempt, commit })?;
            }
        }
        Ok(())
    }

    /// The checks on `commit` in a fresh clone; `Some(reason)` when one failed.
    pub async fn check(
        &self,
        name: &str,
        commit: &str,
        kind: &str,
    ) -> Result<Option<String>, SwarmError> {
        if self.settings.checks.is_empty() {
            return Ok(None);
        }
        let task = TaskSpec {
            id: name.to_string(),
            title: name.to_string(),
            acceptance: self.settings.checks.clone(),
            ..TaskSpec::default()
        };
        let result = self.run.verify_commit(&task, commit, kind, 1).await?;
        Ok(result.failure.map(|reason| format!("{reason} (log: {})", result.log.display())))
    }

    /// The integration branch's tip measured as the baseline, unless it is already;
    /// `Err(reason)` when a check fails on it or the metric gives no number.
    pub async fn ensure_baseline(&self) -> Result<Result<(), String>, SwarmError> {
        let run = &self.run;
        let Some(tip) = run.repo.resolve(&run.branch).await? else {
            return Err(SwarmError::Usage(format!("the branch {} is gone", run.branch)));
        };
        let view = self.view();
        if view.baseline().is_some_and(|point| point.commit == tip) {
            return Ok(Ok(()));
        }
        // `_` is never in an experiment id: its logs cannot be an experiment's.
        let name = format!("baseline_{}", view.baselines.len() + 1);
        let failed = |reason: String| -> Result<Result<(), String>, SwarmError> {
            run.emit(SwarmEvent::BaselineFailed { commit: tip.clone(), reason: reason.clone() })?;
            Ok(Err(reason))
        };
        if let Some(reason) = self.check(&name, &tip, "check").await? {
            return failed(reason);
        }
        let bench = measure::Bench::new(run, &self.settings.metric, &name);
        match bench.alone(&tip, self.settings.runs).await? {
            Ok(values) => {
                run.emit(SwarmEvent::BaselineMeasured { commit: tip.clone(), values })?;
                self.write_report();
                Ok(Ok(()))
            }
            Err(why) => failed(why),
        }
    }

    /// The size of `commit`'s change against `base`; the diff itself is kept as
    /// `logs/<name>.diff` (the experiment's branch goes when the climb ends).
    pub async fn diff(&self, name: &str, base: &str, commit: &str) -> Result<DiffSize, SwarmError> {
        let args = ["diff", "--no-ext-diff", "--no-textconv"];
        let numstat =
            self.run.repo.run(&[&args[..], &["--numstat", base, commit]].concat()).await?;
        let mut size = DiffSize::default();
        for line in numstat.stdout.lines() {
            let mut fields = line.split('\t');
            let insertions = fields.next().and_then(|n| n.parse::<u32>().ok()).unwrap_or(0);
            let deletions = fields.next().and_then(|n| n.parse::<u32>().ok()).unwrap_or(0);
            size.files += 1;
            size.insertions += insertions;
            size.deletions += deletions;
        }
        let patch = self.run.repo.run(&[&args[..], &[base, commit]].concat()).await?;
        let path = self.run.logs_dir().join(format!("{name}.diff"));
        std::fs::write(&path, patch.stdout)
            .map_err(|error| SwarmError::io("cannot write", &path, error))?;
        Ok(size)
    }

    /// `climb.md` and `climb.svg` in the run directory, from its events (a report that
    /// cannot be written is not worth stopping the climb for).
    pub fn write_report(&self) {
        if let Ok(dir) = SwarmRunDir::open(&self.run.home, &self.run.id) {
            let _ = dir.write_climb_report();
        }
    }
}

/// A console that says nothing of its own (events still go through).
struct Quiet(Arc<dyn Console>);

impl Console for Quiet {
    fn event(&self, entry: &SwarmEntry) {
        self.0.event(entry);
    }
    fn note(&self, _text: &str) {}
    fn print(&self, text: &str) {
        self.0.print(text);
    }
    fn ask(&self, question: &str) -> Option<bool> {
        self.0.ask(question)
    }
}
