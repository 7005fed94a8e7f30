//! `kestrel swarm …` (ARCHITECTURE §10): parses the arguments, hands the work to
//! kestrel-swarm, and is the swarm's console: events as JSON lines on stdout with
//! `--json`, short lines on stderr otherwise. `status` and `list` read the run
//! directories through the store. Exit 0 ok, 1 a task failed or the run stopped, 2 usage.

mod climb;

use clap::{Args, Subcommand};
use kestrel_protocol::swarm::{RunState, SwarmEntry};
use kestrel_store::{KestrelHome, RunStatus, SwarmRunDir, list_runs};
use kestrel_swarm::{Console, Input, Launch, RunRequest, SwarmError};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args)]
pub struct SwarmArgs {
    #[command(subcommand)]
    command: SwarmCommand,
}

#[derive(Subcommand)]
enum SwarmCommand {
    /// Run a task graph (--graph FILE) or a goal (a planner writes the graph).
    Run(RunArgs),
    /// Improve a measured number: experiments built, checked and measured against the
    /// baseline; only the ones that beat it beyond noise are merged.
    Climb(climb::ClimbArgs),
    /// Continue a run after a crash, kill or Ctrl+C, exactly where it stopped.
    Resume(ResumeArgs),
    /// Give a failed (or blocked, or cancelled) task new attempts, and continue the run.
    Retry(RetryArgs),
    /// Cancel a run, or one task of it.
    Cancel(CancelArgs),
    /// Show a run's tasks: state, attempt, live session, model, tokens, cost, time.
    Status(StatusArgs),
    /// List runs, newest first.
    List(ListArgs),
    /// What a Ray job runs on a node (the `ray` executor); not for people.
    #[command(hide = true)]
    Node(NodeArgs),
}

#[derive(Args)]
struct NodeArgs {
    /// The run's git remote.
    remote: String,
    /// The ref on it holding the job's spec.
    spec_ref: String,
}

#[derive(Args)]
struct RunArgs {
    /// What to build, when no --graph is given: a planner session splits it into tasks.
    goal: Option<String>,
    /// The task graph (TOML; see docs/swarm.md).
    #[arg(long, conflicts_with = "goal")]
    graph: Option<PathBuf>,
    /// Check the graph and print the order the tasks would run in; start nothing.
    #[arg(long)]
    dry_run: bool,
    /// Run the planner's graph without asking.
    #[arg(long)]
    yes: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct CommonArgs {
    /// The run's events as JSON lines on stdout (the objects of events.jsonl).
    #[arg(long)]
    json: bool,
    /// Start no new role turn once the run has cost this much (US dollars).
    #[arg(long, value_name = "USD")]
    max_cost: Option<f64>,
    /// Role turns at once (default: [swarm] max_parallel).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_parallel: Option<u32>,
}

#[derive(Args)]
struct ResumeArgs {
    /// The run (id or unique prefix).
    run: String,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct RetryArgs {
    run: String,
    task: String,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct CancelArgs {
    run: String,
    /// Only this task (and what depends on it).
    task: Option<String>,
}

#[derive(Args)]
struct StatusArgs {
    /// The run (id or unique prefix); default: the newest.
    run: Option<String>,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Redraw every second until the run is no longer running.
    #[arg(long)]
    watch: bool,
}

#[derive(Args)]
struct ListArgs {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

pub fn run(args: SwarmArgs) -> ExitCode {
    let home = match KestrelHome::from_env() {
        Ok(home) => home,
        Err(error) => return fail(2, &error.to_string()),
    };
    match args.command {
        SwarmCommand::Status(args) => status(&home, args),
        SwarmCommand::List(args) => list(&home, args),
        SwarmCommand::Run(args) => {
            let input = match (args.graph, args.goal) {
                (Some(graph), None) => Input::Graph(graph),
                (None, Some(goal)) => Input::Goal(goal),
                _ => return fail(2, "give a goal or --graph FILE"),
            };
            let Some(launch) = launch(&home, &args.common) else { return ExitCode::from(2) };
            let request = RunRequest { launch, input, dry_run: args.dry_run, yes: args.yes };
            orchestrate(kestrel_swarm::run(request))
        }
        SwarmCommand::Climb(args) => climb::run(&home, args),
        SwarmCommand::Resume(args) => {
            let Some(launch) = launch(&home, &args.common) else { return ExitCode::from(2) };
            orchestrate(async move { kestrel_swarm::resume(launch, &args.run).await })
        }
        SwarmCommand::Retry(args) => {
            let Some(launch) = launch(&home, &args.common) else { return ExitCode::from(2) };
            orchestrate(async move { kestrel_swarm::retry(launch, &args.run, &args.task).await })
        }
        SwarmCommand::Node(args) => {
            let program = match std::env::current_exe() {
                Ok(program) => program,
                Err(error) => return fail(1, &error.to_string()),
            };
            orchestrate(async move {
                Ok(kestrel_swarm::node(&program, &args.remote, &args.spec_ref).await)
            })
        }
        SwarmCommand::Cancel(args) => {
            let common = CommonArgs { json: false, max_cost: None, max_parallel: None };
            let Some(launch) = launch(&home, &common) else { return ExitCode::from(2) };
            orchestrate(async move {
                kestrel_swarm::cancel(launch, &args.run, args.task.as_deref()).await
            })
        }
    }
}

fn launch(home: &KestrelHome, common: &CommonArgs) -> Option<Launch> {
    let (program, cwd) = match (std::env::current_exe(), std::env::current_dir()) {
        (Ok(program), Ok(cwd)) => (program, cwd),
        (Err(error), _) | (_, Err(error)) => {
            eprintln!("kestrel swarm: {error}");
            return None;
        }
    };
    if let Some(cost) = common.max_cost
        && !(cost.is_finite() && cost >= 0.0)
    {
        eprintln!("kestrel swarm: --max-cost must be a number of dollars, 0 or more");
        return None;
    }
    Some(Launch {
        home: home.clone(),
        program,
        cwd,
        console: Arc::new(Terminal { json: common.json }),
        max_cost: common.max_cost,
        max_parallel: common.max_parallel.map(|n| n as usize),
    })
}

fn orchestrate(work: impl Future<Output = Result<i32, SwarmError>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(1, &error.to_string()),
    };
    match runtime.block_on(work) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => fail(u8::try_from(error.exit_code()).unwrap_or(1), &error.to_string()),
    }
}

/// The swarm's console on this process's stdout and stderr.
struct Terminal {
    json: bool,
}

impl Console for Terminal {
    fn event(&self, entry: &SwarmEntry) {
        if self.json {
            if let Ok(line) = serde_json::to_string(entry) {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{line}");
                let _ = stdout.flush();
            }
        } else if let Some(line) = kestrel_swarm::describe(&entry.event) {
            eprintln!("kestrel swarm: {line}");
        }
    }

