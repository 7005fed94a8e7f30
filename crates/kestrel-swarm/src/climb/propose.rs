//! A planner round of a climb: the planner session (read-only, in a worktree of the
//! current baseline) proposes experiments through `swarm_experiments`; a turn without a
//! valid proposal is asked again with the reasons, at most twice. Proposals are recorded
//! (`experiments_proposed`) before they become tasks of `graph.toml`.

use super::Climb;
use super::prompts;
use crate::SwarmError;
use crate::git::Git;
use crate::plan::PLAN_TASK;
use crate::turn::{TurnResult, TurnSpec, run_turn_in_slot};
use kestrel_protocol::swarm::{
    ExperimentSpec, MAX_TASK_ID_LEN, RunKind, SwarmEvent, SwarmExperiments, SwarmRole,
    SwarmSessionTag,
};
use tokio_util::sync::CancellationToken;

/// Prompts per round: the first and at most two more.
const MAX_PROMPTS: u32 = 3;

/// How a round ended.
pub enum Proposed {
    /// New experiments were recorded.
    Experiments,
    /// No valid proposal: the reasons of the last prompt.
    Nothing(Vec<String>),
    /// The run stopped first (budget, Ctrl+C, cancel).
    Stopped,
}

/// Asks the planner for at most `wanted` experiments (round `round`).
pub async fn propose(climb: &Climb, round: u32, wanted: u32) -> Result<Proposed, SwarmError> {
    let run = &climb.run;
    let Some(baseline) = climb.view().baseline().map(|point| point.commit.clone()) else {
        return Err(SwarmError::Usage("the climb has no baseline to plan from".into()));
    };
    let dir = run.workdir.join(".plan");
    run.repo.add_detached_worktree(&dir, &baseline).await?;
    Git::new(&dir).run(&["checkout", "--quiet", "--detach", &baseline]).await?;
    let cancel = CancellationToken::new();
    let mut reasons: Vec<String> = Vec::new();
    for _ in 0..MAX_PROMPTS {
        let tag = SwarmSessionTag {
            run: run.id.clone(),
            task: PLAN_TASK.to_string(),
            role: SwarmRole::Planner,
            attempt: next_planner_turn(climb),
            kind: RunKind::Climb,
        };
        let refusal = (!reasons.is_empty())
            .then(|| reasons.iter().map(|r| format!("- {r}")).collect::<Vec<_>>().join("\n"));
        let prompt = prompts::planner(&tag, &climb.view(), wanted, refusal.as_deref());
        let session = run.view().planner_sessions.last().map(|s| s.session.clone());
        let spec = TurnSpec { tag, cwd: &dir, model: &run.models.planner, prompt, session };
        let result = {
            let Some((_slot, _lease)) = climb.turn_lease().await? else {
                return Ok(Proposed::Stopped);
            };
            run_turn_in_slot(run, spec, &cancel).await?
        };
        match result {
            TurnResult::Stopped | TurnResult::Cancelled => return Ok(Proposed::Stopped),
            TurnResult::Failed { message, .. } => {
                reasons = vec![format!("the planner's turn failed: {message}")];
            }
            TurnResult::Ended { turn, .. } => match turn.experiments {
                Some(experiments) => {
                    let proposal = SwarmExperiments { experiments };
                    let problems = proposal.problems();
                    if problems.is_empty() {
                        let taken = take(climb, proposal.experiments, wanted);
                        run.emit(SwarmEvent::ExperimentsProposed { round, experiments: taken })?;
                        climb.ensure_graph()?;
                        return Ok(Proposed::Experiments);
                    }
                    reasons = problems;
                }
                None => {
                    reasons = vec!["the turn ended without calling swarm_experiments".into()];
                }
            },
        }
    }
    Ok(Proposed::Nothing(reasons))
}

/// The planner turn to run now: the first one no `turn_finished` records (a resumed run
/// takes over the one it was waiting for).
fn next_planner_turn(climb: &Climb) -> u32 {
    let mut attempt = 1;
    while climb.run.any_event(|event| {
        matches!(event, SwarmEvent::TurnFinished { role: SwarmRole::Planner, attempt: a, .. } if *a == attempt)
    }) {
        attempt += 1;
    }
    attempt
}

/// At most `wanted` of the proposals; an id the run used already gets a suffix.
fn take(climb: &Climb, experiments: Vec<ExperimentSpec>, wanted: u32) -> Vec<ExperimentSpec> {
    let graph = climb.run.graph();
    let mut used: Vec<String> = graph.tasks.iter().map(|task| task.id.clone()).collect();
    used.extend(climb.view().experiments.iter().map(|e| e.spec.id.clone()));
    let mut taken = Vec::new();
    for mut experiment in experiments.into_iter().take(wanted as usize) {
        let mut id = experiment.id.clone();
        let mut suffix = 2;
        while used.contains(&id) || id == PLAN_TASK {
            id = suffixed(&experiment.id, suffix);
            suffix += 1;
        }
        experiment.id = id.clone();
        used.push(id);
        taken.push(experiment);
    }
    taken
}

/// `id-suffix`, `id` cut so that the whole stays a valid id (at most
/// [`MAX_TASK_ID_LEN`], not ending in `-` before the suffix).
fn suffixed(id: &str, suffix: u32) -> String {
    let tail = format!("-{suffix}");
    let room = MAX_TASK_ID_LEN.saturating_sub(tail.len());
    // Ids are ASCII: bytes are characters.
    let head = id.get(..id.len().min(room)).unwrap_or(id).trim_end_matches('-');
    format!("{head}{tail}")
}

#[cfg(test)]
mod tests {
    use super::suffixed;
    use kestrel_protocol::swarm::{MAX_TASK_ID_LEN, valid_task_id};

    #[test]
    fn a_suffixed_id_stays_a_valid_id() {
        assert_eq!(suffixed("faster", 2), "faster-2");
        let long = "a".repeat(MAX_TASK_ID_LEN);
        let id = suffixed(&long, 12);
        assert_eq!(id.len(), MAX_TASK_ID_LEN);
        assert!(id.ends_with("a-12") && valid_task_id(&id), "{id}");
        let dashed = format!("{}-bc", "a".repeat(MAX_TASK_ID_LEN - 3));
        let id = suffixed(&dashed, 2);
        assert_eq!(id, format!("{}-2", "a".repeat(MAX_TASK_ID_LEN - 3)));
        assert!(valid_task_id(&id), "{id}");
    }
}
