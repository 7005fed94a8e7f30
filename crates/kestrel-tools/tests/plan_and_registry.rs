mod common;

use common::{call, call_text, context, err, ok};
use kestrel_protocol::Mode;
use kestrel_tools::{PlanStep, PlanStepStatus, builtin_tools};
use serde_json::json;

#[tokio::test]
async fn update_plan_returns_the_plan_and_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::ReadOnly);
    let plan = json!({"plan": [
        {"step": "read the code", "status": "completed"},
        {"step": "fix the bug", "status": "in_progress"},
        {"step": "run the tests", "status": "pending"}
    ]});
    let output = call(&ctx, "update_plan", plan).await;
    assert_eq!(ok(&output), "Plan updated: 1 completed, 1 in progress, 1 pending.");
    let steps = output.plan.unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(
        steps[1],
        PlanStep { step: "fix the bug".to_string(), status: PlanStepStatus::InProgress }
    );
}

#[tokio::test]
async fn update_plan_rejects_two_in_progress_steps_and_unknown_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let plan = json!({"plan": [
        {"step": "a", "status": "in_progress"},
        {"step": "b", "status": "in_progress"}
    ]});
    let output = call(&ctx, "update_plan", plan).await;
    assert!(err(&output).contains("at most one step may be in_progress"));
    assert!(output.plan.is_none());
    let output =
        call(&ctx, "update_plan", json!({"plan": [{"step": "a", "status": "done"}]})).await;
    let message = err(&output);
    assert!(message.contains("plan[0].status") && message.contains("done"), "{message}");
    let output =
        call(&ctx, "update_plan", json!({"plan": [{"step": " ", "status": "pending"}]})).await;
    assert!(err(&output).contains("step 1"));
}

#[tokio::test]
async fn the_registry_turns_unknown_tools_and_bad_json_into_error_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call_text(&ctx, "delete_everything", "{}").await;
    let message = err(&output);
    assert!(message.contains("unknown tool") && message.contains("read_file"), "{message}");
    let output = call_text(&ctx, "read_file", "{\"path\": ").await;
    assert!(err(&output).contains("not valid JSON"));
    let output = call_text(&ctx, "read_file", "[\"a.txt\"]").await;
    assert!(err(&output).contains("JSON object"));
    let output = call_text(&ctx, "read_file", "").await;
    assert!(err(&output).contains("path"), "missing field named: {}", output.content);
}

#[test]
fn builtin_tools_have_the_fixed_names_schemas_and_read_only_flags() {
    let registry = builtin_tools();
    let names: Vec<String> = registry.definitions().into_iter().map(|d| d.name).collect();
    // Other owners add task and MCP tools to the same registry.
    for expected in [
        "read_file",
        "write_file",
        "edit_file",
        "apply_patch",
        "shell",
        "grep",
        "glob",
        "list_dir",
        "update_plan",
        "web_fetch",
    ] {
        assert!(names.iter().any(|name| name == expected), "{expected} in {names:?}");
    }
    for definition in registry.definitions() {
        assert_eq!(definition.parameters["type"], "object", "{}", definition.name);
        assert!(definition.description.len() > 40, "{} is described", definition.name);
    }
    let read_only = ["read_file", "grep", "glob", "list_dir", "update_plan", "web_fetch"];
    let writers = ["write_file", "edit_file", "apply_patch", "shell"];
    for name in read_only {
        assert!(registry.is_read_only(name), "{name}");
    }
    for name in writers {
        assert!(!registry.is_read_only(name), "{name}");
    }
}
