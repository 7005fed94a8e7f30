//! A run's state as its events tell it: the graph plus `events.jsonl` folded into one
//! view per task. The orchestrator resumes from it; `swarm status` and the TUI show it.
//! Whether an orchestrator is alive is not in the events: callers say so.

use super::climb::Decision;
use super::event::{RunEnd, SwarmEntry, SwarmEvent, SwarmRole, TurnUsage};
use super::graph::SwarmGraph;
use crate::{SessionId, Timestamp};
use serde::{Deserialize, Serialize};

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    /// A dependency is not merged yet.
    Waiting,
    /// Could start now (waits for a slot, or a task sharing a file).
    Ready,
    Implementing,
    Reviewing,
    Verifying,
    /// Passed review and verification; being merged (or waiting for the merge slot).
    Merging,
    /// A role session waits for a permission answer from a person.
    NeedsInput,
    Merged,
    Failed,
    Blocked,
    Cancelled,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Waiting => "waiting",
            TaskState::Ready => "ready",
            TaskState::Implementing => "implementing",
            TaskState::Reviewing => "reviewing",
            TaskState::Verifying => "verifying",
            TaskState::Merging => "merging",
            TaskState::NeedsInput => "needs-input",
            TaskState::Merged => "merged",
            TaskState::Failed => "failed",
            TaskState::Blocked => "blocked",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// Merged, failed, blocked or cancelled: nothing more happens without a retry.
    pub fn is_final(self) -> bool {
        match self {
            TaskState::Merged | TaskState::Failed | TaskState::Blocked | TaskState::Cancelled => {
                true
            }
            TaskState::Waiting
            | TaskState::Ready
            | TaskState::Implementing
            | TaskState::Reviewing
            | TaskState::Verifying
            | TaskState::Merging
            | TaskState::NeedsInput => false,
        }
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Running,
    /// Not finished, and no orchestrator holds its lock.
    Interrupted,
    Done,
    Failed,
    Cancelled,
    Budget,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Interrupted => "interrupted",
            RunState::Done => "done",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
            RunState::Budget => "budget",
        }
    }
}

impl From<RunEnd> for RunState {
    fn from(end: RunEnd) -> Self {
        match end {
            RunEnd::Done => RunState::Done,
            RunEnd::Failed => RunState::Failed,
            RunEnd::Cancelled => RunState::Cancelled,
            RunEnd::Budget => RunState::Budget,
        }
    }
}

/// A session a task's roles used.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleSession {
    pub session: SessionId,
    pub role: SwarmRole,
    pub attempt: u32,
    pub model: String,
    /// What its finished turns cost, as their `turn_finished` events say.
    pub usage: TurnUsage,
}

/// One task as the events tell it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    pub id: String,
    pub state: TaskState,
    /// The state before `needs-input`, to go back to.
    before_input: TaskState,
    /// The current (or last) attempt; 0 before the first.
    pub attempt: u32,
    /// Attempts this task may make in all (`max_attempts` plus retries).
    pub max_attempts: u32,
    /// The session whose turn runs now, if any.
    pub live_session: Option<SessionId>,
    /// The model of the last turn started.
    pub model: Option<String>,
    /// Every role session, in the order of their first turn.
    pub sessions: Vec<RoleSession>,
    /// The attempt's starting commit and the commit under review.
    pub attempt_base: Option<String>,
    pub commit: Option<String>,
    pub worktree: Option<String>,
    /// The findings or failure the next attempt is given.
    pub last_failure: Option<AttemptFailure>,
    pub failure: Option<String>,
    pub started_at: Option<Timestamp>,
    pub ended_at: Option<Timestamp>,
}

/// Why the last attempt failed, for the next prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptFailure {
    pub attempt: u32,
    pub stage: super::event::FailedStage,
    pub reason: String,
    pub findings: Vec<String>,
    pub log: Option<String>,
}

impl TaskView {
    /// Tokens and cost of every finished turn of the task.
    pub fn usage(&self) -> TurnUsage {
        let mut total = TurnUsage::default();
        for session in &self.sessions {
            total.add(&session.usage);
        }
        total
    }

    /// What the task is doing, a wait for input aside: the state before `needs-input`.
    pub fn working_state(&self) -> TaskState {
        if self.state == TaskState::NeedsInput { self.before_input } else { self.state }
    }

    /// The implementer's session (one per task, kept across attempts).
    pub fn implementer_session(&self) -> Option<&SessionId> {
        self.sessions.iter().rev().find(|s| s.role == SwarmRole::Implementer).map(|s| &s.session)
    }
}

