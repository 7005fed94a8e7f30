//! How the daemon runs: where its home is, which program it runs as a worker, and its
//! timeouts (config `[agent] idle_worker_minutes`, with env overrides for tests).

use crate::DaemonError;
use kestrel_store::{Config, KestrelHome};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Seconds of no session and no client after which the daemon exits (float allowed).
pub const DAEMON_IDLE_ENV: &str = "KESTREL_DAEMON_IDLE_SECS";
/// Seconds a worker with no client and no turn stays alive; overrides
/// `[agent] idle_worker_minutes` (float allowed, for tests).
pub const WORKER_IDLE_ENV: &str = "KESTREL_WORKER_IDLE_SECS";
/// Bytes that may wait for one slow client before it is cut off (tests make it small).
pub const CLIENT_BACKLOG_ENV: &str = "KESTREL_DAEMON_CLIENT_BACKLOG";
/// The daemon's default idle exit: 10 minutes with no session and no client.
pub const DEFAULT_DAEMON_IDLE: Duration = Duration::from_secs(600);

/// The command a worker is started with: `program args...` (normally `kestrel worker`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The program (the `kestrel` binary itself in production).
    pub program: PathBuf,
    /// Its arguments (`["worker"]`).
    pub args: Vec<OsString>,
}

impl WorkerCommand {
    /// `program worker`, the argv ARCHITECTURE §2 fixes.
    pub fn kestrel(program: PathBuf) -> Self {
        Self { program, args: vec!["worker".into()] }
    }
}

/// Everything the daemon needs to run.
#[derive(Debug, Clone)]
pub struct DaemonSettings {
    /// The home served: its `run/` holds the socket, its `logs/` the logs.
    pub home: KestrelHome,
    /// How a session's worker is started.
    pub worker: WorkerCommand,
    /// Exit after this long with no live session and no client.
    pub idle_exit: Duration,
    /// A worker with no client and no turn in flight is stopped after this long.
    pub worker_idle: Duration,
    /// How long a worker gets to exit after its stdin closes before it is killed.
    pub stop_grace: Duration,
    /// More than this many restarts of one session within `restart_window`: give up.
    pub max_restarts: usize,
    pub restart_window: Duration,
    /// How long a request waits for a starting or restarting worker.
    pub start_timeout: Duration,
    /// Bytes waiting for one client before it is cut off as not reading.
    pub client_backlog_bytes: usize,
}

impl DaemonSettings {
    /// Settings for `home`, running workers with `worker`: `[agent] idle_worker_minutes`
    /// from the user's config (defaults if it cannot be read: the daemon must still
    /// come up), then `KESTREL_DAEMON_IDLE_SECS` and `KESTREL_WORKER_IDLE_SECS`.
    ///
    /// Fails when an override is not a non-negative number of seconds.
    pub fn from_env(home: KestrelHome, worker: WorkerCommand) -> Result<Self, DaemonError> {
        let config = Config::load(&home, home.root()).unwrap_or_default();
        let mut worker_idle =
            Duration::from_secs(config.agent.idle_worker_minutes.saturating_mul(60));
        if let Some(seconds) = seconds_from_env(WORKER_IDLE_ENV)? {
            worker_idle = seconds;
        }
        let idle_exit = seconds_from_env(DAEMON_IDLE_ENV)?.unwrap_or(DEFAULT_DAEMON_IDLE);
        let mut settings = Self { idle_exit, worker_idle, ..Self::new(home, worker) };
        if let Some(value) = std::env::var_os(CLIENT_BACKLOG_ENV) {
            let text = value.to_string_lossy().into_owned();
            settings.client_backlog_bytes = text
                .trim()
                .parse()
                .map_err(|_| DaemonError::BadBytes { variable: CLIENT_BACKLOG_ENV, value: text })?;
        }
        Ok(settings)
    }

    /// Defaults (30 min worker idle, 10 min daemon idle) without reading anything.
    pub fn new(home: KestrelHome, worker: WorkerCommand) -> Self {
        Self {
            home,
            worker,
            idle_exit: DEFAULT_DAEMON_IDLE,
            worker_idle: Duration::from_secs(kestrel_store::DEFAULT_IDLE_WORKER_MINUTES * 60),
            stop_grace: Duration::from_secs(3),
            max_restarts: 3,
            restart_window: Duration::from_secs(60),
            start_timeout: Duration::from_secs(30),
            client_backlog_bytes: crate::client_link::MAX_BACKLOG_BYTES,
        }
    }
}

fn seconds_from_env(variable: &'static str) -> Result<Option<Duration>, DaemonError> {
    let Some(value) = std::env::var_os(variable) else { return Ok(None) };
    let text = value.to_string_lossy().into_owned();
    parse_seconds(&text).map(Some).ok_or(DaemonError::BadSeconds { variable, value: text })
}

/// A non-negative, finite number of seconds, fractions allowed.
pub(crate) fn parse_seconds(text: &str) -> Option<Duration> {
    let seconds: f64 = text.trim().parse().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_accept_fractions_and_refuse_garbage() {
        assert_eq!(parse_seconds("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_seconds(" 30 "), Some(Duration::from_secs(30)));
        assert_eq!(parse_seconds("-1"), None);
        assert_eq!(parse_seconds("soon"), None);
        assert_eq!(parse_seconds("inf"), None);
    }
}
