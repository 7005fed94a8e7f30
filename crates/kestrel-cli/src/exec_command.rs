//! `kestrel exec` and `kestrel exec resume`: flags and environment to a `Launch`.

use clap::{Args, Subcommand};
use kestrel_agent::{AgentError, ExecOptions, ExecOutput, Launch, ResumeTarget, run_exec};
use kestrel_model::{ClientOptions, ReasoningEffort, RetryNotice};
use kestrel_protocol::Mode;
use kestrel_store::{Config, KestrelHome};
use kestrel_tools::permission::SandboxStatus;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ExecArgs {
    #[command(subcommand)]
    resume: Option<ExecSubcommand>,
    #[command(flatten)]
    common: CommonArgs,
    /// The prompt; `-` (or nothing, with stdin not a terminal) reads it from stdin.
    prompt: Option<String>,
}

#[derive(Subcommand)]
enum ExecSubcommand {
    /// Continue a session with a new prompt.
    Resume {
        /// Continue the newest session started in this directory.
        #[arg(long)]
        last: bool,
        #[command(flatten)]
        common: CommonArgs,
        /// `ID PROMPT`, or just `PROMPT` with --last (the id may be a unique prefix;
        /// the prompt may be `-` for stdin).
        #[arg(num_args = 0..=2, value_name = "ID PROMPT")]
        words: Vec<String>,
    },
}

#[derive(Args, Clone)]
struct CommonArgs {
    /// Print JSONL events on stdout instead of the final answer.
    #[arg(long)]
    json: bool,
    /// No progress on stderr (tool calls and their outcomes); errors, notices and
    /// retries are still said.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// The model as PROVIDER/MODEL (overrides KESTREL_MODEL and config).
    #[arg(long, short = 'm')]
    model: Option<String>,
    /// read-only, ask, auto or yolo (default for exec: auto).
    #[arg(long)]
    mode: Option<String>,
    /// Run in this directory.
    #[arg(long = "cd", short = 'C')]
    cd: Option<PathBuf>,
    /// Stop after this many model requests.
    #[arg(long)]
    max_turns: Option<u32>,
    /// Also write the final answer to this file.
    #[arg(long)]
    output_last_message: Option<PathBuf>,
    /// Reasoning effort: minimal, low, medium or high.
    #[arg(long)]
    reasoning: Option<String>,
    /// A swarm job's role session (JSON of its tag: run, task, role, attempt); set by
    /// `kestrel swarm node`, not by people.
    #[arg(long, hide = true)]
    swarm_role: Option<String>,
}

pub fn run(args: ExecArgs) -> ExitCode {
    let (common, prompt, resume) = match args.resume {
        Some(ExecSubcommand::Resume { last, common, mut words }) => {
            let target = if last {
                if words.len() > 1 {
                    return fail(&AgentError::Usage(
                        "exec resume --last takes only a prompt, not an id".to_string(),
                    ));
                }
                ResumeTarget::Last
            } else if words.is_empty() {
                return fail(&AgentError::Usage(
                    "exec resume needs a session id or --last".to_string(),
                ));
            } else {
                ResumeTarget::Id(words.remove(0))
            };
            (common, words.pop(), Some(target))
        }
        None => (args.common, args.prompt, None),
    };
    match prepare(&common, prompt, resume) {
        Ok((launch, options)) => execute(launch, options),
        Err(error) => fail(&error),
    }
}

fn fail(error: &AgentError) -> ExitCode {
    eprintln!("kestrel: {error}");
    ExitCode::from(error.exit_code())
}

