//! The run's event log as the orchestrator writes it: each event is appended to
//! `events.jsonl` first (a failed write stops the run: nothing happens that the log does
//! not hold), then kept in memory for the state fold, then handed to the [`Console`].

use crate::SwarmError;
use kestrel_protocol::swarm::short_commit as short;
use kestrel_protocol::swarm::{
    NOTHING_TO_LAND, RunView, SwarmEntry, SwarmEvent, SwarmGraph, TaskView, median, number, spread,
};
use kestrel_store::SwarmRunDir;
use std::sync::Arc;

/// Where the orchestrator's output goes: the binary decides (JSON lines on stdout with
/// `--json`, short lines on stderr otherwise); this crate never prints.
pub trait Console: Send + Sync {
    /// Every event, once it is in the log.
    fn event(&self, entry: &SwarmEntry);
    /// A line for people (stderr).
    fn note(&self, text: &str);
    /// Output proper (stdout): the dry-run order, a plan no one confirmed.
    fn print(&self, text: &str);
    /// Asks a person yes or no; `None` when no one can answer.
    fn ask(&self, question: &str) -> Option<bool>;
}

pub struct EventLog {
    dir: SwarmRunDir,
    run: String,
    graph: SwarmGraph,
    entries: Vec<SwarmEntry>,
    /// Events of `events.jsonl` read by the last [`EventLog::read_foreign`] (or at
    /// the start); ours appended since come after them, among other processes'.
    lines_seen: usize,
    console: Arc<dyn Console>,
}

impl EventLog {
    /// The log of `dir` with the events already in it (a resumed run).
    pub fn new(
        dir: SwarmRunDir,
        run: &str,
        graph: SwarmGraph,
        entries: Vec<SwarmEntry>,
        console: Arc<dyn Console>,
    ) -> Self {
        let lines_seen = entries.len();
        EventLog { dir, run: run.to_string(), graph, entries, lines_seen, console }
    }

    pub fn dir(&self) -> &SwarmRunDir {
        &self.dir
    }

    pub fn graph(&self) -> &SwarmGraph {
        &self.graph
    }

    /// The planner's graph replaces the empty one of a GOAL run.
    pub fn set_graph(&mut self, graph: SwarmGraph) {
        self.graph = graph;
    }

    pub fn entries(&self) -> &[SwarmEntry] {
        &self.entries
    }

    /// Appends, remembers and shows `event`.
    pub fn emit(&mut self, event: SwarmEvent) -> Result<(), SwarmError> {
        let entry = SwarmEntry::now(event);
        self.dir.append(&entry)?;
        self.console.event(&entry);
        self.entries.push(entry);
        Ok(())
    }

    /// Events appended by other processes since (`kestrel swarm cancel`). Their lines
    /// may sit before ours in the file (appended before our last events), so they are
    /// told apart by kind, not by position: only other processes write requests.
    pub fn read_foreign(&mut self) -> Result<Vec<SwarmEvent>, SwarmError> {
        let all = self.dir.events()?.entries;
        let Some(unseen) = all.get(self.lines_seen..) else { return Ok(Vec::new()) };
        let new: Vec<SwarmEntry> = unseen
            .iter()
            .filter(|entry| matches!(entry.event, SwarmEvent::CancelRequested { .. }))
            .cloned()
            .collect();
        self.lines_seen = all.len();
        self.entries.extend(new.iter().cloned());
        Ok(new.into_iter().map(|entry| entry.event).collect())
    }

    pub fn view(&self) -> RunView {
        RunView::fold(&self.run, &self.graph, &self.entries)
    }

    pub fn task(&self, id: &str) -> Option<TaskView> {
        self.view().task(id).cloned()
    }
}

