//! `grep`: regex search over files with ripgrep's crates, honouring .gitignore, .ignore
//! and hidden-file rules, skipping binary files, stopping at `max_results`.

use crate::arguments::{self, optional_bool, optional_u64};
use crate::walk::{self, FileGlob};
use crate::workspace;
use crate::{Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput, paths};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;

/// Results when the call gives no `max_results`.
pub const DEFAULT_MAX_RESULTS: u64 = 100;
/// The most results one call may ask for.
const MAX_MAX_RESULTS: u64 = 2000;
/// Characters of a matching line shown before it is cut.
const MAX_LINE_CHARS: usize = 300;

/// The `grep` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct GrepTool;

#[derive(Deserialize)]
struct Arguments {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default, deserialize_with = "optional_bool")]
    case_insensitive: Option<bool>,
    #[serde(default, deserialize_with = "optional_u64")]
    max_results: Option<u64>,
}

impl Tool for GrepTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "grep".to_string(),
            description: format!(
                "Searches file contents with a regular expression (Rust regex syntax, like \
                 ripgrep) and returns matching lines as `path:line:text`. Searches the \
                 working directory unless `path` names a directory or file; honours \
                 .gitignore and skips hidden and binary files. `glob` limits the files \
                 searched (e.g. `*.rs`, `src/**/*.ts`). Returns at most `max_results` lines \
                 (default {DEFAULT_MAX_RESULTS})."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression to search for."},
                    "path": {"type": "string", "description": "Directory or file to search (default: the working directory)."},
                    "glob": {"type": "string", "description": "Only search files whose path matches this glob, e.g. `*.py`."},
                    "case_insensitive": {"type": "boolean", "description": "Match case-insensitively (default false)."},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_MAX_RESULTS, "description": format!("Maximum matching lines to return (default {DEFAULT_MAX_RESULTS}).")}
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
            let arguments: Arguments = match arguments::parse("grep", arguments) {
                Ok(arguments) => arguments,
                Err(output) => return output,
            };
            let root = match workspace::search_root(context, arguments.path.as_deref()) {
                Ok(root) => root,
                Err(output) => return output,
            };
            let max_results = match arguments.max_results {
                Some(0) => return ToolOutput::error("max_results must be at least 1"),
                Some(count) => count.min(MAX_MAX_RESULTS),
                None => DEFAULT_MAX_RESULTS,
            };
            let search = Search {
                pattern: arguments.pattern,
                root,
                glob: arguments.glob,
                case_insensitive: arguments.case_insensitive.unwrap_or(false),
                max_results,
            };
            let context = context.clone();
            match tokio::task::spawn_blocking(move || search.run(&context)).await {
                Ok(output) => output,
                Err(error) => ToolOutput::error(format!("grep failed: {error}")),
            }
        })
    }
}

struct Search {
    pattern: String,
    root: PathBuf,
    glob: Option<String>,
    case_insensitive: bool,
    max_results: u64,
}

impl Search {
    fn run(self, context: &ToolContext) -> ToolOutput {
        let shown_root = paths::display(context, &self.root);
        if !self.root.exists() {
            return ToolOutput::error(format!("{shown_root} does not exist"));
        }
        let matcher = match RegexMatcherBuilder::new()
            .case_insensitive(self.case_insensitive)
            .line_terminator(Some(b'\n'))
            .build(&self.pattern)
        {
            Ok(matcher) => matcher,
            Err(error) => {
                return ToolOutput::error(format!("invalid regex `{}`: {error}", self.pattern));
            }
        };
        let glob = match self.glob.as_deref().filter(|glob| !glob.trim().is_empty()) {
            None => None,
            Some(glob) => match FileGlob::new(glob) {
                Ok(glob) => Some(glob),
                Err(message) => return ToolOutput::error(message),
            },
        };
        let walker = walk::builder(&self.root, walk::Hidden::Skip).build();
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(0))
            .line_number(true)
            .build();
        let mut lines: Vec<String> = Vec::new();
        let mut capped = false;
        let mut files_with_errors = 0usize;
        for entry in walker {
            if context.cancel.is_cancelled() {
                return ToolOutput::error("grep cancelled by the user");
            }
            let Ok(entry) = entry else {
                files_with_errors += 1;
                continue;
            };
            if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                continue;
            }
            if glob.as_ref().is_some_and(|glob| !glob.matches(&self.root, entry.path())) {
                continue;
            }
            let shown = paths::display(context, entry.path());
            let result = searcher.search_path(
                &matcher,
                entry.path(),
                Lossy(|number, line| {
                    if lines.len() as u64 >= self.max_results {
                        capped = true;
                        return Ok(false);
                    }
                    lines.push(format!("{shown}:{number}:{}", cut(line)));
                    Ok(true)
                }),
            );
            if result.is_err() {
                files_with_errors += 1;
            }
            if capped {
                break;
            }
        }
        if lines.is_empty() {
            return ToolOutput::ok(format!("No matches for `{}` in {shown_root}", self.pattern));
        }
        let mut text = lines.join("\n");
        if capped {
            text.push_str(&format!(
                "\n[results capped at {} lines; narrow the pattern, path or glob, or raise \
                 max_results]",
                self.max_results
            ));
        }
        if files_with_errors > 0 {
            text.push_str(&format!("\n[{files_with_errors} file(s) could not be read]"));
        }
        ToolOutput::ok(text)
    }
}

/// The line without its newline, cut to a readable length.
fn cut(line: &str) -> String {
    let line = line.trim_end_matches(['\n', '\r']);
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((end, _)) => format!("{} [...]", &line[..end]),
        None => line.to_string(),
    }
}
