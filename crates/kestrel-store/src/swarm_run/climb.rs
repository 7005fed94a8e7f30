//! A climb run's report (`kestrel swarm climb`): every experiment's hypothesis, diff
//! size, both sides' median and spread, decision and cost, and the baseline's path —
//! as `swarm status` shows it, as `climb.md` in the run directory, and as `climb.svg`
//! (a hand-written plot) next to it.

use super::SwarmRunDir;
use crate::StoreError;
use crate::paths;
use kestrel_protocol::swarm::{
    BaselinePoint, ClimbView, DiffSize, first_line, median, number, short_commit, spread,
};
use serde::Serialize;
use std::fmt::Write as _;

/// A climb as `kestrel swarm status --json` adds it (`climb`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClimbStatus {
    pub metric: String,
    pub direction: String,
    pub checks: Vec<String>,
    pub runs: u32,
    pub max_experiments: u32,
    /// The baseline's path: the first, then one after each kept experiment.
    pub baselines: Vec<BaselinePoint>,
    /// Why the first baseline could not be measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_failure: Option<String>,
    pub experiments: Vec<ExperimentStatus>,
}

/// One experiment of [`ClimbStatus`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExperimentStatus {
    pub id: String,
    pub hypothesis: String,
    pub round: u32,
    /// `kept`, `worse`, `neutral`, `check_failed`, `build_failed`, `rejected`; `null`
    /// while it is built or measured.
    pub decision: Option<String>,
    pub reason: Option<String>,
    pub diff: Option<DiffSize>,
    /// The baseline's runs of its measurement: median and spread (`null` unmeasured).
    pub baseline_median: Option<f64>,
    pub baseline_spread: Option<f64>,
    pub median: Option<f64>,
    pub spread: Option<f64>,
    pub p_value: Option<f64>,
    pub merged: bool,
    pub cost_usd: f64,
}

impl SwarmRunDir {
    /// The climb of this run; `None` when it is not a climb.
    ///
    /// Fails as [`SwarmRunDir::status`] does.
    pub fn climb_status(&self) -> Result<Option<ClimbStatus>, StoreError> {
        let log = self.events()?;
        let Some(view) = ClimbView::fold(&log.entries) else { return Ok(None) };
        let status = self.status()?;
        let cost = |id: &str| {
            status.tasks.iter().find(|task| task.id == id).map_or(0.0, |task| task.cost_usd)
        };
        let measured = |values: &[f64]| (!values.is_empty()).then(|| median(values));
        let spread_of = |values: &[f64]| (!values.is_empty()).then(|| spread(values));
        let experiments = view
            .experiments
            .iter()
            .map(|experiment| {
                let result = experiment.result.as_ref();
                let baseline = result.map(|r| r.baseline.as_slice()).unwrap_or(&[]);
                let values = result.map(|r| r.values.as_slice()).unwrap_or(&[]);
                ExperimentStatus {
                    id: experiment.spec.id.clone(),
                    hypothesis: experiment.spec.hypothesis.clone(),
                    round: experiment.round,
                    decision: result.map(|r| r.decision.as_str().to_string()),
                    reason: result.map(|r| r.reason.clone()),
                    diff: result.and_then(|r| r.diff),
                    baseline_median: measured(baseline),
                    baseline_spread: spread_of(baseline),
                    median: measured(values),
                    spread: spread_of(values),
                    p_value: result.and_then(|r| r.p_value),
                    merged: experiment.merged,
                    cost_usd: cost(&experiment.spec.id),
                }
            })
            .collect();
        Ok(Some(ClimbStatus {
            metric: view.settings.metric.clone(),
            direction: view.settings.direction.as_str().to_string(),
            checks: view.settings.checks.clone(),
            runs: view.settings.runs,
            max_experiments: view.settings.max_experiments,
            baselines: view.baselines.clone(),
            baseline_failure: view.baseline_failure.clone(),
            experiments,
        }))
    }

