//! The climb's prompts: the planner's (the metric, the baseline's path and every
//! experiment's result so far) and an experiment's implementer's. Each starts with the
//! role's prompt line, like every swarm prompt.

use kestrel_protocol::swarm::{ClimbView, ExperimentSpec, SwarmSessionTag, number, short_commit};
use std::fmt::Write as _;

/// The planner's prompt for a round: propose at most `wanted` experiments.
pub fn planner(
    tag: &SwarmSessionTag,
    climb: &ClimbView,
    wanted: u32,
    refusal: Option<&str>,
) -> String {
    let settings = &climb.settings;
    let mut text = tag.prompt_line();
    text.push_str("\n\n");
    if let Some(reasons) = refusal {
        let _ = writeln!(
            text,
            "Your experiments were not taken:\n{reasons}\n\nCall `swarm_experiments` again.\n"
        );
    }
    let _ = write!(
        text,
        "You plan performance experiments for this repository. The metric is the command \
         `{}` (the number on its last line of output); {} is better. ",
        settings.metric,
        settings.direction.as_str()
    );
    if !settings.checks.is_empty() {
        let _ = write!(
            text,
            "Every experiment must keep these commands passing: {}. ",
            settings.checks.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
        );
    }
    let _ = writeln!(
        text,
        "Each experiment is built by an implementer in its own worktree from the current \
         baseline, then measured against it ({} interleaved runs each, more while it is \
         promising but not conclusive); only an experiment \
         that beats the baseline beyond noise is merged and becomes the new baseline.\n",
        settings.runs
    );
    text.push_str("The baseline so far:\n");
    for point in &climb.baselines {
        let after = point.after.as_deref().map(|id| format!(" after `{id}`")).unwrap_or_default();
        let _ = writeln!(
            text,
            "- {}{after}: median {} (±{})",
            short_commit(&point.commit),
            number(point.median),
            number(point.spread)
        );
    }
    if !climb.experiments.is_empty() {
        text.push_str("\nExperiments so far (do not repeat them; learn from them):\n");
        for experiment in &climb.experiments {
            let outcome = match &experiment.result {
                Some(result) => format!("{}: {}", result.decision.as_str(), result.reason),
                None => "not finished".to_string(),
            };
            let _ = writeln!(
                text,
                "- `{}` ({}): {outcome}",
                experiment.spec.id, experiment.spec.hypothesis
            );
        }
    }
    let _ = writeln!(
        text,
        "\nRead the code (you cannot change it), find where the metric's cost comes from, and \
         call `swarm_experiments` with at most {wanted} new experiment(s), each independent of \
         the others, with an id never used in this run, a one-sentence hypothesis and a precise \
         description. Then end your turn."
    );
    text
}

/// An experiment's implementer's prompt.
pub fn implementer(
    tag: &SwarmSessionTag,
    spec: &ExperimentSpec,
    metric: &str,
    direction: &str,
    checks: &[String],
    baseline: Option<f64>,
) -> String {
    let mut text = tag.prompt_line();
    let _ = write!(
        text,
        "\n\nYou make one performance experiment. Your working directory is a git worktree of \
         its own: make the change there. Do not commit and do not switch branches: when your \
         turn ends the orchestrator commits what you changed, runs the checks and measures the \
         metric against the baseline. Change only what the experiment needs.\n\n\
         The metric: `{metric}` ({direction} is better"
    );
    if let Some(median) = baseline {
        let _ = write!(text, "; the baseline's median is {}", number(median));
    }
    text.push_str(").\n");
    if !checks.is_empty() {
        text.push_str("Checks that must still pass:\n");
        for check in checks {
            let _ = writeln!(text, "- `{check}`");
        }
    }
    let _ = write!(
        text,
        "\n# Experiment `{}`\n\nHypothesis: {}\n\n{}\n",
        spec.id,
        spec.hypothesis.trim(),
        spec.description.trim()
    );
    if !spec.files.is_empty() {
        let _ = writeln!(text, "\nFiles it is expected to touch: {}", spec.files.join(", "));
    }
    text
}
