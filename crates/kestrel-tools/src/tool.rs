//! The tool trait, what a tool gets to run with, what it returns, and the registry.

use futures_util::future::BoxFuture;
use kestrel_protocol::Mode;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What the model is told about a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// Everything a tool call may use. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The session's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// The workspace root the file tools are confined to in `auto`, `ask` and `read-only`.
    pub workspace: PathBuf,
    pub mode: Mode,
    /// Whether commands and web_fetch may use the network (`[sandbox] network`).
    pub network: bool,
    /// Cancelled when the user interrupts the turn: tools stop and kill what they started.
    pub cancel: CancellationToken,
    /// Files outside the workspace this one call may write (outside `yolo`), as they
    /// resolved (symlinks followed) when the user approved the call or an `allow_write`
    /// rule covered it: exactly these files, nothing beside them
    /// ([`PermissionPolicy::granted_writes`](crate::permission::PermissionPolicy::granted_writes)).
    pub granted_writes: Vec<PathBuf>,
    /// Whether the policy let this one call out of the sandbox, or (auto) widened the
    /// sandbox for it (the user approved it, or the allow rules cover it:
    /// [`PermissionPolicy::assess_confinement`](crate::permission::PermissionPolicy::assess_confinement)).
    /// `No`, `shell` runs it sandboxed as the mode says: the tool never judges the line
    /// again, since what it reads may have changed since the policy's decision.
    pub unconfined: Unconfined,
    /// The workspace directory the session started in: outside `yolo` the file tools
    /// write beneath `workspace` only while it still names that directory. `None`: not
    /// checked.
    pub workspace_pin: Option<crate::workspace::WorkspacePin>,
}

/// Whether `shell` runs a call outside the sandbox, or in a wider one (the policy's
/// decision).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Unconfined {
    /// No: sandboxed as the mode says.
    #[default]
    No,
    /// The user approved this call: it runs outside the sandbox.
    Approved,
    /// In `ask` (or `auto` without a sandbox): the allow rules cover every part of the
    /// line, a standing approval, so it runs outside the sandbox. Its `git` commands run
    /// in `repository` (the workspace's, pinned when the session began), whatever
    /// repository git would find when they run: one a sandboxed process makes meanwhile
    /// (`sub/.git` with hooks) is never used.
    ByRules { repository: Option<crate::permission::PinnedRepository> },
    /// In `auto`: the allow rules cover every part of the line. It runs in the sandbox
    /// with only the `allow_write` places its redirections write added ([`Lift`]), and
    /// contained. Never `.git` writable nor the network on: each way of letting git
    /// write the repository from the sandbox let code the model can change (a nested
    /// repository's config, a hook, the login profile) plant what git outside the
    /// sandbox runs later (docs/permissions.md).
    Lifted(Lift),
}

/// What auto's sandbox lets a line the allow rules cover do beyond the usual.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lift {
    /// Places the user allowed writing (`allow_write` rules) that the line writes.
    pub writable: Vec<PathBuf>,
}

impl ToolContext {
    /// `path` resolved against the cwd (not canonicalised).
    pub fn resolve(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        if path.is_absolute() { path.to_path_buf() } else { self.cwd.join(path) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStepStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    pub step: String,
    pub status: PlanStepStatus,
}

/// A file a tool call created, changed or deleted, with a unified diff where known.
#[derive(Debug, Clone, PartialEq)]
pub struct FileChange {
    pub path: PathBuf,
    pub diff: Option<String>,
    /// The whole text before and after, for UIs that draw their own diff (ACP `diff`
    /// content); `None` when either side is not UTF-8 text or too large to carry.
    pub text: Option<ChangeText>,
}

/// Both sides of a change to a text file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeText {
    /// `None`: the file did not exist before.
    pub before: Option<String>,
    /// `None`: the file was deleted.
    pub after: Option<String>,
}

/// An image a tool returned (e.g. an MCP tool's `image` content), for models that take
/// images. `content` keeps a `[image: TYPE]` placeholder where it stood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolImage {
    /// `image/png`, `image/jpeg`, ...
    pub media_type: String,
    /// Base64, as the tool sent it.
    pub data: String,
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    /// What the model reads.
    pub content: String,
    pub is_error: bool,
    /// Files the call changed, for UIs and checkpoints.
    pub changes: Vec<FileChange>,
    /// The new plan, from `update_plan`.
    pub plan: Option<Vec<PlanStep>>,
    /// Images of the result, in order, beside the text in `content`.
    pub images: Vec<ToolImage>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self { content: content.into(), ..Self::default() }
    }

    pub fn error(content: impl Into<String>) -> Self {
        Self { content: content.into(), is_error: true, ..Self::default() }
    }
}

