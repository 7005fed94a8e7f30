//! `shell`: runs a command with `bash -c` in the login shell's environment (taken once
//! per session, see `login_shell`) in its own process group, stdin closed, stdout and
//! stderr captured together with bounded memory. On timeout or cancel the
//! whole group is terminated (SIGTERM, then SIGKILL after a grace period); background
//! processes still holding the output pipes after the shell exits are ended too, so a
//! call always returns.
//!
//! Confinement by mode: in `auto` the command runs in the OS sandbox (writes only to
//! the workspace and temp directories, never to `.git`, `.kestrel` or `$KESTREL_HOME`,
//! the network only if `[sandbox] network`), and without a sandbox it does not run at
//! all (the permission policy asks first, and an approved call runs as in `ask`); in
//! `read-only`, and for a command `ask` lets through as known read-only, it runs in a
//! sandbox that cannot write the workspace, where one exists, so a misjudged command
//! still cannot write; an approved command in `ask` and everything in `yolo` run
//! unconfined. Every command runs in a new session, without a controlling terminal.

use crate::arguments::{self, optional_u64};
use crate::covered_line;
#[cfg(target_os = "linux")]
use crate::login_shell::LoginShell;
/// The login shell's environment a command runs in, when there is one.
#[cfg(target_os = "linux")]
type Snapshot = std::sync::Arc<crate::login_shell::Snapshot>;
#[cfg(not(target_os = "linux"))]
type Snapshot = ();
use crate::output::{DEFAULT_KEEP, HeadTail};
use crate::permission::shell_workdir;
use crate::{Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput, Unconfined, paths};
use kestrel_platform::{
    MetadataWatch, Sandbox, SandboxPolicy, SandboxUnavailable, ShellStartup, process,
};
use kestrel_protocol::Mode;
use kestrel_store::KestrelHome;
use serde::Deserialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::time::Instant;

/// Timeout when the call gives none.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// The longest timeout a call may ask for.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// Messages of commands that ran into the sandbox's limits.
const SANDBOX_SYMPTOMS: [&str; 4] =
    ["Permission denied", "permission denied", "Operation not permitted", "Read-only file system"];

/// Messages of commands that tried the network (loopback included) where it is off.
const NETWORK_SYMPTOMS: [&str; 9] = [
    "Network is unreachable",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Connection refused",
    "Couldn't connect",
    "Could not connect",
    "Failed to connect",
    "Cannot assign requested address",
];

/// How the tool ends process groups and waits for stragglers.
#[derive(Debug, Clone, Copy)]
pub struct ShellLimits {
    /// Between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// How long output is still read after the shell itself exited.
    pub drain: Duration,
    /// Bytes kept from the start and the end of the output, each.
    pub keep_bytes: usize,
}

impl Default for ShellLimits {
    fn default() -> Self {
        Self {
            kill_grace: Duration::from_secs(2),
            drain: Duration::from_millis(300),
            keep_bytes: DEFAULT_KEEP,
        }
    }
}

/// The `shell` tool.
#[derive(Debug, Default, Clone)]
pub struct ShellTool {
    limits: ShellLimits,
    /// `None`: the best sandbox of this machine ([`Sandbox::detect`]).
    sandbox: Option<Result<Sandbox, SandboxUnavailable>>,
    /// The login shell's environment, shared by the clones of this tool.
    #[cfg(target_os = "linux")]
    login: std::sync::Arc<LoginShell>,
}

impl ShellTool {
    /// A shell tool with non-default limits (tests use a short grace period).
    pub fn with_limits(limits: ShellLimits) -> Self {
        Self { limits, ..Self::default() }
    }

    /// The same tool confining commands with `sandbox`, or acting as if none existed
    /// (`Err`), instead of the machine's best.
    pub fn with_sandbox(mut self, sandbox: Result<Sandbox, SandboxUnavailable>) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    fn sandbox(&self, network: bool) -> Result<Sandbox, SandboxUnavailable> {
        match &self.sandbox {
            Some(fixed) => fixed.clone(),
            None => Sandbox::detect(network),
        }
    }

