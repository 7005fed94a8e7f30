//! `write_file`: creates or replaces a whole file, creating missing parent directories,
//! and reports the change as a unified diff.

use crate::arguments;
use crate::workspace::{self, Access};
use crate::{FileChange, Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput, diff, paths};
use serde::Deserialize;
use serde_json::json;
use std::io;

/// The `write_file` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct WriteFileTool;

#[derive(Deserialize)]
struct Arguments {
    path: String,
    content: String,
}

impl Tool for WriteFileTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "write_file".to_string(),
            description: "Writes `content` to a file, replacing the whole file if it exists and \
                          creating it (and any missing parent directories) if not. Use it for \
                          new files or complete rewrites; for changes to part of an existing \
                          file prefer edit_file or apply_patch."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write, relative to the working directory or absolute."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a self, arguments: serde_json::Value, context: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arguments: Arguments = match arguments::parse("write_file", arguments) {
                Ok(arguments) => arguments,
                Err(output) => return output,
            };
            let path = match workspace::confine(context, &arguments.path, Access::Write) {
                Ok(path) => path,
                Err(reason) => return ToolOutput::error(reason),
            };
            let shown = paths::display(context, &path);
            if let Ok(metadata) = tokio::fs::metadata(&path).await
                && !metadata.is_file()
            {
                let what = if metadata.is_dir() { "a directory" } else { "not a regular file" };
                return ToolOutput::error(format!(
                    "{shown} is {what}; write_file needs a file path"
                ));
            }
            let old = match tokio::fs::read(&path).await {
                Ok(bytes) => Some(bytes),
                Err(error) if error.kind() == io::ErrorKind::NotFound => None,
                Err(error) if error.kind() == io::ErrorKind::IsADirectory => {
                    return ToolOutput::error(format!(
                        "{shown} is a directory; write_file needs a file path"
                    ));
                }
                Err(error) => return ToolOutput::error(format!("cannot write {shown}: {error}")),
            };
            if let Some(parent) = path.parent()
                && let Err(error) = tokio::fs::create_dir_all(parent).await
            {
                return ToolOutput::error(format!(
                    "cannot create the directory {}: {error}",
                    paths::display(context, parent)
                ));
            }
            if let Err(error) = tokio::fs::write(&path, arguments.content.as_bytes()).await {
                return ToolOutput::error(format!("cannot write {shown}: {error}"));
            }
            let lines = arguments.content.lines().count();
            let verb = if old.is_some() { "Overwrote" } else { "Created" };
            let old_text = old.as_deref().map(String::from_utf8_lossy);
            let diff = diff::unified(&shown, old_text.as_deref(), &arguments.content);
            let text = match old.as_deref().map(std::str::from_utf8) {
                None => diff::change_text(None, Some(&arguments.content)),
                Some(Ok(before)) => diff::change_text(Some(before), Some(&arguments.content)),
                Some(Err(_)) => None,
            };
            let mut output = ToolOutput::ok(format!(
                "{verb} {shown} ({lines} line{}, {} bytes)",
                if lines == 1 { "" } else { "s" },
                arguments.content.len()
            ));
            output.changes.push(FileChange { path, diff, text });
            output
        })
    }
}
