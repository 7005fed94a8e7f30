//! The model-facing `apply_patch` tool (ARCHITECTURE §6): every path of the patch,
//! sources and `Move to` destinations alike, must pass workspace confinement before
//! anything is written.

use super::plan::{PatchSummary, apply_patch_beneath};
use crate::workspace::{Access, WriteScope, confine};
use crate::{FileChange, Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput};
use serde_json::{Value, json};

const DESCRIPTION: &str = "\
Edit files with a patch: add, delete, update and rename files in one atomic step \
(nothing is written unless every part applies).

*** Begin Patch
*** Add File: path/new.txt
+every line of the new file, each prefixed with +
*** Delete File: path/obsolete.txt
*** Update File: path/file.py
*** Move to: path/renamed.py   (optional)
@@ def greet():   (optional: a line of the file before the change, to place the hunk)
     context line, prefixed with one space
-    removed line
+    added line
*** End Patch

Copy context and removed lines exactly from the file; give about 3 lines of context \
around each change, enough that it matches in one place only. Hunks of a file go in \
file order. Add `*** End of File` after a hunk that ends at the end of the file. \
Paths are relative to the working directory.";

/// The `apply_patch` tool. Stateless; register one per registry.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApplyPatchTool;

impl Tool for ApplyPatchTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "apply_patch".to_string(),
            description: DESCRIPTION.to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "patch": {
                        "type": "string",
                        "description": "The whole patch, from `*** Begin Patch` to `*** End Patch`."
                    }
                },
                "required": ["patch"],
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a self, arguments: Value, context: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(patch) = arguments.get("patch").and_then(Value::as_str) else {
                return ToolOutput::error(
                    "apply_patch needs a string argument `patch`: the patch text from \
                     `*** Begin Patch` to `*** End Patch`",
                );
            };
            if context.cancel.is_cancelled() {
                return ToolOutput::error("cancelled before the patch was applied");
            }
            let patch = patch.to_string();
            let context = context.clone();
            // File I/O is blocking; the patch is small, so a blocking thread suffices.
            let outcome = tokio::task::spawn_blocking(move || {
                let scope = WriteScope::of(&context);
                apply_patch_beneath(&patch, &scope, |path| confine(&context, path, Access::Write))
            })
            .await;
            match outcome {
                Ok(Ok(summary)) => success(summary),
                Ok(Err(error)) => ToolOutput::error(error.to_string()),
                Err(error) => {
                    ToolOutput::error(format!("apply_patch stopped unexpectedly: {error}"))
                }
            }
        })
    }
}

fn success(summary: PatchSummary) -> ToolOutput {
    let changes = summary
        .files
        .iter()
        .map(|file| FileChange {
            path: file.absolute.clone(),
            diff: file.diff.clone(),
            text: file.text.clone(),
        })
        .collect();
    ToolOutput { changes, ..ToolOutput::ok(summary.to_string()) }
}
