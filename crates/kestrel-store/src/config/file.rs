//! The on-disk shape of `config.toml` (ARCHITECTURE §7). Every table denies unknown
//! keys, so a typo is an error with a position instead of a silently ignored setting.
//! Everything is optional here: a file may set only what it changes, and the layers
//! (built-ins, user, project) are merged before the result is resolved.

use super::swarm::ExecutorKind;
use super::{ReasoningEffort, WireApiSetting};
use kestrel_protocol::Mode;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One config file, or the merge of several.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConfigFile {
    pub model: Option<String>,
    pub mode: Option<Mode>,
    pub catalog_url: Option<String>,
    pub ca_bundle: Option<std::path::PathBuf>,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub max_turns: Option<u32>,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderTable>,
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerTable>,
    #[serde(default)]
    pub sandbox: SandboxTable,
    #[serde(default)]
    pub permissions: PermissionsTable,
    #[serde(default)]
    pub agent: AgentTable,
    #[serde(default)]
    pub swarm: SwarmTable,
    #[serde(default)]
    pub storage: StorageTable,
}

/// `[storage]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StorageTable {
    pub checkpoint_days: Option<u32>,
    pub checkpoint_max_mb: Option<u64>,
}

/// `[providers.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProviderTable {
    pub base_url: Option<String>,
    pub wire_api: Option<WireApiSetting>,
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub request_max_retries: Option<u32>,
    pub stream_idle_timeout_ms: Option<u64>,
    pub context_window: Option<u64>,
    pub images: Option<bool>,
}

/// `[mcp_servers.NAME]`: either a local server (`command`) or a remote one (`url`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpServerTable {
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub tool_timeout_sec: Option<u64>,
    pub enabled: Option<bool>,
}

/// `[sandbox]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SandboxTable {
    pub network: Option<bool>,
}

/// `[permissions]` (user's file only).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PermissionsTable {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub allow_write: Vec<std::path::PathBuf>,
    #[serde(default)]
    pub project: Vec<ProjectPermissionsTable>,
}

/// `[[permissions.project]]`: rules that apply only under `path`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProjectPermissionsTable {
    pub path: std::path::PathBuf,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub allow_write: Vec<std::path::PathBuf>,
    #[serde(default)]
    pub allow_tools: Vec<String>,
}

/// `[agent]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentTable {
    pub max_parallel_tools: Option<u32>,
    pub idle_worker_minutes: Option<u64>,
    pub compact_at: Option<f64>,
    pub max_subagents: Option<u32>,
}

/// `[swarm]`. `workdir`, `executor` and `ray` are the user's file's only (see `layer`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SwarmTable {
    pub max_parallel: Option<usize>,
    pub max_attempts: Option<u32>,
    pub verify_timeout_s: Option<u64>,
    pub workdir: Option<String>,
    pub executor: Option<ExecutorKind>,
    #[serde(default)]
    pub roles: SwarmRolesTable,
    pub ray: Option<RayTable>,
}

/// `[swarm.roles]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SwarmRolesTable {
    #[serde(default)]
    pub planner: RoleTable,
    #[serde(default)]
    pub implementer: RoleTable,
    #[serde(default)]
    pub reviewer: ReviewerTable,
}

/// `[swarm.roles.planner]`, `[swarm.roles.implementer]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RoleTable {
    pub model: Option<String>,
}

/// `[swarm.roles.reviewer]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReviewerTable {
    pub model: Option<String>,
    pub allow_same_model: Option<bool>,
}

/// `[swarm.ray]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RayTable {
    pub address: Option<String>,
    pub remote: Option<String>,
    pub kestrel: Option<String>,
    pub num_cpus: Option<f64>,
    pub memory_mb: Option<u64>,
    pub job_timeout_s: Option<u64>,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    pub env_file: Option<String>,
}

/// The built-in providers, as a bottom layer that user and project files merge over
/// key by key (so `[providers.openai] base_url = ...` changes only the URL).
pub(super) const BUILT_IN: &str = r#"
[providers.openai]
base_url = "https://api.openai.com/v1"
wire_api = "responses"
api_key_env = "OPENAI_API_KEY"

[providers.anthropic]
base_url = "https://api.anthropic.com/v1"
wire_api = "anthropic"
api_key_env = "ANTHROPIC_API_KEY"

[providers.openrouter]
base_url = "https://openrouter.ai/api/v1"
wire_api = "chat"
api_key_env = "OPENROUTER_API_KEY"

[providers.ollama]
base_url = "http://127.0.0.1:11434/v1"
wire_api = "chat"

[providers.lmstudio]
base_url = "http://127.0.0.1:1234/v1"
wire_api = "chat"

[providers.llamacpp]
base_url = "http://127.0.0.1:8080/v1"
wire_api = "chat"

[providers.vllm]
base_url = "http://127.0.0.1:8000/v1"
wire_api = "chat"
"#;
