//! One configured MCP server over its life: starting in the background, up with its
//! tools listed, then failed or stopped. A task of its own supervises it: it notices
//! the process exiting or the connection closing, lists the tools again when the server
//! says they changed, and takes everything down when the session ends.

use crate::mcp::client::Client;
use crate::mcp::connection::{Connection, ServerProcess, connect, describe};
use crate::mcp::naming;
use crate::mcp::tool::McpTool;
use kestrel_store::McpServerSettings;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How long a server has to start, finish the handshake and list its tools.
pub(crate) const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// A tool call's limit when the server sets no `tool_timeout_sec`.
pub(crate) const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a server is in its life.
#[derive(Clone)]
pub(crate) enum State {
    Starting,
    Ready {
        tools: Arc<Vec<Arc<McpTool>>>,
    },
    /// It never came up; why.
    Failed(String),
    /// It was up and is gone; why.
    Stopped(String),
}

/// Problems to show the user, each once.
pub(crate) type Reports = Arc<Mutex<Vec<String>>>;

/// One server as the session sees it. Tools hold it weakly, so nothing keeps a closed
/// session's servers alive.
pub(crate) struct ServerSlot {
    pub(crate) name: String,
    /// `mcp__<server>__`: every tool name of this server starts with it.
    pub(crate) prefix: String,
    /// Other servers' prefixes that start with this one: its tool names avoid them.
    longer: Vec<String>,
    pub(crate) tool_timeout: Duration,
    state: watch::Sender<State>,
}

impl ServerSlot {
    /// A server named `name` whose tools are named `prefix…` (see `naming::prefixes`),
    /// in a session whose other servers have `others` as prefixes.
    pub(crate) fn new(
        name: &str,
        prefix: String,
        others: &[String],
        settings: &McpServerSettings,
    ) -> Arc<Self> {
        let tool_timeout = settings
            .tool_timeout_sec
            .map_or(DEFAULT_TOOL_TIMEOUT, |seconds| Duration::from_secs(seconds.max(1)));
        Arc::new(Self {
            name: name.to_string(),
            longer: others
                .iter()
                .filter(|other| other.len() > prefix.len() && other.starts_with(&prefix))
                .cloned()
                .collect(),
            prefix,
            tool_timeout,
            state: watch::Sender::new(State::Starting),
        })
    }

    pub(crate) fn state(&self) -> State {
        self.state.borrow().clone()
    }

    fn set(&self, state: State) {
        self.state.send_replace(state);
    }

    /// The state once the server is no longer starting. Its supervisor settles it within
    /// [`STARTUP_TIMEOUT`], so this ends; `None` only if the supervisor is gone.
    pub(crate) async fn settled(&self) -> Option<State> {
        let mut receiver = self.state.subscribe();
        let state = receiver.wait_for(|state| !matches!(state, State::Starting)).await.ok()?;
        Some(state.clone())
    }

    /// Marks a server that cannot even be started, with the report for the user.
    pub(crate) fn fail(&self, reason: String, reports: &Reports) {
        report(reports, format!("MCP server `{}` failed to start: {reason}", self.name));
        self.set(State::Failed(reason));
    }
}

fn report(reports: &Reports, message: String) {
    if let Ok(mut reports) = reports.lock() {
        reports.push(message);
    }
}

