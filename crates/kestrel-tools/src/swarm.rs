//! The swarm's role tools (ARCHITECTURE §10): `swarm_plan` for planner sessions,
//! `swarm_experiments` for the planner sessions of climb runs instead, and `swarm_review`
//! for reviewer sessions. They only check and acknowledge: the
//! orchestrator reads each call's arguments and its result's `is_error` from the session
//! record, so a call answered ok is one the orchestrator can parse.

use crate::{Tool, ToolContext, ToolDefinition, ToolFuture, ToolOutput, arguments};
use kestrel_protocol::swarm::{
    EXPERIMENTS_TOOL, MAX_TASK_ID_LEN, PLAN_TOOL, REVIEW_TOOL, RunKind, SwarmExperiments,
    SwarmPlan, SwarmReview, SwarmRole, SwarmSessionTag,
};
use serde_json::json;
use std::sync::Arc;

/// The tools only sessions of the tag's role (and run kind) get: none for the
/// implementer; a climb's planner proposes experiments instead of a graph.
pub fn role_tools(tag: &SwarmSessionTag) -> Vec<Arc<dyn Tool>> {
    match (tag.role, tag.kind) {
        (SwarmRole::Planner, RunKind::Build) => vec![Arc::new(SwarmPlanTool)],
        (SwarmRole::Planner, RunKind::Climb) => vec![Arc::new(SwarmExperimentsTool)],
        (SwarmRole::Reviewer, _) => vec![Arc::new(SwarmReviewTool)],
        (SwarmRole::Implementer, _) => Vec::new(),
    }
}

/// The climb planner's `swarm_experiments`: experiments to build and measure.
#[derive(Debug, Default, Clone, Copy)]
pub struct SwarmExperimentsTool;

const EXPERIMENTS_SHAPE: &str = "expected {\"experiments\": [{\"id\": \"cache-parse\", \
\"hypothesis\": \"...\", \"description\": \"...\", \"files\": [\"optional/path\"]}]}";

impl Tool for SwarmExperimentsTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: EXPERIMENTS_TOOL.to_string(),
            description: "Records experiments for this climb run: changes you expect to \
                          improve the metric. Each is built by an implementer in its own git \
                          worktree from the current baseline, checked, then measured against \
                          the baseline (interleaved runs of both); only one that beats the \
                          baseline beyond noise is merged and becomes the new baseline. Send \
                          all of this round's experiments in one call. If the answer lists \
                          problems, fix all of them and call swarm_experiments again."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "experiments": {
                        "type": "array",
                        "minItems": 1,
                        "description": "This round's experiments, independent of each other.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {
                                    "type": "string",
                                    "pattern": format!("^[a-z0-9][a-z0-9-]{{0,{}}}$", MAX_TASK_ID_LEN - 1),
                                    "description": "Short unique id, never used before in this run: lowercase letters, digits and `-`; it names the experiment's branch."
                                },
                                "hypothesis": {"type": "string", "description": "One sentence: why this change should move the metric, and by about how much."},
                                "description": {"type": "string", "description": "What to change, precisely enough for an engineer who sees only this: files, functions, the change itself."},
                                "files": {
                                    "type": "array",
                                    "items": {"type": "string"},
                                    "description": "Optional: files it will change."
                                }
                            },
                            "required": ["id", "hypothesis", "description"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["experiments"],
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
            let proposal: SwarmExperiments = match arguments::parse(EXPERIMENTS_TOOL, arguments) {
                Ok(proposal) => proposal,
                Err(output) => return with_shape(output, EXPERIMENTS_SHAPE),
            };
            let problems = proposal.problems();
            if !problems.is_empty() {
                return ToolOutput::error(format!(
                    "the experiments were not recorded:\n{}\nCall swarm_experiments again with \
                     all of them corrected.",
                    problems.iter().map(|p| format!("- {p}")).collect::<Vec<_>>().join("\n")
                ));
            }
            let ids: Vec<&str> = proposal.experiments.iter().map(|e| e.id.as_str()).collect();
            ToolOutput::ok(format!(
                "experiments recorded: {} ({}). End your turn now.",
                ids.len(),
                ids.join(", ")
            ))
        })
    }
}

/// The planner's `swarm_plan`: the run's task graph, validated.
#[derive(Debug, Default, Clone, Copy)]
pub struct SwarmPlanTool;

const PLAN_SHAPE: &str = "expected {\"tasks\": [{\"id\": \"parse\", \"title\": \"...\", \
\"description\": \"...\", \"depends_on\": [], \"acceptance\": [\"command that exits 0\"], \
\"files\": [\"optional/path\"]}]}";

