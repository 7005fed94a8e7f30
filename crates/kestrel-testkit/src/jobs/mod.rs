//! A scripted Ray Jobs API: the part of Ray 2.60's job server (the dashboard's
//! `/api/jobs/`) that Kestrel's `ray` executor uses, with the same paths, JSON shapes,
//! status codes and messages, checked against a live head. Jobs really run: each
//! entrypoint is `sh -c ENTRYPOINT` in its own session, with `runtime_env.env_vars` added
//! to its environment and its stdout and stderr appended to the job's log, as Ray does.
//! What one machine cannot make Ray show, it can be told to do: lose the node under a job
//! ([`NodeLoss`]). It stands in for a cluster only where a real head cannot show a fault.
//!
//! ```no_run
//! use kestrel_testkit::{JobsServer, NodeLoss};
//! let jobs = JobsServer::start()?;
//! // The second job submitted dies with its node once it printed "working".
//! jobs.lose_node(NodeLoss::of_nth_job(2).once_log_contains("working"));
//! // point [swarm.ray] address at jobs.address(), run the client, then:
//! let first = &jobs.jobs()[0];
//! assert_eq!(first.status, kestrel_testkit::JobStatus::Succeeded);
//! # Ok::<(), std::io::Error>(())
//! ```

mod api;
mod run;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::http::{ReadError, read_request, write_full};
use crate::ids::IdGenerator;
use crate::logged_request::LoggedRequest;
use crate::server_thread::ServerThread;

/// A client that sends nothing for this long is dropped.
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// The status of a job, as Ray names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobStatus {
    /// Submitted, waiting for resources (or, on Ray, for its runtime environment).
    Pending,
    Running,
    /// Stopped through `POST /api/jobs/{id}/stop`.
    Stopped,
    /// The entrypoint exited 0.
    Succeeded,
    /// The entrypoint exited non-zero, could not start, or its node was lost.
    Failed,
}

impl JobStatus {
    /// `PENDING`, `RUNNING`, `STOPPED`, `SUCCEEDED` or `FAILED`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Pending => "PENDING",
            JobStatus::Running => "RUNNING",
            JobStatus::Stopped => "STOPPED",
            JobStatus::Succeeded => "SUCCEEDED",
            JobStatus::Failed => "FAILED",
        }
    }

    /// Stopped, succeeded or failed: the status will not change again.
    pub fn is_terminal(self) -> bool {
        match self {
            JobStatus::Stopped | JobStatus::Succeeded | JobStatus::Failed => true,
            JobStatus::Pending | JobStatus::Running => false,
        }
    }
}

/// How to start a [`JobsServer`]: the one node it simulates.
#[derive(Debug, Clone)]
pub struct JobsOptions {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// CPUs of the node: a job waits in `PENDING` until its `entrypoint_num_cpus` fit
    /// beside the running jobs' (like `ray start --num-cpus`). Default 4.
    pub num_cpus: f64,
    /// Memory of the node for `entrypoint_memory`, in bytes; `None` (default): unlimited.
    pub memory_bytes: Option<u64>,
    /// Where entrypoints run; default the system temp dir (Ray's workers run in `/tmp`).
    pub working_dir: PathBuf,
    /// Variables of the node's own environment, added before the job's `env_vars`
    /// (the test process's environment is inherited, as a node inherits `ray start`'s).
    pub node_env: Vec<(String, String)>,
}

impl Default for JobsOptions {
    fn default() -> JobsOptions {
        JobsOptions {
            port: 0,
            num_cpus: 4.0,
            memory_bytes: None,
            working_dir: std::env::temp_dir(),
            node_env: Vec::new(),
        }
    }
}

/// A scripted loss of the node under one job: its process group is SIGKILLed and the job
/// ends `FAILED` with Ray's message for a dead node ("Job supervisor actor died: ... The
/// actor died because its node has died ..."); from the loss on, its logs answer HTTP 500
/// (Ray's head cannot reach the dead node's agent) and a stop answers `{"stopped": false}`.
/// Each loss happens once, to the first job it selects among those submitted after it was
/// scheduled with [`JobsServer::lose_node`].
pub struct NodeLoss {
    selector: Selector,
    trigger: Trigger,
    detected_after: Duration,
}

enum Selector {
    /// The n-th accepted submission of the server's life (1-based).
    Nth(usize),
    Matching(Box<dyn Fn(&str) -> bool + Send + Sync>),
}

#[derive(Clone)]
enum Trigger {
    AtStart,
    LogContains(String),
}

impl NodeLoss {
    /// The node of the `n`-th job the server accepts (1-based, counting every accepted
    /// submission since it started), as soon as its entrypoint runs.
    pub fn of_nth_job(n: usize) -> NodeLoss {
        NodeLoss {
            selector: Selector::Nth(n),
            trigger: Trigger::AtStart,
            detected_after: Duration::ZERO,
        }
    }

