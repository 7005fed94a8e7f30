//! The scheduler: starts a driver for every task whose dependencies are merged (and that
//! shares no file with a task in flight), blocks the dependents of a task that failed or
//! was cancelled, hears cancellation asked by another process, and ends the run.

use crate::SwarmError;
use crate::context::Run;
use crate::task::{TaskEnd, drive};
use kestrel_protocol::swarm::{RunEnd, SwarmEvent, SwarmGraph, TaskState};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// How often the event log is read for requests of other processes.
const FOREIGN_POLL: Duration = Duration::from_millis(500);

/// Why the loop stopped before the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The run ended this way (a `run_finished` was written).
    Ended(RunEnd),
    /// Ctrl+C: nothing more is scheduled; turns in flight go on in the daemon, and
    /// `kestrel swarm resume` continues.
    Interrupted,
}

/// Runs the graph until every task is final or the run stops.
pub async fn schedule(run: Arc<Run>) -> Result<Outcome, SwarmError> {
    let graph = run.graph();
    let mut running: JoinSet<(String, Result<TaskEnd, SwarmError>)> = JoinSet::new();
    let mut active: BTreeSet<String> = BTreeSet::new();
    let mut error: Option<SwarmError> = None;
    let mut poll = tokio::time::interval(FOREIGN_POLL);
    let interrupt = tokio::signal::ctrl_c();
    tokio::pin!(interrupt);
    loop {
        block_dependents(&run, &graph)?;
        if error.is_none() && !run.stop.is_cancelled() {
            for id in startable(&run, &graph, &active) {
                active.insert(id.clone());
                let run = Arc::clone(&run);
                running.spawn(async move {
                    let end = drive(&run, &id).await;
                    (id, end)
                });
            }
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            joined = running.join_next() => {
                let Some(joined) = joined else { continue };
                match joined {
                    Ok((id, Ok(_end))) => {
                        active.remove(&id);
                    }
                    Ok((id, Err(failure))) => {
                        active.remove(&id);
                        run.halt();
                        error.get_or_insert(failure);
                    }
                    Err(join_error) => {
                        run.halt();
                        error.get_or_insert(SwarmError::Daemon(format!("a task driver died: {join_error}")));
                    }
                }
            }
            _ = poll.tick() => {
                if let Err(failure) = hear_requests(&run) {
                    run.halt();
                    error.get_or_insert(failure);
                }
            }
            _ = &mut interrupt => {
                run.stop.cancel();
                running.abort_all();
                while running.join_next().await.is_some() {}
                return Ok(Outcome::Interrupted);
            }
        }
    }
    if let Some(error) = error {
        return Err(error);
    }
    finish(&run).await
}

/// Tasks that may start now: ready, not in flight, sharing no file with one in flight.
fn startable(run: &Run, graph: &SwarmGraph, active: &BTreeSet<String>) -> Vec<String> {
    let view = run.view();
    let mut busy_files: Vec<String> = graph
        .tasks
        .iter()
        .filter(|task| active.contains(&task.id))
        .flat_map(|task| task.files.iter().map(|file| normal_path(file)))
        .collect();
    let mut start = Vec::new();
    for id in graph.order() {
        let Some(task) = view.task(&id) else { continue };
        if active.contains(&id) || task.state.is_final() || task.state == TaskState::Waiting {
            continue;
        }
        let Some(spec) = graph.task(&id) else { continue };
        let files: Vec<String> = spec.files.iter().map(|file| normal_path(file)).collect();
        if files.iter().any(|file| busy_files.iter().any(|busy| overlaps(file, busy))) {
            continue;
        }
        busy_files.extend(files);
        start.push(id);
    }
    start
}

/// A `files` hint as a plain relative path: `./src/a.py` and `src/a.py/` are `src/a.py`.
pub(crate) fn normal_path(file: &str) -> String {
    let mut path = file.trim();
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    path.trim_end_matches('/').to_string()
}

/// Two hints name the same place when equal or when one is a directory holding the other.
pub(crate) fn overlaps(a: &str, b: &str) -> bool {
    a == b || a.starts_with(&format!("{b}/")) || b.starts_with(&format!("{a}/"))
}

/// Every task waiting on a failed, blocked or cancelled one is blocked, naming it.
fn block_dependents(run: &Run, graph: &SwarmGraph) -> Result<(), SwarmError> {
    loop {
        let view = run.view();
        let mut blocked = None;
        for task in &graph.tasks {
            let Some(state) = view.task(&task.id).map(|t| t.state) else { continue };
            if state != TaskState::Waiting {
                continue;
            }
            let dead = task.depends_on.iter().find(|dep| {
                view.task(dep).is_some_and(|dep| {
                    matches!(
                        dep.state,
                        TaskState::Failed | TaskState::Blocked | TaskState::Cancelled
                    )
                })
            });
            if let Some(dep) = dead {
                blocked = Some((task.id.clone(), dep.clone()));
                break;
            }
        }
        let Some((task, by)) = blocked else { return Ok(()) };
        run.emit(SwarmEvent::TaskBlocked { task, by })?;
    }
}

/// `kestrel swarm cancel` from another process appends a request to the log.
pub(crate) fn hear_requests(run: &Run) -> Result<(), SwarmError> {
    let requests = run.read_foreign()?;
    for event in requests {
        if let SwarmEvent::CancelRequested { task } = event {
            match task {
                Some(task) => run.task_cancel(&task).cancel(),
                None => {
                    run.stop.cancel();
                    run.cancel.cancel();
                }
            }
        }
    }
    Ok(())
}

/// Writes how the run ended.
async fn finish(run: &Run) -> Result<Outcome, SwarmError> {
    let view = run.view();
    // A cancelled run also cancels the tasks that never started.
    if run.cancel.is_cancelled() {
        for task in &view.tasks {
            if !task.state.is_final() {
                run.emit(SwarmEvent::TaskCancelled { task: task.id.clone() })?;
            }
        }
    }
    let view = run.view();
    let all_merged = view.tasks.iter().all(|task| task.state == TaskState::Merged);
    let any_open = view.tasks.iter().any(|task| !task.state.is_final());
    let end = if run.cancel.is_cancelled() {
        RunEnd::Cancelled
    } else if all_merged {
        RunEnd::Done
    } else if any_open && run.max_cost.is_some() && run.stop.is_cancelled() {
        RunEnd::Budget
    } else if any_open {
        // Nothing runs and nothing can start: a stop that is not the budget's.
        return Ok(Outcome::Interrupted);
    } else {
        RunEnd::Failed
    };
    let land = run.land();
    let cost_usd = run.view().usage().cost_usd;
    run.emit(SwarmEvent::RunFinished { state: end, branch: run.branch.clone(), land, cost_usd })?;
    if end == RunEnd::Done {
        crate::cleanup::remove_worktrees(run).await;
    }
    Ok(Outcome::Ended(end))
}

#[cfg(test)]
mod tests {
    use super::{normal_path, overlaps};

    #[test]
    fn file_hints_overlap_by_path_not_by_spelling() {
        assert_eq!(normal_path(" ./src/a.py "), "src/a.py");
        assert_eq!(normal_path("src/"), "src");
        assert!(overlaps(&normal_path("./src/a.py"), &normal_path("src/a.py")));
        assert!(overlaps("src", "src/a.py"));
        assert!(overlaps("src/a.py", "src"));
        assert!(!overlaps("src/a.py", "src/ab.py"));
        assert!(!overlaps("src2", "src/a.py"));
    }
}