impl Tool for SwarmPlanTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: PLAN_TOOL.to_string(),
            description: "Records the plan of this swarm run: the tasks that together reach \
                          the goal, as a dependency graph. Each task is built by an \
                          implementer in its own git worktree (starting from the work of the \
                          tasks it depends on), reviewed, then verified by running its \
                          acceptance commands in a fresh clone: every command must exit 0. \
                          Send the whole plan in one call. If the answer lists problems, fix \
                          all of them and call swarm_plan again."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "tasks": {
                        "type": "array",
                        "minItems": 1,
                        "description": "Every task of the plan.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {
                                    "type": "string",
                                    "pattern": format!("^[a-z0-9][a-z0-9-]{{0,{}}}$", MAX_TASK_ID_LEN - 1),
                                    "description": "Short unique id: lowercase letters, digits and `-` (e.g. `parse-config`); it names the task's branch."
                                },
                                "title": {"type": "string", "description": "One line saying what the task delivers."},
                                "description": {"type": "string", "description": "What to build, precisely enough for an engineer who sees only this task: files, functions, behaviour, edge cases."},
                                "depends_on": {
                                    "type": "array",
                                    "items": {"type": "string"},
                                    "description": "Ids of the tasks whose work this task needs; [] for none. No cycles."
                                },
                                "acceptance": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {"type": "string"},
                                    "description": "Shell commands run in the repository root of a fresh clone; each must exit 0 once the task is done (e.g. a test command)."
                                },
                                "files": {
                                    "type": "array",
                                    "items": {"type": "string"},
                                    "description": "Optional: files the task will change; tasks sharing a file never run at once."
                                }
                            },
                            "required": ["id", "title", "description", "depends_on", "acceptance"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["tasks"],
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
            let plan: SwarmPlan = match arguments::parse(PLAN_TOOL, arguments) {
                Ok(plan) => plan,
                Err(output) => return with_shape(output, PLAN_SHAPE),
            };
            let problems = plan.problems();
            if !problems.is_empty() {
                return ToolOutput::error(format!(
                    "the plan was not recorded:\n{}\nCall swarm_plan again with a corrected \
                     plan (all the tasks, not only the changed ones).",
                    problems.iter().map(|p| format!("- {p}")).collect::<Vec<_>>().join("\n")
                ));
            }
            let ids: Vec<&str> = plan.tasks.iter().map(|task| task.id.as_str()).collect();
            let count = ids.len();
            let noun = if count == 1 { "task" } else { "tasks" };
            ToolOutput::ok(format!(
                "plan recorded: {count} {noun} ({}). End your turn with a short summary of \
                 the plan.",
                ids.join(", ")
            ))
        })
    }
}

/// The reviewer's `swarm_review`: a verdict on the task's diff.
#[derive(Debug, Default, Clone, Copy)]
pub struct SwarmReviewTool;

const REVIEW_SHAPE: &str =
    "expected {\"approve\": true or false, \"findings\": [\"what must change, and where\"]}";

impl Tool for SwarmReviewTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: REVIEW_TOOL.to_string(),
            description: "Records your verdict on the task's change. approve: true when the \
                          change does what the task asks, correctly and completely; false \
                          when something must change, each problem in `findings` (what is \
                          wrong, where, and what to do), which go back to the implementer. \
                          If you call it more than once, the last call counts. End your turn \
                          after it."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "approve": {"type": "boolean", "description": "true: the change may be merged; false: it goes back to the implementer with the findings."},
                    "findings": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "One entry per problem: what is wrong, where (file, function) and what to do. Required and non-empty when approve is false."
                    }
                },
                "required": ["approve", "findings"],
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
            let review: SwarmReview = match arguments::parse(REVIEW_TOOL, arguments) {
                Ok(review) => review,
                Err(output) => return with_shape(output, REVIEW_SHAPE),
            };
            let findings = review.findings.iter().filter(|f| !f.trim().is_empty()).count();
            if !review.approve && findings == 0 {
                return ToolOutput::error(
                    "a rejection needs findings: call swarm_review again with approve false \
                     and each problem in `findings` (what is wrong, where, what to do)",
                );
            }
            let verdict = if review.approve { "approved" } else { "rejected" };
            ToolOutput::ok(format!(
                "recorded: {verdict}, {findings} finding{}. A later swarm_review call would \
                 replace this verdict; end your turn when you are done.",
                if findings == 1 { "" } else { "s" }
            ))
        })
    }
}

