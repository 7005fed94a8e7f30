//! A session's swarm role (ARCHITECTURE §10), as its record header names it: the lines
//! its system prompt gains and the tools it is offered. Both follow the header, so a
//! role session loaded in a new worker is the same role.

use kestrel_protocol::swarm::{RunKind, SwarmRole, SwarmSessionTag};
use kestrel_tools::ToolRegistry;

/// What the system prompt adds for a role: which role this is and what ends its job.
pub(crate) fn role_note(tag: &SwarmSessionTag) -> String {
    let job = match tag.role {
        SwarmRole::Planner if tag.kind == RunKind::Climb => {
            "You are the planner of a climb: experiments that improve one measured number. \
             Read the repository as needed (you cannot change it) and propose experiments \
             with swarm_experiments; then end your turn."
        }
        SwarmRole::Planner => {
            "You are the planner. Read the repository as needed (you cannot change it) and \
             split the goal into tasks. Your job is done once swarm_plan has accepted your \
             plan; then end your turn."
        }
        SwarmRole::Implementer => {
            "You are the implementer of one task. Make the change by editing files in the \
             working directory and check that the acceptance commands pass. Do not commit, \
             switch branches or push: the orchestrator commits your work when your turn ends."
        }
        SwarmRole::Reviewer => {
            "You are the reviewer of one task's change. Read the code and run read-only \
             commands as needed; never edit anything. Your job is done once you have called \
             swarm_review with your verdict; then end your turn."
        }
    };
    format!(
        "\nYou are a role session of a Kestrel swarm run (run {}, task {}, attempt {}). {job}\n",
        tag.run, tag.task, tag.attempt
    )
}

/// Adds the tools of the tag's role (none for the implementer) to `tools`.
pub(crate) fn add_role_tools(tools: &mut ToolRegistry, tag: &SwarmSessionTag) {
    for tool in kestrel_tools::swarm::role_tools(tag) {
        tools.register(tool);
    }
}
