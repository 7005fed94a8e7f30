//! The commands' entry points: `run` (a graph file or a goal), `resume`, `retry` and
//! `cancel`. Everything that can be wrong with the input is found before anything is
//! started or written: the repository, the base branch, the graph, the models and their
//! keys, the sandbox the verifier needs.

use crate::SwarmError;
use crate::client::Daemon;
use crate::context::{Models, Run, RunParts};
use crate::events::{Console, EventLog};
use crate::git::Git;
use crate::plan::{Planned, plan};
use crate::ray::RayExecutor;
use crate::scheduler::{Outcome, schedule};
use kestrel_protocol::SessionId;
use kestrel_protocol::swarm::{
    NOTHING_TO_LAND, RunEnd, SwarmEvent, SwarmGraph, TaskState, integration_branch,
};
use kestrel_store::{
    Config, Executor, KestrelHome, RunLock, SwarmRunDir, parse_graph, split_model_ref,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What every command shares.
#[derive(Clone)]
pub struct Launch {
    pub home: KestrelHome,
    /// The `kestrel` binary (started as `kestrel daemon` when none runs).
    pub program: PathBuf,
    pub cwd: PathBuf,
    pub console: Arc<dyn Console>,
    pub max_cost: Option<f64>,
    pub max_parallel: Option<usize>,
}

/// What `kestrel swarm run` is given.
#[derive(Debug, Clone)]
pub enum Input {
    Graph(PathBuf),
    Goal(String),
}

/// `kestrel swarm run`.
#[derive(Clone)]
pub struct RunRequest {
    pub launch: Launch,
    pub input: Input,
    pub dry_run: bool,
    /// Run a planner's graph without asking.
    pub yes: bool,
}

/// The exit code of a run that got going: 0 when every task merged, 1 otherwise.
fn exit_code(outcome: Outcome) -> i32 {
    match outcome {
        Outcome::Ended(RunEnd::Done) => 0,
        Outcome::Ended(RunEnd::Failed | RunEnd::Cancelled | RunEnd::Budget)
        | Outcome::Interrupted => 1,
    }
}

/// `kestrel swarm run`: checks everything, then runs (or prints the order).
pub async fn run(request: RunRequest) -> Result<i32, SwarmError> {
    let launch = &request.launch;
    Git::check_version().await?;
    let repo = Git::new(Git::new(&launch.cwd).toplevel().await?);
    let config = load_config(&launch.home, repo.dir())?;
    let (graph, graph_text) = match &request.input {
        Input::Graph(path) => {
            let text = std::fs::read_to_string(path).map_err(|error| {
                SwarmError::Usage(format!("cannot read the graph {}: {error}", path.display()))
            })?;
            let graph = parse_graph(&text)
                .map_err(|error| SwarmError::Usage(format!("{}: {error}", path.display())))?;
            (graph, text)
        }
        Input::Goal(goal) => {
            if goal.trim().is_empty() {
                return Err(SwarmError::Usage("the goal is empty: say what to build".into()));
            }
            let graph = SwarmGraph { goal: Some(goal.clone()), ..SwarmGraph::default() };
            let text = format!("goal = {}\n", toml_string(goal));
            (graph, text)
        }
    };
    let base = match &graph.base {
        Some(base) => base.clone(),
        None => repo.current_branch().await?.ok_or_else(|| {
            SwarmError::Usage(
                "HEAD is not on a branch: set `base = \"<branch>\"` in the graph or check out a branch"
                    .into(),
            )
        })?,
    };
    if !repo.branch_exists(&base).await? {
        return Err(SwarmError::Usage(format!(
            "the base branch `{base}` does not exist in {} (set `base` in the graph to an existing branch)",
            repo.dir().display()
        )));
    }
    let base_commit = repo.resolve(&base).await?.ok_or_else(|| {
        SwarmError::Usage(format!(
            "the base branch `{base}` has no commit yet: commit something first"
        ))
    })?;
    let goal_mode = matches!(request.input, Input::Goal(_));
    let models = choose_models(&config, Roles { planner: goal_mode, reviewer: true })?;
    let ray = prepare_executor(&config, &repo).await?;
    if request.dry_run {
        if goal_mode {
            return Err(SwarmError::Usage(
                "--dry-run needs --graph FILE (a goal has no graph before its planner runs)".into(),
            ));
        }
        launch.console.print(&order(&graph));
        return Ok(0);
    }
    let run_id = SessionId::new().to_string();
    let dir = SwarmRunDir::create(&launch.home, &run_id, &graph_text)?;
    let lock = dir.lock()?;
    launch.console.note(&format!("run {run_id}"));
    let max_parallel = launch.max_parallel.unwrap_or(config.swarm.max_parallel);
    let workdir = config.swarm.workdir.join(&run_id);
    let branch = integration_branch(&run_id);
    // The branch first: a run whose start is recorded always has it.
    repo.ensure_branch(&branch, &base_commit).await?;
    let mut log = EventLog::new(dir, &run_id, graph.clone(), Vec::new(), launch.console.clone());
    log.emit(SwarmEvent::RunStarted {
        run: run_id.clone(),
        repo: repo.dir().display().to_string(),
        base: base.clone(),
        base_commit: base_commit.clone(),
        branch: branch.clone(),
        workdir: workdir.display().to_string(),
        goal: graph.goal.clone(),
        tasks: graph.tasks.len(),
        max_parallel,
        max_attempts: config.swarm.max_attempts,
        max_cost_usd: launch.max_cost,
    })?;
    let run = Arc::new(Run::new(parts(
        launch,
        &config,
        &run_id,
        repo,
        workdir,
        models,
        log,
        max_parallel,
        ray,
    )?));
    if let Input::Goal(goal) = &request.input {
        match plan(&run, goal, &base_commit).await? {
            Planned::Tasks(tasks) => {
                let graph = SwarmGraph {
                    goal: Some(goal.clone()),
                    base: Some(base),
                    setup: Vec::new(),
                    tasks,
                };
                run.set_graph(&graph)?;
                if !confirm(&graph, request.yes, launch.console.as_ref())? {
                    // Not confirmed: the run ends here (a resume must not run it unasked).
                    end_unplanned(&run, RunEnd::Cancelled).await?;
                    return Ok(2);
                }
                // `planned` says the graph was accepted: a resume runs only such a plan.
                run.emit(SwarmEvent::Planned { tasks: graph.tasks.len() })?;
            }
            Planned::Refused(reasons) => {
                run.emit(SwarmEvent::PlanFailed { reasons: reasons.clone() })?;
                // Nothing can run: the run ends here rather than stay `interrupted`,
                // which says a resume would continue it.
                end_unplanned(&run, RunEnd::Failed).await?;
                return Err(SwarmError::Usage(format!(
                    "the planner gave no valid plan:\n  - {}",
                    reasons.join("\n  - ")
                )));
            }
            Planned::Stopped => return Ok(1),
        }
    }
    let outcome = schedule(Arc::clone(&run)).await?;
    report(&run, outcome, launch.console.as_ref());
    drop(lock);
    Ok(exit_code(outcome))
}

/// `kestrel swarm resume RUN`: rebuilds the state from the events and git, and goes on.
pub async fn resume(launch: Launch, run: &str) -> Result<i32, SwarmError> {
    let (run, lock) = reopen(&launch, run).await?;
    let view = run.view();
    match view.ended {
        Some(RunEnd::Done) => {
            launch.console.note(&format!("run {} is done: nothing to resume", run.id));
            return Ok(0);
        }
        Some(RunEnd::Cancelled) => {
            return Err(SwarmError::Usage(format!(
                "run {} was cancelled: `kestrel swarm retry {} TASK` gives a task new attempts",
                run.id, run.id
            )));
        }
        Some(RunEnd::Failed | RunEnd::Budget) | None => {}
    }
    run.emit(SwarmEvent::RunResumed { run: run.id.clone() })?;
    if crate::climb::is_climb(&run) {
        return crate::climb::go_on(run, lock, launch.console.as_ref()).await;
    }
    go_on(run, lock, launch.console.as_ref()).await
}

/// `kestrel swarm retry RUN TASK`: the task (failed, blocked or cancelled) gets new
/// attempts, so do the tasks it blocked, and the run goes on.
pub async fn retry(launch: Launch, run: &str, task: &str) -> Result<i32, SwarmError> {
    let (run, lock) = reopen(&launch, run).await?;
    if crate::climb::is_climb(&run) {
        return Err(SwarmError::Usage(format!(
            "run {} is a climb: its experiments are not retried (`kestrel swarm resume {}` \
             continues it)",
            run.id, run.id
        )));
    }
    let view = run.view();
    let Some(target) = view.task(task) else {
        return Err(SwarmError::Usage(format!("run {} has no task `{task}`", run.id)));
    };
    if !matches!(target.state, TaskState::Failed | TaskState::Blocked | TaskState::Cancelled) {
        return Err(SwarmError::Usage(format!(
            "task `{task}` is {}: only a failed, blocked or cancelled task can be retried",
            target.state.as_str()
        )));
    }
    run.emit(SwarmEvent::RunResumed { run: run.id.clone() })?;
    let attempts = view.max_attempts;
    run.emit(SwarmEvent::TaskRetried { task: task.to_string(), attempts })?;
    for dependent in run.graph().dependents(task) {
        if view
            .task(&dependent)
            .is_some_and(|t| matches!(t.state, TaskState::Blocked | TaskState::Cancelled))
        {
            run.emit(SwarmEvent::TaskRetried { task: dependent, attempts })?;
        }
    }
    go_on(run, lock, launch.console.as_ref()).await
}

/// `kestrel swarm cancel RUN [TASK]`. With an orchestrator alive the request goes
/// through the event log (it cancels the turns); else the tasks are cancelled here.
pub async fn cancel(launch: Launch, run: &str, task: Option<&str>) -> Result<i32, SwarmError> {
    let dir = SwarmRunDir::open(&launch.home, run)?;
    let graph = dir.graph()?;
    if let Some(task) = task
        && graph.task(task).is_none()
    {
        return Err(SwarmError::Usage(format!("run {} has no task `{task}`", dir.run_id())));
    }
    let lock = match dir.lock() {
        Ok(lock) => lock,
        Err(_) if dir.is_locked() => {
            let request = SwarmEvent::CancelRequested { task: task.map(str::to_string) };
            dir.append(&kestrel_protocol::swarm::SwarmEntry::now(request))?;
            launch
                .console
                .note(&format!("asked the orchestrator of run {} to cancel", dir.run_id()));
            return Ok(0);
        }
        Err(error) => return Err(error.into()),
    };
    let run_id = dir.run_id().to_string();
    let entries = dir.events()?.entries;
    let log = EventLog::new(dir, &run_id, graph, entries, launch.console.clone());
    let view = log.view();
    let daemon = Daemon::new(launch.home.clone(), launch.program.clone());
    // On a cluster the role turns are jobs: stopped here, no orchestrator being alive.
    if let Some(repo) = &view.repo
        && let Ok(config) = load_config(&launch.home, Path::new(repo))
        && let Executor::Ray(settings) = &config.swarm.executor
    {
        let stopped = crate::ray::stop_jobs(settings, &run_id, task).await?;
        launch.console.note(&format!("stopped {stopped} Ray job(s) of run {run_id}"));
    }
    let mut log = log;
    for view_task in &view.tasks {
        let selected = task.is_none_or(|task| task == view_task.id);
        if !selected || view_task.state.is_final() {
            continue;
        }
        if let Some(session) = &view_task.live_session {
            daemon.cancel(session).await;
            daemon.flush().await;
        }
        log.emit(SwarmEvent::TaskCancelled { task: view_task.id.clone() })?;
    }
    if task.is_none() && view.ended.is_none() {
        let branch = view.branch.clone().unwrap_or_else(|| integration_branch(&run_id));
        let merged =
            log.entries().iter().any(|entry| matches!(entry.event, SwarmEvent::Merged { .. }));
        log.emit(SwarmEvent::RunFinished {
            state: RunEnd::Cancelled,
            land: if merged { format!("git merge {branch}") } else { NOTHING_TO_LAND.to_string() },
            branch,
            cost_usd: view.usage().cost_usd,
        })?;
    }
    drop(lock);
    Ok(0)
}

/// Takes a run over: its lock, graph, events and settings.
pub(crate) async fn reopen(
    launch: &Launch,
    query: &str,
) -> Result<(Arc<Run>, RunLock), SwarmError> {
    Git::check_version().await?;
    let dir = SwarmRunDir::open(&launch.home, query)?;
    let lock = dir.lock().map_err(|error| SwarmError::Usage(error.to_string()))?;
    let run_id = dir.run_id().to_string();
    let graph = dir.graph()?;
    let entries = dir.events()?.entries;
    let log = EventLog::new(dir, &run_id, graph.clone(), entries, launch.console.clone());
    let view = log.view();
    let (Some(repo), Some(workdir)) = (view.repo.clone(), view.workdir.clone()) else {
        return Err(SwarmError::Usage(format!(
            "run {run_id} never started (no run_started event): start a new run"
        )));
    };
    let repo = Git::new(repo);
    let config = load_config(&launch.home, repo.dir())?;
    // A climb asks its planner again whenever it wants more experiments, and has a
    // reviewer only with --review.
    let roles = match kestrel_protocol::swarm::ClimbView::fold(log.entries()) {
        Some(climb) => Roles { planner: true, reviewer: climb.settings.review },
        None => Roles { planner: graph.tasks.is_empty(), reviewer: true },
    };
    let models = choose_models(&config, roles)?;
    let ray = prepare_executor(&config, &repo).await?;
    launch.console.note(&format!("run {run_id}"));
    // The run's own limits hold unless the command line says otherwise.
    let started = log.entries().iter().find_map(|entry| match &entry.event {
        SwarmEvent::RunStarted { max_parallel, max_cost_usd, .. } => {
            Some((*max_parallel, *max_cost_usd))
        }
        _ => None,
    });
    let max_parallel = launch
        .max_parallel
        .or(started.map(|(parallel, _)| parallel))
        .unwrap_or(config.swarm.max_parallel);
    let mut launch = launch.clone();
    launch.max_cost = launch.max_cost.or(started.and_then(|(_, cost)| cost));
    let workdir = PathBuf::from(workdir);
    let parts = parts(&launch, &config, &run_id, repo, workdir, models, log, max_parallel, ray)?;
    Ok((Arc::new(Run::new(parts)), lock))
}

async fn go_on(run: Arc<Run>, lock: RunLock, console: &dyn Console) -> Result<i32, SwarmError> {
    let goal_run = run.any_event(|event| matches!(event, SwarmEvent::RunStarted { tasks: 0, .. }));
    let planned = run.any_event(|event| matches!(event, SwarmEvent::Planned { .. }));
    if run.graph().tasks.is_empty() || (goal_run && !planned) {
        return Err(SwarmError::Usage(format!(
            "run {} has no accepted plan (its planner never finished, or no one confirmed \
             the plan): start a new run",
            run.id
        )));
    }
    // A run killed right after its start may lack its branch: made again from its base.
    if let Some(base_commit) = run.view().base_commit {
        run.repo.ensure_branch(&run.branch, &base_commit).await?;
    }
    crate::merge::reconcile(&run).await?;
    let outcome = schedule(Arc::clone(&run)).await?;
    report(&run, outcome, console);
    drop(lock);
    Ok(exit_code(outcome))
}

#[allow(clippy::too_many_arguments)]
fn parts(
    launch: &Launch,
    config: &Config,
    run_id: &str,
    repo: Git,
    workdir: PathBuf,
    models: Models,
    log: EventLog,
    max_parallel: usize,
    ray: Option<RayExecutor>,
) -> Result<RunParts, SwarmError> {
    std::fs::create_dir_all(&workdir)
        .map_err(|error| SwarmError::io("cannot create", &workdir, error))?;
    let goal = log.graph().goal.clone();
    Ok(RunParts {
        home: launch.home.clone(),
        id: run_id.to_string(),
        repo,
        workdir,
        goal,
        models,
        verify_timeout: Duration::from_secs(config.swarm.verify_timeout_s),
        network: config.sandbox.network,
        max_cost: launch.max_cost,
        max_parallel,
        daemon: Daemon::new(launch.home.clone(), launch.program.clone()),
        ray,
        log,
    })
}

pub(crate) fn load_config(home: &KestrelHome, repo: &Path) -> Result<Config, SwarmError> {
    Config::load(home, repo).map_err(|error| SwarmError::Usage(error.to_string()))
}

/// The roles a run will use besides the implementer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Roles {
    pub planner: bool,
    pub reviewer: bool,
}

