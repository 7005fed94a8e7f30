//! Running jobs: admission by the node's free CPUs and memory, then one tokio task per job
//! that runs `/bin/sh -c ENTRYPOINT` as the leader of its own session (Ray's
//! `start_new_session=True`) with stdout and stderr appended to the job's log file, and
//! ends it as Ray does: by its exit code, by a stop (SIGTERM, SIGKILL after 3 s), or by a
//! scripted node loss (SIGKILL, then FAILED with Ray's dead-node message).

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kestrel_platform::{ProcessGroup, Signal, exit_signal, spawn_group};
use tokio::sync::mpsc;

use super::api::{self, Submission};
use super::{Job, JobStatus, Shared, State, Trigger};

/// What a job's task is told from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Control {
    Stop,
    LoseNode,
}

/// Ray's grace between SIGTERM and SIGKILL on a stop (`RAY_JOB_STOP_WAIT_TIME_S`).
const STOP_GRACE: Duration = Duration::from_secs(3);
/// How often a job with a `once_log_contains` loss looks at its log.
const LOG_POLL: Duration = Duration::from_millis(20);
/// Ray's tail of the log in a failed job's message (`NUM_LOG_LINES_ON_ERROR`, `MAX_LOG_SIZE`).
const TAIL_LINES: usize = 10;
const TAIL_CHARS: usize = 20_000;

/// Takes a submission that passed the request checks: `PENDING`, or `FAILED` at once when
/// its runtime environment is one Ray's supervisor could not start with.
pub(super) fn accept(shared: &Arc<Shared>, state: &mut State, mut submission: Submission) {
    state.submitted += 1;
    let ordinal = state.submitted;
    let id = submission.submission_id.clone();
    let loss = state
        .losses
        .iter()
        .position(|loss| loss.selects(ordinal, &id))
        .map(|index| state.losses.remove(index))
        .map(|loss| (loss.trigger, loss.detected_after));
    // Named by ordinal: a submission id may hold anything.
    let log_path = shared.log_dir.join(format!("job-driver-{ordinal}.log"));
    let now = now_ms();
    let _ = std::fs::write(
        &log_path,
        format!("{}\tINFO job_manager.py:581 -- Runtime env is setting up.\n", log_timestamp(now)),
    );
    let env_vars = api::env_vars(submission.runtime_env.as_ref());
    submission.env_vars = env_vars.clone().unwrap_or_default();
    let mut job = Job {
        ordinal,
        message: pending_message(&submission),
        submission,
        status: JobStatus::Pending,
        error_type: None,
        start_time: now,
        end_time: None,
        driver_exit_code: None,
        driver_node: None,
        stop_requested: false,
        node_lost: false,
        loss,
        log_path,
        control: None,
    };
    if let Err(error) = env_vars {
        let message = format!(
            "Failed to start supervisor actor {id}: '{error}'. Full traceback:\n\
             Traceback (most recent call last):\n  File \"scripted Jobs API (kestrel-testkit)\"\n"
        );
        finish(
            &mut job,
            JobStatus::Failed,
            Some(message),
            Some("JOB_SUPERVISOR_ACTOR_START_FAILURE"),
        );
    }
    state.jobs.insert(id, job);
    schedule(shared, state);
}

/// Ray's message for a job that has not started.
fn pending_message(submission: &Submission) -> String {
    let mut message = "Job has not started yet.".to_owned();
    if submission.asks_for_resources() {
        message.push_str(
            " It may be waiting for resources (CPUs, GPUs, memory, custom resources) to become available.",
        );
    }
    if submission.runtime_env.as_ref().is_some_and(|env| !env.is_empty()) {
        message.push_str(" It may be waiting for the runtime environment to be set up.");
    }
    message
}

/// Moves the job to a terminal status with Ray's message for it unless one is given.
pub(super) fn finish(
    job: &mut Job,
    status: JobStatus,
    message: Option<String>,
    error_type: Option<&'static str>,
) {
    job.message = message.unwrap_or_else(|| {
        match status {
            JobStatus::Stopped => "Job was intentionally stopped.",
            JobStatus::Succeeded => "Job finished successfully.",
            JobStatus::Failed => "Job failed.",
            JobStatus::Pending | JobStatus::Running => "",
        }
        .to_owned()
    });
    job.status = status;
    job.error_type = error_type;
    job.end_time = Some(now_ms());
}

