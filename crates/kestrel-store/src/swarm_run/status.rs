//! What `kestrel swarm status` and `kestrel swarm list` show: a run's events folded over
//! its graph ([`RunView::fold`]), whether an orchestrator holds its lock, and each role
//! session's tokens and cost. Costs come from the session index (updated per model
//! request, so a running turn's spend shows), else from the events' finished turns.
//! One listing of the session index per call, however many runs or sessions.

use super::events::SkippedEvents;
use super::{SwarmRunDir, run_ids};
use crate::StoreError;
use crate::index::SessionIndex;
use crate::paths::KestrelHome;
use kestrel_protocol::swarm::{
    RoleSession, RunState, RunView, SwarmGraph, SwarmRole, TaskState, TaskView,
};
use kestrel_protocol::{SessionId, Timestamp, Usage};
use serde::{Serialize, Serializer};
use std::collections::HashMap;

/// A run as `kestrel swarm status --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunStatus {
    pub run: String,
    #[serde(serialize_with = "run_state_name")]
    pub state: RunState,
    /// The integration branch; `null` before the run started.
    pub branch: Option<String>,
    /// Every role turn's cost, the planner's included.
    pub cost_usd: f64,
    pub tasks: Vec<TaskStatus>,
    /// Tokens and cost by role (planner, implementer, reviewer), for the table.
    #[serde(skip)]
    pub roles: Vec<(SwarmRole, Usage)>,
    /// Lines of `events.jsonl` left out (not printed: for a warning on stderr).
    #[serde(skip)]
    pub skipped_events: SkippedEvents,
}

/// One task of [`RunStatus`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskStatus {
    pub id: String,
    #[serde(serialize_with = "task_state_name")]
    pub state: TaskState,
    /// The current (or last) attempt; 0 before the first.
    pub attempts: u32,
    pub cost_usd: f64,
    pub tokens: TokenCounts,
    /// The model of the last turn started; `null` before any.
    pub model: Option<String>,
    /// The session whose turn runs now; `null` when none does.
    pub session: Option<SessionId>,
    /// Whole seconds from the first attempt's start to the task's end, or to now while
    /// the run is running (to its last event when not); 0 before the first attempt.
    pub elapsed_s: u64,
}

/// Tokens of a task's role sessions (subagents included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct TokenCounts {
    pub input: u64,
    pub output: u64,
}

/// One run as `kestrel swarm list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub run: String,
    #[serde(serialize_with = "run_state_name")]
    pub state: RunState,
    pub goal: Option<String>,
    /// Tasks in the graph (0 for a GOAL run before its plan).
    pub tasks: usize,
    pub merged: usize,
    pub cost_usd: f64,
    /// The time of the run's first event; `null` before it.
    pub created_at: Option<Timestamp>,
    /// Why the run's directory could not be read in full, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SwarmRunDir {
    /// The run's status now: its graph and events, the lock probe and one listing of the
    /// session index.
    ///
    /// Fails when the graph or the events cannot be read, or the session index can be
    /// neither read nor rebuilt.
    pub fn status(&self) -> Result<RunStatus, StoreError> {
        let graph = self.graph()?;
        let log = self.events()?;
        let view = RunView::fold(&self.run, &graph, &log.entries);
        let locked = self.is_locked();
        let index = session_usage(&self.home, [&view])?;
        let last_event = log.entries.last().map(|entry| entry.ts);
        let mut status = build_status(&view, locked, &index, Timestamp::now(), last_event);
        status.skipped_events = log.skipped;
        Ok(status)
    }
}

/// Every run under `swarm/`, newest first (run ids are UUIDv7s, which sort by time). A
/// run whose directory cannot be read in full is listed with what could be read and
/// its `error`.
///
/// Fails when `swarm/` cannot be listed, or the session index can be neither read nor
/// rebuilt.
pub fn list_runs(home: &KestrelHome) -> Result<Vec<RunSummary>, StoreError> {
    let mut ids = run_ids(home)?;
    ids.sort_unstable_by(|a, b| b.cmp(a));
    let mut runs = Vec::with_capacity(ids.len());
    for id in ids {
        let dir = SwarmRunDir::at(home, &id);
        let mut error = None;
        let graph = dir.graph().unwrap_or_else(|failure| {
            error = Some(failure.to_string());
            SwarmGraph::default()
        });
        let entries = match dir.events() {
            Ok(log) => log.entries,
            Err(failure) => {
                error.get_or_insert(failure.to_string());
                Vec::new()
            }
        };
        let view = RunView::fold(&id, &graph, &entries);
        let created_at = view.started_at.or(entries.first().map(|entry| entry.ts));
        runs.push((dir.is_locked(), view, graph.goal, created_at, error));
    }
    let index = session_usage(home, runs.iter().map(|(_, view, ..)| view))?;
    Ok(runs
        .into_iter()
        .map(|(locked, view, goal, created_at, error)| RunSummary {
            state: run_state(&view, locked),
            goal,
            tasks: view.tasks.len(),
            merged: view.tasks.iter().filter(|task| task.state == TaskState::Merged).count(),
            cost_usd: run_spend(&view, &index).cost,
            created_at,
            error,
            run: view.run,
        })
        .collect())
}

