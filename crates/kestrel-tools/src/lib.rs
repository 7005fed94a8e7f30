//! The tools a model can call (ARCHITECTURE §6), behind one `Tool` trait and a
//! `ToolRegistry` that turns a raw call (name + JSON text) into a `ToolOutput`.
//! A tool's failure is an output with `is_error`, never an `Err` that ends a turn.

mod tool;
pub mod workspace;

pub use tool::{
    FileChange, PlanStep, PlanStepStatus, Tool, ToolContext, ToolDefinition, ToolFuture,
    ToolOutput, ToolRegistry,
};