fn prepare(
    common: &CommonArgs,
    prompt: Option<String>,
    resume: Option<ResumeTarget>,
) -> Result<(Launch, ExecOptions), AgentError> {
    let home = KestrelHome::from_env()?;
    // A bad mode is named with where it came from.
    let (source, named) = match (&common.mode, env("KESTREL_MODE")) {
        (Some(mode), _) => ("--mode", Some(mode.clone())),
        (None, variable) => ("KESTREL_MODE", variable),
    };
    if let Some(Err(error)) = named.map(|mode| mode.parse::<Mode>()) {
        return Err(AgentError::Usage(format!("{source}: {error}")));
    }
    let cwd = match &common.cd {
        Some(dir) => std::fs::canonicalize(dir)
            .map_err(|error| AgentError::Usage(format!("--cd {}: {error}", dir.display())))?,
        None => std::env::current_dir().map_err(|error| {
            AgentError::Usage(format!("cannot read the current directory: {error}"))
        })?,
    };
    let config = Config::load(&home, &cwd)?;
    let swarm = match &common.swarm_role {
        Some(text) => Some(
            serde_json::from_str::<kestrel_protocol::swarm::SwarmSessionTag>(text)
                .map_err(|error| AgentError::Usage(format!("--swarm-role: {error}")))?,
        ),
        None => None,
    };
    // exec ignores config `mode`: no one is there to answer questions. A swarm role
    // runs in its role's mode unless told otherwise.
    let mode = match (common.mode.clone(), env("KESTREL_MODE"), &swarm) {
        (Some(mode), _, _) | (None, Some(mode), None) => {
            mode.parse::<Mode>().map_err(AgentError::Usage)?
        }
        (None, _, Some(tag)) => tag.role.default_mode(),
        (None, None, None) => Mode::Auto,
    };
    // On resume the record's model is used unless one is named explicitly.
    let model = common
        .model
        .clone()
        .or_else(|| env("KESTREL_MODEL"))
        .or_else(|| if resume.is_some() { None } else { config.model.clone() });
    let configured = config.reasoning_effort.map(|effort| effort.as_str().to_owned());
    let reasoning = match common.reasoning.clone().or(configured) {
        Some(text) => Some(parse_reasoning(&text)?),
        None => None,
    };
    if common.max_turns == Some(0) {
        return Err(AgentError::Usage("--max-turns must be at least 1".to_string()));
    }
    if let Some(path) = &common.output_last_message
        && let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        return Err(AgentError::Usage(format!(
            "--output-last-message {}: the directory {} does not exist",
            path.display(),
            parent.display()
        )));
    }
    let prompt = read_prompt(prompt)?;
    let client_options = ClientOptions { ca_bundle: config.ca_bundle.clone(), ..client_options() };
    // Said once here rather than in every refused command's result.
    if mode == Mode::Auto
        && let SandboxStatus::Unavailable { reason } = SandboxStatus::detect(config.sandbox.network)
    {
        eprintln!(
            "kestrel: no sandbox available ({reason}); commands not known to be read-only will \
             not run, since no one is here to approve running them unsandboxed"
        );
    }
    // Nothing configured: what the environment offers decides (one) or is listed.
    let model = match model {
        None if resume.is_none() => {
            Some(crate::first_run::choose_for_exec(&home, &config).map_err(AgentError::Usage)?)
        }
        model => model,
    };
    let launch = Launch {
        home,
        max_turns: common.max_turns.or(config.max_turns),
        config,
        cwd,
        model,
        mode,
        reasoning,
        client_options,
    };
    let options = ExecOptions {
        prompt,
        json: common.json,
        output_last_message: common.output_last_message.clone(),
        resume,
        progress: !common.quiet,
        cwd_given: common.cd.is_some(),
        swarm,
    };
    Ok((launch, options))
}

fn execute(launch: Launch, options: ExecOptions) -> ExitCode {
    let runtime =
        match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("kestrel: cannot start the async runtime: {error}");
                return ExitCode::from(1);
            }
        };
    let cancel = CancellationToken::new();
    let output =
        ExecOutput { stdout: Box::new(std::io::stdout()), stderr: Box::new(std::io::stderr()) };
    let home = launch.home.clone();
    let result = runtime.block_on(async {
        let watcher = cancel.clone();
        tokio::spawn(async move {
            // Ctrl+C, SIGTERM and SIGHUP (a closed terminal) all cancel the turn: its
            // tools are killed and the record says `cancelled`.
            if stop_signal().await {
                watcher.cancel();
            }
            // A second one leaves at once, taking every command this run started along.
            if stop_signal().await {
                kestrel_platform::kill_all_groups(kestrel_platform::Signal::Kill);
                std::process::exit(130);
            }
        });
        run_exec(launch, options, output, cancel).await
    });
    // After the answer, with this run's session closed: a short walk, at most hourly.
    if let Some(clean_up) =
        crate::storage_upkeep::clean_up_in_background(home, |line| eprintln!("kestrel: {line}"))
    {
        let _ = clean_up.join();
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => fail(&error),
    }
}

/// Waits for Ctrl+C, SIGTERM or SIGHUP; false if no handler could be installed.
async fn stop_signal() -> bool {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut hangup)) =
            (signal(SignalKind::terminate()), signal(SignalKind::hangup()))
        else {
            return tokio::signal::ctrl_c().await.is_ok();
        };
        tokio::select! {
            result = tokio::signal::ctrl_c() => result.is_ok(),
            _ = term.recv() => true,
            _ = hangup.recv() => true,
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.is_ok()
    }
}

fn client_options() -> ClientOptions {
    let on_retry = Arc::new(|notice: &RetryNotice| {
        eprintln!(
            "kestrel: retrying {} in {:.1}s (try {}/{}): {}",
            notice.url,
            notice.delay.as_secs_f64(),
            notice.attempt,
            notice.max_attempts,
            notice.reason
        );
    });
    ClientOptions { on_retry: Some(on_retry), ..ClientOptions::default() }
}

fn read_prompt(prompt: Option<String>) -> Result<String, AgentError> {
    let from_stdin = match prompt.as_deref() {
        Some("-") => true,
        Some(_) => false,
        None if !std::io::stdin().is_terminal() => true,
        None => {
            return Err(AgentError::Usage(
                "no prompt: pass it as an argument, or `-` to read it from stdin".to_string(),
            ));
        }
    };
    let text = if from_stdin {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(AgentError::Stdin)?;
        text
    } else {
        prompt.unwrap_or_default()
    };
    if text.trim().is_empty() {
        return Err(AgentError::Usage("the prompt is empty".to_string()));
    }
    Ok(text)
}

fn parse_reasoning(text: &str) -> Result<ReasoningEffort, AgentError> {
    match text {
        "minimal" => Ok(ReasoningEffort::Minimal),
        "low" => Ok(ReasoningEffort::Low),
        "medium" => Ok(ReasoningEffort::Medium),
        "high" => Ok(ReasoningEffort::High),
        other => Err(AgentError::Usage(format!(
            "unknown reasoning effort `{other}`: expected minimal, low, medium or high"
        ))),
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.trim().is_empty())
}