    /// How a command is confined as `context` says (the mode and the policy's
    /// decision), or the error output when it must not run.
    fn confinement(&self, context: &ToolContext) -> Result<Confinement, ToolOutput> {
        let confined_read_only = match context.mode {
            Mode::Yolo => return Ok(Confinement::None),
            // Approved, or covered by the user's rules (the policy's decision).
            Mode::Ask if context.unconfined != Unconfined::No => return Ok(Confinement::None),
            // Let through unasked as known read-only: in doubt, sandboxed.
            Mode::Ask => true,
            Mode::Auto => false,
            Mode::ReadOnly => true,
        };
        let network = context.network;
        let mut policy = if confined_read_only {
            SandboxPolicy::read_only(network)
        } else {
            SandboxPolicy::workspace_write(&context.workspace, network)
        };
        // Records, config and the daemon's socket: never the command's to change.
        if let Ok(home) = KestrelHome::from_env() {
            policy = policy.protect(home.root());
        }
        if let Unconfined::Lifted(lift) = &context.unconfined {
            covered_line::widen(&mut policy, lift);
        }
        match self.sandbox(network) {
            Ok(sandbox) => Ok(Confinement::Sandbox(sandbox, policy)),
            // Read-only commands (by the policy's judgement) run without one.
            Err(_) if confined_read_only => Ok(Confinement::None),
            Err(unavailable) => Err(ToolOutput::error(format!(
                "{unavailable}. In auto mode commands run only inside the sandbox, so this \
                 one did not run; the user can approve it to run without one."
            ))),
        }
    }

    /// The command for `script` in `workdir`: `bash -c` in the login shell's environment,
    /// or `bash -lc` when there is no snapshot of it.
    async fn command(
        &self,
        script: &str,
        workdir: &Path,
        confinement: &Confinement,
        context: &ToolContext,
    ) -> Result<(Command, Option<Snapshot>), ToolOutput> {
        let cancel = &context.cancel;
        // A line the rules let out of the sandbox is checked again as it starts.
        let covered = |path: Option<&std::ffi::OsStr>| match &context.unconfined {
            Unconfined::ByRules { repository } => {
                covered_line::script(script, repository.as_ref(), path, &context.workspace)
                    .map_err(ToolOutput::error)
            }
            Unconfined::No | Unconfined::Approved | Unconfined::Lifted(_) => Ok(script.to_string()),
        };
        #[cfg(target_os = "linux")]
        {
            let capture = |capture_script: &str| {
                confinement.command(capture_script, ShellStartup::Login).ok()
            };
            let snapshot =
                self.login.snapshot(confinement.policy(), workdir, cancel, capture).await;
            // A snapshot cancelled half-way is `None`: the command must not start then.
            if cancel.is_cancelled() {
                return Err(cancelled_before_start());
            }
            if let Some(snapshot) = snapshot {
                let script = covered(snapshot.variable("PATH"))?;
                let mut command = confinement.command(&script, ShellStartup::Plain)?;
                snapshot.apply(&mut command);
                return Ok((command, Some(snapshot)));
            }
        }
        if cancel.is_cancelled() {
            return Err(cancelled_before_start());
        }
        #[cfg(not(target_os = "linux"))]
        let _ = workdir;
        // The login profile's PATH is not known here: this process's stands in for it.
        let script = covered(std::env::var_os("PATH").as_deref())?;
        Ok((confinement.command(&script, ShellStartup::Login)?, None))
    }
}

fn cancelled_before_start() -> ToolOutput {
    ToolOutput::error("Command cancelled by the user before it started; nothing was run.")
}

/// Where a command runs.
enum Confinement {
    None,
    Sandbox(Sandbox, SandboxPolicy),
}

impl Confinement {
    fn policy(&self) -> Option<&SandboxPolicy> {
        match self {
            Confinement::None => None,
            Confinement::Sandbox(_, policy) => Some(policy),
        }
    }

    fn command(&self, script: &str, startup: ShellStartup) -> Result<Command, ToolOutput> {
        match self {
            Confinement::None => Ok(process::shell_command_with(script, startup)),
            Confinement::Sandbox(sandbox, policy) => sandbox
                .shell_command(script, startup, policy)
                .map_err(|error| ToolOutput::error(error.to_string())),
        }
    }
}

#[derive(Deserialize)]
struct Arguments {
    command: String,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default, deserialize_with = "optional_u64")]
    timeout_ms: Option<u64>,
}