    /// The node of the first job whose submission id satisfies `matches`, as soon as its
    /// entrypoint runs.
    pub fn of_job_where(matches: impl Fn(&str) -> bool + Send + Sync + 'static) -> NodeLoss {
        NodeLoss {
            selector: Selector::Matching(Box::new(matches)),
            trigger: Trigger::AtStart,
            detected_after: Duration::ZERO,
        }
    }

    /// Loses the node once the job's log holds `text` (looked for every 20 ms), so the
    /// client has seen the job start working.
    pub fn once_log_contains(mut self, text: impl Into<String>) -> NodeLoss {
        self.trigger = Trigger::LogContains(text.into());
        self
    }

    /// The job stays `RUNNING` for `delay` after its processes died (its logs already
    /// failing), as on Ray, where the head notices a dead node by missed health checks
    /// (about 16 s on Ray 2.60's defaults). Default: at once.
    pub fn detected_after(mut self, delay: Duration) -> NodeLoss {
        self.detected_after = delay;
        self
    }

    fn selects(&self, ordinal: usize, submission_id: &str) -> bool {
        match &self.selector {
            Selector::Nth(n) => *n == ordinal,
            Selector::Matching(matches) => matches(submission_id),
        }
    }
}

impl std::fmt::Debug for NodeLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let selector = match &self.selector {
            Selector::Nth(n) => format!("job #{n}"),
            Selector::Matching(_) => "a job matching a predicate".to_owned(),
        };
        let trigger = match &self.trigger {
            Trigger::AtStart => "at start".to_owned(),
            Trigger::LogContains(text) => format!("once its log holds {text:?}"),
        };
        write!(f, "NodeLoss({selector}, {trigger}, detected after {:?})", self.detected_after)
    }
}

/// What the server knows of one job, for tests to assert on.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSnapshot {
    pub submission_id: String,
    pub entrypoint: String,
    pub status: JobStatus,
    /// Ray's message for the status (e.g. "Job finished successfully.").
    pub message: String,
    /// The submission's `metadata`.
    pub metadata: BTreeMap<String, String>,
    /// The submission's `runtime_env.env_vars`.
    pub env_vars: BTreeMap<String, String>,
    pub entrypoint_num_cpus: Option<f64>,
    pub entrypoint_memory: Option<u64>,
    /// The entrypoint's exit code once it exited by itself (`None` when stopped or lost).
    pub driver_exit_code: Option<i32>,
    /// Whether a stop was asked for while the job was not yet terminal.
    pub stop_requested: bool,
    /// Whether a scripted [`NodeLoss`] hit it.
    pub node_lost: bool,
    /// The job's log as `GET /api/jobs/{id}/logs` gives it while the node is up.
    pub logs: String,
}

/// A fake Ray head's Jobs API on 127.0.0.1. Dropping it stops it, kills every job's
/// processes and removes the logs.
pub struct JobsServer {
    address: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<ServerThread>,
}

impl JobsServer {
    /// Starts with [`JobsOptions::default`] on its own thread and tokio runtime, so sync
    /// and async tests can use it. Fails if the socket, the log directory or the thread
    /// cannot be set up.
    pub fn start() -> std::io::Result<JobsServer> {
        JobsServer::start_with(JobsOptions::default())
    }

