//! The tools a model can call (ARCHITECTURE §6), behind one `Tool` trait and a
//! `ToolRegistry` that turns a raw call (name + JSON text) into a `ToolOutput`.
//! A tool's failure is an output with `is_error`, never an `Err` that ends a turn.

pub mod apply_patch;
mod arguments;
mod builtin;
pub mod checkpoint;
mod covered_line;
mod diff;
mod edit_file;
mod glob;
mod grep;
pub mod html;
mod image;
mod list_dir;
#[cfg(target_os = "linux")]
mod login_shell;
pub mod mcp;
mod output;
mod paths;
pub mod permission;
mod read_file;
mod shell;
pub mod swarm;
mod tool;
mod update_plan;
mod walk;
mod web_fetch;
pub mod workspace;
mod write_file;

pub use builtin::builtin_tools;
pub use edit_file::EditFileTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use image::{ImageSize, MAX_IMAGE_BYTES, MAX_IMAGE_SIDE, checked_image, image_size};
pub use list_dir::ListDirTool;
pub use read_file::ReadFileTool;
pub use shell::{ShellLimits, ShellTool};
pub use tool::{
    ChangeText, FileChange, Lift, PlanStep, PlanStepStatus, Tool, ToolContext, ToolDefinition,
    ToolFuture, ToolImage, ToolOutput, ToolRegistry, ToolSource, Unconfined,
};
pub use update_plan::UpdatePlanTool;
pub use web_fetch::WebFetchTool;
pub use write_file::WriteFileTool;