    /// Writes `climb.md` and `climb.svg` (each replaced whole) when the run is a climb.
    ///
    /// Fails when the run cannot be read or a file cannot be written.
    pub fn write_climb_report(&self) -> Result<(), StoreError> {
        let Some(climb) = self.climb_status()? else { return Ok(()) };
        let status = self.status()?;
        let mut text = format!(
            "# Climb `{}` ({} is better)\n\nRun `{}` · {} · branch `{}` · ${:.4}\n\n",
            climb.metric,
            climb.direction,
            status.run,
            status.state.as_str(),
            status.branch.as_deref().unwrap_or("-"),
            status.cost_usd
        );
        let checks = if climb.checks.is_empty() {
            "none".to_string()
        } else {
            climb.checks.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
        };
        let rule = kestrel_protocol::swarm::keep_rule(climb.runs);
        let _ = writeln!(text, "Checks: {checks}. {rule} (docs/swarm.md, \"climb\").\n");
        text.push_str("## The baseline\n\n![the baseline over time](climb.svg)\n\n");
        text.push_str(&baseline_table(&climb));
        if let Some(failure) = &climb.baseline_failure {
            let _ = writeln!(text, "\nThe baseline could not be measured: {failure}");
        }
        text.push_str("\n## Experiments\n\n");
        text.push_str(&experiment_table(&climb));
        text.push_str("\n## Why\n\n");
        for experiment in &climb.experiments {
            let _ = writeln!(
                text,
                "- **{}** — {}: {}. Hypothesis: {}",
                experiment.id,
                experiment.decision.as_deref().unwrap_or("not decided"),
                experiment.reason.as_deref().unwrap_or("being built or measured"),
                first_line(&experiment.hypothesis)
            );
        }
        let md = self.path().join("climb.md");
        paths::replace_file(&md, text.as_bytes())
            .map_err(|source| StoreError::io("write the climb report", &md, source))?;
        let svg = self.path().join("climb.svg");
        paths::replace_file(&svg, plot(&climb).as_bytes())
            .map_err(|source| StoreError::io("write the climb plot", &svg, source))
    }
}

/// The baselines as a Markdown table.
pub fn baseline_table(climb: &ClimbStatus) -> String {
    let mut text = "| # | commit | after | median | spread | change |\n|---|---|---|---|---|---|\n"
        .to_string();
    let first = climb.baselines.first().map(|point| point.median);
    for (index, point) in climb.baselines.iter().enumerate() {
        let change = match first {
            Some(first) if first != 0.0 && index > 0 => {
                format!("{:+.2}%", (point.median - first) / first.abs() * 100.0)
            }
            _ => "-".to_string(),
        };
        let _ = writeln!(
            text,
            "| {} | `{}` | {} | {} | ±{} | {change} |",
            index + 1,
            short_commit(&point.commit),
            point.after.as_deref().map_or("start".to_string(), |id| format!("`{id}`")),
            number(point.median),
            number(point.spread)
        );
    }
    text
}

/// The experiments as a Markdown table (also `swarm status`'s climb table).
pub fn experiment_table(climb: &ClimbStatus) -> String {
    let mut text =
        "| experiment | hypothesis | diff | baseline | experiment | p | decision | cost |\n\
                    |---|---|---|---|---|---|---|---|\n"
            .to_string();
    let side = |median: Option<f64>, spread: Option<f64>| match (median, spread) {
        (Some(median), Some(spread)) => format!("{} ±{}", number(median), number(spread)),
        _ => "-".to_string(),
    };
    for experiment in &climb.experiments {
        let diff = experiment.diff.map_or("-".to_string(), |diff| {
            format!("{} file(s) +{} −{}", diff.files, diff.insertions, diff.deletions)
        });
        let _ = writeln!(
            text,
            "| `{}` | {} | {diff} | {} | {} | {} | {} | ${:.4} |",
            experiment.id,
            first_line(&experiment.hypothesis).replace('|', "\\|"),
            side(experiment.baseline_median, experiment.baseline_spread),
            side(experiment.median, experiment.spread),
            experiment.p_value.map_or("-".to_string(), |p| format!("{p:.4}")),
            experiment.decision.as_deref().unwrap_or("…"),
            experiment.cost_usd
        );
    }
    text
}