    /// [`JobsServer::start`] with a chosen port, node size, working directory or node
    /// environment.
    pub fn start_with(options: JobsOptions) -> std::io::Result<JobsServer> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, options.port))?;
        let address = listener.local_addr()?;
        let log_dir = std::env::temp_dir().join(format!(
            "kestrel-jobs-{}-{}-{}",
            std::process::id(),
            address.port(),
            SERVERS.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&log_dir)?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            options,
            address,
            log_dir,
            ids: IdGenerator::default(),
            runtime: runtime.handle().clone(),
        });
        let thread_shared = Arc::clone(&shared);
        // Dropping the runtime, when the thread ends, drops every job's task, whose process
        // group is then killed (kestrel_platform::ProcessGroup's Drop).
        let thread = ServerThread::start("scripted-jobs", listener, runtime, move |stream| {
            serve_connection(stream, Arc::clone(&thread_shared))
        })?;
        Ok(JobsServer { address, shared, thread: Some(thread) })
    }

    /// `http://127.0.0.1:PORT`: what goes into `[swarm.ray] address`.
    pub fn address(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The socket address it listens on.
    pub fn socket_address(&self) -> SocketAddr {
        self.address
    }

    /// Schedules a node loss (see [`NodeLoss`]); several may wait at once.
    pub fn lose_node(&self, loss: NodeLoss) {
        self.shared.lock().losses.push(loss);
    }

    /// Loses the node under the job `submission_id` now. False when there is no such job
    /// or it is not running.
    pub fn lose_node_now(&self, submission_id: &str) -> bool {
        let state = self.shared.lock();
        match state.jobs.get(submission_id) {
            Some(job) if job.status == JobStatus::Running && !job.node_lost => job
                .control
                .as_ref()
                .is_some_and(|control| control.send(run::Control::LoseNode).is_ok()),
            _ => false,
        }
    }

    /// Every job not deleted, in submission order.
    pub fn jobs(&self) -> Vec<JobSnapshot> {
        let state = self.shared.lock();
        let mut jobs: Vec<&Job> = state.jobs.values().collect();
        jobs.sort_by_key(|job| job.ordinal);
        jobs.into_iter().map(|job| self.shared.snapshot(job)).collect()
    }

    /// One job, unless it does not exist (or was deleted).
    pub fn job(&self, submission_id: &str) -> Option<JobSnapshot> {
        let state = self.shared.lock();
        state.jobs.get(submission_id).map(|job| self.shared.snapshot(job))
    }

    /// Waits up to `timeout` for the job to exist and satisfy `done`; returns its last
    /// snapshot either way (`None` if it never existed).
    pub fn wait_for(
        &self,
        submission_id: &str,
        timeout: Duration,
        done: impl Fn(&JobSnapshot) -> bool,
    ) -> Option<JobSnapshot> {
        let deadline = Instant::now() + timeout;
        loop {
            let job = self.job(submission_id);
            if job.as_ref().is_some_and(&done) || Instant::now() >= deadline {
                return job;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every request so far, in arrival order (deleted jobs' included).
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.lock().requests.clone()
    }
}

impl Drop for JobsServer {
    fn drop(&mut self) {
        // Stops the jobs before their logs go.
        drop(self.thread.take());
        let _ = std::fs::remove_dir_all(&self.shared.log_dir);
    }
}

impl std::fmt::Debug for JobsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobsServer").field("address", &self.address).finish()
    }
}

/// Makes every server's log directory distinct within one process.
static SERVERS: AtomicU64 = AtomicU64::new(0);

struct Shared {
    state: Mutex<State>,
    options: JobsOptions,
    address: SocketAddr,
    log_dir: PathBuf,
    ids: IdGenerator,
    runtime: tokio::runtime::Handle,
}

#[derive(Default)]
struct State {
    jobs: BTreeMap<String, Job>,
    /// Accepted submissions so far (deleted ones too): the next job's ordinal - 1.
    submitted: usize,
    losses: Vec<NodeLoss>,
    /// Node losses so far: a lost node is replaced, so later jobs run on a new node id.
    nodes_lost: u64,
    requests: Vec<LoggedRequest>,
}

/// One job: what was submitted and where it stands.
struct Job {
    ordinal: usize,
    submission: api::Submission,
    status: JobStatus,
    message: String,
    error_type: Option<&'static str>,
    start_time: u64,
    end_time: Option<u64>,
    driver_exit_code: Option<i32>,
    /// Set once the entrypoint started: the node it runs on.
    driver_node: Option<String>,
    stop_requested: bool,
    node_lost: bool,
    loss: Option<(Trigger, Duration)>,
    log_path: PathBuf,
    /// Talks to the job's task once it runs.
    control: Option<mpsc::UnboundedSender<run::Control>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not take the server down with it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn snapshot(&self, job: &Job) -> JobSnapshot {
        JobSnapshot {
            submission_id: job.submission.submission_id.clone(),
            entrypoint: job.submission.entrypoint.clone(),
            status: job.status,
            message: job.message.clone(),
            metadata: job.submission.metadata.clone().unwrap_or_default(),
            env_vars: job.submission.env_vars.clone(),
            entrypoint_num_cpus: job.submission.entrypoint_num_cpus,
            entrypoint_memory: job.submission.entrypoint_memory,
            driver_exit_code: job.driver_exit_code,
            stop_requested: job.stop_requested,
            node_lost: job.node_lost,
            logs: run::read_log(&job.log_path),
        }
    }

    /// The node id jobs started now run on (56 hex digits, like Ray's).
    fn node_id(&self, state: &State) -> String {
        format!("{:056x}", (u64::from(self.address.port()) << 32) | (state.nodes_lost + 1))
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let (read_half, mut writer) = stream.into_split();
    let mut reader = BufReader::new(read_half);
    let read = tokio::time::timeout(REQUEST_READ_TIMEOUT, read_request(&mut reader, &mut writer));
    let response = match read.await {
        Ok(Ok(Some(request))) => {
            let logged = LoggedRequest {
                method: request.method.clone(),
                path: request.target.clone(),
                headers: request.headers.clone(),
                body: serde_json::from_slice(&request.body).unwrap_or(serde_json::Value::Null),
            };
            shared.lock().requests.push(logged);
            api::respond(&shared, &request)
        }
        Ok(Ok(None) | Err(ReadError::Io(_))) | Err(_) => return,
        Ok(Err(error @ (ReadError::Malformed(_) | ReadError::TooLarge(_)))) => {
            let status = if matches!(error, ReadError::TooLarge(_)) { 413 } else { 400 };
            api::Response::text(status, format!("{status}: {error}"))
        }
    };
    let headers = vec![("content-type".to_owned(), response.content_type.to_owned())];
    let _ = write_full(&mut writer, response.status, &headers, response.body.as_bytes()).await;
    let _ = writer.shutdown().await;
}