/// Starts every waiting job that fits beside the running ones, oldest first (a smaller
/// job may pass a bigger one, as on Ray). A job asking for GPUs or custom resources never
/// fits this node and waits, as on a Ray cluster without them.
pub(super) fn schedule(shared: &Arc<Shared>, state: &mut State) {
    let node = shared.node_id(state);
    let holds = |job: &Job| job.control.is_some() && !job.status.is_terminal();
    let mut free_cpus = shared.options.num_cpus
        - state
            .jobs
            .values()
            .filter(|job| holds(job))
            .map(|job| job.submission.entrypoint_num_cpus.unwrap_or(0.0))
            .sum::<f64>();
    let mut free_memory = shared.options.memory_bytes.map(|total| {
        total.saturating_sub(
            state
                .jobs
                .values()
                .filter(|job| holds(job))
                .map(|job| job.submission.entrypoint_memory.unwrap_or(0))
                .sum::<u64>(),
        )
    });
    let mut waiting: Vec<&mut Job> = state
        .jobs
        .values_mut()
        .filter(|job| job.status == JobStatus::Pending && job.control.is_none())
        .collect();
    waiting.sort_by_key(|job| job.ordinal);
    for job in waiting {
        let submission = &job.submission;
        let cpus = submission.entrypoint_num_cpus.unwrap_or(0.0);
        let memory = submission.entrypoint_memory.unwrap_or(0);
        let only_cpus_and_memory = submission.entrypoint_num_gpus.is_none_or(|gpus| gpus <= 0.0)
            && submission
                .entrypoint_resources
                .as_ref()
                .is_none_or(|resources| resources.is_empty());
        let memory_fits = free_memory.is_none_or(|free| memory <= free);
        if !only_cpus_and_memory || cpus > free_cpus || !memory_fits {
            continue;
        }
        free_cpus -= cpus;
        if let Some(free) = free_memory.as_mut() {
            *free -= memory;
        }
        let (control, receiver) = mpsc::unbounded_channel();
        job.control = Some(control);
        let id = job.submission.submission_id.clone();
        shared.runtime.spawn(supervise(Arc::clone(shared), id, node.clone(), receiver));
    }
}

/// How a running entrypoint ended.
enum Outcome {
    Exited(std::io::Result<ExitStatus>),
    Stopped,
    /// Its node was lost; the head notices after this long.
    Lost(Duration),
}

async fn supervise(
    shared: Arc<Shared>,
    id: String,
    node: String,
    mut control: mpsc::UnboundedReceiver<Control>,
) {
    let plan = {
        let state = shared.lock();
        let Some(job) = state.jobs.get(&id) else { return };
        (job.submission.clone(), job.log_path.clone(), job.loss.clone())
    };
    let (submission, log_path, loss) = plan;
    // A stop that came between admission and now: it never runs.
    if let Ok(Control::Stop) = control.try_recv() {
        end(&shared, &id, |job| finish(job, JobStatus::Stopped, None, None));
        return;
    }
    let mut group = match start(&shared, &submission, &log_path) {
        Ok(group) => group,
        Err(error) => {
            let message = format!(
                "Traceback (most recent call last):\n  File \"scripted Jobs API (kestrel-testkit)\"\n\
                 OSError: cannot start /bin/sh: {error}\n"
            );
            end(&shared, &id, |job| {
                finish(
                    job,
                    JobStatus::Failed,
                    Some(message),
                    Some("JOB_ENTRYPOINT_COMMAND_START_ERROR"),
                );
            });
            return;
        }
    };
    {
        let mut state = shared.lock();
        let Some(job) = state.jobs.get_mut(&id) else { return };
        job.status = JobStatus::Running;
        job.message = "Job is currently running.".to_owned();
        job.driver_node = Some(node.clone());
    }
    let outcome = drive(&shared, &id, &mut group, &mut control, loss, &log_path).await;
    match outcome {
        Outcome::Exited(Ok(status)) => {
            // Python's Popen: a negative return code for a signal.
            let code =
                status.code().or_else(|| exit_signal(&status).map(|signal| -signal)).unwrap_or(-1);
            let tail = log_tail(&log_path);
            end(&shared, &id, |job| {
                job.driver_exit_code = Some(code);
                if code == 0 {
                    finish(job, JobStatus::Succeeded, None, None);
                } else {
                    let message = format!(
                        "Job entrypoint command failed with exit code {code}, last available logs \
                         (truncated to 20,000 chars):\n{tail}"
                    );
                    finish(
                        job,
                        JobStatus::Failed,
                        Some(message),
                        Some("JOB_ENTRYPOINT_COMMAND_ERROR"),
                    );
                }
            });
        }
        Outcome::Exited(Err(error)) => {
            let message = format!("Unexpected error occurred: {error}");
            end(&shared, &id, |job| {
                finish(
                    job,
                    JobStatus::Failed,
                    Some(message),
                    Some("JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE"),
                );
            });
        }
        Outcome::Stopped => end(&shared, &id, |job| finish(job, JobStatus::Stopped, None, None)),
        Outcome::Lost(detected_after) => {
            tokio::time::sleep(detected_after).await;
            let pid = group.id();
            end(&shared, &id, |job| {
                let message = lost_node_message(&id, job.ordinal, pid, &node);
                finish(job, JobStatus::Failed, Some(message), Some("JOB_SUPERVISOR_ACTOR_DIED"));
            });
        }
    }
}

/// Applies `change` to the job (if it still exists) and lets waiting jobs take what it held.
fn end(shared: &Arc<Shared>, id: &str, change: impl FnOnce(&mut Job)) {
    let mut state = shared.lock();
    if let Some(job) = state.jobs.get_mut(id) {
        change(job);
    }
    schedule(shared, &mut state);
}