/// Each role's model, checked for the roles the run uses: known provider, key present,
/// and a reviewer on another model than the implementer unless `allow_same_model`.
pub(crate) fn choose_models(config: &Config, roles: Roles) -> Result<Models, SwarmError> {
    let pick = |role: &str, model: &Option<String>| -> Result<String, SwarmError> {
        model.clone().or_else(|| config.model.clone()).ok_or_else(|| {
            SwarmError::Usage(format!(
                "no model for the swarm's {role}: set `model` under [swarm.roles.{role}] (or `model`) in config.toml"
            ))
        })
    };
    let swarm = &config.swarm;
    let implementer = pick("implementer", &swarm.implementer.model)?;
    let reviewer = pick("reviewer", &swarm.reviewer.model)?;
    let planner = pick("planner", &swarm.planner.model)?;
    if roles.reviewer && implementer == reviewer && !swarm.reviewer.allow_same_model {
        return Err(SwarmError::Usage(format!(
            "the reviewer's model ({reviewer}) is the implementer's ({implementer}): a review needs \
             another model; set [swarm.roles.reviewer] model to a different one, or \
             [swarm.roles.reviewer] allow_same_model = true"
        )));
    }
    // On a cluster the implementer's and reviewer's keys are the nodes' own.
    let mut check = if matches!(swarm.executor, Executor::Ray(_)) {
        Vec::new()
    } else if roles.reviewer {
        vec![&implementer, &reviewer]
    } else {
        vec![&implementer]
    };
    if roles.planner {
        check.push(&planner);
    }
    for model in check {
        let (provider, _) =
            split_model_ref(model).map_err(|error| SwarmError::Usage(error.to_string()))?;
        let Some(settings) = config.provider(&provider) else {
            return Err(SwarmError::Usage(format!(
                "model {model}: no provider `{provider}` (known: {}); add [providers.{provider}] to config.toml",
                config.provider_names().join(", ")
            )));
        };
        if let Some(variable) = &settings.api_key_env {
            let present = std::env::var(variable).is_ok_and(|value| !value.trim().is_empty());
            if !present {
                return Err(SwarmError::Usage(format!(
                    "model {model} needs an API key: set {variable} (or change the role's model)"
                )));
            }
        }
    }
    Ok(Models { planner, implementer, reviewer })
}

