//! `kestrel swarm climb` (docs/swarm.md, "climb"): its arguments, and the climb's part
//! of `kestrel swarm status` (a table after the tasks', a `climb` object in `--json`).

use super::{CommonArgs, launch, orchestrate};
use clap::Args;
use kestrel_protocol::swarm::Direction;
use kestrel_store::{ClimbStatus, KestrelHome, RunStatus, experiment_table};
use kestrel_swarm::ClimbRequest;
use std::process::ExitCode;

#[derive(Args)]
pub(super) struct ClimbArgs {
    /// A command that prints the number to improve on its last line of output.
    #[arg(long, value_name = "CMD")]
    metric: String,
    /// Which way is better.
    #[arg(long, value_name = "lower|higher", value_parser = parse_direction)]
    direction: Direction,
    /// A command that must pass on the baseline and on every experiment (repeatable).
    #[arg(long = "check", value_name = "CMD")]
    checks: Vec<String>,
    /// Experiments in all; the planner is asked again until they are proposed.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    experiments: u32,
    /// Runs of the metric per side of a measurement (at least 2; checked by the climb).
    #[arg(long, value_name = "K", default_value_t = 7)]
    runs: u32,
    /// A reviewer looks at each experiment before it is measured.
    #[arg(long)]
    review: bool,
    /// Start without asking.
    #[arg(long)]
    yes: bool,
    #[command(flatten)]
    common: CommonArgs,
}

fn parse_direction(text: &str) -> Result<Direction, String> {
    match text {
        "lower" => Ok(Direction::Lower),
        "higher" => Ok(Direction::Higher),
        _ => Err("expected `lower` (a time, a size) or `higher` (a score)".to_string()),
    }
}

pub(super) fn run(home: &KestrelHome, args: ClimbArgs) -> ExitCode {
    let Some(launch) = launch(home, &args.common) else { return ExitCode::from(2) };
    let request = ClimbRequest {
        launch,
        metric: args.metric,
        direction: args.direction,
        checks: args.checks,
        experiments: args.experiments,
        runs: args.runs,
        review: args.review,
        yes: args.yes,
    };
    orchestrate(kestrel_swarm::climb(request))
}

/// `status --json`: the run's object, with `climb` for a climb.
pub(super) fn json(status: &RunStatus, climb: Option<&ClimbStatus>) -> String {
    let mut value = serde_json::to_value(status).unwrap_or_default();
    if let (Some(climb), Some(object)) = (climb, value.as_object_mut()) {
        object.insert("climb".into(), serde_json::to_value(climb).unwrap_or_default());
    }
    serde_json::to_string(&value).unwrap_or_default() + "\n"
}

/// The climb's lines of the status table.
pub(super) fn table(climb: Option<&ClimbStatus>) -> String {
    let Some(climb) = climb else { return String::new() };
    let mut text = format!("\nclimb `{}` ({} is better)", climb.metric, climb.direction);
    let path: Vec<String> =
        climb.baselines.iter().map(|point| format!("{}", point.median)).collect();
    if !path.is_empty() {
        text.push_str(&format!(": baseline {}", path.join(" → ")));
    }
    if let Some(failure) = &climb.baseline_failure {
        text.push_str(&format!("\nthe baseline could not be measured: {failure}"));
    }
    text.push_str("\n\n");
    text.push_str(&experiment_table(climb));
    for experiment in &climb.experiments {
        if let (Some(decision), Some(reason)) = (&experiment.decision, &experiment.reason) {
            text.push_str(&format!("{}: {decision}: {reason}\n", experiment.id));
        }
    }
    text
}
