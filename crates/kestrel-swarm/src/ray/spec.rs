//! What a job on a node is asked to do: `spec.json` in the commit the job's entrypoint
//! names (a prompt with a review diff can be 200 KB, more than one argument may hold).

use kestrel_protocol::swarm::SwarmSessionTag;
use serde::{Deserialize, Serialize};

/// The first field of the last line a node prints: its result.
pub const RESULT_TYPE: &str = "kestrel.swarm.node";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobSpec {
    /// The ref on the remote that holds `commit` (the task branch or a verify ref).
    pub fetch: String,
    /// What the job checks out.
    pub commit: String,
    /// A `NAME=value` file on the node read into the environment of `kestrel exec`.
    #[serde(default)]
    pub env_file: Option<String>,
    /// The run's integration branch, made in the node's clone from the remote's copy (the
    /// reviewer's diff range names it).
    #[serde(default)]
    pub integration: Option<String>,
    pub work: JobWork,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobWork {
    /// One role turn: `kestrel exec --json` with the role's tag.
    Turn {
        tag: SwarmSessionTag,
        model: String,
        prompt: String,
        /// The role's session to continue (its record is on the records ref).
        session: Option<String>,
        /// Where the implementer's commit is pushed (`refs/heads/kestrel/<run>-<task>`);
        /// `None`: nothing is committed (the reviewer).
        push_branch: Option<String>,
        /// The implementer's commit message.
        message: String,
    },
    /// The verifier: setup and acceptance commands in a fresh clone.
    Verify { setup: Vec<String>, acceptance: Vec<String>, timeout_s: u64, network: bool },
}

/// The node's last line: what came of the job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct JobResult {
    #[serde(rename = "type")]
    pub kind: String,
    /// The role's session.
    #[serde(default)]
    pub session: Option<String>,
    /// The implementer's branch tip after the turn.
    #[serde(default)]
    pub commit: Option<String>,
    /// A verification's failure (`None`: it passed) and the failing output.
    #[serde(default)]
    pub verify_failure: Option<String>,
    #[serde(default)]
    pub verify_output: Option<String>,
    /// The whole verification log.
    #[serde(default)]
    pub verify_log: Option<String>,
    /// What went wrong on the node itself (a clone, a push): the job is lost.
    #[serde(default)]
    pub error: Option<String>,
}

/// The ref holding a run's task's session records (ARCHITECTURE §10).
pub fn records_ref(run: &str, task: &str) -> String {
    format!("refs/kestrel/records/{run}/{task}")
}

/// The ref holding a job's spec.
pub fn spec_ref(run: &str, job: &str) -> String {
    format!("refs/kestrel/jobs/{run}/{job}")
}
