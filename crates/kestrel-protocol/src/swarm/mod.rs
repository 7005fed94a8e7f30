//! The swarm's shared types (ARCHITECTURE §10): the task graph and its validation, the
//! run's events, and the state they fold into. Here, not in kestrel-swarm, so the store,
//! the TUI and the worker's role tools read runs without depending on the orchestrator.

mod climb;
mod event;
mod graph;
mod state;
mod tools;

pub use climb::{
    BaselinePoint, ClimbSettings, ClimbView, Decision, DiffSize, Direction, EXPERIMENTS_TOOL,
    ExperimentResult, ExperimentSpec, ExperimentView, KEEP_ALPHA, MAX_LOOKS, MIN_RUNS,
    MIN_STANDARD_ERRORS, PROMISING, RunKind, SwarmExperiments, first_line, keep_rule, median,
    number, short_commit, spread,
};
pub use event::{
    FailedStage, MERGE_TRAILER, NOTHING_TO_LAND, RunEnd, SwarmEntry, SwarmEvent, SwarmRole,
    SwarmSessionTag, TurnUsage, integration_branch, task_branch,
};
pub use graph::{MAX_TASK_ID_LEN, SwarmGraph, SwarmPlan, TaskSpec, valid_task_id};
pub use state::{AttemptFailure, RoleSession, RunState, RunView, TaskState, TaskView};
pub use tools::{PLAN_TOOL, REVIEW_TOOL, SwarmReview};
