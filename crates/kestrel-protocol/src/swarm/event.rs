//! The events of a swarm run: one JSON object per line of `events.jsonl` (append-only),
//! also what `kestrel swarm run --json` prints. The table in docs/swarm.md is this enum.
//! Readers accept fields they do not know and skip a torn last line.

use super::climb::{Decision, DiffSize, Direction, ExperimentSpec, RunKind};
use crate::{Mode, SessionId, Timestamp};
use serde::{Deserialize, Serialize};

/// One line of `events.jsonl`: the event and when it happened. `type` comes first on
/// the line (`{"type":"run_started","run":…,"ts":…}`), `ts` last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwarmEntry {
    #[serde(flatten)]
    pub event: SwarmEvent,
    pub ts: Timestamp,
}

impl SwarmEntry {
    pub fn now(event: SwarmEvent) -> Self {
        Self { ts: Timestamp::now(), event }
    }
}

/// A role that runs a session (the verifier runs commands, not a model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SwarmRole {
    Planner,
    Implementer,
    Reviewer,
}

impl SwarmRole {
    pub fn as_str(self) -> &'static str {
        match self {
            SwarmRole::Planner => "planner",
            SwarmRole::Implementer => "implementer",
            SwarmRole::Reviewer => "reviewer",
        }
    }

    /// The mode a session of this role runs in unless its creator chose one: the
    /// implementer writes (confined by the sandbox to its worktree), the others only read.
    pub fn default_mode(self) -> Mode {
        match self {
            SwarmRole::Planner | SwarmRole::Reviewer => Mode::ReadOnly,
            SwarmRole::Implementer => Mode::Auto,
        }
    }
}

/// What marks a session as a swarm role: `_meta.kestrel.swarm` of its `session/new`, and
/// `swarm` of its record header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwarmSessionTag {
    pub run: String,
    /// The task (`"plan"` for the planner, which has none).
    pub task: String,
    pub role: SwarmRole,
    pub attempt: u32,
    /// `climb` for the sessions of a climb run (its planner proposes experiments); left
    /// out for a task graph's.
    #[serde(default, skip_serializing_if = "RunKind::is_build")]
    pub kind: RunKind,
}

impl SwarmSessionTag {
    /// The first line of every prompt a role gets.
    pub fn prompt_line(&self) -> String {
        format!(
            "[kestrel swarm] run={} task={} role={} attempt={}",
            self.run,
            self.task,
            self.role.as_str(),
            self.attempt
        )
    }
}

/// Where an attempt stopped short of a merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailedStage {
    /// The implementer's turn failed or changed nothing.
    Implement,
    /// The reviewer rejected it (or gave no verdict).
    Review,
    /// An acceptance command failed in the fresh clone.
    Verify,
    /// Merging into the integration branch conflicted.
    Merge,
    /// The acceptance commands failed on the integration branch after the merge (reverted).
    Integrate,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEnd {
    /// Every task merged.
    Done,
    /// A task failed (its dependents blocked) and nothing else can run.
    Failed,
    Cancelled,
    /// `--max-cost` was reached: no new turn was started.
    Budget,
}

/// Tokens and cost of one role turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
}

impl TurnUsage {
    pub fn add(&mut self, other: &TurnUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
    }
}

