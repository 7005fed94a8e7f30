//! One job from submission to its end: its log read as it grows (each JSON line handed
//! on, the node's result line kept), its deadline kept, a cancel or a dropped future
//! stopping it, and a job lost on the way (a node gone, stopped by someone else, unknown
//! to a restarted cluster) submitted once more.

use super::RayExecutor;
use super::jobs::{JobRequest, RuntimeEnv};
use super::spec::{JobResult, RESULT_TYPE};
use crate::SwarmError;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often a running job is looked at.
const POLL: Duration = Duration::from_millis(500);
/// Failed looks in a row (the API unreachable) before the run gives up on the job.
const MAX_POLL_ERRORS: u32 = 120;
/// Submissions of one job: the first and one retry.
const TRIES: u32 = 2;

/// How a job ended.
#[derive(Debug)]
pub enum JobEnd {
    /// The node printed its result.
    Done(JobResult),
    /// Lost (twice): why, each time.
    Lost(String),
    /// Ran past `job_timeout_s` and was stopped.
    TimedOut,
    /// Stopped because the task or run was cancelled.
    Cancelled,
}

/// Stops the job when the future following it is dropped (a cancelled task's driver
/// stops waiting) unless it ended first.
struct StopOnDrop {
    jobs: super::jobs::Jobs,
    id: Option<String>,
    /// The run stops (Ctrl+C, the budget): its jobs go on, for a resume to follow.
    leave: CancellationToken,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(id) = self.id.take().filter(|_| !self.leave.is_cancelled()) {
            let jobs = self.jobs.clone();
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = jobs.stop(&id).await;
                });
            }
        }
    }
}

impl RayExecutor {
    /// Runs job `name` (submission ids `<name>-0`, `<name>-1`): a job of that id that
    /// exists already — submitted by an orchestrator before a resume — is followed, not
    /// submitted again.
    pub(super) async fn run_job(
        &self,
        name: &str,
        spec_ref: &str,
        metadata: BTreeMap<String, String>,
        on_event: &mut (dyn FnMut(&Value) + Send),
        cancel: &CancellationToken,
        leave: &CancellationToken,
    ) -> Result<JobEnd, SwarmError> {
        let mut lost = Vec::new();
        for attempt in 0..TRIES {
            let id = format!("{name}-{attempt}");
            let request = self.request(&id, spec_ref, metadata.clone());
            self.jobs.submit(&request).await?;
            match self.follow(&id, on_event, cancel, leave).await? {
                JobEnd::Lost(why) => lost.push(why),
                // The node could not do its part (a clone, a push, kestrel not starting):
                // another node may.
                JobEnd::Done(JobResult { error: Some(error), .. }) => {
                    lost.push(format!("job {id} failed on its node: {error}"));
                }
                end => return Ok(end),
            }
        }
        Ok(JobEnd::Lost(lost.join("; then ")))
    }

    fn request(&self, id: &str, spec_ref: &str, metadata: BTreeMap<String, String>) -> JobRequest {
        let settings = &self.settings;
        let entrypoint = format!(
            "{} swarm node {} {}",
            shell_quote(&settings.kestrel),
            shell_quote(&settings.remote),
            shell_quote(spec_ref)
        );
        JobRequest {
            entrypoint,
            submission_id: id.to_string(),
            runtime_env: RuntimeEnv { env_vars: settings.env.clone() },
            metadata,
            entrypoint_num_cpus: settings.num_cpus,
            entrypoint_memory: (settings.memory_mb > 0).then(|| settings.memory_mb * 1024 * 1024),
        }
    }

    async fn follow(
        &self,
        id: &str,
        on_event: &mut (dyn FnMut(&Value) + Send),
        cancel: &CancellationToken,
        leave: &CancellationToken,
    ) -> Result<JobEnd, SwarmError> {
        let mut guard =
            StopOnDrop { jobs: self.jobs.clone(), id: Some(id.to_string()), leave: leave.clone() };
        let deadline = Instant::now() + Duration::from_secs(self.settings.job_timeout_s);
        let mut seen = 0usize;
        let mut result: Option<JobResult> = None;
        let mut errors = 0u32;
        loop {
            tokio::select! {
                () = cancel.cancelled() => {
                    guard.id = None;
                    // A stop that fails leaves the job to its deadline; the task is
                    // cancelled either way.
                    let _ = self.jobs.stop(id).await;
                    return Ok(JobEnd::Cancelled);
                }
                () = tokio::time::sleep(POLL) => {}
            }
            // The state first, then the log: a job seen ended has its whole log read.
            // A lost node's log cannot be read (the head answers 500) while its state
            // still can: only the state's failures count against the API.
            if Instant::now() >= deadline {
                guard.id = None;
                let _ = self.jobs.stop(id).await;
                return Ok(JobEnd::TimedOut);
            }
            let info = match self.jobs.info(id).await {
                Ok(info) => info,
                Err(error) => {
                    errors += 1;
                    if errors >= MAX_POLL_ERRORS {
                        return Err(error);
                    }
                    continue;
                }
            };
            errors = 0;
            let mut logs = self.jobs.logs(id).await;
            if info.as_ref().is_some_and(|info| info.status.is_terminal()) {
                // The last read of an ended job's log is the one its result is in.
                for _ in 0..3 {
                    if logs.is_ok() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    logs = self.jobs.logs(id).await;
                }
            }
            let logs = logs.unwrap_or_default();
            if let Some(end) = logs.get(seen..).and_then(|rest| rest.rfind('\n')) {
                for line in logs[seen..seen + end].lines() {
                    let Ok(value) = serde_json::from_str::<Value>(line.trim()) else { continue };
                    if value["type"] == RESULT_TYPE {
                        result = serde_json::from_value(value).ok();
                    } else if value.is_object() {
                        on_event(&value);
                    }
                }
                seen += end + 1;
            }
            let Some(info) = info else {
                guard.id = None;
                return Ok(JobEnd::Lost(format!(
                    "the cluster does not know job {id} (restarted?)"
                )));
            };
            if info.status.is_terminal() {
                guard.id = None;
                return Ok(match result {
                    Some(result) => JobEnd::Done(result),
                    None => JobEnd::Lost(format!(
                        "job {id} ended {:?} without a result: {}",
                        info.status,
                        info.message.unwrap_or_default()
                    )),
                });
            }
        }
    }
}

/// A word for `sh -c`: single-quoted, `'` written as `'\''`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}
