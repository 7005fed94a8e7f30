//! Configuration (ARCHITECTURE §7): the built-in providers, then the user's
//! `$KESTREL_HOME/config.toml`, then a project's `.kestrel/config.toml`, merged table by
//! table and key by key (later layers win), then resolved into [`Config`]. Each file is
//! checked on its own first, so an error points at the file, line and key that caused it.
//! Environment and command-line overrides (`KESTREL_MODEL`, `--mode`...) are the
//! caller's: this module reads files only.

mod agent;
mod error;
mod file;
mod layer;
mod mcp;
mod permissions;
mod providers;
mod storage;
mod swarm;

pub use agent::{
    AgentSettings, DEFAULT_COMPACT_AT, DEFAULT_IDLE_WORKER_MINUTES, DEFAULT_MAX_SUBAGENTS,
};
pub use error::ConfigError;
pub use mcp::{McpServerSettings, McpTransport};
pub use permissions::{PermissionSettings, ProjectPermissions};
pub use providers::{ProviderSettings, WireApiSetting};
pub use storage::StorageSettings;
pub use swarm::{
    DEFAULT_SWARM_MAX_ATTEMPTS, DEFAULT_SWARM_MAX_PARALLEL, DEFAULT_SWARM_VERIFY_TIMEOUT_S,
    Executor, RaySettings, ReviewerSettings, SwarmRoleSettings, SwarmSettings,
};

pub(crate) use error::line_column;

use crate::KestrelHome;
use agent::resolve_agent;
use file::ConfigFile;
use kestrel_protocol::Mode;
use layer::{Layer, find_project_config, merge_tables, same_file};
use mcp::resolve_mcp_server;
use permissions::project_permissions;
use providers::resolve_provider;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use swarm::{SwarmEnv, resolve_swarm};

/// The model catalog fetched when `catalog_url` is not set.
pub const DEFAULT_CATALOG_URL: &str = "https://models.dev/api.json";

/// How hard a reasoning model should think, where the provider supports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    /// The name used in config files and provider APIs.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

impl fmt::Display for ReasoningEffort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[sandbox]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SandboxSettings {
    /// Whether sandboxed commands may use the network (default false).
    pub network: bool,
}

/// The resolved configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `"<provider>/<model id>"`; checked with [`split_model_ref`] when loaded.
    pub model: Option<String>,
    /// The configured mode; `exec` ignores it (ARCHITECTURE §7).
    pub mode: Option<Mode>,
    pub catalog_url: String,
    /// A PEM file of extra trusted roots for provider requests (a corporate CA).
    pub ca_bundle: Option<PathBuf>,
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Model round trips per prompt before giving up; at least 1 when set.
    pub max_turns: Option<u32>,
    /// All providers, built-in and configured, by name.
    pub providers: BTreeMap<String, ProviderSettings>,
    pub mcp_servers: BTreeMap<String, McpServerSettings>,
    pub sandbox: SandboxSettings,
    pub permissions: PermissionSettings,
    pub agent: AgentSettings,
    pub swarm: SwarmSettings,
    pub storage: StorageSettings,
    /// The files that were read, lowest precedence first (for messages).
    pub sources: Vec<PathBuf>,
}

impl Default for Config {
    /// Built-in providers and defaults only, as when no config file exists.
    fn default() -> Self {
        let env = SwarmEnv::from_process(None);
        match resolve(Vec::new(), &env) {
            Ok(config) => config,
            // The built-in layer is a constant that the tests check resolves.
            Err(_) => Self {
                model: None,
                mode: None,
                catalog_url: DEFAULT_CATALOG_URL.to_owned(),
                ca_bundle: None,
                reasoning_effort: None,
                max_turns: None,
                providers: BTreeMap::new(),
                mcp_servers: BTreeMap::new(),
                sandbox: SandboxSettings::default(),
                permissions: PermissionSettings::default(),
                agent: AgentSettings::default(),
                swarm: SwarmSettings::defaults(&env),
                storage: StorageSettings::default(),
                sources: Vec::new(),
            },
        }
    }
}

