//! `kestrel swarm climb`: a number to improve, experiments a planner proposes, each built
//! by an implementer and measured against the current baseline. The planner's tool and
//! its arguments, the decisions, and the climb's state folded from the run's events (for
//! the orchestrator's resume, `swarm status` and `climb.md` alike).

use super::event::{SwarmEntry, SwarmEvent};
use super::graph::{MAX_TASK_ID_LEN, valid_task_id};
use crate::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The climb planner's tool: its arguments are a [`SwarmExperiments`].
pub const EXPERIMENTS_TOOL: &str = "swarm_experiments";

/// What kind of run a role session belongs to: a task graph, or a climb (whose planner
/// proposes experiments instead of a graph).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    #[default]
    Build,
    Climb,
}

impl RunKind {
    pub fn is_build(&self) -> bool {
        *self == RunKind::Build
    }
}

/// One experiment the planner proposes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSpec {
    /// As a task id: `[a-z0-9-]`, unique in the run; names the experiment's branch.
    pub id: String,
    /// Why it should move the number, in one sentence.
    pub hypothesis: String,
    /// What to change, precisely.
    pub description: String,
    /// Files it is expected to touch (hints).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// The arguments of `swarm_experiments`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwarmExperiments {
    pub experiments: Vec<ExperimentSpec>,
}

impl SwarmExperiments {
    /// Why the proposal cannot be taken, every reason; empty when it can.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.experiments.is_empty() {
            problems.push("no experiments: propose at least one".to_string());
        }
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for experiment in &self.experiments {
            if !valid_task_id(&experiment.id) {
                problems.push(format!(
                    "experiment id `{}` is not valid: use 1 to {MAX_TASK_ID_LEN} of a-z, 0-9 \
                     and `-`, not starting with `-`",
                    experiment.id
                ));
            }
            if !seen.insert(&experiment.id) {
                problems.push(format!("experiment id `{}` is used twice", experiment.id));
            }
            if experiment.hypothesis.trim().is_empty() {
                problems.push(format!("experiment `{}` has no hypothesis", experiment.id));
            }
            if experiment.description.trim().is_empty() {
                problems.push(format!("experiment `{}` has no description", experiment.id));
            }
        }
        problems
    }
}

/// Which way the metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Lower,
    Higher,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Lower => "lower",
            Direction::Higher => "higher",
        }
    }
}

/// What became of an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Better beyond noise, checks passed: merged, the new baseline.
    Kept,
    /// Worse beyond noise.
    Worse,
    /// No difference beyond noise.
    Neutral,
    /// A check command failed on it, or the metric gave no number on it.
    CheckFailed,
    /// Nothing to measure: the implementer's turn failed or changed nothing, or it
    /// conflicts with the new baseline.
    BuildFailed,
    /// The reviewer rejected it (`--review`).
    Rejected,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Kept => "kept",
            Decision::Worse => "worse",
            Decision::Neutral => "neutral",
            Decision::CheckFailed => "check_failed",
            Decision::BuildFailed => "build_failed",
            Decision::Rejected => "rejected",
        }
    }
}

/// The size of an experiment's change against the baseline it was measured on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffSize {
    pub files: u32,
    pub insertions: u32,
    pub deletions: u32,
}

/// The keep rule's numbers (docs/swarm.md, "The rule"), shared by the rule itself and
/// the texts that describe it. The rank test's one-sided level over all the looks:
pub const KEEP_ALPHA: f64 = 0.01;
/// How many times K runs a side may be taken: K, 2K, ... up to this many K.
pub const MAX_LOOKS: u32 = 4;
/// How many standard errors of a difference of medians an improvement must reach.
pub const MIN_STANDARD_ERRORS: f64 = 4.0;
/// An undecided look whose rank test gives p up to this (improvement side) measures more.
pub const PROMISING: f64 = 0.25;
/// The fewest runs a side per look (the noise needs two).
pub const MIN_RUNS: u32 = 2;

