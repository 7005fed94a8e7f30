//! `update_plan`: the model's task list, validated and handed to UIs as an ACP plan.

use crate::{
    PlanStep, PlanStepStatus, Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput, arguments,
};
use serde::Deserialize;
use serde_json::json;

/// The `update_plan` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct UpdatePlanTool;

#[derive(Deserialize)]
struct Arguments {
    plan: Vec<PlanStep>,
}

impl Tool for UpdatePlanTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "update_plan".to_string(),
            description: "Records your plan for the task as a list of steps, each `pending`, \
                          `in_progress` or `completed`, and shows it to the user. Send the \
                          whole list every time; keep at most one step `in_progress` and mark \
                          steps completed as you finish them. Use it for multi-step work, not \
                          for a single quick action."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "plan": {
                        "type": "array",
                        "description": "The complete list of steps, in order.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "step": {"type": "string", "description": "What this step does, in a short sentence."},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                            },
                            "required": ["step", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["plan"],
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn run<'a>(
        &'a self,
        arguments: serde_json::Value,
        _context: &'a ToolContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let arguments: Arguments = match arguments::parse("update_plan", arguments) {
                Ok(arguments) => arguments,
                Err(output) => return output,
            };
            let plan = arguments.plan;
            if let Some(index) = plan.iter().position(|step| step.step.trim().is_empty()) {
                return ToolOutput::error(format!(
                    "step {} of the plan has no text; every step needs a short description",
                    index + 1
                ));
            }
            let count = |status: PlanStepStatus| plan.iter().filter(|s| s.status == status).count();
            let in_progress = count(PlanStepStatus::InProgress);
            if in_progress > 1 {
                return ToolOutput::error(format!(
                    "{in_progress} steps are in_progress; at most one step may be in_progress \
                     at a time (mark the others pending or completed)"
                ));
            }
            let summary = if plan.is_empty() {
                "Plan cleared.".to_string()
            } else {
                format!(
                    "Plan updated: {} completed, {in_progress} in progress, {} pending.",
                    count(PlanStepStatus::Completed),
                    count(PlanStepStatus::Pending)
                )
            };
            ToolOutput { plan: Some(plan), ..ToolOutput::ok(summary) }
        })
    }
}
