//! The `ray` executor (ARCHITECTURE §10 "Beyond one machine"): implementer and reviewer
//! turns and verifications run as jobs on a Ray cluster, submitted through its Jobs API;
//! the scheduler, the event log and the merge stay here. What a job needs travels through
//! the run's git remote (see `remote`), what it did comes back through its log and the
//! remote.

mod follow;
mod jobs;
pub mod node;
mod remote;
mod spec;
mod turn;
mod verify;

pub use turn::run_turn;
pub use verify::verify_commit;

use crate::SwarmError;
use crate::git::Git;
use jobs::Jobs;
use kestrel_store::RaySettings;

/// A run's cluster and remote.
pub struct RayExecutor {
    jobs: Jobs,
    settings: RaySettings,
}

impl RayExecutor {
    /// Checks, before anything is started or written, that the Jobs API answers and the
    /// remote can be read: exit 2 naming what is wrong otherwise.
    pub async fn connect(settings: &RaySettings, repo: &Git) -> Result<RayExecutor, SwarmError> {
        let jobs = Jobs::new(&settings.address)?;
        if let Err(error) = jobs.version().await {
            return Err(SwarmError::Usage(format!(
                "{error}: start Ray there (`ray start --head`) or set [swarm.ray] address"
            )));
        }
        let (readable, output) = repo.output(&["ls-remote", "--heads", &settings.remote]).await?;
        if !readable {
            return Err(SwarmError::Usage(format!(
                "[swarm.ray] remote `{}` cannot be read: {}",
                settings.remote,
                output.stderr.trim()
            )));
        }
        Ok(RayExecutor { jobs, settings: settings.clone() })
    }

    pub fn remote(&self) -> &str {
        &self.settings.remote
    }
}

/// Stops the unfinished jobs of `run` (of its `task` only, when given), for a cancel
/// with no orchestrator alive to do it.
pub async fn stop_jobs(
    settings: &RaySettings,
    run: &str,
    task: Option<&str>,
) -> Result<usize, SwarmError> {
    let jobs = Jobs::new(&settings.address)?;
    let mut stopped = 0;
    for job in jobs.list().await? {
        let meta = job.metadata.unwrap_or_default();
        let ours = meta.get("kestrel_run").is_some_and(|r| r == run)
            && task.is_none_or(|task| meta.get("kestrel_task").is_some_and(|t| t == task));
        if let (true, false, Some(id)) = (ours, job.status.is_terminal(), job.submission_id) {
            jobs.stop(&id).await?;
            stopped += 1;
        }
    }
    Ok(stopped)
}
