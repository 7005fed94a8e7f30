//! The prompts each role gets. Every one starts with the role's prompt line
//! (`[kestrel swarm] run=… task=… role=… attempt=…`, ARCHITECTURE §10): scripts, the
//! scripted model and a resumed orchestrator find a role's turn by it.

use kestrel_protocol::swarm::{AttemptFailure, FailedStage, SwarmSessionTag, TaskSpec};
use std::fmt::Write as _;

/// The diff a reviewer is given is cut at this size.
pub const MAX_REVIEW_DIFF: usize = 200 * 1024;

/// The implementer's prompt for an attempt: the task, its acceptance commands and, on a
/// later attempt, why the last one was not accepted.
pub fn implementer(
    tag: &SwarmSessionTag,
    task: &TaskSpec,
    goal: Option<&str>,
    failure: Option<&AttemptFailure>,
) -> String {
    let mut text = tag.prompt_line();
    text.push_str("\n\n");
    if let Some(failure) = failure {
        text.push_str(&retry_section(failure));
        text.push_str("\nThe task, again:\n\n");
    } else {
        text.push_str(
            "You implement one task of a larger job. Your working directory is a git worktree \
             of its own: make the change there. Do not commit and do not switch branches: when \
             your turn ends the orchestrator commits what you changed, a reviewer on another \
             model reads the diff, and the acceptance commands run in a fresh clone. End your \
             turn when the task is done and the acceptance commands pass.\n\n",
        );
    }
    if let Some(goal) = goal.filter(|goal| !goal.trim().is_empty()) {
        let _ = writeln!(text, "The whole job's goal: {goal}\n");
    }
    text.push_str(&task_section(task));
    text
}

/// The reviewer's prompt: the task and the attempt's diff.
pub fn reviewer(tag: &SwarmSessionTag, task: &TaskSpec, diff: &str, range: &str) -> String {
    let mut text = tag.prompt_line();
    text.push_str(
        "\n\nYou review one task's change, with a fresh eye: you did not write it. Read the diff \
         and whatever files you need (you cannot change anything). Judge whether it does what \
         the task asks, correctly and completely, without breaking anything else, and whether \
         the acceptance commands really test it. Then call `swarm_review` with `approve` and \
         `findings` (concrete, each one something the implementer can act on; empty when you \
         approve). The last call counts; ending your turn without one rejects the change.\n\n",
    );
    text.push_str(&task_section(task));
    let (shown, cut) = cut_diff(diff);
    let _ = write!(text, "\n# The change (`git diff {range}`)\n\n```diff\n{shown}\n```\n");
    if cut {
        let _ = writeln!(
            text,
            "\n[the diff is cut at {} kB of {} kB: read the rest in the working directory]",
            MAX_REVIEW_DIFF / 1024,
            diff.len() / 1024
        );
    }
    if diff.trim().is_empty() {
        text.push_str("\n(The diff is empty.)\n");
    }
    text
}

/// The planner's prompt; `refusal` says why the last plan was not accepted.
pub fn planner(tag: &SwarmSessionTag, goal: &str, refusal: Option<&str>) -> String {
    let mut text = tag.prompt_line();
    text.push_str("\n\n");
    if let Some(reasons) = refusal {
        let _ = writeln!(
            text,
            "Your plan was not accepted:\n{reasons}\n\nCall `swarm_plan` again with a corrected plan.\n"
        );
    }
    let _ = write!(
        text,
        "You plan a job for a swarm of coding agents. The goal:\n\n{goal}\n\n\
         Read the repository (you cannot change it), then split the goal into tasks and call \
         `swarm_plan` with them. Each task is done by one agent in its own git worktree, \
         reviewed by another model and verified by its acceptance commands in a fresh clone, \
         then merged in dependency order. For each task give: `id` (a-z, 0-9, `-`), `title`, \
         a precise `description` (what to build, where, how it is tested), `depends_on` (ids \
         whose work it needs), `acceptance` (shell commands that each exit 0 only when the \
         task is done, e.g. its tests; they run without network), and `files` (the files it \
         will change: tasks sharing a file never run at once). Prefer tasks that can run in \
         parallel; no cycles.\n"
    );
    text
}

fn task_section(task: &TaskSpec) -> String {
    let mut text = format!("# Task `{}`: {}\n\n", task.id, task.title);
    if !task.description.trim().is_empty() {
        let _ = writeln!(text, "{}\n", task.description.trim_end());
    }
    text.push_str("Acceptance commands (each must exit 0):\n");
    for command in &task.acceptance {
        let _ = writeln!(text, "- `{command}`");
    }
    if !task.files.is_empty() {
        let _ = writeln!(text, "\nFiles it is expected to touch: {}", task.files.join(", "));
    }
    text
}

