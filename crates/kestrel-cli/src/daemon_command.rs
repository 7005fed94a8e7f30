//! `kestrel daemon [start|stop|status]`: run the daemon in the foreground (what clients
//! start, detached, on demand), or manage the running one.

use clap::{Args, Subcommand};
use kestrel_daemon::{DaemonSettings, DaemonStatus, WorkerCommand, client};
use kestrel_store::KestrelHome;
use std::process::ExitCode;
use std::time::Duration;

/// How long `stop` waits for the daemon to exit (its workers get a grace period first).
const STOP_WAIT: Duration = Duration::from_secs(15);

#[derive(Args)]
pub struct DaemonArgs {
    #[command(subcommand)]
    action: Option<DaemonAction>,
}

#[derive(Subcommand)]
enum DaemonAction {
    /// Start the daemon in the background if it is not running.
    Start,
    /// Ask the running daemon to stop its workers and exit.
    Stop,
    /// Show whether the daemon runs: pid, socket, sessions (id, worker pid, clients).
    Status {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: DaemonArgs) -> ExitCode {
    let home = match KestrelHome::from_env() {
        Ok(home) => home,
        Err(error) => return fail(&error),
    };
    let runtime =
        match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
            Ok(runtime) => runtime,
            Err(error) => return fail(&error),
        };
    runtime.block_on(async move {
        match args.action {
            None => serve(home).await,
            Some(DaemonAction::Start) => start(&home).await,
            Some(DaemonAction::Stop) => stop(&home).await,
            Some(DaemonAction::Status { json }) => status(&home, json).await,
        }
    })
}

async fn serve(home: KestrelHome) -> ExitCode {
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(error) => return fail(&error),
    };
    let settings = match DaemonSettings::from_env(home, WorkerCommand::kestrel(program)) {
        Ok(settings) => settings,
        Err(error) => return fail(&error),
    };
    match kestrel_daemon::run(settings).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

async fn start(home: &KestrelHome) -> ExitCode {
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(error) => return fail(&error),
    };
    if let Err(error) = client::connect_or_start(home, &program).await {
        return fail(&error);
    }
    match client::endpoint(home).running_pid() {
        Some(pid) => println!("daemon running (pid {pid})"),
        None => println!("daemon running"),
    }
    ExitCode::SUCCESS
}

async fn stop(home: &KestrelHome) -> ExitCode {
    match client::stop(home, STOP_WAIT).await {
        Ok(Some(pid)) => {
            println!("daemon stopped (pid {pid})");
            ExitCode::SUCCESS
        }
        Ok(None) => {
            println!("daemon not running");
            ExitCode::SUCCESS
        }
        Err(error) => fail(&error),
    }
}

/// Exit 0 when running, 3 when not (like `systemctl status`), 1 on errors.
async fn status(home: &KestrelHome, json: bool) -> ExitCode {
    let status = match client::status(home).await {
        Ok(status) => status,
        Err(error) => return fail(&error),
    };
    let Some(status) = status else {
        if json {
            println!("{}", serde_json::json!({"running": false}));
        } else {
            println!("daemon not running");
        }
        return ExitCode::from(3);
    };
    if json {
        let mut value = serde_json::to_value(&status).unwrap_or_default();
        if let serde_json::Value::Object(map) = &mut value {
            map.insert("running".into(), true.into());
        }
        println!("{value}");
    } else {
        print!("{}", describe(&status));
    }
    ExitCode::SUCCESS
}

fn describe(status: &DaemonStatus) -> String {
    let mut text = format!(
        "daemon running (pid {})\nsocket: {}\nclients: {}\nsessions: {}\n",
        status.pid,
        status.socket,
        status.clients,
        status.sessions.len()
    );
    for session in &status.sessions {
        let pid = session.worker_pid.map_or_else(|| "-".to_owned(), |pid| pid.to_string());
        text.push_str(&format!(
            "  {}  {}  worker {}  clients {}  restarts {}\n",
            session.session_id, session.state, pid, session.clients, session.restarts
        ));
    }
    text
}

fn fail(error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("kestrel: {error}");
    ExitCode::from(1)
}
