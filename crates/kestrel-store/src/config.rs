//! Configuration (ARCHITECTURE §7): the built-in providers, then the user's
//! `$KESTREL_HOME/config.toml`, then a project's `.kestrel/config.toml`, merged table by
//! table and key by key (later layers win), then resolved into [`Config`]. Each file is
//! checked on its own first, so an error points at the file, line and key that caused it.
//! Environment and command-line overrides (`KESTREL_MODEL`, `--mode`...) are the
//! caller's: this module reads files only.

mod file;

use crate::KestrelHome;
use file::{ConfigFile, McpServerTable, ProviderTable};
use kestrel_protocol::Mode;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// The model catalog fetched when `catalog_url` is not set.
pub const DEFAULT_CATALOG_URL: &str = "https://models.dev/api.json";

/// How long an idle worker with no client lives when `[agent] idle_worker_minutes` is unset.
pub const DEFAULT_IDLE_WORKER_MINUTES: u64 = 30;

/// The share of the context window at which a session compacts itself when
/// `[agent] compact_at` is unset.
pub const DEFAULT_COMPACT_AT: f64 = 0.85;

/// How many subagents (`task` calls) of one step run at once when `[agent] max_subagents`
/// is unset.
pub const DEFAULT_MAX_SUBAGENTS: u32 = 4;

/// Why the configuration could not be loaded. Every variant names the file to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Bad TOML, an unknown key or a value of the wrong type, at a position in the file.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Parse { path: PathBuf, line: usize, column: usize, message: String },

    /// Valid TOML with a setting that makes no sense (e.g. an MCP server with neither
    /// `command` nor `url`).
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },

    /// A provider that is not built in must say where it is.
    #[error(
        "{}: [providers.{provider}] has no `base_url`: add one, e.g. base_url = \"http://127.0.0.1:8080/v1\" (including the API version prefix)",
        path.display()
    )]
    MissingBaseUrl { provider: String, path: PathBuf },

    /// A model reference that is not `<provider>/<model id>`.
    #[error(
        "invalid model `{model_ref}`: {reason}; expected \"<provider>/<model id>\", e.g. \"anthropic/claude-sonnet-4-5\""
    )]
    InvalidModelRef { model_ref: String, reason: &'static str },
}

/// Which wire API a provider speaks; requests go to `{base_url}/chat/completions`,
/// `{base_url}/responses` or `{base_url}/messages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireApiSetting {
    /// OpenAI Chat Completions (also OpenRouter, vLLM, Ollama, llama.cpp...).
    Chat,
    /// OpenAI Responses.
    Responses,
    /// Anthropic Messages.
    Anthropic,
}

impl WireApiSetting {
    /// The name used in config files.
    pub fn as_str(self) -> &'static str {
        match self {
            WireApiSetting::Chat => "chat",
            WireApiSetting::Responses => "responses",
            WireApiSetting::Anthropic => "anthropic",
        }
    }
}

impl fmt::Display for WireApiSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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

/// A provider, resolved: built-in values with the user's and project's over them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    /// The API root including its version prefix, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub wire_api: WireApiSetting,
    /// The environment variable holding the API key; `None` for keyless local servers.
    pub api_key_env: Option<String>,
    /// Extra HTTP headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// Retries after the first try (`None`: the client's default).
    pub request_max_retries: Option<u32>,
    /// A stream silent this long counts as dropped (`None`: the client's default).
    pub stream_idle_timeout_ms: Option<u64>,
    /// The context window of every model of this provider, over the catalog's (a local
    /// server started with a smaller context than the model allows).
    pub context_window: Option<u64>,
    /// Whether every model of this provider takes images, over the catalog (`None`: as
    /// the catalog says; a model it does not know takes none).
    pub images: Option<bool>,
}

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A local server run as a child process speaking over stdio. A relative `cwd` is
    /// relative to the session's cwd.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// A remote server over streamable HTTP.
    Http { url: String, headers: BTreeMap<String, String> },
}