/// A whole run as its events tell it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunView {
    pub run: String,
    /// `None` before `run_started` (a run whose first write failed).
    pub branch: Option<String>,
    pub base_commit: Option<String>,
    pub repo: Option<String>,
    pub workdir: Option<String>,
    pub max_attempts: u32,
    /// `Some` once `run_finished` was written (and no resume since).
    pub ended: Option<RunEnd>,
    pub tasks: Vec<TaskView>,
    /// The planner's sessions (GOAL runs).
    pub planner_sessions: Vec<RoleSession>,
    /// Cancellation asked by another process: `Some(None)` the whole run.
    pub cancel_requests: Vec<Option<String>>,
    pub started_at: Option<Timestamp>,
    pub events: usize,
}

impl RunView {
    /// Folds `entries` over `graph` (empty for a GOAL run before its plan).
    pub fn fold(run: &str, graph: &SwarmGraph, entries: &[SwarmEntry]) -> RunView {
        let mut view = RunView {
            run: run.to_string(),
            branch: None,
            base_commit: None,
            repo: None,
            workdir: None,
            max_attempts: 3,
            ended: None,
            tasks: graph.tasks.iter().map(|task| TaskView::new(&task.id, 3)).collect(),
            planner_sessions: Vec::new(),
            cancel_requests: Vec::new(),
            started_at: None,
            events: entries.len(),
        };
        for entry in entries {
            view.apply(entry);
        }
        view.settle_waiting(graph);
        view
    }

    pub fn task(&self, id: &str) -> Option<&TaskView> {
        self.tasks.iter().find(|task| task.id == id)
    }

    /// Tokens and cost of every finished role turn of the run, the planner's included.
    pub fn usage(&self) -> TurnUsage {
        let mut total = TurnUsage::default();
        for task in &self.tasks {
            total.add(&task.usage());
        }
        for session in &self.planner_sessions {
            total.add(&session.usage);
        }
        total
    }

    fn task_mut(&mut self, id: &str) -> Option<&mut TaskView> {
        self.tasks.iter_mut().find(|task| task.id == id)
    }

