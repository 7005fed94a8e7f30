//! `kestrel worker`: one session as an ACP agent on stdin/stdout, for the daemon (or the
//! exec host) that spawned it. Stdout carries protocol messages only; logs go to stderr.

use kestrel_agent::{Logger, WorkerOptions, run_worker};
use kestrel_model::{ClientOptions, RetryNotice};
use kestrel_protocol::Mode;
use kestrel_store::KestrelHome;
use std::process::ExitCode;
use std::sync::Arc;

pub fn run() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("kestrel worker: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime =
        match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("kestrel worker: cannot start the async runtime: {error}");
                return ExitCode::from(1);
            }
        };
    // Under a daemon (its run dir exists) the worker's tool and MCP process groups are
    // listed where the daemon finds them if this process is killed outright.
    if options.home.run_dir().is_dir() {
        let groups = options.home.worker_groups_file(std::process::id());
        if let Err(error) = kestrel_platform::mirror_groups_to(&groups) {
            eprintln!("kestrel worker: cannot write {}: {error}", groups.display());
        }
    }
    crate::storage_upkeep::clean_up_in_background(options.home.clone(), |line| {
        eprintln!("kestrel worker: {line}");
    });
    runtime.block_on(run_worker(options, tokio::io::stdin(), tokio::io::stdout()));
    kestrel_platform::stop_mirroring_groups();
    // A tool still stuck in a blocking thread must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    ExitCode::SUCCESS
}

fn options() -> Result<WorkerOptions, String> {
    let home = KestrelHome::from_env().map_err(|error| error.to_string())?;
    let mode = match env("KESTREL_MODE") {
        Some(mode) => Some(mode.parse::<Mode>().map_err(|error| format!("KESTREL_MODE: {error}"))?),
        None => None,
    };
    let log: Logger = Arc::new(|line: &str| eprintln!("kestrel worker: {line}"));
    let on_retry = Arc::new(|notice: &RetryNotice| {
        eprintln!(
            "kestrel worker: retrying {} in {:.1}s (try {}/{}): {}",
            notice.url,
            notice.delay.as_secs_f64(),
            notice.attempt,
            notice.max_attempts,
            notice.reason
        );
    });
    let client_options = ClientOptions { on_retry: Some(on_retry), ..ClientOptions::default() };
    Ok(WorkerOptions { home, model: env("KESTREL_MODEL"), mode, client_options, log })
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.trim().is_empty())
}
