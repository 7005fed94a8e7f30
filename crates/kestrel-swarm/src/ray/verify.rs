//! A verification as a Ray job: the commit pushed under `refs/kestrel/verify/`, a node
//! runs the setup and acceptance commands in a fresh clone in its sandbox (the same
//! verifier as the local one), and its log comes back into the run's logs.

use super::RayExecutor;
use super::follow::JobEnd;
use super::remote::push;
use super::spec::{JobSpec, JobWork};
use super::turn::publish_spec;
use crate::SwarmError;
use crate::context::Run;
use crate::verify::Verification;
use kestrel_protocol::swarm::TaskSpec;
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

pub async fn verify_commit(
    run: &Run,
    ray: &RayExecutor,
    task: &TaskSpec,
    commit: &str,
    name: &str,
) -> Result<Verification, SwarmError> {
    let fetch = format!("refs/kestrel/verify/{}/{name}", run.id);
    push(&run.repo, ray.remote(), commit, &fetch, true).await?;
    let graph = run.graph();
    let spec = JobSpec {
        fetch,
        commit: commit.to_string(),
        env_file: None,
        integration: None,
        work: JobWork::Verify {
            setup: graph.setup.clone(),
            acceptance: task.acceptance.clone(),
            timeout_s: run.verify_timeout.as_secs(),
            network: run.network,
        },
    };
    let job = format!("kestrel-{}-{name}", run.id);
    let spec_ref = publish_spec(run, ray, &job, &spec).await?;
    let metadata: BTreeMap<String, String> = [
        ("kestrel_run".to_string(), run.id.clone()),
        ("kestrel_task".to_string(), task.id.clone()),
        ("kestrel_role".to_string(), "verifier".to_string()),
    ]
    .into_iter()
    .collect();
    // A cancelled task drops this future: the job is stopped then (see `follow`).
    let never = CancellationToken::new();
    let end = ray.run_job(&job, &spec_ref, metadata, &mut |_| {}, &never, &run.stop).await?;
    let log = run.logs_dir().join(format!("{name}.log"));
    let failed = |reason: String| Verification {
        failure: Some(reason),
        output: String::new(),
        log: log.clone(),
    };
    let verification = match end {
        JobEnd::Done(result) => match result.error {
            Some(error) => failed(format!("the verification job failed on its node: {error}")),

            None => {
                let text = result.verify_log.unwrap_or_default();
                std::fs::write(&log, text)
                    .map_err(|error| SwarmError::io("cannot write", &log, error))?;
                Verification {
                    failure: result.verify_failure,
                    output: result.verify_output.unwrap_or_default(),
                    log: log.clone(),
                }
            }
        },
        JobEnd::Lost(why) => failed(format!("the verification job was lost twice: {why}")),
        JobEnd::TimedOut => failed(format!(
            "the verification job ran past [swarm.ray] job_timeout_s ({} s) and was stopped",
            ray.settings.job_timeout_s
        )),
        JobEnd::Cancelled => failed("the verification job was cancelled".to_string()),
    };
    Ok(verification)
}
