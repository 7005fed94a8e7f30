//! `write_file`: creates or replaces a whole file, creating missing parent directories,
//! and reports the change as a unified diff.

use crate::arguments;
use crate::workspace::{self, Access, WriteScope};
use crate::{FileChange, Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput, diff, paths};
use serde::Deserialize;
use serde_json::json;
use std::io;
use std::path::Path;

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
            let scope = WriteScope::of(context);
            let content = arguments.content.clone();
            let target = path.clone();
            let written =
                tokio::task::spawn_blocking(move || write(&scope, &target, content.as_bytes()))
                    .await;
            let old = match written {
                Ok(Ok(done)) => done,
                Ok(Err(Failure::NotAFile(what))) => {
                    return ToolOutput::error(format!(
                        "{shown} is {what}; write_file needs a file path"
                    ));
                }
                Ok(Err(Failure::Io(error))) => {
                    return ToolOutput::error(format!("cannot write {shown}: {error}"));
                }
                Err(error) => {
                    return ToolOutput::error(format!("write_file stopped unexpectedly: {error}"));
                }
            };
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

/// Why a write failed.
enum Failure {
    /// The path is a directory or another non-file (`what` says which).
    NotAFile(&'static str),
    Io(io::Error),
}

/// Replaces the file at `path` (within `scope`) with `content`, keeping its
/// permissions. Its old bytes, `None` if it is new.
fn write(scope: &WriteScope, path: &Path, content: &[u8]) -> Result<Option<Vec<u8>>, Failure> {
    let place = scope.open(path, true, &mut Vec::new()).map_err(Failure::Io)?;
    let old = match place.read() {
        Ok(old) => old,
        Err(error) if error.kind() == io::ErrorKind::IsADirectory => {
            return Err(Failure::NotAFile("a directory"));
        }
        Err(error) if error.kind() == io::ErrorKind::InvalidInput => {
            return Err(Failure::NotAFile("not a regular file"));
        }
        Err(error) => return Err(Failure::Io(error)),
    };
    place.replace(content, old.as_ref().map(|old| old.mode)).map_err(Failure::Io)?;
    Ok(old.map(|old| old.bytes))
}