/// One `[mcp_servers.NAME]`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerSettings {
    pub transport: McpTransport,
    /// Per-call timeout; `None` leaves it to the tools crate's default.
    pub tool_timeout_sec: Option<u64>,
    /// `false` keeps the server configured but not started.
    pub enabled: bool,
}

/// `[sandbox]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SandboxSettings {
    /// Whether sandboxed commands may use the network (default false).
    pub network: bool,
}

/// `[permissions]`: what `ask` mode runs without asking. Read from the user's file only
/// (a project's file may not set it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PermissionSettings {
    /// Command prefixes ("cargo test") that run without asking.
    pub allow: Vec<String>,
    /// Files, or directories (everything beneath), the file tools write without asking.
    pub allow_write: Vec<PathBuf>,
    /// `[[permissions.project]]`: rules for sessions under one directory only (what
    /// "always and save" writes).
    pub projects: Vec<ProjectPermissions>,
}

/// The rules of one `[[permissions.project]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProjectPermissions {
    /// Absolute: the rules apply to sessions whose workspace is this directory or under it.
    pub path: PathBuf,
    pub allow: Vec<String>,
    pub allow_write: Vec<PathBuf>,
    /// Tools (`mcp__server__tool`) that run without asking, in read-only mode too.
    pub allow_tools: Vec<String>,
}

/// `[agent]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentSettings {
    /// How many tool calls of one model response may run at once; `None`: the agent's default.
    pub max_parallel_tools: Option<u32>,
    /// How long a worker with no client stays alive.
    pub idle_worker_minutes: u64,
    /// The share of the model's context window (0 < x <= 1) past which the session
    /// compacts its conversation before the next model request.
    pub compact_at: f64,
    /// How many `task` calls (subagents) of one model response run at once; at least 1.
    pub max_subagents: u32,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            max_parallel_tools: None,
            idle_worker_minutes: DEFAULT_IDLE_WORKER_MINUTES,
            compact_at: DEFAULT_COMPACT_AT,
            max_subagents: DEFAULT_MAX_SUBAGENTS,
        }
    }
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
    /// The files that were read, lowest precedence first (for messages).
    pub sources: Vec<PathBuf>,
}

impl Default for Config {
    /// Built-in providers and defaults only, as when no config file exists.
    fn default() -> Self {
        match resolve(Vec::new()) {
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
        resolve(layers)
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

/// One parsed file: its path (for errors) and its raw table (for merging).
/// Top-level keys a project's `.kestrel/config.toml` may not set.
const USER_ONLY_KEYS: [&str; 6] =
    ["mode", "providers", "mcp_servers", "sandbox", "permissions", "ca_bundle"];

struct Layer {
    path: PathBuf,
    table: toml::Table,
}

impl Layer {
    /// Reads and checks one file; `None` when it does not exist.
    fn read(path: &Path) -> Result<Option<Layer>, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Layer::parse(path, &text).map(Some),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ConfigError::Read { path: path.to_path_buf(), source }),
        }
    }

    /// Checks `text` against the schema (for positioned errors), then keeps it as a table.
    fn parse(path: &Path, text: &str) -> Result<Layer, ConfigError> {
        let parse_error = |error: toml::de::Error| positioned(path, text, &error);
        toml::from_str::<ConfigFile>(text).map_err(parse_error)?;
        let table = toml::from_str::<toml::Table>(text).map_err(parse_error)?;
        Ok(Layer { path: path.to_path_buf(), table })
    }

    /// Whether this file has `[section.name]`.
    fn defines(&self, section: &str, name: &str) -> bool {
        self.table
            .get(section)
            .and_then(toml::Value::as_table)
            .is_some_and(|t| t.contains_key(name))
    }

    /// A repository's own config must not raise its permissions, run commands or send
    /// the user's API keys elsewhere: those settings belong to the user's file alone.
    fn refuse_user_only_keys(&self) -> Result<(), ConfigError> {
        match USER_ONLY_KEYS.iter().find(|key| self.sets(key)) {
            Some(key) => Err(ConfigError::Invalid {
                path: self.path.clone(),
                message: format!(
                    "`{key}` can only be set in the user's config ($KESTREL_HOME/config.toml): \
                     a repository may not change providers, modes, sandboxing or commands to run"
                ),
            }),
            None => Ok(()),
        }
    }