pub type ToolFuture<'a> = BoxFuture<'a, ToolOutput>;

/// A model-callable tool.
pub trait Tool: Send + Sync {
    fn definition(&self) -> ToolDefinition;

    /// True when the tool never changes anything: such calls of one step may run
    /// concurrently and need no approval.
    fn is_read_only(&self) -> bool;

    /// Runs the call with already-parsed arguments.
    fn run<'a>(&'a self, arguments: serde_json::Value, context: &'a ToolContext) -> ToolFuture<'a>;
}

/// Tools that come and go while a session runs (an MCP server's, once it is up). The
/// registry asks its sources on every look-up, so the tool list of each model request is
/// the one of that moment.
pub trait ToolSource: Send + Sync {
    /// The tools available now, in a stable order.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;

    /// The tool called `name`, also when it is not listed yet (its server is still
    /// starting: the call then waits for it). `None`: not this source's name.
    fn find(&self, name: &str) -> Option<Arc<dyn Tool>>;

    /// What went wrong since the last call (a server that failed to start or died),
    /// each reported once, for the session to show and record.
    fn take_reports(&self) -> Vec<String>;

    /// Resolves once `name` is what it will be: a tool whose server is still starting is
    /// waited for (within its start-up limit), so that whether it is read-only is known
    /// before its call is allowed or refused.
    fn settle<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ()> {
        let _ = name;
        Box::pin(std::future::ready(()))
    }

    /// Resolves once every tool this source will have is known (each server up or
    /// given up on, within its start-up limit): for a headless run, whose first request
    /// should carry them all.
    fn settle_all(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// The tools of a session, by name: fixed ones plus those of its [`ToolSource`]s.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    /// Each fixed tool with its name, so a look-up does not build every definition.
    tools: Vec<(String, Arc<dyn Tool>)>,
    sources: Vec<Arc<dyn ToolSource>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; one with the same name is replaced.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let name = tool.definition().name;
        self.tools.retain(|(existing, _)| *existing != name);
        self.tools.push((name, tool));
    }

    /// Adds a source of tools that may change while the session runs.
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// The definitions to send with a model request: the fixed tools, then each
    /// source's tools as they are now.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let fixed = self.tools.iter().map(|(_, tool)| tool.definition());
        let dynamic = self.sources.iter().flat_map(|source| source.tools());
        fixed.chain(dynamic.map(|tool| tool.definition())).collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if let Some((_, tool)) = self.tools.iter().find(|(known, _)| known == name) {
            return Some(tool.clone());
        }
        self.sources.iter().find_map(|source| source.find(name))
    }

    /// Waits until every source knows `name` for what it is (see [`ToolSource::settle`]).
    pub async fn settle(&self, name: &str) {
        if self.tools.iter().any(|(known, _)| known == name) {
            return;
        }
        for source in &self.sources {
            source.settle(name).await;
        }
    }

    /// Waits until every source has settled (see [`ToolSource::settle_all`]).
    pub async fn settle_all(&self) {
        for source in &self.sources {
            source.settle_all().await;
        }
    }

    /// What the sources have to report since the last call (see [`ToolSource::take_reports`]).
    pub fn take_reports(&self) -> Vec<String> {
        self.sources.iter().flat_map(|source| source.take_reports()).collect()
    }

    /// True for a known read-only tool; unknown names count as not read-only.
    pub fn is_read_only(&self, name: &str) -> bool {
        self.get(name).is_some_and(|tool| tool.is_read_only())
    }

    /// Runs a call as the model sent it. Unknown names and arguments that are not a
    /// JSON object come back as error outputs for the model, not as failures.
    pub async fn call(&self, name: &str, arguments: &str, context: &ToolContext) -> ToolOutput {
        let Some(tool) = self.get(name) else {
            let known: Vec<String> = self.definitions().into_iter().map(|d| d.name).collect();
            return ToolOutput::error(format!(
                "unknown tool `{name}`; available tools: {}",
                known.join(", ")
            ));
        };
        let text = if arguments.trim().is_empty() { "{}" } else { arguments };
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(value @ serde_json::Value::Object(_)) => tool.run(value, context).await,
            Ok(_) => ToolOutput::error(format!(
                "arguments of `{name}` must be a JSON object, got: {}",
                truncate(arguments, 200)
            )),
            Err(error) => ToolOutput::error(format!(
                "arguments of `{name}` are not valid JSON ({error}): {}",
                truncate(arguments, 200)
            )),
        }
    }
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}