/// Starts the server and watches it until it dies or `shutdown` is cancelled.
pub(crate) async fn supervise(
    slot: Arc<ServerSlot>,
    settings: McpServerSettings,
    cwd: PathBuf,
    shutdown: CancellationToken,
    reports: Reports,
) {
    let started = tokio::select! {
        started = tokio::time::timeout(STARTUP_TIMEOUT, start(&slot, &settings, &cwd, &reports)) => started,
        // Dropping a half-started connection kills its process group.
        () = shutdown.cancelled() => return,
    };
    let (connection, client) = match started {
        Ok(Ok(started)) => started,
        Ok(Err(reason)) => return slot.fail(reason, &reports),
        Err(_) => {
            let reason = format!(
                "it did not start and list its tools within {} s",
                STARTUP_TIMEOUT.as_secs()
            );
            return slot.fail(reason, &reports);
        }
    };
    let Connection { mut process, mut list_changed, .. } = connection;
    let reason = loop {
        tokio::select! {
            () = shutdown.cancelled() => {
                // Closing stdin asks a stdio server to exit; `stop` makes sure it does.
                client.close("the session ended");
                if let Some(process) = process.as_mut() {
                    process.stop().await;
                }
                slot.set(State::Stopped("the session ended".to_string()));
                return;
            }
            status = exit_of(&mut process) => {
                let exited = match status {
                    Ok(status) => format!("it exited ({})", describe(status)),
                    Err(error) => format!("waiting for it failed: {error}"),
                };
                break last_words(&mut process, &exited).await;
            }
            () = client.closed() => {
                break last_words(&mut process, "it closed the connection").await;
            }
            Some(()) = list_changed.recv() => {
                // A failed refresh keeps the tools known so far.
                let listed = tokio::time::timeout(STARTUP_TIMEOUT, list_tools(&slot, &client, None)).await;
                if let Ok(Ok(tools)) = listed {
                    slot.set(State::Ready { tools: Arc::new(tools) });
                }
            }
        }
    };
    report(&reports, format!("MCP server `{}` stopped: {reason}; its tools are gone", slot.name));
    slot.set(State::Stopped(reason));
}

/// Connects, lists the tools and marks the server ready.
async fn start(
    slot: &Arc<ServerSlot>,
    settings: &McpServerSettings,
    cwd: &std::path::Path,
    reports: &Reports,
) -> Result<(Connection, Client), String> {
    let mut connection = connect(settings, cwd).await?;
    let client = connection.client.clone();
    match list_tools(slot, &client, Some(reports)).await {
        Ok(tools) => {
            slot.set(State::Ready { tools: Arc::new(tools) });
            Ok((connection, client))
        }
        Err(error) => {
            connection.client.close("listing the tools failed");
            let what = format!("listing its tools failed: {error}");
            Err(match connection.process.as_mut() {
                Some(process) => process.explain_failure(&what).await,
                None => what,
            })
        }
    }
}

/// The server's tools under their model-facing names. Two tools whose names clean up
/// to the same name: the later one in the server's list gets a hash, reported (once,
/// when `reports` is given: the first listing).
async fn list_tools(
    slot: &Arc<ServerSlot>,
    client: &Client,
    reports: Option<&Reports>,
) -> Result<Vec<Arc<McpTool>>, String> {
    let listed = client.list_tools().await?;
    let mut taken = HashSet::new();
    let tools = listed
        .into_iter()
        .map(|tool| {
            let mut name = naming::tool_name(&slot.prefix, &tool.name, &slot.longer);
            if !taken.insert(name.clone()) {
                let renamed = naming::with_hash(&name, &tool.name);
                if let Some(reports) = reports {
                    report(
                        reports,
                        format!(
                            "MCP server `{}`: tool `{}` would be named {name} like an earlier \
                             tool of the server; it is offered as {renamed}",
                            slot.name, tool.name
                        ),
                    );
                }
                name = renamed;
                taken.insert(name.clone());
            }
            Arc::new(McpTool::new(slot, name, tool, client.clone()))
        })
        .collect();
    Ok(tools)
}

/// The leader's exit; never, for a server without a process.
async fn exit_of(process: &mut Option<ServerProcess>) -> std::io::Result<std::process::ExitStatus> {
    match process {
        Some(process) => process.wait().await,
        None => std::future::pending().await,
    }
}

async fn last_words(process: &mut Option<ServerProcess>, what: &str) -> String {
    match process {
        Some(process) => process.explain_failure(what).await,
        None => what.to_string(),
    }
}
