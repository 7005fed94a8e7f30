//! MCP servers of a session (ARCHITECTURE §6): `[mcp_servers.NAME]` from config and the
//! `mcpServers` of ACP `session/new`, each started in the background by
//! [`McpServers::start`], which never waits for them. Their tools appear as
//! `mcp__<server>__<tool>` as soon as a server is up, through the registry's
//! [`ToolSource`], which the session asks on every model request. A server that fails to
//! start or dies is reported once (see [`ToolSource::take_reports`]) and its tools
//! vanish; calls to it then return error results. Every server process is killed when
//! the `McpServers` is dropped.

mod acp;
mod client;
mod connection;
mod http;
mod naming;
mod result;
mod server;
mod tool;

pub use acp::servers_from_acp;

use crate::{Tool, ToolSource};
use futures_util::future::BoxFuture;
use kestrel_store::McpServerSettings;
use server::{Reports, STARTUP_TIMEOUT, ServerSlot, State, supervise};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tool::PendingTool;

/// The MCP servers of one session.
pub struct McpServers {
    servers: Vec<Arc<ServerSlot>>,
    reports: Reports,
    shutdown: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// Where one server is, for status displays and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServerState {
    Starting,
    /// Up, with the model-facing names of its tools.
    Ready {
        tools: Vec<String>,
    },
    /// It never came up.
    Failed {
        reason: String,
    },
    /// It was up and is gone (or the session ended).
    Stopped {
        reason: String,
    },
}

impl McpServers {
    /// Starts every enabled server of `servers` on the current tokio runtime and
    /// returns at once. `cwd` is the session's directory: stdio servers run there (or in
    /// their `cwd`, relative to it). Nothing fails here: a server that cannot start is
    /// reported like one that dies, and without a runtime every server is reported so.
    pub fn start(servers: &BTreeMap<String, McpServerSettings>, cwd: &Path) -> Self {
        let reports: Reports = Arc::new(Mutex::new(Vec::new()));
        let shutdown = CancellationToken::new();
        let runtime = tokio::runtime::Handle::try_current();
        let mut slots = Vec::new();
        let mut tasks = Vec::new();
        let enabled: Vec<(&String, &McpServerSettings)> =
            servers.iter().filter(|(_, settings)| settings.enabled).collect();
        let names: Vec<&str> = enabled.iter().map(|(name, _)| name.as_str()).collect();
        let (prefixes, clashes) = naming::prefixes(&names);
        if let Ok(mut reports) = reports.lock() {
            reports.extend(clashes);
        }
        for ((name, settings), prefix) in enabled.into_iter().zip(prefixes.iter()) {
            let slot = ServerSlot::new(name, prefix.clone(), &prefixes, settings);
            match &runtime {
                Ok(runtime) => tasks.push(runtime.spawn(supervise(
                    slot.clone(),
                    settings.clone(),
                    cwd.to_path_buf(),
                    shutdown.clone(),
                    reports.clone(),
                ))),
                Err(_) => slot.fail("no async runtime to run it on".to_string(), &reports),
            }
            slots.push(slot);
        }
        Self { servers: slots, reports, shutdown, tasks: Mutex::new(tasks) }
    }

    /// Adds a problem to report with the servers' own (e.g. an ACP server that was refused).
    pub fn report(&self, message: String) {
        if let Ok(mut reports) = self.reports.lock() {
            reports.push(message);
        }
    }

    /// Every started server, in name order, and where it is now.
    pub fn statuses(&self) -> Vec<(String, McpServerState)> {
        self.servers
            .iter()
            .map(|slot| {
                let state = match slot.state() {
                    State::Starting => McpServerState::Starting,
                    State::Ready { tools, .. } => McpServerState::Ready {
                        tools: tools.iter().map(|tool| tool.definition().name).collect(),
                    },
                    State::Failed(reason) => McpServerState::Failed { reason },
                    State::Stopped(reason) => McpServerState::Stopped { reason },
                };
                (slot.name.clone(), state)
            })
            .collect()
    }

    /// Waits until no server is starting any more (each settles within the startup
    /// timeout). For hosts that want every server before they go on, and for tests.
    pub async fn wait_until_started(&self) {
        for slot in &self.servers {
            let _ = tokio::time::timeout(STARTUP_TIMEOUT * 2, slot.settled()).await;
        }
    }

    /// Stops every server and waits (a few seconds at most) until their processes are
    /// gone. Dropping `McpServers` stops them too, without waiting.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let tasks = match self.tasks.lock() {
            Ok(mut tasks) => std::mem::take(&mut *tasks),
            Err(_) => Vec::new(),
        };
        for task in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

impl McpServers {
    /// The server a tool name belongs to, by its `mcp__<server>__` prefix.
    fn server_of(&self, name: &str) -> Option<&Arc<ServerSlot>> {
        self.servers
            .iter()
            .filter(|slot| name.starts_with(&slot.prefix))
            .max_by_key(|slot| slot.prefix.len())
    }
}

impl Drop for McpServers {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl ToolSource for McpServers {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        // Names are made unique (`naming`); should two still meet, providers refuse two
        // tools of one name, so the first server's (in name order) is offered.
        let mut names = HashSet::new();
        for slot in &self.servers {
            if let State::Ready { tools: ready, .. } = slot.state() {
                for tool in ready.iter() {
                    if names.insert(tool.definition().name) {
                        tools.push(tool.clone());
                    }
                }
            }
        }
        tools
    }

    fn find(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if let Some(tool) = self.tools().into_iter().find(|tool| tool.definition().name == name) {
            return Some(tool);
        }
        // A server still starting (the call waits for it) or gone (the call says why).
        let slot = self.server_of(name)?;
        Some(Arc::new(PendingTool::new(slot.clone(), name)))
    }

    fn settle<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(slot) = self.server_of(name) {
                let _ = tokio::time::timeout(STARTUP_TIMEOUT * 2, slot.settled()).await;
            }
        })
    }

    fn settle_all(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.wait_until_started())
    }

    fn take_reports(&self) -> Vec<String> {
        match self.reports.lock() {
            Ok(mut reports) => std::mem::take(&mut *reports),
            Err(_) => Vec::new(),
        }
    }
}