/// The line people see for an event; `None` for the ones too small to show.
pub fn describe(event: &SwarmEvent) -> Option<String> {
    Some(match event {
        SwarmEvent::RunStarted { branch, base, tasks, .. } => {
            format!("{tasks} task(s) on {branch} (from {base})")
        }
        SwarmEvent::RunResumed { .. } => "resumed".to_string(),
        SwarmEvent::Planned { tasks } => format!("the planner made {tasks} task(s)"),
        SwarmEvent::PlanFailed { reasons } => format!("no valid plan: {}", reasons.join("; ")),
        SwarmEvent::AttemptStarted { task, attempt, .. } => format!("{task}: attempt {attempt}"),
        SwarmEvent::TurnStarted { task, role, session, model, .. } => {
            format!("{task}: {} on {model} (session {session})", role.as_str())
        }
        SwarmEvent::TurnFinished { .. } | SwarmEvent::InputGiven { .. } => return None,
        SwarmEvent::NeedsInput { task, session, title } => {
            format!("{task} needs input: {title} (answer it with `kestrel resume {session}`)")
        }
        SwarmEvent::Committed { task, commit, .. } => {
            format!("{task}: committed {}", short(commit))
        }
        SwarmEvent::Reviewed { task, approve: true, .. } => format!("{task}: approved"),
        SwarmEvent::Reviewed { task, findings, .. } => {
            format!("{task}: rejected ({})", findings.join("; "))
        }
        SwarmEvent::Verified { task, .. } => format!("{task}: verified"),
        SwarmEvent::AttemptFailed { task, attempt, reason, .. } => {
            format!("{task}: attempt {attempt} failed: {reason}")
        }
        SwarmEvent::Merged { task, commit, .. } => format!("{task}: merged ({})", short(commit)),
        SwarmEvent::TaskFailed { task, reason } => format!("{task}: FAILED: {reason}"),
        SwarmEvent::TaskBlocked { task, by } => format!("{task}: blocked by {by}"),
        SwarmEvent::TaskCancelled { task } => format!("{task}: cancelled"),
        SwarmEvent::TaskRetried { task, attempts } => format!("{task}: {attempts} more attempt(s)"),
        SwarmEvent::CancelRequested { task: Some(task) } => format!("{task}: cancel requested"),
        SwarmEvent::CancelRequested { task: None } => "cancel requested".to_string(),
        SwarmEvent::RateLimited { task, until } => {
            format!("{task}: rate limited; no new turn until {until}")
        }
        SwarmEvent::BudgetReached { cost_usd, max_cost_usd } => {
            format!("budget reached (${cost_usd:.4} of ${max_cost_usd:.4}): no new turns")
        }
        SwarmEvent::ClimbStarted { metric, direction, runs, .. } => {
            format!("climbing: `{metric}`, {} is better, {runs} runs a side", direction.as_str())
        }
        SwarmEvent::BaselineMeasured { commit, values } => format!(
            "baseline {}: median {} (±{})",
            short(commit),
            number(median(values)),
            number(spread(values))
        ),
        SwarmEvent::BaselineFailed { commit, reason } => {
            format!("baseline {} failed: {reason}", short(commit))
        }
        SwarmEvent::ExperimentsProposed { round, experiments } => format!(
            "round {round}: {} experiment(s) proposed ({})",
            experiments.len(),
            experiments.iter().map(|e| e.id.as_str()).collect::<Vec<_>>().join(", ")
        ),
        SwarmEvent::BaselineMergedIn { task, commit, .. } => {
            format!("{task}: the new baseline merged in ({})", short(commit))
        }
        SwarmEvent::ExperimentMeasured { task, look, baseline, values, .. } => format!(
            "{task}: look {look}: median {} against the baseline's {}",
            number(median(values)),
            number(median(baseline))
        ),
        SwarmEvent::ExperimentDecided { task, decision, reason, .. } => {
            format!("{task}: {}: {reason}", decision.as_str())
        }
        SwarmEvent::RunFinished { state, branch, land, cost_usd } => {
            let state = serde_json::to_value(state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            if land == NOTHING_TO_LAND {
                format!(
                    "run {state}: {branch} (${cost_usd:.4}); nothing was merged, nothing to land"
                )
            } else {
                format!("run {state}: {branch} (${cost_usd:.4}); land it with: {land}")
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Silent;

    impl Console for Silent {
        fn event(&self, _entry: &SwarmEntry) {}
        fn note(&self, _text: &str) {}
        fn print(&self, _text: &str) {}
        fn ask(&self, _question: &str) -> Option<bool> {
            None
        }
    }

    #[test]
    fn a_request_appended_before_our_next_event_is_heard_once() {
        let home = tempfile::tempdir().unwrap();
        let home = kestrel_store::KestrelHome::at(home.path());
        let dir = SwarmRunDir::create(&home, "r1", "").unwrap();
        let mut log =
            EventLog::new(dir.clone(), "r1", SwarmGraph::default(), Vec::new(), Arc::new(Silent));
        log.emit(SwarmEvent::RunResumed { run: "r1".into() }).unwrap();
        let request = SwarmEvent::CancelRequested { task: Some("a".into()) };
        dir.append(&SwarmEntry::now(request.clone())).unwrap();
        log.emit(SwarmEvent::TaskCancelled { task: "b".into() }).unwrap();
        assert_eq!(log.read_foreign().unwrap(), [request]);
        assert!(log.read_foreign().unwrap().is_empty());
        assert_eq!(log.entries().len(), 3);
    }
}
