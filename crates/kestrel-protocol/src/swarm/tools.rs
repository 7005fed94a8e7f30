//! The role tools' names and the reviewer's arguments: the worker offers the tools, the
//! orchestrator finds their calls in the session record by these names and parses their
//! arguments with these types (the planner's are a [`SwarmPlan`](super::SwarmPlan)).

use serde::{Deserialize, Serialize};

/// The planner's tool: its arguments are a [`SwarmPlan`](super::SwarmPlan).
pub const PLAN_TOOL: &str = "swarm_plan";

/// The reviewer's tool: its arguments are a [`SwarmReview`]. The last call of a turn wins.
pub const REVIEW_TOOL: &str = "swarm_review";

/// The arguments of the reviewer's `swarm_review` tool.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwarmReview {
    pub approve: bool,
    /// What must change (on a rejection) or is worth knowing (on an approval).
    #[serde(default)]
    pub findings: Vec<String>,
}
