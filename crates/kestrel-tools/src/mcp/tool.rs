//! MCP tools as [`Tool`]s: [`McpTool`] is one tool of a server that is up;
//! [`PendingTool`] stands for a name of a server that is still starting (the call waits
//! for it) or is gone (the call says why).

use crate::mcp::client::{Client, ListedTool};
use crate::mcp::result::tool_output;
use crate::mcp::server::{STARTUP_TIMEOUT, ServerSlot, State};
use crate::{Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput};
use serde_json::{Map, Value};
use std::sync::{Arc, Weak};

/// One tool of a running MCP server, under its model-facing name.
pub(crate) struct McpTool {
    server: Weak<ServerSlot>,
    server_name: String,
    remote_name: String,
    definition: ToolDefinition,
    client: Client,
}

impl McpTool {
    pub(crate) fn new(
        server: &Arc<ServerSlot>,
        name: String,
        tool: ListedTool,
        client: Client,
    ) -> Self {
        let description = tool
            .description
            .filter(|text| !text.trim().is_empty())
            .or(tool.title.clone())
            .unwrap_or_else(|| {
                format!("The `{}` tool of MCP server `{}`.", tool.name, server.name)
            });
        Self {
            server: Arc::downgrade(server),
            server_name: server.name.clone(),
            remote_name: tool.name,
            definition: ToolDefinition {
                name,
                description,
                parameters: object_schema(&tool.input_schema),
            },
            client,
        }
    }

    async fn call(&self, arguments: Value, context: &ToolContext) -> ToolOutput {
        let Some(server) = self.server.upgrade() else {
            return ToolOutput::error("the session's MCP connections are closed");
        };
        match server.state() {
            State::Ready { .. } => {}
            State::Starting => {} // not reached: a tool exists only once its server is up
            State::Failed(reason) | State::Stopped(reason) => {
                return ToolOutput::error(format!(
                    "MCP server `{}` is not running ({reason}), so `{}` cannot be called",
                    self.server_name, self.definition.name
                ));
            }
        }
        let timeout = server.tool_timeout;
        // Dropping the call (timeout, cancel) sends the server `notifications/cancelled`.
        let call =
            tokio::time::timeout(timeout, self.client.call_tool(&self.remote_name, arguments));
        tokio::select! {
            result = call => match result {
                Ok(Ok(result)) => tool_output(result),
                Ok(Err(error)) => {
                    let why = match server.state() {
                        State::Failed(reason) | State::Stopped(reason) => {
                            format!("the server stopped ({reason})")
                        }
                        State::Starting | State::Ready { .. } => error.message,
                    };
                    ToolOutput::error(format!(
                        "MCP tool `{}` of server `{}` failed: {why}",
                        self.remote_name, self.server_name
                    ))
                }
                Err(_) => ToolOutput::error(format!(
                    "MCP tool `{}` of server `{}` did not answer within {} s and was cancelled \
                     (raise tool_timeout_sec in [mcp_servers.{}] if it needs longer)",
                    self.remote_name,
                    self.server_name,
                    timeout.as_secs(),
                    self.server_name
                )),
            },
            () = context.cancel.cancelled() => {
                ToolOutput::error(format!("`{}` was cancelled by the user", self.definition.name))
            }
        }
    }
}

impl Tool for McpTool {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    /// Never: a server's `readOnlyHint` is its own claim, untrusted input, so every MCP
    /// call goes through the permission policy (which allows them in auto and yolo).
    fn is_read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a self, arguments: Value, context: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(self.call(arguments, context))
    }
}

/// A name under a server's prefix that is not (yet) one of its listed tools.
pub(crate) struct PendingTool {
    server: Arc<ServerSlot>,
    name: String,
}

impl PendingTool {
    pub(crate) fn new(server: Arc<ServerSlot>, name: &str) -> Self {
        Self { server, name: name.to_string() }
    }

    async fn call(&self, arguments: Value, context: &ToolContext) -> ToolOutput {
        let settled = tokio::select! {
            // The supervisor settles the state within the startup timeout; the margin
            // only guards against a bug there.
            settled = tokio::time::timeout(STARTUP_TIMEOUT * 2, self.server.settled()) => settled,
            () = context.cancel.cancelled() => {
                return ToolOutput::error(format!("`{}` was cancelled by the user", self.name));
            }
        };
        let server = &self.server.name;
        match settled {
            Ok(Some(State::Ready { tools, .. })) => {
                match tools.iter().find(|tool| tool.definition().name == self.name) {
                    Some(tool) => tool.run(arguments, context).await,
                    None => {
                        let known: Vec<String> =
                            tools.iter().map(|tool| tool.definition().name).collect();
                        ToolOutput::error(format!(
                            "MCP server `{server}` has no tool `{}`; its tools: {}",
                            self.name,
                            known.join(", ")
                        ))
                    }
                }
            }
            Ok(Some(State::Failed(reason))) => ToolOutput::error(format!(
                "MCP server `{server}` failed to start ({reason}), so `{}` cannot be called",
                self.name
            )),
            Ok(Some(State::Stopped(reason))) => ToolOutput::error(format!(
                "MCP server `{server}` is not running ({reason}), so `{}` cannot be called",
                self.name
            )),
            Ok(Some(State::Starting)) | Ok(None) | Err(_) => {
                ToolOutput::error(format!("MCP server `{server}` did not start"))
            }
        }
    }
}

impl Tool for PendingTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: format!("A tool of MCP server `{}`.", self.server.name),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
        }
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a self, arguments: Value, context: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(self.call(arguments, context))
    }
}

/// The server's input schema as the providers want it: an object schema with
/// `properties` (some providers refuse one without).
fn object_schema(schema: &Map<String, Value>) -> Value {
    let mut schema = schema.clone();
    schema.entry("type").or_insert_with(|| Value::String("object".into()));
    schema.entry("properties").or_insert_with(|| Value::Object(Default::default()));
    Value::Object(schema)
}
