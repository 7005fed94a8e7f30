//! `edit_file`: replaces an exact string in a file. Exactly one match is required unless
//! `replace_all` is set; a CRLF file keeps its CRLF line endings.

use crate::arguments::{self, optional_bool};
use crate::workspace::{self, Access, WriteScope};
use crate::{FileChange, Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput, diff, paths};
use serde::Deserialize;
use serde_json::json;
use std::io;

/// Match positions listed in the error for an ambiguous `old_string`.
const LISTED_MATCHES: usize = 10;

/// The `edit_file` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct EditFileTool;

#[derive(Deserialize)]
struct Arguments {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default, deserialize_with = "optional_bool")]
    replace_all: Option<bool>,
}

impl Tool for EditFileTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "edit_file".to_string(),
            description: "Replaces `old_string` with `new_string` in a file. `old_string` must \
                          match the file exactly (indentation and whitespace included, without \
                          read_file's line numbers) and exactly once: include enough surrounding \
                          lines to make it unique, or set `replace_all` to replace every \
                          occurrence. Read the file first. Line endings follow the file."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to edit, relative to the working directory or absolute."},
                    "old_string": {"type": "string", "description": "The exact text to replace."},
                    "new_string": {"type": "string", "description": "The text to put in its place (must differ from old_string)."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one (default false)."}
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a self, arguments: serde_json::Value, context: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arguments: Arguments = match arguments::parse("edit_file", arguments) {
                Ok(arguments) => arguments,
                Err(output) => return output,
            };
            let path = match workspace::confine(context, &arguments.path, Access::Write) {
                Ok(path) => path,
                Err(reason) => return ToolOutput::error(reason),
            };
            let shown = paths::display(context, &path);
            if arguments.old_string.is_empty() {
                return ToolOutput::error(
                    "old_string is empty; give the exact text to replace (use write_file to \
                     create a file or replace all of it)",
                );
            }
            if arguments.old_string == arguments.new_string {
                return ToolOutput::error(
                    "old_string and new_string are the same, so the edit would change nothing",
                );
            }
            let scope = WriteScope::of(context);
            let edit = Edit {
                old: &arguments.old_string,
                new: &arguments.new_string,
                replace_all: arguments.replace_all.unwrap_or(false),
            };
            let target = path.clone();
            let place = match tokio::task::spawn_blocking(move || {
                scope.open(&target, false, &mut Vec::new())
            })
            .await
            {
                Ok(Ok(place)) => place,
                Ok(Err(error)) if error.kind() == io::ErrorKind::NotFound => {
                    return ToolOutput::error(format!(
                        "{shown} does not exist; use write_file to create a file"
                    ));
                }
                Ok(Err(error)) => {
                    return ToolOutput::error(format!("cannot edit {shown}: {error}"));
                }
                Err(error) => {
                    return ToolOutput::error(format!("edit_file stopped unexpectedly: {error}"));
                }
            };
            let content = match place.read() {
                Ok(Some(content)) => content,
                Ok(None) => {
                    return ToolOutput::error(format!(
                        "{shown} does not exist; use write_file to create a file"
                    ));
                }
                Err(error) if error.kind() == io::ErrorKind::IsADirectory => {
                    return ToolOutput::error(format!("{shown} is a directory, not a file"));
                }
                Err(error) if error.kind() == io::ErrorKind::InvalidInput => {
                    return ToolOutput::error(format!("{shown} is not a regular file"));
                }
                Err(error) => return ToolOutput::error(format!("cannot read {shown}: {error}")),
            };
            let Ok(text) = String::from_utf8(content.bytes) else {
                return ToolOutput::error(format!(
                    "{shown} is not UTF-8 text; edit_file only edits text files"
                ));
            };
            let (updated, report) = match edit.apply(&text, &shown) {
                Ok(result) => result,
                Err(message) => return ToolOutput::error(message),
            };
            if let Err(error) = place.replace(updated.as_bytes(), Some(content.mode)) {
                return ToolOutput::error(format!("cannot write {shown}: {error}"));
            }
            let diff = diff::unified(&shown, Some(&text), &updated);
            let text = diff::change_text(Some(&text), Some(&updated));
            let mut output = ToolOutput::ok(report);
            output.changes.push(FileChange { path, diff, text });
            output
        })
    }
}

