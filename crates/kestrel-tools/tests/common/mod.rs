//! Shared helpers: a ToolContext on a temp dir and a one-line way to call a tool
//! through the registry with JSON text, as the agent does.

#![allow(dead_code)]

pub mod permission;

use kestrel_protocol::Mode;
use kestrel_tools::{ToolContext, ToolOutput, Unconfined, builtin_tools};
use std::path::Path;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub fn context(root: &Path, mode: Mode) -> ToolContext {
    ToolContext {
        cwd: root.to_path_buf(),
        workspace: root.to_path_buf(),
        mode,
        network: false,
        cancel: CancellationToken::new(),
        granted_writes: Vec::new(),
        unconfined: Unconfined::No,
        workspace_pin: None,
    }
}

/// Calls `name` with `arguments` (a JSON value) through the built-in registry, bounded
/// so that no test can hang.
pub async fn call(context: &ToolContext, name: &str, arguments: serde_json::Value) -> ToolOutput {
    call_text(context, name, &arguments.to_string()).await
}

pub async fn call_text(context: &ToolContext, name: &str, arguments: &str) -> ToolOutput {
    let registry = builtin_tools();
    tokio::time::timeout(Duration::from_secs(60), registry.call(name, arguments, context))
        .await
        .unwrap_or_else(|_| panic!("tool call did not finish within 60 s"))
}

/// Asserts success and returns the content.
pub fn ok(output: &ToolOutput) -> &str {
    assert!(!output.is_error, "expected success, got error: {}", output.content);
    &output.content
}

/// Asserts failure and returns the message.
pub fn err(output: &ToolOutput) -> &str {
    assert!(output.is_error, "expected an error, got: {}", output.content);
    &output.content
}