fn retry_section(failure: &AttemptFailure) -> String {
    let mut text = format!("Attempt {} was not accepted. ", failure.attempt);
    match failure.stage {
        FailedStage::Implement => {
            let _ = writeln!(text, "{}", sentence(&failure.reason));
        }
        FailedStage::Review => {
            text.push_str("The reviewer rejected it. Their findings:\n");
            for finding in &failure.findings {
                let _ = writeln!(text, "- {finding}");
            }
            if failure.findings.is_empty() {
                let _ = writeln!(text, "- {}", failure.reason);
            }
            text.push_str("\nAddress every finding.\n");
        }
        FailedStage::Verify | FailedStage::Integrate => {
            let place = match failure.stage {
                FailedStage::Integrate => {
                    "after it was merged into the integration branch (the merge was reverted; \
                     the integration branch is merged into your worktree now)"
                }
                _ => "in a fresh clone of your commit",
            };
            let _ = writeln!(text, "Verification failed {place}: {}.", failure.reason);
            if let Some(output) = failure.findings.first() {
                let _ = writeln!(
                    text,
                    "\nIts output (head and tail):\n```\n{}\n```",
                    output.trim_end()
                );
            }
            text.push_str("\nFix it so that every acceptance command passes.\n");
        }
        FailedStage::Merge => {
            let _ = writeln!(
                text,
                "Merging it into the integration branch conflicted (other tasks were merged \
                 meanwhile). The integration branch is merged into your worktree now, with the \
                 conflict markers in place in: {}.\nResolve every conflict so that both your \
                 task and the merged work are kept, remove the markers, and end your turn.",
                failure.findings.join(", ")
            );
        }
    }
    text
}

fn sentence(text: &str) -> String {
    let mut text = text.trim().to_string();
    if !text.ends_with('.') {
        text.push('.');
    }
    text
}

/// The diff as shown: cut at [`MAX_REVIEW_DIFF`] on a character boundary.
fn cut_diff(diff: &str) -> (&str, bool) {
    if diff.len() <= MAX_REVIEW_DIFF {
        return (diff.trim_end(), false);
    }
    let mut end = MAX_REVIEW_DIFF;
    while !diff.is_char_boundary(end) {
        end -= 1;
    }
    (&diff[..end], true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_protocol::swarm::SwarmRole;

    fn tag(role: SwarmRole, attempt: u32) -> SwarmSessionTag {
        SwarmSessionTag {
            run: "r".into(),
            task: "t".into(),
            role,
            attempt,
            kind: Default::default(),
        }
    }

    fn task() -> TaskSpec {
        TaskSpec {
            id: "t".into(),
            title: "Do it".into(),
            acceptance: vec!["make test".into()],
            ..TaskSpec::default()
        }
    }

    #[test]
    fn every_prompt_starts_with_the_role_line() {
        let implementer = implementer(&tag(SwarmRole::Implementer, 1), &task(), None, None);
        assert!(
            implementer.starts_with("[kestrel swarm] run=r task=t role=implementer attempt=1\n")
        );
        assert!(implementer.contains("- `make test`"));
        let review = reviewer(&tag(SwarmRole::Reviewer, 2), &task(), "+x", "a...b");
        assert!(review.starts_with("[kestrel swarm] run=r task=t role=reviewer attempt=2\n"));
        assert!(review.contains("```diff\n+x\n```"));
    }

    #[test]
    fn a_retry_carries_the_findings_and_the_failing_output() {
        let failure = AttemptFailure {
            attempt: 1,
            stage: FailedStage::Review,
            reason: "rejected".into(),
            findings: vec!["handle empty input".into()],
            log: None,
        };
        let text = implementer(&tag(SwarmRole::Implementer, 2), &task(), None, Some(&failure));
        assert!(text.contains("- handle empty input"));
        let failure = AttemptFailure {
            stage: FailedStage::Verify,
            reason: "acceptance command `make test` exited with 2".into(),
            findings: vec!["FAILED test_x".into()],
            ..failure
        };
        let text = implementer(&tag(SwarmRole::Implementer, 2), &task(), None, Some(&failure));
        assert!(text.contains("exited with 2") && text.contains("FAILED test_x"));
    }

    #[test]
    fn a_huge_diff_is_cut_and_says_so() {
        let diff = "é".repeat(MAX_REVIEW_DIFF);
        let text = reviewer(&tag(SwarmRole::Reviewer, 1), &task(), &diff, "a...b");
        assert!(text.contains("[the diff is cut at 200 kB"));
        assert!(text.len() < MAX_REVIEW_DIFF + 4096);
    }
}