fn with_shape(mut output: ToolOutput, shape: &str) -> ToolOutput {
    output.content.push_str(&format!(" ({shape})"));
    output
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Unconfined;
    use kestrel_protocol::Mode;
    use std::path::PathBuf;
    use tokio_util::sync::CancellationToken;

    fn context() -> ToolContext {
        ToolContext {
            cwd: PathBuf::from("/w"),
            workspace: PathBuf::from("/w"),
            mode: Mode::ReadOnly,
            network: false,
            cancel: CancellationToken::new(),
            granted_writes: Vec::new(),
            unconfined: Unconfined::No,
            workspace_pin: None,
        }
    }

    fn task(id: &str, deps: &[&str], acceptance: &[&str]) -> serde_json::Value {
        json!({"id": id, "title": format!("do {id}"), "description": "d",
               "depends_on": deps, "acceptance": acceptance})
    }

    async fn plan(arguments: serde_json::Value) -> ToolOutput {
        SwarmPlanTool.run(arguments, &context()).await
    }

    async fn review(arguments: serde_json::Value) -> ToolOutput {
        SwarmReviewTool.run(arguments, &context()).await
    }

    #[tokio::test]
    async fn a_valid_plan_is_recorded_with_its_ids() {
        let output =
            plan(json!({"tasks": [task("a", &[], &["true"]), task("b", &["a"], &["true"])]})).await;
        assert!(!output.is_error, "{}", output.content);
        assert!(output.content.starts_with("plan recorded: 2 tasks (a, b)"), "{}", output.content);
    }

    #[tokio::test]
    async fn an_invalid_plan_lists_every_reason_one_per_line() {
        let output = plan(json!({"tasks": [
            task("a", &["b"], &["true"]), task("b", &["a"], &["true"]), task("c", &[], &[])
        ]}))
        .await;
        assert!(output.is_error);
        let lines: Vec<&str> = output.content.lines().collect();
        assert!(
            lines.contains(
                &"- task `c` has no acceptance commands (each must exit 0 when the task is done)"
            ),
            "{}",
            output.content
        );
        assert!(
            lines.contains(&"- the dependencies form a cycle: a -> b -> a"),
            "{}",
            output.content
        );
        assert!(output.content.contains("Call swarm_plan again"), "{}", output.content);
    }

    #[tokio::test]
    async fn a_plan_of_the_wrong_shape_names_the_field_and_the_expected_shape() {
        let output =
            plan(json!({"tasks": [{"id": "a", "title": "t", "acceptance": "true"}]})).await;
        assert!(output.is_error);
        assert!(output.content.contains("tasks[0].acceptance"), "{}", output.content);
        assert!(output.content.contains("expected {\"tasks\""), "{}", output.content);
        let output = plan(json!({"steps": []})).await;
        assert!(output.is_error);
        assert!(output.content.contains("steps"), "{}", output.content);
    }

    #[tokio::test]
    async fn a_review_is_recorded_and_a_rejection_needs_findings() {
        let output = review(json!({"approve": true, "findings": []})).await;
        assert!(!output.is_error, "{}", output.content);
        assert!(output.content.starts_with("recorded"), "{}", output.content);
        let output = review(json!({"approve": false, "findings": ["x.rs: off by one"]})).await;
        assert!(!output.is_error, "{}", output.content);
        assert!(output.content.starts_with("recorded: rejected, 1 finding."), "{}", output.content);
        let output = review(json!({"approve": false, "findings": [" "]})).await;
        assert!(output.is_error, "{}", output.content);
        let output = review(json!({"approve": "yes", "findings": []})).await;
        assert!(output.is_error);
        assert!(output.content.contains("`approve`"), "{}", output.content);
        assert!(output.content.contains("expected {\"approve\""), "{}", output.content);
    }

    fn tag(role: SwarmRole, kind: RunKind) -> SwarmSessionTag {
        SwarmSessionTag { run: "r".into(), task: "t".into(), role, attempt: 1, kind }
    }

    #[test]
    fn each_role_gets_only_its_own_tool() {
        let names = |role, kind| {
            role_tools(&tag(role, kind))
                .iter()
                .map(|tool| tool.definition().name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(SwarmRole::Planner, RunKind::Build), [PLAN_TOOL]);
        assert_eq!(names(SwarmRole::Planner, RunKind::Climb), [EXPERIMENTS_TOOL]);
        assert_eq!(names(SwarmRole::Reviewer, RunKind::Build), [REVIEW_TOOL]);
        assert_eq!(names(SwarmRole::Reviewer, RunKind::Climb), [REVIEW_TOOL]);
        assert!(names(SwarmRole::Implementer, RunKind::Climb).is_empty());
        for role in [SwarmRole::Planner, SwarmRole::Reviewer] {
            for kind in [RunKind::Build, RunKind::Climb] {
                assert!(role_tools(&tag(role, kind)).iter().all(|tool| tool.is_read_only()));
            }
        }
    }

    #[tokio::test]
    async fn experiments_are_recorded_or_every_problem_listed() {
        let one = |id: &str| json!({"id": id, "hypothesis": "h", "description": "d"});
        let output = SwarmExperimentsTool
            .run(json!({"experiments": [one("a"), one("b")]}), &context())
            .await;
        assert!(!output.is_error, "{}", output.content);
        assert!(output.content.starts_with("experiments recorded: 2 (a, b)"), "{}", output.content);
        let output = SwarmExperimentsTool
            .run(json!({"experiments": [one("a"), one("a")]}), &context())
            .await;
        assert!(output.is_error);
        assert!(output.content.contains("- experiment id `a` is used twice"), "{}", output.content);
        let output = SwarmExperimentsTool.run(json!({"tasks": []}), &context()).await;
        assert!(output.is_error);
        assert!(output.content.contains("expected {\"experiments\""), "{}", output.content);
    }
}
