//! MCP servers: `[mcp_servers.NAME]`, each either a local command spoken to over stdio
//! or a remote server over streamable HTTP, never both.

use super::ConfigError;
use super::file::McpServerTable;
use std::collections::BTreeMap;
use std::path::PathBuf;

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

/// Checks one merged `[mcp_servers.NAME]` table; `path` is the file an error names.
pub(super) fn resolve_mcp_server(
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