/// A run's state: how it ended, else running while an orchestrator holds its lock,
/// else interrupted.
fn run_state(view: &RunView, locked: bool) -> RunState {
    match (view.ended, locked) {
        (Some(end), _) => RunState::from(end),
        (None, true) => RunState::Running,
        (None, false) => RunState::Interrupted,
    }
}

/// The session index's usage of every role session of `views`, from one listing (none
/// when the runs have no session yet).
fn session_usage<'a>(
    home: &KestrelHome,
    views: impl IntoIterator<Item = &'a RunView>,
) -> Result<HashMap<SessionId, Usage>, StoreError> {
    let mut wanted: HashMap<SessionId, Usage> = HashMap::new();
    for view in views {
        let sessions = view.tasks.iter().flat_map(|task| &task.sessions);
        for role in sessions.chain(&view.planner_sessions) {
            wanted.insert(role.session.clone(), Usage::default());
        }
    }
    if wanted.is_empty() {
        return Ok(wanted);
    }
    for summary in SessionIndex::list(home)? {
        if let Some(usage) = wanted.get_mut(&summary.id) {
            // Its subagents' spend is the role's too.
            *usage = summary.total_usage;
        }
    }
    Ok(wanted)
}

/// Tokens and cost of one role session: the index's or the events', whichever is
/// further along (the index hears of every model request but is best effort; the
/// events only of finished turns).
fn role_spend(role: &RoleSession, index: &HashMap<SessionId, Usage>) -> Usage {
    let events = Usage {
        input_tokens: role.usage.input_tokens,
        output_tokens: role.usage.output_tokens,
        cost: role.usage.cost_usd,
        ..Usage::default()
    };
    let tokens = |usage: &Usage| usage.input_tokens + usage.output_tokens;
    match index.get(&role.session) {
        Some(indexed) if tokens(indexed) >= tokens(&events) => *indexed,
        Some(_) | None => events,
    }
}

fn task_spend(task: &TaskView, index: &HashMap<SessionId, Usage>) -> Usage {
    let mut total = Usage::default();
    for role in &task.sessions {
        total.add(&role_spend(role, index));
    }
    total
}

fn run_spend(view: &RunView, index: &HashMap<SessionId, Usage>) -> Usage {
    let mut total = Usage::default();
    for task in &view.tasks {
        total.add(&task_spend(task, index));
    }
    for role in &view.planner_sessions {
        total.add(&role_spend(role, index));
    }
    total
}

/// The status of a folded run (pure, for tests): `now` ends the elapsed time of tasks
/// still going while the run is running, `last_event` while it is not.
fn build_status(
    view: &RunView,
    locked: bool,
    index: &HashMap<SessionId, Usage>,
    now: Timestamp,
    last_event: Option<Timestamp>,
) -> RunStatus {
    let state = run_state(view, locked);
    let open_end = match state {
        RunState::Running => now,
        RunState::Interrupted
        | RunState::Done
        | RunState::Failed
        | RunState::Cancelled
        | RunState::Budget => last_event.unwrap_or(now),
    };
    let tasks = view
        .tasks
        .iter()
        .map(|task| {
            let spend = task_spend(task, index);
            let elapsed_ms = task.started_at.map_or(0, |start| {
                task.ended_at.unwrap_or(open_end).millis.saturating_sub(start.millis)
            });
            TaskStatus {
                id: task.id.clone(),
                state: task.state,
                attempts: task.attempt,
                cost_usd: spend.cost,
                tokens: TokenCounts { input: spend.input_tokens, output: spend.output_tokens },
                model: task.model.clone(),
                session: task.live_session.clone(),
                elapsed_s: u64::try_from(elapsed_ms / 1000).unwrap_or(0),
            }
        })
        .collect();
    RunStatus {
        run: view.run.clone(),
        state,
        branch: view.branch.clone(),
        cost_usd: run_spend(view, index).cost,
        tasks,
        roles: role_totals(view, index),
        skipped_events: SkippedEvents::default(),
    }
}

/// Every role's spend across the run's sessions.
fn role_totals(view: &RunView, index: &HashMap<SessionId, Usage>) -> Vec<(SwarmRole, Usage)> {
    let sessions: Vec<&RoleSession> =
        view.tasks.iter().flat_map(|task| &task.sessions).chain(&view.planner_sessions).collect();
    [SwarmRole::Planner, SwarmRole::Implementer, SwarmRole::Reviewer]
        .into_iter()
        .map(|role| {
            let mut total = Usage::default();
            for session in sessions.iter().filter(|session| session.role == role) {
                total.add(&role_spend(session, index));
            }
            (role, total)
        })
        .collect()
}

fn run_state_name<S: Serializer>(state: &RunState, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(state.as_str())
}

fn task_state_name<S: Serializer>(state: &TaskState, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(state.as_str())
}
