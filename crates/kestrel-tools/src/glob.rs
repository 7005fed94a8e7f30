//! `glob`: files whose path matches a glob, newest first, honouring .gitignore.

use crate::walk::{self, FileGlob};
use crate::workspace;
use crate::{Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput, arguments, paths};
use serde::Deserialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Paths returned by one call at most.
pub const MAX_PATHS: usize = 1000;

/// The `glob` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct GlobTool;

#[derive(Deserialize)]
struct Arguments {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

impl Tool for GlobTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "glob".to_string(),
            description: format!(
                "Finds files by name pattern and lists them newest first (by modification \
                 time). A pattern without `/` matches file names at any depth (`*.rs`, \
                 `Cargo.toml`); with `/` it matches the path relative to `path` \
                 (`src/**/*.ts`, `tests/*.py`). `*` stays within a directory, `**` crosses \
                 directories, `{{a,b}}` and `[abc]` work. Honours .gitignore and skips hidden \
                 files. Returns at most {MAX_PATHS} paths."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob to match, e.g. `**/*.rs`."},
                    "path": {"type": "string", "description": "Directory to search in (default: the working directory)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, arguments: serde_json::Value, context: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arguments: Arguments = match arguments::parse("glob", arguments) {
                Ok(arguments) => arguments,
                Err(output) => return output,
            };
            let root = match workspace::search_root(context, arguments.path.as_deref()) {
                Ok(root) => root,
                Err(output) => return output,
            };
            let glob = match FileGlob::new(&arguments.pattern) {
                Ok(glob) => glob,
                Err(message) => return ToolOutput::error(message),
            };
            let context = context.clone();
            let pattern = arguments.pattern;
            match tokio::task::spawn_blocking(move || find(&context, &root, &glob, &pattern)).await
            {
                Ok(output) => output,
                Err(error) => ToolOutput::error(format!("glob failed: {error}")),
            }
        })
    }
}

fn find(context: &ToolContext, root: &Path, glob: &FileGlob, pattern: &str) -> ToolOutput {
    let shown_root = paths::display(context, root);
    if !root.is_dir() {
        return ToolOutput::error(format!("{shown_root} is not a directory"));
    }
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    for entry in walk::builder(root, walk::Hidden::Skip).build() {
        if context.cancel.is_cancelled() {
            return ToolOutput::error("glob cancelled by the user");
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|kind| kind.is_file()) {
            continue;
        }
        if !glob.matches(root, entry.path()) {
            continue;
        }
        let modified = entry
            .metadata()
            .ok()
            .and_then(|metadata| metadata.modified().ok())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        found.push((modified, entry.into_path()));
    }
    if found.is_empty() {
        return ToolOutput::ok(format!("No files match `{pattern}` in {shown_root}"));
    }
    // Newest first; ties by path so the order is stable.
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let mut text: String = found
        .iter()
        .take(MAX_PATHS)
        .map(|(_, path)| paths::display(context, path))
        .collect::<Vec<_>>()
        .join("\n");
    if total > MAX_PATHS {
        text.push_str(&format!(
            "\n[showing the {MAX_PATHS} newest of {total} matching files; use a narrower \
             pattern or path]"
        ));
    }
    ToolOutput::ok(text)
}