/// The rule in a sentence, with `runs` a side per look.
pub fn keep_rule(runs: u32) -> String {
    format!(
        "{runs} runs a side per look, interleaved with the baseline's, up to {MAX_LOOKS} looks. \
         An experiment is kept when a one-sided Mann–Whitney U test gives p ≤ {} ({KEEP_ALPHA} \
         split over the looks) and its median beats the baseline's by at least \
         {MIN_STANDARD_ERRORS} standard errors; a promising one is measured again",
        KEEP_ALPHA / f64::from(MAX_LOOKS)
    )
}

/// A measured number as people read it: up to 4 decimals, no trailing zeros.
pub fn number(value: f64) -> String {
    let text = format!("{value:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() || text == "-" { "0".to_string() } else { text.to_string() }
}

/// A commit as shown: its first 10 characters.
pub fn short_commit(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}

/// The first non-empty line of `text`, trimmed.
pub fn first_line(text: &str) -> &str {
    text.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or("")
}

/// The median of `values` (0 for none).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The spread shown next to a median: the median absolute deviation from it.
pub fn spread(values: &[f64]) -> f64 {
    let center = median(values);
    let deviations: Vec<f64> = values.iter().map(|value| (value - center).abs()).collect();
    median(&deviations)
}

/// The climb's settings, as `climb_started` records them.
#[derive(Debug, Clone, PartialEq)]
pub struct ClimbSettings {
    pub metric: String,
    pub direction: Direction,
    pub checks: Vec<String>,
    pub runs: u32,
    pub max_experiments: u32,
    pub review: bool,
}

/// A baseline: the integration branch's commit and the metric's runs on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselinePoint {
    pub commit: String,
    pub values: Vec<f64>,
    pub median: f64,
    pub spread: f64,
    /// The experiment whose merge made it (`null` for the first).
    pub after: Option<String>,
    pub at: Timestamp,
}

/// What the measurement said about an experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExperimentResult {
    pub decision: Decision,
    pub reason: String,
    pub attempt: u32,
    pub commit: Option<String>,
    pub baseline_commit: Option<String>,
    pub baseline: Vec<f64>,
    pub values: Vec<f64>,
    pub p_value: Option<f64>,
    pub diff: Option<DiffSize>,
}

/// One experiment as the events tell it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentView {
    pub spec: ExperimentSpec,
    /// The planner's round that proposed it (1, 2, ...).
    pub round: u32,
    pub result: Option<ExperimentResult>,
    /// Merged into the integration branch (kept ones, once merged).
    pub merged: bool,
}

/// A climb run as its events tell it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClimbView {
    pub settings: ClimbSettings,
    /// The baseline's path: the first one, then one after each kept experiment.
    pub baselines: Vec<BaselinePoint>,
    /// Why the baseline could not be measured last (the first one, or against an
    /// experiment), until it is measured again.
    pub baseline_failure: Option<String>,
    pub experiments: Vec<ExperimentView>,
    /// Planner rounds that proposed experiments.
    pub rounds: u32,
}