    fn apply(&mut self, entry: &SwarmEntry) {
        let ts = entry.ts;
        match &entry.event {
            SwarmEvent::RunStarted { branch, base_commit, repo, workdir, max_attempts, .. } => {
                self.branch = Some(branch.clone());
                self.base_commit = Some(base_commit.clone());
                self.repo = Some(repo.clone());
                self.workdir = Some(workdir.clone());
                self.max_attempts = *max_attempts;
                self.started_at = Some(ts);
                for task in &mut self.tasks {
                    task.max_attempts = *max_attempts;
                }
            }
            SwarmEvent::RunResumed { .. } => {
                self.ended = None;
                self.cancel_requests.clear();
            }
            SwarmEvent::Planned { .. } | SwarmEvent::PlanFailed { .. } => {}
            SwarmEvent::TurnStarted { task, role, attempt, session, model } => {
                let role_session = RoleSession {
                    session: session.clone(),
                    role: *role,
                    attempt: *attempt,
                    model: model.clone(),
                    usage: TurnUsage::default(),
                };
                if *role == SwarmRole::Planner {
                    if !self.planner_sessions.iter().any(|s| s.session == *session) {
                        self.planner_sessions.push(role_session);
                    }
                    return;
                }
                let Some(view) = self.task_mut(task) else { return };
                view.live_session = Some(session.clone());
                view.model = Some(model.clone());
                if !view.sessions.iter().any(|s| s.session == *session) {
                    view.sessions.push(role_session);
                }
                view.state = match role {
                    SwarmRole::Reviewer => TaskState::Reviewing,
                    SwarmRole::Implementer | SwarmRole::Planner => TaskState::Implementing,
                };
            }
            SwarmEvent::TurnFinished { task, session, usage, role, .. } => {
                let sessions = if *role == SwarmRole::Planner {
                    &mut self.planner_sessions
                } else {
                    let Some(view) = self.task_mut(task) else { return };
                    if view.live_session.as_ref() == Some(session) {
                        view.live_session = None;
                    }
                    if view.state == TaskState::NeedsInput {
                        view.state = view.before_input;
                    }
                    &mut view.sessions
                };
                if let Some(known) = sessions.iter_mut().find(|s| s.session == *session) {
                    known.usage.add(usage);
                }
            }
            SwarmEvent::NeedsInput { task, .. } => {
                if let Some(view) = self.task_mut(task)
                    && view.state != TaskState::NeedsInput
                {
                    view.before_input = view.state;
                    view.state = TaskState::NeedsInput;
                }
            }
            SwarmEvent::InputGiven { task, .. } => {
                if let Some(view) = self.task_mut(task)
                    && view.state == TaskState::NeedsInput
                {
                    view.state = view.before_input;
                }
            }
            SwarmEvent::AttemptStarted { task, attempt, worktree, base_commit, .. } => {
                if let Some(view) = self.task_mut(task) {
                    view.attempt = *attempt;
                    view.state = TaskState::Implementing;
                    view.worktree = Some(worktree.clone());
                    view.attempt_base = Some(base_commit.clone());
                    view.commit = None;
                    view.started_at.get_or_insert(ts);
                    view.ended_at = None;
                }
            }
            SwarmEvent::Committed { task, commit, .. } => {
                if let Some(view) = self.task_mut(task) {
                    view.commit = Some(commit.clone());
                    view.state = TaskState::Reviewing;
                }
            }
            // The same work on a newer baseline: where it stood holds.
            SwarmEvent::BaselineMergedIn { task, commit, .. } => {
                if let Some(view) = self.task_mut(task) {
                    view.commit = Some(commit.clone());
                }
            }
            SwarmEvent::Reviewed { task, approve, .. } => {
                if let Some(view) = self.task_mut(task)
                    && *approve
                {
                    view.state = TaskState::Verifying;
                }
            }
            SwarmEvent::Verified { task, .. } => {
                if let Some(view) = self.task_mut(task) {
                    view.state = TaskState::Merging;
                }
            }
            SwarmEvent::AttemptFailed { task, attempt, stage, reason, findings, log } => {
                if let Some(view) = self.task_mut(task) {
                    view.state = TaskState::Implementing;
                    view.live_session = None;
                    view.last_failure = Some(AttemptFailure {
                        attempt: *attempt,
                        stage: *stage,
                        reason: reason.clone(),
                        findings: findings.clone(),
                        log: log.clone(),
                    });
                }
            }
            SwarmEvent::Merged { task, commit, .. } => {
                if let Some(view) = self.task_mut(task) {
                    view.state = TaskState::Merged;
                    view.commit = Some(commit.clone());
                    view.live_session = None;
                    view.ended_at = Some(ts);
                }
            }
            SwarmEvent::TaskFailed { task, reason } => {
                if let Some(view) = self.task_mut(task) {
                    view.state = TaskState::Failed;
                    view.failure = Some(reason.clone());
                    view.live_session = None;
                    view.ended_at = Some(ts);
                }
            }
            SwarmEvent::TaskBlocked { task, by } => {
                if let Some(view) = self.task_mut(task) {
                    view.state = TaskState::Blocked;
                    view.failure = Some(format!("blocked by `{by}`"));
                    view.ended_at = Some(ts);
                }
            }
            SwarmEvent::TaskCancelled { task } => {
                if let Some(view) = self.task_mut(task) {
                    view.state = TaskState::Cancelled;
                    view.live_session = None;
                    view.ended_at = Some(ts);
                }
            }
            SwarmEvent::TaskRetried { task, attempts } => {
                if let Some(view) = self.task_mut(task) {
                    view.max_attempts = view.attempt + attempts;
                    // Waiting or ready is settled once every event is read.
                    view.state = TaskState::Waiting;
                    view.failure = None;
                    view.ended_at = None;
                }
            }
            SwarmEvent::CancelRequested { task } => self.cancel_requests.push(task.clone()),
            SwarmEvent::ExperimentDecided { task, decision, reason, .. } => {
                if let Some(view) = self.task_mut(task) {
                    view.live_session = None;
                    if *decision == Decision::Kept {
                        view.state = TaskState::Merging;
                    } else {
                        // Measured and not kept, or stopped short: the experiment is over.
                        view.state = TaskState::Failed;
                        view.failure = Some(format!("{}: {reason}", decision.as_str()));
                        view.ended_at = Some(ts);
                    }
                }
            }
            SwarmEvent::RateLimited { .. }
            | SwarmEvent::BudgetReached { .. }
            | SwarmEvent::ClimbStarted { .. }
            | SwarmEvent::BaselineMeasured { .. }
            | SwarmEvent::BaselineFailed { .. }
            | SwarmEvent::ExperimentsProposed { .. }
            | SwarmEvent::ExperimentMeasured { .. } => {}
            SwarmEvent::RunFinished { state, .. } => self.ended = Some(*state),
        }
    }

    /// A task that never started (or was retried) is ready once its dependencies merged.
    fn settle_waiting(&mut self, graph: &SwarmGraph) {
        let merged: Vec<String> = self
            .tasks
            .iter()
            .filter(|task| task.state == TaskState::Merged)
            .map(|task| task.id.clone())
            .collect();
        for view in &mut self.tasks {
            if !matches!(view.state, TaskState::Waiting | TaskState::Ready) {
                continue;
            }
            let deps = graph.task(&view.id).map(|task| task.depends_on.as_slice()).unwrap_or(&[]);
            view.state = if deps.iter().all(|dep| merged.contains(dep)) {
                TaskState::Ready
            } else {
                TaskState::Waiting
            };
        }
    }
}