/// The baseline's medians over time (each with its spread as a bar), as SVG.
pub fn plot(climb: &ClimbStatus) -> String {
    let (width, height, margin) = (640.0_f64, 320.0_f64, 56.0_f64);
    let points = &climb.baselines;
    let mut low = points.iter().map(|p| p.median - p.spread).fold(f64::INFINITY, f64::min);
    let mut high = points.iter().map(|p| p.median + p.spread).fold(f64::NEG_INFINITY, f64::max);
    if !low.is_finite() || !high.is_finite() {
        (low, high) = (0.0, 1.0);
    }
    if (high - low).abs() < f64::EPSILON {
        let pad = if low == 0.0 { 1.0 } else { low.abs() * 0.05 };
        (low, high) = (low - pad, high + pad);
    }
    let x = |index: usize| {
        let steps = points.len().saturating_sub(1).max(1) as f64;
        margin + (width - 2.0 * margin) * index as f64 / steps
    };
    let y = |value: f64| height - margin - (height - 2.0 * margin) * (value - low) / (high - low);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{margin}\" y=\"24\" font-size=\"14\">{} ({} is better): the baseline's median</text>\n\
         <line x1=\"{margin}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#888\"/>\n\
         <line x1=\"{margin}\" y1=\"{margin}\" x2=\"{margin}\" y2=\"{b}\" stroke=\"#888\"/>\n\
         <text x=\"4\" y=\"{}\">{}</text>\n<text x=\"4\" y=\"{}\">{}</text>\n",
        escape(&climb.metric),
        climb.direction,
        y(high) + 4.0,
        number(high),
        y(low) + 4.0,
        number(low),
        b = height - margin,
        r = width - margin,
    );
    let path: Vec<String> =
        points.iter().enumerate().map(|(i, p)| format!("{:.1},{:.1}", x(i), y(p.median))).collect();
    if points.len() > 1 {
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"#1f6feb\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" ")
        );
    }
    for (index, point) in points.iter().enumerate() {
        let (cx, cy) = (x(index), y(point.median));
        let _ = writeln!(
            svg,
            "<line x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" stroke=\"#1f6feb\" stroke-opacity=\"0.4\"/>\n\
             <circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"4\" fill=\"#1f6feb\"><title>{}: {}</title></circle>\n\
             <text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            y(point.median + point.spread),
            y(point.median - point.spread),
            escape(point.after.as_deref().unwrap_or("start")),
            number(point.median),
            height - margin + 16.0,
            escape(point.after.as_deref().unwrap_or("start"))
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_protocol::Timestamp;

    fn point(commit: &str, median: f64, after: Option<&str>) -> BaselinePoint {
        BaselinePoint {
            commit: commit.into(),
            values: vec![median],
            median,
            spread: 1.0,
            after: after.map(str::to_string),
            at: Timestamp { millis: 0 },
        }
    }

    #[test]
    fn the_plot_has_a_point_per_baseline_and_escapes_the_metric() {
        let climb = ClimbStatus {
            metric: "sh bench.sh <fast>".into(),
            direction: "lower".into(),
            checks: Vec::new(),
            runs: 7,
            max_experiments: 4,
            baselines: vec![point("aaaa", 100.0, None), point("bbbb", 80.0, Some("cache"))],
            baseline_failure: None,
            experiments: Vec::new(),
        };
        let svg = plot(&climb);
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("&lt;fast&gt;") && !svg.contains("<fast>"));
        assert!(svg.contains("<polyline"));
        let table = baseline_table(&climb);
        assert!(table.contains("| 2 | `bbbb` | `cache` | 80 | ±1 | -20.00% |"), "{table}");
    }
}