    /// Whether this file sets the top-level `key`.
    fn sets(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }
}

/// Merges the layers over the built-ins and resolves defaults and checks.
fn resolve(layers: Vec<Layer>) -> Result<Config, ConfigError> {
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
    let agent_path = || source_of(&|layer| layer.sets("agent"));
    if let Some(fraction) = file.agent.compact_at
        && !(fraction > 0.0 && fraction <= 1.0)
    {
        return Err(ConfigError::Invalid {
            path: agent_path(),
            message: format!(
                "`[agent] compact_at` is the share of the context window at which to compact: \
                 a number above 0 and at most 1 (e.g. 0.85), got {fraction}"
            ),
        });
    }
    if file.agent.max_subagents == Some(0) {
        return Err(ConfigError::Invalid {
            path: agent_path(),
            message: "`[agent] max_subagents` must be at least 1".into(),
        });
    }
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
        agent: AgentSettings {
            max_parallel_tools: file.agent.max_parallel_tools,
            idle_worker_minutes: file
                .agent
                .idle_worker_minutes
                .unwrap_or(DEFAULT_IDLE_WORKER_MINUTES),
            compact_at: file.agent.compact_at.unwrap_or(DEFAULT_COMPACT_AT),
            max_subagents: file.agent.max_subagents.unwrap_or(DEFAULT_MAX_SUBAGENTS),
        },
        sources: layers.into_iter().map(|layer| layer.path).collect(),
    })
}

/// `[[permissions.project]]` entries, each with an absolute `path`.
fn project_permissions(
    tables: Vec<file::ProjectPermissionsTable>,
    path: impl Fn() -> PathBuf,
) -> Result<Vec<ProjectPermissions>, ConfigError> {
    tables
        .into_iter()
        .map(|table| {
            if !table.path.is_absolute() {
                return Err(ConfigError::Invalid {
                    path: path(),
                    message: format!(
                        "`path = \"{}\"` in [[permissions.project]] must be an absolute path",
                        table.path.display()
                    ),
                });
            }
            Ok(ProjectPermissions {
                path: table.path,
                allow: table.allow,
                allow_write: table.allow_write,
                allow_tools: table.allow_tools,
            })
        })
        .collect()
}

fn resolve_provider(
    name: String,
    table: ProviderTable,
    path: PathBuf,
) -> Result<ProviderSettings, ConfigError> {
    let Some(base_url) = table.base_url.filter(|url| !url.trim().is_empty()) else {
        return Err(ConfigError::MissingBaseUrl { provider: name, path });
    };
    Ok(ProviderSettings {
        base_url: base_url.trim_end_matches('/').to_owned(),
        // Chat Completions is what nearly every other server speaks.
        wire_api: table.wire_api.unwrap_or(WireApiSetting::Chat),
        api_key_env: table.api_key_env.filter(|variable| !variable.is_empty()),
        headers: table.headers,
        request_max_retries: table.request_max_retries,
        stream_idle_timeout_ms: table.stream_idle_timeout_ms,
        context_window: table.context_window.filter(|tokens| *tokens > 0),
        images: table.images,
    })
}