impl TaskView {
    fn new(id: &str, max_attempts: u32) -> TaskView {
        TaskView {
            id: id.to_string(),
            state: TaskState::Waiting,
            before_input: TaskState::Waiting,
            attempt: 0,
            max_attempts,
            live_session: None,
            model: None,
            sessions: Vec::new(),
            attempt_base: None,
            commit: None,
            worktree: None,
            last_failure: None,
            failure: None,
            started_at: None,
            ended_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::event::FailedStage;
    use crate::swarm::graph::TaskSpec;

    fn graph() -> SwarmGraph {
        let task = |id: &str, deps: &[&str]| TaskSpec {
            id: id.into(),
            title: id.into(),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            acceptance: vec!["true".into()],
            ..TaskSpec::default()
        };
        SwarmGraph { tasks: vec![task("a", &[]), task("b", &["a"])], ..SwarmGraph::default() }
    }

    fn at(millis: i64, event: SwarmEvent) -> SwarmEntry {
        SwarmEntry { ts: Timestamp { millis }, event }
    }

    #[test]
    fn a_task_moves_through_its_states_and_sums_its_turns() {
        let s1 = SessionId::from_string("s1");
        let events = vec![
            at(
                1,
                SwarmEvent::AttemptStarted {
                    task: "a".into(),
                    attempt: 1,
                    branch: "kestrel/r-a".into(),
                    worktree: "/w/a".into(),
                    base_commit: "c0".into(),
                },
            ),
            at(
                2,
                SwarmEvent::TurnStarted {
                    task: "a".into(),
                    role: SwarmRole::Implementer,
                    attempt: 1,
                    session: s1.clone(),
                    model: "p/m".into(),
                },
            ),
            at(
                3,
                SwarmEvent::NeedsInput { task: "a".into(), session: s1.clone(), title: "x".into() },
            ),
        ];
        let view = RunView::fold("r", &graph(), &events);
        assert_eq!(view.task("a").unwrap().state, TaskState::NeedsInput);
        assert_eq!(view.task("a").unwrap().live_session.as_ref(), Some(&s1));
        assert_eq!(view.task("b").unwrap().state, TaskState::Waiting);

        let mut more = events.clone();
        more.push(at(
            4,
            SwarmEvent::TurnFinished {
                task: "a".into(),
                role: SwarmRole::Implementer,
                attempt: 1,
                session: s1.clone(),
                stop_reason: "end_turn".into(),
                usage: TurnUsage { input_tokens: 7, output_tokens: 3, cost_usd: 0.25 },
            },
        ));
        more.push(at(
            5,
            SwarmEvent::AttemptFailed {
                task: "a".into(),
                attempt: 1,
                stage: FailedStage::Implement,
                reason: "the attempt changed nothing".into(),
                findings: Vec::new(),
                log: None,
            },
        ));
        more.push(at(6, SwarmEvent::Merged { task: "a".into(), attempt: 2, commit: "m".into() }));
        let view = RunView::fold("r", &graph(), &more);
        let a = view.task("a").unwrap();
        assert_eq!(a.state, TaskState::Merged);
        assert_eq!(a.usage().input_tokens, 7);
        assert_eq!(a.last_failure.as_ref().unwrap().stage, FailedStage::Implement);
        assert_eq!(view.task("b").unwrap().state, TaskState::Ready);
        assert_eq!(view.usage().cost_usd, 0.25);
    }

    #[test]
    fn a_retry_gives_more_attempts_and_a_resume_clears_the_end() {
        let events = vec![
            at(1, SwarmEvent::TaskFailed { task: "a".into(), reason: "no".into() }),
            at(2, SwarmEvent::TaskBlocked { task: "b".into(), by: "a".into() }),
            at(
                3,
                SwarmEvent::RunFinished {
                    state: RunEnd::Failed,
                    branch: "kestrel/r".into(),
                    land: "git merge kestrel/r".into(),
                    cost_usd: 0.0,
                },
            ),
        ];
        let view = RunView::fold("r", &graph(), &events);
        assert_eq!(view.ended, Some(RunEnd::Failed));
        assert_eq!(view.task("b").unwrap().state, TaskState::Blocked);
        let mut more = events;
        more.push(at(4, SwarmEvent::RunResumed { run: "r".into() }));
        more.push(at(5, SwarmEvent::TaskRetried { task: "a".into(), attempts: 2 }));
        more.push(at(6, SwarmEvent::TaskRetried { task: "b".into(), attempts: 0 }));
        let view = RunView::fold("r", &graph(), &more);
        assert_eq!(view.ended, None);
        assert_eq!(view.task("a").unwrap().state, TaskState::Ready);
        assert_eq!(view.task("a").unwrap().max_attempts, 2);
        assert_eq!(view.task("b").unwrap().state, TaskState::Waiting);
    }
}
