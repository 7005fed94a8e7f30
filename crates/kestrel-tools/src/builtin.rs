//! The registry of every built-in tool a session starts with.

use crate::ToolRegistry;
use crate::apply_patch::ApplyPatchTool;
use crate::edit_file::EditFileTool;
use crate::glob::GlobTool;
use crate::grep::GrepTool;
use crate::list_dir::ListDirTool;
use crate::read_file::ReadFileTool;
use crate::shell::ShellTool;
use crate::update_plan::UpdatePlanTool;
use crate::web_fetch::WebFetchTool;
use crate::write_file::WriteFileTool;
use std::sync::Arc;

/// A registry with the built-in tools of ARCHITECTURE §6 (read_file, write_file,
/// edit_file, apply_patch, shell, grep, glob, list_dir, update_plan, web_fetch).
/// `task` and MCP tools are registered by their owners.
pub fn builtin_tools() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(ReadFileTool));
    registry.register(Arc::new(WriteFileTool));
    registry.register(Arc::new(EditFileTool));
    registry.register(Arc::new(ApplyPatchTool));
    registry.register(Arc::new(ShellTool::default()));
    registry.register(Arc::new(GrepTool));
    registry.register(Arc::new(GlobTool));
    registry.register(Arc::new(ListDirTool));
    registry.register(Arc::new(UpdatePlanTool));
    registry.register(Arc::new(WebFetchTool::default()));
    registry
}