/// What the executor needs: for `ray` a cluster that answers and a remote that can be
/// read; for `local` an OS sandbox for the verifier on this machine.
async fn prepare_executor(config: &Config, repo: &Git) -> Result<Option<RayExecutor>, SwarmError> {
    if let Executor::Ray(settings) = &config.swarm.executor {
        return RayExecutor::connect(settings, repo).await.map(Some);
    }
    kestrel_platform::Sandbox::detect(config.sandbox.network).map(|_| ()).map_err(|error| {
        SwarmError::Usage(format!(
            "the verifier runs acceptance commands in the OS sandbox, and {error}"
        ))
    })?;
    Ok(None)
}

/// `--dry-run`: the order the tasks would run in, dependencies first.
fn order(graph: &SwarmGraph) -> String {
    let mut text = String::new();
    for (index, id) in graph.order().iter().enumerate() {
        let Some(task) = graph.task(id) else { continue };
        let after = if task.depends_on.is_empty() {
            String::new()
        } else {
            format!("  (after {})", task.depends_on.join(", "))
        };
        text.push_str(&format!("{}. {}: {}{after}\n", index + 1, task.id, task.title));
    }
    text
}

/// Shows the planner's graph and asks to run it; `false` (exit 2) when no one can say
/// yes: the graph is printed on stdout for `--graph` then.
fn confirm(graph: &SwarmGraph, yes: bool, console: &dyn Console) -> Result<bool, SwarmError> {
    let text = kestrel_store::graph_to_toml(graph).map_err(SwarmError::Usage)?;
    if yes {
        console.note(&format!("the plan:\n{text}"));
        return Ok(true);
    }
    let question = format!("{text}\nRun these {} task(s)?", graph.tasks.len());
    match console.ask(&question) {
        Some(answer) => Ok(answer),
        None => {
            console.print(&text);
            console.note(
                "no terminal to confirm the plan: save the graph above and run it with --graph FILE, or pass --yes",
            );
            Ok(false)
        }
    }
}

/// The closing lines for people.
fn report(run: &Run, outcome: Outcome, console: &dyn Console) {
    if let Outcome::Interrupted = outcome {
        console.note(&format!(
            "interrupted; role turns in flight go on in the daemon. Continue with: kestrel swarm resume {}",
            run.id
        ));
    }
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_string())
}

/// Ends a GOAL run whose plan will not run: its planner's worktree and the empty
/// integration branch go (nothing was merged), and `run_finished` says how it ended.
async fn end_unplanned(run: &Run, state: RunEnd) -> Result<(), SwarmError> {
    crate::cleanup::remove_worktrees(run).await;
    let _ = run.repo.run(&["branch", "-D", &run.branch]).await;
    let cost_usd = run.view().usage().cost_usd;
    run.emit(SwarmEvent::RunFinished {
        state,
        land: NOTHING_TO_LAND.to_string(),
        branch: run.branch.clone(),
        cost_usd,
    })
}