impl Config {
    /// Loads the user's config (absent is fine: defaults) and, over it, the project's
    /// `.kestrel/config.toml`: the nearest one from `cwd` up to the repository root (the
    /// nearest directory with `.git`), or in `cwd` itself outside a repository.
    ///
    /// Fails when a file cannot be read, is not valid TOML, has an unknown key or a bad
    /// value (the error names file:line:column and the key), or configures a provider
    /// without `base_url` or an MCP server without `command`/`url`.
    pub fn load(home: &KestrelHome, cwd: &Path) -> Result<Config, ConfigError> {
        let user_path = home.config_file();
        let mut layers = Vec::new();
        if let Some(layer) = Layer::read(&user_path)? {
            layers.push(layer);
        }
        if let Some(project_path) = find_project_config(cwd)
            && !same_file(&project_path, &user_path)
            && let Some(layer) = Layer::read(&project_path)?
        {
            layer.refuse_user_only_keys()?;
            layers.push(layer);
        }
        resolve(layers, &SwarmEnv::from_process(Some(home.root())))
    }

    /// The provider called `name`, resolved; `None` if it is neither built in nor configured.
    pub fn provider(&self, name: &str) -> Option<ProviderSettings> {
        self.providers.get(name).cloned()
    }

    /// The names of all providers, built-in and configured, sorted (for "unknown
    /// provider" messages and listings).
    pub fn provider_names(&self) -> Vec<&str> {
        self.providers.keys().map(String::as_str).collect()
    }
}

/// Splits `"<provider>/<model id>"` at the first `/` into `(provider, model id)`; the
/// model id may contain more (`openrouter/meta-llama/llama-3` is provider `openrouter`,
/// model `meta-llama/llama-3`).
///
/// Fails when there is no `/` or either side is empty.
pub fn split_model_ref(model_ref: &str) -> Result<(String, String), ConfigError> {
    let invalid = |reason| ConfigError::InvalidModelRef { model_ref: model_ref.to_owned(), reason };
    let Some((provider, model_id)) = model_ref.split_once('/') else {
        return Err(invalid("no provider"));
    };
    if provider.trim().is_empty() {
        return Err(invalid("empty provider"));
    }
    if model_id.trim().is_empty() {
        return Err(invalid("empty model id"));
    }
    Ok((provider.to_owned(), model_id.to_owned()))
}