/// One replacement request, independent of the file system.
struct Edit<'a> {
    old: &'a str,
    new: &'a str,
    replace_all: bool,
}

impl Edit<'_> {
    /// The new text and a report line, or the error message for the model.
    fn apply(&self, text: &str, shown: &str) -> Result<(String, String), String> {
        // A CRLF file is matched and written with CRLF even when the model sends LF.
        let crlf = text.contains("\r\n") && !self.old.contains('\r');
        let (old, new) = if crlf {
            (to_crlf(self.old), to_crlf(self.new))
        } else {
            (self.old.to_string(), self.new.to_string())
        };
        let positions: Vec<usize> = text.match_indices(&old).map(|(index, _)| index).collect();
        match positions.len() {
            0 => return Err(no_match(text, self.old, shown)),
            1 => {}
            count if !self.replace_all => {
                let lines: Vec<String> = positions
                    .iter()
                    .take(LISTED_MATCHES)
                    .map(|&index| line_of(text, index).to_string())
                    .collect();
                return Err(format!(
                    "old_string matches {count} times in {shown} (at lines {}); add more \
                     surrounding lines to old_string so it matches exactly once, or set \
                     replace_all to true to replace all {count}",
                    lines.join(", ")
                ));
            }
            _ => {}
        }
        let first_line = line_of(text, positions[0]);
        let updated = text.replace(&old, &new);
        let report = if positions.len() == 1 {
            format!("Edited {shown}: replaced 1 occurrence at line {first_line}")
        } else {
            format!("Edited {shown}: replaced {} occurrences", positions.len())
        };
        Ok((updated, report))
    }
}

/// `\n` not already preceded by `\r` becomes `\r\n`.
fn to_crlf(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    let mut previous = '\0';
    for character in text.chars() {
        if character == '\n' && previous != '\r' {
            out.push('\r');
        }
        out.push(character);
        previous = character;
    }
    out
}

/// 1-based line number of the byte `index` in `text`.
fn line_of(text: &str, index: usize) -> usize {
    text[..index].bytes().filter(|&b| b == b'\n').count() + 1
}

/// The error for an `old_string` that is not in the file, with a hint when it matches
/// once whitespace and line endings are normalised.
fn no_match(text: &str, old: &str, shown: &str) -> String {
    let base = format!(
        "old_string was not found in {shown}; read the file again and copy the exact text \
         (without line numbers)"
    );
    match fuzzy_line(text, old) {
        Some(line) => format!(
            "{base}. It does match near line {line} if whitespace and line endings are \
             ignored: check indentation (tabs vs spaces), trailing spaces and blank lines"
        ),
        None => base,
    }
}

/// Collapses runs of whitespace to one space and trims the ends.
fn squash(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first line where `needle` matches `text` line by line after `squash`: its first
/// line may end a file line, its last may start one, the middle must equal.
fn fuzzy_line(text: &str, needle: &str) -> Option<usize> {
    let wanted: Vec<String> = needle.lines().map(squash).filter(|line| !line.is_empty()).collect();
    if wanted.is_empty() {
        return None;
    }
    let lines: Vec<String> = text.lines().map(squash).filter(|line| !line.is_empty()).collect();
    let numbers: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, _)| index + 1)
        .collect();
    if wanted.len() > lines.len() {
        return None;
    }
    (0..=lines.len() - wanted.len()).find_map(|start| {
        let window = &lines[start..start + wanted.len()];
        let last = wanted.len() - 1;
        let matches = wanted.iter().zip(window).enumerate().all(|(index, (want, have))| {
            match (index == 0, index == last) {
                (true, true) => have.contains(want.as_str()),
                (true, false) => have.ends_with(want.as_str()),
                (false, true) => have.starts_with(want.as_str()),
                (false, false) => have == want,
            }
        });
        matches.then(|| numbers[start])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzzy_match_ignores_indentation_and_blank_lines() {
        let text = "fn main() {\n    let x = 1;\n\n    let y = 2;\n}\n";
        assert_eq!(fuzzy_line(text, "let  x = 1;\nlet y = 2;"), Some(2));
        assert_eq!(fuzzy_line(text, "let z = 3;"), None);
    }

    #[test]
    fn crlf_conversion_keeps_existing_crlf() {
        assert_eq!(to_crlf("a\nb\r\nc"), "a\r\nb\r\nc");
    }
}