/// Everything that happens in a run, in the order it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SwarmEvent {
    /// The first event. `branch` is the integration branch, made from `base_commit`.
    RunStarted {
        run: String,
        repo: String,
        base: String,
        base_commit: String,
        branch: String,
        workdir: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        goal: Option<String>,
        tasks: usize,
        max_parallel: usize,
        max_attempts: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_cost_usd: Option<f64>,
    },
    /// An orchestrator took the run over again (`resume`, `retry`).
    RunResumed {
        run: String,
    },
    /// The planner's graph was accepted (GOAL runs); graph.toml holds it.
    Planned {
        tasks: usize,
    },
    /// The planner gave no valid plan after its prompts.
    PlanFailed {
        reasons: Vec<String>,
    },
    /// A task's attempt began: its implementer is prompted from `base_commit` (the worktree's
    /// HEAD at that moment).
    AttemptStarted {
        task: String,
        attempt: u32,
        branch: String,
        worktree: String,
        base_commit: String,
    },
    /// A role's turn began: its prompt is (about to be) sent to `session`.
    TurnStarted {
        task: String,
        role: SwarmRole,
        attempt: u32,
        session: SessionId,
        model: String,
    },
    /// A role session's turn ended (`stop_reason` as ACP's, or `failed`).
    TurnFinished {
        task: String,
        role: SwarmRole,
        attempt: u32,
        session: SessionId,
        stop_reason: String,
        #[serde(flatten)]
        usage: TurnUsage,
    },
    /// A role session waits for a permission answer (`title` says what for).
    NeedsInput {
        task: String,
        session: SessionId,
        title: String,
    },
    /// The permission was answered (or withdrawn); the role works again.
    InputGiven {
        task: String,
        session: SessionId,
    },
    /// The orchestrator committed the implementer's work.
    Committed {
        task: String,
        attempt: u32,
        commit: String,
    },
    /// The reviewer's verdict (`approve: false` with `findings`; no call: "no verdict").
    Reviewed {
        task: String,
        attempt: u32,
        approve: bool,
        findings: Vec<String>,
    },
    /// The acceptance commands passed in a fresh clone of the task's commit.
    Verified {
        task: String,
        attempt: u32,
        log: String,
    },
    /// The attempt did not make it; the next one (if any) gets `findings`.
    AttemptFailed {
        task: String,
        attempt: u32,
        stage: FailedStage,
        reason: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        findings: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        log: Option<String>,
    },
    /// Merged into the integration branch and checked there.
    Merged {
        task: String,
        attempt: u32,
        commit: String,
    },
    /// The task failed for good (attempts used up, or a failure that no attempt fixes).
    TaskFailed {
        task: String,
        reason: String,
    },
    /// A dependency failed or was cancelled: this task will not run.
    TaskBlocked {
        task: String,
        by: String,
    },
    TaskCancelled {
        task: String,
    },
    /// `kestrel swarm retry`: a failed, blocked or cancelled task gets `attempts` more.
    TaskRetried {
        task: String,
        attempts: u32,
    },
    /// A request from another process (`kestrel swarm cancel`), for a live orchestrator.
    CancelRequested {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
    },
    /// A provider said 429: no new turn starts until `until`.
    RateLimited {
        task: String,
        until: Timestamp,
    },
    /// `--max-cost` reached: no new turn starts.
    BudgetReached {
        cost_usd: f64,
        max_cost_usd: f64,
    },
    /// A climb run's settings (`kestrel swarm climb`), right after `run_started`.
    ClimbStarted {
        metric: String,
        direction: Direction,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        checks: Vec<String>,
        runs: u32,
        max_experiments: u32,
        review: bool,
    },
    /// The metric's runs on a baseline (the integration branch's commit): the first,
    /// and again after each kept experiment's merge.
    BaselineMeasured {
        commit: String,
        values: Vec<f64>,
    },
    /// The baseline could not be measured (a check failed, the metric printed no number).
    BaselineFailed {
        commit: String,
        reason: String,
    },
    /// The climb planner's proposals of one round (each one a task of `graph.toml`).
    ExperimentsProposed {
        round: u32,
        experiments: Vec<ExperimentSpec>,
    },
    /// A climb merged the baseline, which moved since the experiment started, into the
    /// experiment before its measurement: `commit` is what will be measured (the review,
    /// if any, stands: it is not new work).
    BaselineMergedIn {
        task: String,
        attempt: u32,
        commit: String,
    },
    /// One look of an experiment's measurement: K more runs of each side, interleaved,
    /// on these commits (a resumed run goes on from the looks recorded).
    ExperimentMeasured {
        task: String,
        attempt: u32,
        look: u32,
        commit: String,
        baseline_commit: String,
        baseline: Vec<f64>,
        values: Vec<f64>,
    },
    /// An experiment's end: measured against the baseline (interleaved runs of both), or
    /// stopped short of it.
    ExperimentDecided {
        task: String,
        attempt: u32,
        decision: Decision,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        baseline_commit: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        baseline: Vec<f64>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        values: Vec<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p_value: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<DiffSize>,
    },
    /// The run ended; `land` is the command that brings the branch into the user's, or
    /// [`NOTHING_TO_LAND`] when nothing was merged into the branch.
    RunFinished {
        state: RunEnd,
        branch: String,
        land: String,
        cost_usd: f64,
    },
}