impl Tool for ShellTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "shell".to_string(),
            description: format!(
                "Runs a shell command with `bash -c` in the user's login environment (the \
                 profile's variables, functions and aliases) and returns its exit code and combined \
                 stdout/stderr. Standard input is empty (nothing can be typed into the \
                 command), so use non-interactive flags. Long output keeps its start and end \
                 and drops the middle: filter it (grep, head, tail) when you need a part. The \
                 command and everything it started are killed after `timeout_ms` (default \
                 {DEFAULT_TIMEOUT_MS}, at most {MAX_TIMEOUT_MS}); background processes that \
                 keep the output open are ended when the command exits, so redirect a server's \
                 output to a file (`cmd > log 2>&1 &`) if it must keep running. Prefer \
                 read_file, grep, glob and list_dir over cat, grep and find for files."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line, run by `bash -c`."},
                    "workdir": {"type": "string", "description": "Directory to run in (default: the working directory)."},
                    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS, "description": format!("Milliseconds before the command is killed (default {DEFAULT_TIMEOUT_MS}).")}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a self, arguments: serde_json::Value, context: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arguments: Arguments = match arguments::parse("shell", arguments) {
                Ok(arguments) => arguments,
                Err(output) => return output,
            };
            if arguments.command.trim().is_empty() {
                return ToolOutput::error("command is empty");
            }
            let timeout_ms = match arguments.timeout_ms {
                None => DEFAULT_TIMEOUT_MS,
                Some(0) => return ToolOutput::error("timeout_ms must be at least 1"),
                Some(ms) => ms.min(MAX_TIMEOUT_MS),
            };
            // The directory the permission policy judged: symlinks resolved once, here too.
            let workdir = match shell_workdir(&context.cwd, arguments.workdir.as_deref()) {
                Ok(dir) if dir.is_dir() => dir,
                Ok(_) | Err(_) => {
                    let named = context.resolve(arguments.workdir.as_deref().unwrap_or("."));
                    return ToolOutput::error(format!(
                        "workdir {} is not an existing directory",
                        paths::display(context, &named)
                    ));
                }
            };
            let command = match self.confinement(context) {
                Ok(confinement) => {
                    self.command(&arguments.command, &workdir, &confinement, context).await
                }
                Err(output) => Err(output),
            };
            // The snapshot is kept until the command is spawned (it inherits its source).
            let (command, _snapshot) = match command {
                Ok(command) => command,
                Err(output) => return output,
            };
            let run = Run {
                workdir,
                timeout_ms,
                limits: self.limits,
                // A lifted line's failure is explained by the policy's note instead.
                sandboxed: context.mode == Mode::Auto
                    && !matches!(context.unconfined, Unconfined::Lifted(_)),
                network: context.network,
            };
            // The sandbox cannot forbid creating .git/.kestrel where none exist: look.
            let watch = match context.mode {
                Mode::Auto => watch_metadata(&context.workspace).await,
                Mode::Yolo | Mode::Ask | Mode::ReadOnly => None,
            };
            let mut output = run.execute(command, context).await;
            if let Some(watch) = watch {
                warn_of_created_metadata(&mut output, watch, context).await;
            }
            output
        })
    }
}

/// One command execution.
struct Run {
    workdir: PathBuf,
    timeout_ms: u64,
    limits: ShellLimits,
    /// Runs in the auto-mode sandbox (a failure gets a hint about its limits).
    sandboxed: bool,
    /// The sandbox lets it use the network.
    network: bool,
}

/// Why the run stopped.
enum Ending {
    Exited,
    TimedOut,
    Cancelled,
}