    fn note(&self, text: &str) {
        eprintln!("kestrel swarm: {text}");
    }

    fn print(&self, text: &str) {
        // With --json, stdout holds events only.
        if self.json {
            eprint!("{text}");
            return;
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }

    fn ask(&self, question: &str) -> Option<bool> {
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return None;
        }
        eprint!("{question} [y/N] ");
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer).ok()?;
        Some(matches!(answer.trim(), "y" | "Y" | "yes"))
    }
}

fn status(home: &KestrelHome, args: StatusArgs) -> ExitCode {
    let query = match args.run {
        Some(run) => run,
        None => match list_runs(home).map(|runs| runs.into_iter().next()) {
            Ok(Some(run)) => run.run,
            Ok(None) => return fail(1, "no swarm runs yet (kestrel swarm run)"),
            Err(error) => return fail(1, &error.to_string()),
        },
    };
    let dir = match SwarmRunDir::open(home, &query) {
        Ok(dir) => dir,
        Err(error) => return fail(2, &error.to_string()),
    };
    loop {
        let status = match dir.status() {
            Ok(status) => status,
            Err(error) => return fail(1, &error.to_string()),
        };
        let climb = dir.climb_status().ok().flatten();
        let text = if args.json {
            climb::json(&status, climb.as_ref())
        } else {
            table(&status) + &climb::table(climb.as_ref())
        };
        let mut stdout = std::io::stdout().lock();
        if args.watch && !args.json {
            // Home and clear: the table redrawn in place.
            let _ = stdout.write_all(b"\x1b[H\x1b[2J");
        }
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
        drop(stdout);
        if !args.watch || status.state != RunState::Running {
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The status as a table for people.
fn table(status: &RunStatus) -> String {
    let mut text = format!(
        "run {}  {}  {}  ${:.4}\n",
        status.run,
        status.state.as_str(),
        status.branch.as_deref().unwrap_or("-"),
        status.cost_usd
    );
    let roles: Vec<String> = status
        .roles
        .iter()
        .filter(|(_, usage)| usage.input_tokens + usage.output_tokens > 0 || usage.cost > 0.0)
        .map(|(role, usage)| {
            format!(
                "{} {}/{} ${:.4}",
                role.as_str(),
                usage.input_tokens,
                usage.output_tokens,
                usage.cost
            )
        })
        .collect();
    if !roles.is_empty() {
        text.push_str(&format!("by role: {}\n", roles.join(" · ")));
    }
    text.push_str(&format!(
        "{:<20} {:<12} {:>7}  {:<36}  {:<28} {:>15}  {:>9}  {:>7}\n",
        "TASK", "STATE", "ATTEMPT", "SESSION", "MODEL", "TOKENS IN/OUT", "COST", "TIME"
    ));
    for task in &status.tasks {
        let session = task.session.as_ref().map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        let tokens = format!("{}/{}", task.tokens.input, task.tokens.output);
        text.push_str(&format!(
            "{:<20} {:<12} {:>7}  {:<36}  {:<28} {:>15}  {:>9}  {:>6}s\n",
            task.id,
            task.state.as_str(),
            task.attempts,
            session,
            task.model.as_deref().unwrap_or("-"),
            tokens,
            format!("${:.4}", task.cost_usd),
            task.elapsed_s
        ));
    }
    text
}

fn list(home: &KestrelHome, args: ListArgs) -> ExitCode {
    let runs = match list_runs(home) {
        Ok(runs) => runs,
        Err(error) => return fail(1, &error.to_string()),
    };
    let mut text = String::new();
    for run in &runs {
        if args.json {
            text.push_str(&serde_json::to_string(run).unwrap_or_default());
        } else {
            let created = run.created_at.map(|at| at.to_string()).unwrap_or_else(|| "-".into());
            let goal = run.goal.as_deref().unwrap_or("").replace('\n', " ");
            let goal: String = goal.chars().take(60).collect();
            text.push_str(&format!(
                "{}  {:<11}  {created}  {}/{} merged  ${:.4}  {goal}",
                run.run,
                run.state.as_str(),
                run.merged,
                run.tasks,
                run.cost_usd
            ));
            if let Some(error) = &run.error {
                text.push_str(&format!("  ({error})"));
            }
        }
        text.push('\n');
    }
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    ExitCode::SUCCESS
}

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("kestrel swarm: {message}");
    ExitCode::from(code)
}