impl SwarmEvent {
    /// The task the event is about, if one.
    pub fn task(&self) -> Option<&str> {
        match self {
            SwarmEvent::AttemptStarted { task, .. }
            | SwarmEvent::TurnStarted { task, .. }
            | SwarmEvent::TurnFinished { task, .. }
            | SwarmEvent::NeedsInput { task, .. }
            | SwarmEvent::InputGiven { task, .. }
            | SwarmEvent::Committed { task, .. }
            | SwarmEvent::Reviewed { task, .. }
            | SwarmEvent::Verified { task, .. }
            | SwarmEvent::AttemptFailed { task, .. }
            | SwarmEvent::Merged { task, .. }
            | SwarmEvent::TaskFailed { task, .. }
            | SwarmEvent::TaskBlocked { task, .. }
            | SwarmEvent::TaskCancelled { task }
            | SwarmEvent::TaskRetried { task, .. }
            | SwarmEvent::RateLimited { task, .. }
            | SwarmEvent::BaselineMergedIn { task, .. }
            | SwarmEvent::ExperimentMeasured { task, .. }
            | SwarmEvent::ExperimentDecided { task, .. } => Some(task),
            SwarmEvent::CancelRequested { task } => task.as_deref(),
            SwarmEvent::RunStarted { .. }
            | SwarmEvent::RunResumed { .. }
            | SwarmEvent::Planned { .. }
            | SwarmEvent::PlanFailed { .. }
            | SwarmEvent::BudgetReached { .. }
            | SwarmEvent::ClimbStarted { .. }
            | SwarmEvent::BaselineMeasured { .. }
            | SwarmEvent::BaselineFailed { .. }
            | SwarmEvent::ExperimentsProposed { .. }
            | SwarmEvent::RunFinished { .. } => None,
        }
    }
}

/// The trailer every merge commit of a run carries: `Kestrel-Swarm: <run>/<task>/<attempt>`.
pub const MERGE_TRAILER: &str = "Kestrel-Swarm";

/// `RunFinished`'s `land` when nothing was merged into the integration branch (it is
/// where it started).
pub const NOTHING_TO_LAND: &str = "nothing to land";

/// The integration branch of `run`.
pub fn integration_branch(run: &str) -> String {
    format!("kestrel/{run}")
}

/// The branch of `task` in `run` (not `kestrel/<run>/<task>`: git cannot hold a ref
/// inside another ref's name).
pub fn task_branch(run: &str, task: &str) -> String {
    format!("kestrel/{run}-{task}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_flat_json_with_a_type() {
        let entry = SwarmEntry {
            ts: Timestamp { millis: 0 },
            event: SwarmEvent::TurnFinished {
                task: "parse".into(),
                role: SwarmRole::Reviewer,
                attempt: 2,
                session: SessionId::from_string("s1"),
                stop_reason: "end_turn".into(),
                usage: TurnUsage { input_tokens: 10, output_tokens: 5, cost_usd: 0.5 },
            },
        };
        let line = serde_json::to_string(&entry).unwrap();
        assert_eq!(
            line,
            r#"{"type":"turn_finished","task":"parse","role":"reviewer","attempt":2,"session":"s1","stop_reason":"end_turn","input_tokens":10,"output_tokens":5,"cost_usd":0.5,"ts":"1970-01-01T00:00:00.000Z"}"#
        );
        let back: SwarmEntry = serde_json::from_str(&line).unwrap();
        assert_eq!(back, entry);
        // Fields a newer Kestrel adds are accepted.
        let newer = r#"{"ts":"1970-01-01T00:00:00.000Z","type":"task_cancelled","task":"a","x":1}"#;
        assert!(serde_json::from_str::<SwarmEntry>(newer).is_ok());
    }

    #[test]
    fn the_prompt_line_names_run_task_role_and_attempt() {
        let tag = SwarmSessionTag {
            run: "r1".into(),
            task: "parse".into(),
            role: SwarmRole::Implementer,
            attempt: 3,
            kind: RunKind::Build,
        };
        assert_eq!(
            tag.prompt_line(),
            "[kestrel swarm] run=r1 task=parse role=implementer attempt=3"
        );
    }
}
