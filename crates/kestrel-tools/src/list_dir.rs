//! `list_dir`: an indented tree of a directory, honouring .gitignore, directories
//! marked with a trailing `/`.

use crate::arguments::{self, optional_u64};
use crate::walk;
use crate::workspace;
use crate::{Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput, paths};
use serde::Deserialize;
use serde_json::json;
use std::path::Path;

/// Depth when the call gives none.
pub const DEFAULT_DEPTH: u64 = 2;
/// The deepest a call may ask for.
const MAX_DEPTH: u64 = 10;
/// Entries shown at most.
pub const MAX_ENTRIES: usize = 500;

/// The `list_dir` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct ListDirTool;

#[derive(Deserialize)]
struct Arguments {
    #[serde(default)]
    path: Option<String>,
    #[serde(default, deserialize_with = "optional_u64")]
    depth: Option<u64>,
}

impl Tool for ListDirTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "list_dir".to_string(),
            description: format!(
                "Lists a directory as an indented tree, directories marked with a trailing \
                 `/`, down to `depth` levels (default {DEFAULT_DEPTH}). Honours .gitignore; \
                 shows dot files but not .git. Shows at most {MAX_ENTRIES} entries."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory to list (default: the working directory)."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH, "description": format!("How many levels to descend (default {DEFAULT_DEPTH}).")}
                },
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, arguments: serde_json::Value, context: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arguments: Arguments = match arguments::parse("list_dir", arguments) {
                Ok(arguments) => arguments,
                Err(output) => return output,
            };
            let root = match workspace::search_root(context, arguments.path.as_deref()) {
                Ok(root) => root,
                Err(output) => return output,
            };
            let depth = match arguments.depth {
                Some(0) => return ToolOutput::error("depth must be at least 1"),
                Some(depth) => depth.min(MAX_DEPTH),
                None => DEFAULT_DEPTH,
            };
            let context = context.clone();
            match tokio::task::spawn_blocking(move || tree(&context, &root, depth)).await {
                Ok(output) => output,
                Err(error) => ToolOutput::error(format!("list_dir failed: {error}")),
            }
        })
    }
}

fn tree(context: &ToolContext, root: &Path, depth: u64) -> ToolOutput {
    let shown_root = paths::display(context, root);
    match std::fs::metadata(root) {
        Ok(metadata) if metadata.is_dir() => {}
        Ok(_) => {
            return ToolOutput::error(format!(
                "{shown_root} is a file, not a directory; use read_file to read it"
            ));
        }
        Err(error) => return ToolOutput::error(format!("cannot list {shown_root}: {error}")),
    }
    let mut builder = walk::builder(root, walk::Hidden::Show);
    builder.max_depth(usize::try_from(depth).ok());
    let mut lines = vec![format!("{}/", shown_root.trim_end_matches('/'))];
    let mut shown = 0usize;
    let mut capped = false;
    for entry in builder.build() {
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        if shown >= MAX_ENTRIES {
            capped = true;
            break;
        }
        shown += 1;
        let indent = "  ".repeat(entry.depth());
        let name = entry.file_name().to_string_lossy();
        let marker = if entry.file_type().is_some_and(|kind| kind.is_dir()) { "/" } else { "" };
        lines.push(format!("{indent}{name}{marker}"));
    }
    if shown == 0 {
        lines.push("  (empty)".to_string());
    }
    let mut text = lines.join("\n");
    if capped {
        text.push_str(&format!(
            "\n[listing capped at {MAX_ENTRIES} entries; list a subdirectory or use a smaller \
             depth]"
        ));
    }
    ToolOutput::ok(text)
}
