//! The `mcpServers` an ACP client sends with `session/new` and `session/load`, as
//! server settings to merge with the configured ones (ACP's win on a name clash: the
//! client asked for them for this session).

use kestrel_protocol::acp;
use kestrel_store::{McpServerSettings, McpTransport};
use std::collections::BTreeMap;

/// The servers Kestrel can run, by name, and one message for each it cannot (an SSE
/// server: Kestrel speaks stdio and streamable HTTP, and advertises only those).
pub fn servers_from_acp(
    servers: &[acp::McpServer],
) -> (BTreeMap<String, McpServerSettings>, Vec<String>) {
    let mut usable = BTreeMap::new();
    let mut refused = Vec::new();
    for server in servers {
        let (name, transport) = match server {
            acp::McpServer::Stdio(stdio) => (
                stdio.name.clone(),
                McpTransport::Stdio {
                    command: stdio.command.display().to_string(),
                    args: stdio.args.clone(),
                    env: stdio.env.iter().map(|v| (v.name.clone(), v.value.clone())).collect(),
                    cwd: None,
                },
            ),
            acp::McpServer::Http(http) => (
                http.name.clone(),
                McpTransport::Http {
                    url: http.url.clone(),
                    headers: http
                        .headers
                        .iter()
                        .map(|h| (h.name.clone(), h.value.clone()))
                        .collect(),
                },
            ),
            acp::McpServer::Sse(sse) => {
                refused.push(format!(
                    "MCP server `{}` failed to start: the SSE transport is not supported; \
                     use streamable HTTP or stdio",
                    sse.name
                ));
                continue;
            }
            // A transport newer than this schema version.
            _ => {
                refused.push("an MCP server with an unsupported transport was ignored".into());
                continue;
            }
        };
        let settings = McpServerSettings { transport, tool_timeout_sec: None, enabled: true };
        usable.insert(name, settings);
    }
    (usable, refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stdio_and_http_servers_are_mapped_and_sse_is_refused() {
        let servers: Vec<acp::McpServer> = serde_json::from_value(json!([
            {"name": "fs", "command": "/usr/bin/mcp-fs", "args": ["."],
             "env": [{"name": "TOKEN", "value": "t"}]},
            {"type": "http", "name": "remote", "url": "http://127.0.0.1:1/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer x"}]},
            {"type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": []},
        ]))
        .expect("valid ACP mcpServers");
        let (usable, refused) = servers_from_acp(&servers);
        assert_eq!(usable.len(), 2);
        assert_eq!(
            usable["fs"].transport,
            McpTransport::Stdio {
                command: "/usr/bin/mcp-fs".into(),
                args: vec![".".into()],
                env: BTreeMap::from([("TOKEN".into(), "t".into())]),
                cwd: None,
            }
        );
        assert_eq!(
            usable["remote"].transport,
            McpTransport::Http {
                url: "http://127.0.0.1:1/mcp".into(),
                headers: BTreeMap::from([("Authorization".into(), "Bearer x".into())]),
            }
        );
        assert_eq!(refused.len(), 1);
        assert!(refused[0].contains("`old`") && refused[0].contains("SSE"), "{refused:?}");
    }
}