/// Merges the layers over the built-ins and resolves defaults and checks.
fn resolve(layers: Vec<Layer>, env: &SwarmEnv) -> Result<Config, ConfigError> {
    let built_in_path = Path::new("<built-in providers>");
    let mut merged = Layer::parse(built_in_path, file::BUILT_IN)?.table;
    for layer in &layers {
        merge_tables(&mut merged, layer.table.clone());
    }
    // The last file that mentions a setting is the one an error should point at.
    let source_of = |mentions: &dyn Fn(&Layer) -> bool| -> PathBuf {
        layers
            .iter()
            .rev()
            .find(|layer| mentions(layer))
            .map_or(built_in_path.to_path_buf(), |l| l.path.clone())
    };
    let file: ConfigFile =
        toml::Value::Table(merged).try_into().map_err(|error: toml::de::Error| {
            ConfigError::Invalid {
                path: source_of(&|_| true),
                message: error.to_string().trim().to_owned(),
            }
        })?;

    if let Some(model) = &file.model {
        split_model_ref(model).map_err(|error| ConfigError::Invalid {
            path: source_of(&|layer| layer.sets("model")),
            message: error.to_string(),
        })?;
    }
    if file.max_turns == Some(0) {
        return Err(ConfigError::Invalid {
            path: source_of(&|layer| layer.sets("max_turns")),
            message: "`max_turns` must be at least 1".into(),
        });
    }
    let agent = resolve_agent(file.agent, || source_of(&|layer| layer.sets("agent")))?;
    let swarm = resolve_swarm(file.swarm, env, |key| source_of(&|layer| layer.sets_path(key)))?;
    let mut providers = BTreeMap::new();
    for (name, table) in file.providers {
        let path = source_of(&|layer| layer.defines("providers", &name));
        providers.insert(name.clone(), resolve_provider(name, table, path)?);
    }
    let mut mcp_servers = BTreeMap::new();
    for (name, table) in file.mcp_servers {
        let path = source_of(&|layer| layer.defines("mcp_servers", &name));
        mcp_servers.insert(name.clone(), resolve_mcp_server(&name, table, path)?);
    }
    Ok(Config {
        model: file.model,
        mode: file.mode,
        catalog_url: file.catalog_url.unwrap_or_else(|| DEFAULT_CATALOG_URL.to_owned()),
        ca_bundle: file.ca_bundle,
        reasoning_effort: file.reasoning_effort,
        max_turns: file.max_turns,
        providers,
        mcp_servers,
        sandbox: SandboxSettings { network: file.sandbox.network.unwrap_or(false) },
        permissions: PermissionSettings {
            allow: file.permissions.allow,
            allow_write: file.permissions.allow_write,
            projects: project_permissions(file.permissions.project, || {
                source_of(&|layer| layer.sets("permissions"))
            })?,
        },
        agent,
        swarm,
        storage: storage::resolve_storage(file.storage, || {
            source_of(&|layer| layer.sets("storage"))
        })?,
        sources: layers.into_iter().map(|layer| layer.path).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user's file at /h/config.toml, with KESTREL_HOME=/h and HOME=/u.
    fn parse(text: &str) -> Result<Config, ConfigError> {
        resolve(vec![Layer::parse(Path::new("/h/config.toml"), text)?], &test_env())
    }

    fn test_env() -> SwarmEnv {
        SwarmEnv { kestrel_home: Some("/h".into()), home: Some("/u".into()), xdg_cache_home: None }
    }

    #[test]
    fn built_ins_resolve_without_any_file() {
        let config = Config::default();
        let openai = config.provider("openai").unwrap();
        assert_eq!(openai.wire_api, WireApiSetting::Responses);
        assert_eq!(openai.base_url, "https://api.openai.com/v1");
        assert_eq!(openai.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        let anthropic = config.provider("anthropic").unwrap();
        assert_eq!(
            (anthropic.wire_api, anthropic.api_key_env.as_deref()),
            (WireApiSetting::Anthropic, Some("ANTHROPIC_API_KEY"))
        );
        assert_eq!(config.provider("openrouter").unwrap().wire_api, WireApiSetting::Chat);
        let ollama = config.provider("ollama").unwrap();
        assert_eq!(
            (ollama.base_url.as_str(), ollama.api_key_env),
            ("http://127.0.0.1:11434/v1", None)
        );
        assert_eq!(config.catalog_url, DEFAULT_CATALOG_URL);
        assert_eq!(config.agent.idle_worker_minutes, 30);
        assert_eq!(
            config.provider_names(),
            ["anthropic", "llamacpp", "lmstudio", "ollama", "openai", "openrouter", "vllm"]
        );
        assert!(!config.sandbox.network);
    }

    #[test]
    fn user_settings_merge_over_a_built_in_provider_key_by_key() {
        let config = parse(
            "[providers.openai]\nbase_url = \"http://proxy/v1/\"\nheaders = { X-Team = \"a\" }\n",
        )
        .unwrap();
        let openai = config.provider("openai").unwrap();
        assert_eq!(openai.base_url, "http://proxy/v1");
        assert_eq!(openai.wire_api, WireApiSetting::Responses);
        assert_eq!(openai.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        assert_eq!(openai.headers.get("X-Team").map(String::as_str), Some("a"));
    }

    #[test]
    fn custom_provider_defaults_to_chat_and_needs_base_url() {
        let config = parse("[providers.local]\nbase_url = \"http://127.0.0.1:8080/v1\"\n").unwrap();
        assert_eq!(config.provider("local").unwrap().wire_api, WireApiSetting::Chat);
        let error = parse("[providers.local]\nwire_api = \"chat\"\n").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("[providers.local]") && text.contains("base_url"), "{text}");
        assert!(text.contains("/h/config.toml"), "{text}");
    }

    #[test]
    fn nested_unknown_key_names_its_table() {
        let error = parse("model = \"a/b\"\n\n[providers.local]\nbase_ur = \"x\"\n").unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("/h/config.toml:4:1: unknown field `base_ur`"), "{text}");
        assert!(text.contains("providers.local.base_ur"), "{text}");
    }

    #[test]
    fn wrong_type_names_line_and_key() {
        let error = parse("mode = \"ask\"\nmax_turns = \"ten\"\n").unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("/h/config.toml:2:"), "{text}");
        assert!(text.contains("max_turns"), "{text}");
    }

    #[test]
    fn bad_enum_values_list_the_choices() {
        let text = parse("mode = \"careful\"\n").unwrap_err().to_string();
        assert!(text.contains("read-only") && text.contains("yolo"), "{text}");
        let text = parse("reasoning_effort = \"max\"\n").unwrap_err().to_string();
        assert!(text.contains("minimal") && text.contains("high"), "{text}");
        let text = parse("[providers.x]\nbase_url = \"u\"\nwire_api = \"grpc\"\n")
            .unwrap_err()
            .to_string();
        assert!(text.contains("responses") && text.contains("anthropic"), "{text}");
    }

    #[test]
    fn every_documented_key_is_accepted() {
        let config = parse(
            r#"
model = "anthropic/claude-sonnet-4-5"
mode = "read-only"
catalog_url = "http://127.0.0.1:9/api.json"
reasoning_effort = "high"
max_turns = 12

[providers.local]
base_url = "http://127.0.0.1:11434/v1"
wire_api = "anthropic"
api_key_env = "LOCAL_API_KEY"
headers = { "X-A" = "1" }

[mcp_servers.fs]
command = "npx"
args = ["-y", "server", "."]
env = { A = "1" }
cwd = "tools"
tool_timeout_sec = 20
enabled = false

[mcp_servers.remote]
url = "https://mcp.example/mcp"
headers = { Authorization = "Bearer x" }

[sandbox]
network = true

[permissions]
allow = ["cargo test"]
allow_write = ["/w/docs"]

[agent]
max_parallel_tools = 4
idle_worker_minutes = 5
compact_at = 0.5
max_subagents = 2
"#,
        )
        .unwrap();
        assert_eq!(config.mode, Some(Mode::ReadOnly));
        assert_eq!(config.reasoning_effort, Some(ReasoningEffort::High));
        assert_eq!(config.max_turns, Some(12));
        let fs = &config.mcp_servers["fs"];
        assert!(!fs.enabled);
        assert_eq!(fs.tool_timeout_sec, Some(20));
        assert!(
            matches!(&fs.transport, McpTransport::Stdio { command, args, .. } if command == "npx" && args.len() == 3)
        );
        assert!(matches!(&config.mcp_servers["remote"].transport, McpTransport::Http { .. }));
        assert!(config.mcp_servers["remote"].enabled);
        assert!(config.sandbox.network);
        assert_eq!(config.permissions.allow, ["cargo test"]);
        assert_eq!(config.permissions.allow_write, [PathBuf::from("/w/docs")]);
        assert_eq!(
            config.agent,
            AgentSettings {
                max_parallel_tools: Some(4),
                idle_worker_minutes: 5,
                compact_at: 0.5,
                max_subagents: 2
            }
        );
    }

    #[test]
    fn mcp_server_needs_exactly_one_transport() {
        for text in
            ["[mcp_servers.x]\nargs = [\"a\"]\n", "[mcp_servers.x]\ncommand = \"a\"\nurl = \"b\"\n"]
        {
            let message = parse(text).unwrap_err().to_string();
            assert!(message.contains("[mcp_servers.x]") && message.contains("`url`"), "{message}");
        }
        let message =
            parse("[mcp_servers.x]\nurl = \"b\"\nargs = [\"a\"]\n").unwrap_err().to_string();
        assert!(message.contains("apply only"), "{message}");
    }

    #[test]
    fn compact_at_must_be_a_fraction_and_max_subagents_at_least_one() {
        for bad in ["0", "0.0", "1.5", "-0.2", "nan"] {
            let message = parse(&format!("[agent]\ncompact_at = {bad}\n")).unwrap_err().to_string();
            assert!(
                message.starts_with("/h/config.toml") && message.contains("compact_at"),
                "{bad}: {message}"
            );
        }
        let message = parse("[agent]\nmax_subagents = 0\n").unwrap_err().to_string();
        assert!(message.contains("max_subagents` must be at least 1"), "{message}");
        let config = parse("[agent]\ncompact_at = 1\n").unwrap();
        assert_eq!((config.agent.compact_at, config.agent.max_subagents), (1.0, 4));
    }

    #[test]
    fn bad_model_and_zero_max_turns_are_errors_naming_the_file() {
        let message = parse("model = \"claude\"\n").unwrap_err().to_string();
        assert!(message.starts_with("/h/config.toml: invalid model `claude`"), "{message}");
        let message = parse("max_turns = 0\n").unwrap_err().to_string();
        assert!(message.contains("max_turns"), "{message}");
    }

    #[test]
    fn model_refs_split_at_the_first_slash() {
        assert_eq!(
            split_model_ref("anthropic/claude-sonnet-4-5").unwrap(),
            ("anthropic".to_owned(), "claude-sonnet-4-5".to_owned())
        );
        assert_eq!(
            split_model_ref("openrouter/meta-llama/llama-3").unwrap(),
            ("openrouter".to_owned(), "meta-llama/llama-3".to_owned())
        );
        for bad in ["claude", "/model", "provider/", ""] {
            let error = split_model_ref(bad).unwrap_err();
            assert!(error.to_string().contains("<provider>/<model id>"), "{error}");
        }
    }
}