fn resolve_mcp_server(
    name: &str,
    table: McpServerTable,
    path: PathBuf,
) -> Result<McpServerSettings, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid { path: path.clone(), message };
    let McpServerTable { command, args, env, cwd, url, headers, tool_timeout_sec, enabled } = table;
    let transport = match (command, url) {
        (Some(command), None) => {
            if !headers.is_empty() {
                return Err(invalid(format!(
                    "[mcp_servers.{name}]: `headers` applies only to servers with a `url`"
                )));
            }
            McpTransport::Stdio { command, args, env, cwd: cwd.map(PathBuf::from) }
        }
        (None, Some(url)) => {
            if !args.is_empty() || !env.is_empty() || cwd.is_some() {
                return Err(invalid(format!(
                    "[mcp_servers.{name}]: `args`, `env` and `cwd` apply only to servers with a `command`"
                )));
            }
            McpTransport::Http { url, headers }
        }
        (Some(_), Some(_)) => {
            return Err(invalid(format!(
                "[mcp_servers.{name}]: set either `command` (a local server) or `url` (a remote one), not both"
            )));
        }
        (None, None) => {
            return Err(invalid(format!(
                "[mcp_servers.{name}]: set `command` (a local server) or `url` (a remote one)"
            )));
        }
    };
    Ok(McpServerSettings { transport, tool_timeout_sec, enabled: enabled.unwrap_or(true) })
}

/// Tables merge key by key, recursively; anything else in `over` replaces what is in `base`.
fn merge_tables(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(base_table)), toml::Value::Table(over_table)) => {
                merge_tables(base_table, over_table);
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// The nearest `.kestrel/config.toml` from `cwd` up to the repository root; outside a
/// repository only `cwd` itself is looked at.
fn find_project_config(cwd: &Path) -> Option<PathBuf> {
    let candidate =
        |dir: &Path| Some(dir.join(".kestrel").join("config.toml")).filter(|path| path.is_file());
    let Some(root) = cwd.ancestors().find(|dir| dir.join(".git").exists()) else {
        return candidate(cwd);
    };
    cwd.ancestors().take_while(|dir| dir.starts_with(root)).find_map(candidate)
}

/// Whether two paths are the same file (e.g. `$KESTREL_HOME` is `<cwd>/.kestrel`).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// A TOML error as `file:line:column: message`, with the key path added when the
/// message does not already name it.
fn positioned(path: &Path, text: &str, error: &toml::de::Error) -> ConfigError {
    let Some(offset) = error.span().map(|span| span.start.min(text.len())) else {
        return ConfigError::Invalid {
            path: path.to_path_buf(),
            message: error.to_string().trim().to_owned(),
        };
    };
    let before = text.get(..offset).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    let mut message = error.message().trim().to_owned();
    if let Some(key) = key_at(text, line_start)
        && (key.contains('.') || !message.contains(&format!("`{key}`")))
    {
        message.push_str(&format!(" (in `{key}`)"));
    }
    ConfigError::Parse { path: path.to_path_buf(), line, column, message }
}

/// The dotted key of the line starting at `line_start`: the nearest `[table]` header
/// above it plus the key before `=`. A best-effort reading for messages only.
fn key_at(text: &str, line_start: usize) -> Option<String> {
    let line = text.get(line_start..)?.lines().next().unwrap_or("").trim();
    let header = |line: &str| {
        let inner = line.strip_prefix('[')?.trim_start_matches('[');
        Some(inner.split(']').next()?.trim().to_owned())
    };
    if line.starts_with('[') {
        return header(line);
    }
    let key =
        line.split_once('=').map(|(key, _)| key.trim().to_owned()).filter(|key| !key.is_empty());
    let table = text
        .get(..line_start)?
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .and_then(header);
    match (table, key) {
        (Some(table), Some(key)) => Some(format!("{table}.{key}")),
        (table, key) => table.or(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        resolve(vec![Layer::parse(Path::new("/h/config.toml"), text)?])
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
        assert_eq!(config.provider_names(), ["anthropic", "ollama", "openai", "openrouter"]);
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

    #[test]
    fn tables_merge_recursively_and_scalars_are_replaced() {
        let mut base: toml::Table = toml::from_str("a = 1\n[t]\nx = 1\ny = [1]\n").unwrap();
        let over: toml::Table = toml::from_str("a = 2\n[t]\ny = [2]\nz = 3\n").unwrap();
        merge_tables(&mut base, over);
        let expected: toml::Table = toml::from_str("a = 2\n[t]\nx = 1\ny = [2]\nz = 3\n").unwrap();
        assert_eq!(base, expected);
    }
}