/// Appends Ray's "Running entrypoint" line and spawns the entrypoint, its output going to
/// the log file.
fn start(
    shared: &Shared,
    submission: &Submission,
    log_path: &Path,
) -> std::io::Result<ProcessGroup> {
    use std::io::Write as _;
    let mut log = std::fs::OpenOptions::new().append(true).open(log_path)?;
    writeln!(
        log,
        "Running entrypoint for job {}: {}",
        submission.submission_id, submission.entrypoint
    )?;
    let mut command = tokio::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(&submission.entrypoint)
        .current_dir(&shared.options.working_dir)
        .envs(shared.options.node_env.iter().map(|(key, value)| (key, value)))
        .env("PYTHONUNBUFFERED", "1")
        .env("RAY_ADDRESS", format!("127.0.0.1:{}", shared.address.port()))
        .envs(&submission.env_vars)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    spawn_group(&mut command)
}

/// Waits for the entrypoint to end, to be stopped or to lose its node.
async fn drive(
    shared: &Shared,
    id: &str,
    group: &mut ProcessGroup,
    control: &mut mpsc::UnboundedReceiver<Control>,
    loss: Option<(Trigger, Duration)>,
    log_path: &Path,
) -> Outcome {
    let (watch_for, detected_after) = match loss {
        Some((Trigger::AtStart, delay)) => return lose(shared, id, group, delay).await,
        Some((Trigger::LogContains(text), delay)) => (Some(text), delay),
        None => (None, Duration::ZERO),
    };
    let mut ticker = tokio::time::interval(LOG_POLL);
    let mut listening = true;
    loop {
        tokio::select! {
            status = group.wait() => return Outcome::Exited(status),
            command = control.recv(), if listening => match command {
                Some(Control::Stop) => {
                    let _ = group.terminate(STOP_GRACE).await;
                    return Outcome::Stopped;
                }
                Some(Control::LoseNode) => return lose(shared, id, group, detected_after).await,
                None => listening = false,
            },
            _ = ticker.tick(), if watch_for.is_some() => {
                if let Some(text) = &watch_for
                    && read_log(log_path).contains(text.as_str())
                {
                    return lose(shared, id, group, detected_after).await;
                }
            }
        }
    }
}

/// The node dies: every process of the job at once; from now on its logs are unreachable.
async fn lose(
    shared: &Shared,
    id: &str,
    group: &mut ProcessGroup,
    detected_after: Duration,
) -> Outcome {
    let _ = group.signal(Signal::Kill);
    let _ = group.wait().await;
    let mut state = shared.lock();
    state.nodes_lost += 1;
    if let Some(job) = state.jobs.get_mut(id) {
        job.node_lost = true;
    }
    Outcome::Lost(detected_after)
}

/// What Ray 2.60 reports for a job whose node died (measured on a two-node cluster whose
/// worker node was SIGKILLed), with this server's ids.
fn lost_node_message(id: &str, ordinal: usize, pid: u32, node: &str) -> String {
    format!(
        "Job supervisor actor died: The actor died unexpectedly before finishing this task.\n\
         \tclass_name: JobSupervisor\n\tactor_id: {ordinal:032x}\n\tpid: {pid}\n\
         \tname: _ray_internal_job_actor_{id}\n\tnamespace: SUPERVISOR_ACTOR_RAY_NAMESPACE\n\
         \tip: 127.0.0.1\nThe actor died because its node has died. Node Id: {node}\n\
         \tthe actor's node was terminated unexpectedly: health check failed due to missing too many heartbeats"
    )
}

/// The job's log file as text (empty when it is gone).
pub(super) fn read_log(path: &Path) -> String {
    std::fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// The last lines of the log, as Ray quotes them in a failed job's message.
fn log_tail(path: &Path) -> String {
    let log = read_log(path);
    let lines: Vec<&str> = log.split_inclusive('\n').collect();
    let tail: String = lines[lines.len().saturating_sub(TAIL_LINES)..].concat();
    let skip = tail.chars().count().saturating_sub(TAIL_CHARS);
    tail.chars().skip(skip).collect()
}

fn now_ms() -> u64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}

/// `YYYY-MM-DD HH:MM:SS,mmm` (UTC), the time format of Ray's log lines.
fn log_timestamp(ms: u64) -> String {
    let seconds = ms / 1000;
    let days = i64::try_from(seconds / 86_400).unwrap_or(0);
    let in_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02},{:03}",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60,
        ms % 1000
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_ray_log_times() {
        assert_eq!(log_timestamp(0), "1970-01-01 00:00:00,000");
        // 2026-12-02 10:41:15.050 UTC, a start_time a live head reported.
        assert_eq!(log_timestamp(1_796_208_075_050), "2026-12-02 10:41:15,050");
        assert_eq!(log_timestamp(951_782_400_000), "2000-02-29 00:00:00,000");
    }
}
