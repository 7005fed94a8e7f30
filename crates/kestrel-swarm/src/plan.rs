//! GOAL runs: a planner session (read-only, in a worktree of the base commit) writes the
//! graph through `swarm_plan`. A turn that ends without a valid plan gets the reasons in
//! a new prompt, at most twice.

use crate::SwarmError;
use crate::context::Run;
use crate::prompts;
use crate::turn::{TurnResult, TurnSpec, run_turn};
use kestrel_protocol::SessionId;
use kestrel_protocol::swarm::{SwarmPlan, SwarmRole, SwarmSessionTag, TaskSpec};
use tokio_util::sync::CancellationToken;

/// The planner's prompts: the first and at most two more.
const MAX_PROMPTS: u32 = 3;

/// The task name planner sessions carry (they have no task).
pub const PLAN_TASK: &str = "plan";

/// How planning ended.
pub enum Planned {
    Tasks(Vec<TaskSpec>),
    /// No valid plan: the reasons of the last refusal.
    Refused(Vec<String>),
    /// The run stopped first (budget, Ctrl+C).
    Stopped,
}

/// Asks the planner for a graph reaching `goal`, from `base_commit`.
pub async fn plan(run: &Run, goal: &str, base_commit: &str) -> Result<Planned, SwarmError> {
    let dir = run.workdir.join(".plan");
    run.repo.add_detached_worktree(&dir, base_commit).await?;
    let cancel = CancellationToken::new();
    let mut session: Option<SessionId> = None;
    let mut reasons: Vec<String> = Vec::new();
    for attempt in 1..=MAX_PROMPTS {
        let tag = SwarmSessionTag {
            run: run.id.clone(),
            task: PLAN_TASK.to_string(),
            role: SwarmRole::Planner,
            attempt,
            kind: Default::default(),
        };
        let refusal = (!reasons.is_empty()).then(|| format_reasons(&reasons));
        let prompt = prompts::planner(&tag, goal, refusal.as_deref());
        let spec = TurnSpec {
            tag,
            cwd: &dir,
            model: &run.models.planner,
            prompt,
            session: session.clone(),
        };
        match run_turn(run, spec, &cancel).await? {
            TurnResult::Stopped | TurnResult::Cancelled => return Ok(Planned::Stopped),
            TurnResult::Failed { session: used, message } => {
                session = Some(used);
                reasons = vec![format!("the planner's turn failed: {message}")];
            }
            TurnResult::Ended { session: used, turn } => {
                session = Some(used);
                match turn.plan {
                    Some(tasks) => {
                        let problems = SwarmPlan { tasks: tasks.clone() }.problems();
                        if problems.is_empty() {
                            if let Some(session) = &session {
                                run.daemon.detach(session).await;
                            }
                            return Ok(Planned::Tasks(tasks));
                        }
                        reasons = problems;
                    }
                    None => {
                        reasons = match turn.plan_refusal {
                            Some(refusal) => refusal_reasons(&refusal),
                            None => vec!["the turn ended without calling swarm_plan".to_string()],
                        };
                    }
                }
            }
        }
    }
    Ok(Planned::Refused(reasons))
}

/// The problems a refused `swarm_plan` call listed (its `- ` lines), without the
/// tool's framing around them; the whole answer when it lists none.
fn refusal_reasons(refusal: &str) -> Vec<String> {
    let listed: Vec<String> =
        refusal.lines().filter_map(|line| line.strip_prefix("- ")).map(str::to_string).collect();
    if listed.is_empty() { vec![refusal.trim().to_string()] } else { listed }
}

fn format_reasons(reasons: &[String]) -> String {
    reasons.iter().map(|reason| format!("- {reason}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::refusal_reasons;

    #[test]
    fn a_refusal_gives_its_listed_problems_only() {
        let refusal = "the plan was not recorded:\n- task `b` has no title\n- a cycle: a -> b -> a\n\
                       Call swarm_plan again with a corrected plan.";
        assert_eq!(refusal_reasons(refusal), ["task `b` has no title", "a cycle: a -> b -> a"]);
        assert_eq!(refusal_reasons("bad arguments\n"), ["bad arguments"]);
    }
}