impl ClimbView {
    /// The climb of a run's events; `None` when the run is not a climb.
    pub fn fold(entries: &[SwarmEntry]) -> Option<ClimbView> {
        let mut view: Option<ClimbView> = None;
        let mut last_merged: Option<String> = None;
        // The commit of the baseline that failed last, until it is seen working.
        let mut failed_baseline: Option<String> = None;
        for entry in entries {
            if let SwarmEvent::ClimbStarted {
                metric,
                direction,
                checks,
                runs,
                max_experiments,
                review,
            } = &entry.event
            {
                view = Some(ClimbView {
                    settings: ClimbSettings {
                        metric: metric.clone(),
                        direction: *direction,
                        checks: checks.clone(),
                        runs: *runs,
                        max_experiments: *max_experiments,
                        review: *review,
                    },
                    baselines: Vec::new(),
                    baseline_failure: None,
                    experiments: Vec::new(),
                    rounds: 0,
                });
                continue;
            }
            let Some(view) = view.as_mut() else { continue };
            match &entry.event {
                SwarmEvent::BaselineMeasured { commit, values } => {
                    view.baseline_failure = None;
                    failed_baseline = None;
                    if view.baselines.last().is_some_and(|last| last.commit == *commit) {
                        continue;
                    }
                    view.baselines.push(BaselinePoint {
                        commit: commit.clone(),
                        values: values.clone(),
                        median: median(values),
                        spread: spread(values),
                        after: last_merged.take(),
                        at: entry.ts,
                    });
                }
                SwarmEvent::BaselineFailed { commit, reason } => {
                    view.baseline_failure = Some(reason.clone());
                    failed_baseline = Some(commit.clone());
                }
                // Measured against the baseline that had failed: it works again.
                SwarmEvent::ExperimentMeasured { baseline_commit, .. }
                    if failed_baseline.as_ref() == Some(baseline_commit) =>
                {
                    view.baseline_failure = None;
                    failed_baseline = None;
                }
                SwarmEvent::ExperimentsProposed { round, experiments } => {
                    view.rounds = view.rounds.max(*round);
                    for spec in experiments {
                        if view.experiment(&spec.id).is_none() {
                            view.experiments.push(ExperimentView {
                                spec: spec.clone(),
                                round: *round,
                                result: None,
                                merged: false,
                            });
                        }
                    }
                }
                SwarmEvent::ExperimentDecided {
                    task,
                    attempt,
                    decision,
                    reason,
                    commit,
                    baseline_commit,
                    baseline,
                    values,
                    p_value,
                    diff,
                } => {
                    if baseline_commit.is_some() && *baseline_commit == failed_baseline {
                        view.baseline_failure = None;
                        failed_baseline = None;
                    }
                    if let Some(experiment) = view.experiment_mut(task) {
                        experiment.result = Some(ExperimentResult {
                            decision: *decision,
                            reason: reason.clone(),
                            attempt: *attempt,
                            commit: commit.clone(),
                            baseline_commit: baseline_commit.clone(),
                            baseline: baseline.clone(),
                            values: values.clone(),
                            p_value: *p_value,
                            diff: *diff,
                        });
                    }
                }
                SwarmEvent::Merged { task, .. } => {
                    if let Some(experiment) = view.experiment_mut(task) {
                        experiment.merged = true;
                        last_merged = Some(task.clone());
                    }
                }
                _ => {}
            }
        }
        view
    }

    pub fn experiment(&self, id: &str) -> Option<&ExperimentView> {
        self.experiments.iter().find(|experiment| experiment.spec.id == id)
    }

    fn experiment_mut(&mut self, id: &str) -> Option<&mut ExperimentView> {
        self.experiments.iter_mut().find(|experiment| experiment.spec.id == id)
    }

    /// The current baseline (the last measured).
    pub fn baseline(&self) -> Option<&BaselinePoint> {
        self.baselines.last()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn experiment(id: &str, hypothesis: &str) -> ExperimentSpec {
        ExperimentSpec {
            id: id.into(),
            hypothesis: hypothesis.into(),
            description: "d".into(),
            files: Vec::new(),
        }
    }

    #[test]
    fn a_proposal_lists_every_problem() {
        let proposal = SwarmExperiments {
            experiments: vec![experiment("a", "h"), experiment("a", " "), experiment("B", "h")],
        };
        let problems = proposal.problems();
        assert!(problems.contains(&"experiment id `a` is used twice".to_string()), "{problems:?}");
        assert!(problems.contains(&"experiment `a` has no hypothesis".to_string()));
        assert!(problems.iter().any(|p| p.starts_with("experiment id `B` is not valid")));
        assert!(SwarmExperiments::default().problems()[0].starts_with("no experiments"));
        assert!(SwarmExperiments { experiments: vec![experiment("a", "h")] }.problems().is_empty());
    }

    #[test]
    fn median_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(spread(&[1.0, 2.0, 3.0, 10.0, 2.0]), 1.0);
        assert_eq!(median(&[]), 0.0);
    }
}