/// One captured pipe; `None` once it reached end of file.
struct Pipe<R> {
    reader: Option<R>,
    buffer: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Pipe<R> {
    fn new(reader: Option<R>) -> Self {
        Self { reader, buffer: vec![0; 8192] }
    }

    fn is_open(&self) -> bool {
        self.reader.is_some()
    }

    /// Reads the next chunk into the pipe's buffer and returns its length (0 at end of
    /// file, after which the pipe is closed). Cancel-safe for `select!`.
    async fn read_chunk(&mut self) -> usize {
        let Some(reader) = self.reader.as_mut() else {
            return std::future::pending().await;
        };
        match reader.read(&mut self.buffer).await {
            Ok(0) | Err(_) => {
                self.reader = None;
                0
            }
            Ok(read) => read,
        }
    }

    fn chunk(&self, read: usize) -> &[u8] {
        &self.buffer[..read]
    }
}

impl Run {
    async fn execute(self, mut command: Command, context: &ToolContext) -> ToolOutput {
        command
            .current_dir(&self.workdir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // No pager may wait for a keypress that never comes.
            .env("PAGER", "cat")
            .env("GIT_PAGER", "cat")
            .env("GIT_TERMINAL_PROMPT", "0");
        // API keys and tokens stay out of commands the model runs: their output goes back
        // to the model and into the record.
        kestrel_platform::remove_secret_variables(&mut command);
        let mut group = match process::spawn_group(&mut command) {
            Ok(group) => group,
            Err(error) if self.sandboxed => {
                return ToolOutput::error(format!("could not start bash in the sandbox: {error}"));
            }
            Err(error) => return ToolOutput::error(format!("could not start bash: {error}")),
        };
        let mut stdout = Pipe::new(group.child_mut().stdout.take());
        let mut stderr = Pipe::new(group.child_mut().stderr.take());
        let mut output = HeadTail::new(self.limits.keep_bytes);
        let deadline = Instant::now() + Duration::from_millis(self.timeout_ms);
        let mut status: Option<ExitStatus> = None;
        let mut drain_deadline = None;
        let mut ending = Ending::Exited;
        let mut leftover_killed = false;
        let mut wait_error = None;

        loop {
            if status.is_some() && !stdout.is_open() && !stderr.is_open() {
                break;
            }
            tokio::select! {
                read = stdout.read_chunk(), if stdout.is_open() => output.push(stdout.chunk(read)),
                read = stderr.read_chunk(), if stderr.is_open() => output.push(stderr.chunk(read)),
                result = group.wait(), if status.is_none() => match result {
                    Ok(exit) => {
                        status = Some(exit);
                        drain_deadline = Some(Instant::now() + self.limits.drain);
                    }
                    Err(error) => {
                        wait_error = Some(error);
                        break;
                    }
                },
                () = sleep_until_some(drain_deadline) => {
                    // The shell is gone but something it started still holds the pipes.
                    leftover_killed = true;
                    break;
                }
                () = tokio::time::sleep_until(deadline), if status.is_none() => {
                    ending = Ending::TimedOut;
                    break;
                }
                () = context.cancel.cancelled(), if status.is_none() => {
                    ending = Ending::Cancelled;
                    break;
                }
            }
        }

        let needs_kill = status.is_none() || leftover_killed || wait_error.is_some();
        if needs_kill {
            match group.terminate(self.limits.kill_grace).await {
                Ok(exit) => status = status.or(Some(exit)),
                Err(error) => wait_error = wait_error.or(Some(error)),
            }
            // Whatever was written before the kill is still worth showing.
            drain(&mut stdout, &mut stderr, &mut output, self.limits.drain).await;
        }
        self.report(ending, status, leftover_killed, wait_error, &output)
    }

    fn report(
        &self,
        ending: Ending,
        status: Option<ExitStatus>,
        leftover_killed: bool,
        wait_error: Option<std::io::Error>,
        output: &HeadTail,
    ) -> ToolOutput {
        let mut text = String::new();
        let mut is_error = false;
        match ending {
            Ending::Exited => {}
            Ending::TimedOut => {
                is_error = true;
                text.push_str(&format!(
                    "Command timed out after {} ms; it and every process it started were \
                     killed. Raise timeout_ms (at most {MAX_TIMEOUT_MS}) or run it in a way \
                     that finishes sooner.\n",
                    self.timeout_ms
                ));
            }
            Ending::Cancelled => {
                is_error = true;
                text.push_str(
                    "Command cancelled by the user; it and every process it started were \
                     killed.\n",
                );
            }
        }
        if let Some(error) = wait_error {
            is_error = true;
            text.push_str(&format!("Could not wait for the command: {error}\n"));
        }
        match status {
            Some(exit) => {
                let (line, failed) = describe_exit(&exit);
                is_error |= failed;
                text.push_str(&line);
            }
            None => text.push_str("Exit code: unknown"),
        }
        text.push('\n');
        if leftover_killed {
            text.push_str(
                "Note: background processes still held the output open after the command \
                 exited; they were terminated. Redirect their output (`> file 2>&1 &`) to keep \
                 them running.\n",
            );
        }
        if is_error && self.sandboxed {
            text.push_str(&sandbox_hint(&output.render(), self.network));
        }
        if output.is_empty() {
            text.push_str("Output: (none)");
        } else {
            text.push_str("Output:\n");
            text.push_str(&output.render());
        }
        ToolOutput { content: text, is_error, ..ToolOutput::default() }
    }
}

/// A note on the sandbox's limits for a failed sandboxed command whose output shows it
/// ran into them; empty when it shows nothing of the kind.
fn sandbox_hint(output: &str, network: bool) -> String {
    let shows = |symptoms: &[&str]| symptoms.iter().any(|symptom| output.contains(symptom));
    if !network && shows(&NETWORK_SYMPTOMS) {
        return "Note: the network is off in the sandbox, localhost included, so connections \
                and name lookups fail; the user can set `[sandbox] network = true` in \
                config.toml to allow it (as for web_fetch), or run the command approved (ask \
                mode) or in yolo.\n"
            .to_string();
    }
    if shows(&SANDBOX_SYMPTOMS) {
        return "Note: the command runs in a sandbox: it can write only inside the workspace \
                and temp directories (not .git or .kestrel), cannot connect to unix sockets \
                (docker, ssh-agent, D-Bus) and has no network unless `[sandbox] network = \
                true`; a command that needs more must run approved (ask mode) or in yolo.\n"
            .to_string();
    }
    String::new()
}

async fn watch_metadata(workspace: &Path) -> Option<MetadataWatch> {
    let workspace = workspace.to_path_buf();
    tokio::task::spawn_blocking(move || MetadataWatch::start(&workspace)).await.ok()
}

/// Tells the model and the user, in the tool result, about git or Kestrel metadata
/// the command created: programs outside the sandbox act on it later.
async fn warn_of_created_metadata(
    output: &mut ToolOutput,
    watch: MetadataWatch,
    context: &ToolContext,
) {
    let Ok(created) = tokio::task::spawn_blocking(move || watch.created()).await else {
        return;
    };
    if created.is_empty() {
        return;
    }
    // No later session of this home trusts a repository made here.
    if let Ok(home) = KestrelHome::from_env() {
        crate::permission::note_made(&home, &created);
    }
    let names: Vec<String> = created.iter().map(|path| paths::display(context, path)).collect();
    output.content.push_str(&format!(
        "\nWarning: this command created {}, which did not exist before. The sandbox cannot \
         prevent that, and what is in it runs outside the sandbox: git runs a repository's \
         hooks and config (core.fsmonitor, filters, aliases) whenever git is used there, \
         and Kestrel reads .kestrel/config.toml (MCP servers) at the next start. Tell the \
         user plainly that it was created and why; they should review it (`git config \
         --list --show-origin`, the hooks) or delete it before running git there.",
        names.join(", ")
    ));
}

/// "Exit code: N" and whether it is a failure.
fn describe_exit(status: &ExitStatus) -> (String, bool) {
    if let Some(code) = status.code() {
        return (format!("Exit code: {code}"), code != 0);
    }
    match process::exit_signal(status) {
        Some(signal) => (format!("Exit code: {} (killed by signal {signal})", 128 + signal), true),
        None => (format!("Exit code: unknown ({status})"), true),
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Reads what is left in the pipes for at most `period`.
async fn drain<A, B>(
    stdout: &mut Pipe<A>,
    stderr: &mut Pipe<B>,
    output: &mut HeadTail,
    period: Duration,
) where
    A: AsyncRead + Unpin,
    B: AsyncRead + Unpin,
{
    let deadline = Instant::now() + period;
    while stdout.is_open() || stderr.is_open() {
        tokio::select! {
            read = stdout.read_chunk(), if stdout.is_open() => output.push(stdout.chunk(read)),
            read = stderr.read_chunk(), if stderr.is_open() => output.push(stderr.chunk(read)),
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
}
