//! One role turn, from the prompt to what the record says: a session made (or the role's
//! session attached again), the prompt sent, a wait for a person's answer announced as
//! `needs-input`, and the turn taken over after a worker restart, a lost daemon or a
//! resumed orchestrator. A turn the record shows finished is never sent again; one that
//! was interrupted is sent again (the same attempt: it is not counted twice).

use crate::SwarmError;
use crate::client::{PromptEnd, SessionSignal};
use crate::context::Run;
use crate::outcome::{RecordedTurn, recorded_turn};
use kestrel_protocol::swarm::{SwarmEvent, SwarmRole, SwarmSessionTag};
use kestrel_protocol::{SessionId, StopReason};
use std::path::Path;
use std::time::Duration;
use tokio::sync::{SemaphorePermit, mpsc};
use tokio_util::sync::CancellationToken;

/// How often one turn is sent again after its worker died or the daemon went away.
const MAX_RESENDS: u32 = 3;
/// How often a turn that failed on a rate limit is sent again.
pub(crate) const MAX_RATE_LIMITED: u32 = 6;

/// A turn to run.
pub struct TurnSpec<'a> {
    pub tag: SwarmSessionTag,
    pub cwd: &'a Path,
    pub model: &'a str,
    pub prompt: String,
    /// The role's session to use; `None` makes a new one.
    pub session: Option<SessionId>,
}

/// How it went.
#[derive(Debug)]
pub enum TurnResult {
    /// The turn ended (its stop reason and role result are in `turn`).
    Ended { session: SessionId, turn: RecordedTurn },
    /// The turn failed (the model's error, say).
    Failed { session: SessionId, message: String },
    /// Not started: the budget is used up or the run is stopping.
    Stopped,
    /// Cancelled by the user.
    Cancelled,
}

/// Runs `spec` to its end.
pub async fn run_turn(
    run: &Run,
    spec: TurnSpec<'_>,
    cancel: &CancellationToken,
) -> Result<TurnResult, SwarmError> {
    if let Some(ray) = &run.ray
        && spec.tag.role != SwarmRole::Planner
    {
        return crate::ray::run_turn(run, ray, spec, cancel).await;
    }
    if let Some(result) = already_finished(run, &spec)? {
        return Ok(result);
    }
    let Some(_slot) = take_slot(run).await? else { return Ok(TurnResult::Stopped) };
    run_turn_in_slot(run, spec, cancel).await
}

/// A turn the record already has (a resumed run), taken as it stands.
fn already_finished(run: &Run, spec: &TurnSpec<'_>) -> Result<Option<TurnResult>, SwarmError> {
    let Some(session) = &spec.session else { return Ok(None) };
    let recorded = recorded_turn(&run.home, session, &spec.tag.prompt_line())?;
    if recorded.prompted && finished(&recorded) {
        return finish(run, &spec.tag, session, recorded).map(Some);
    }
    Ok(None)
}

/// [`run_turn`] (on this machine) for a caller that took its slot with [`take_slot`]
/// first, so that whatever else it holds for the turn is not held while it waits for one.
pub async fn run_turn_in_slot(
    run: &Run,
    spec: TurnSpec<'_>,
    cancel: &CancellationToken,
) -> Result<TurnResult, SwarmError> {
    if let Some(result) = already_finished(run, &spec)? {
        return Ok(result);
    }
    let line = spec.tag.prompt_line();
    if cancel.is_cancelled() {
        return Ok(TurnResult::Cancelled);
    }
    let session = match &spec.session {
        Some(session) => session.clone(),
        None => {
            let mode = spec.tag.role.default_mode();
            run.daemon.new_session(spec.cwd, &spec.tag, spec.model, mode).await?
        }
    };
    // A resumed run taking over a turn it announced already says nothing new.
    let announced = run.any_event(|event| {
        matches!(event, SwarmEvent::TurnStarted { task, role, attempt, session: s, .. }
            if *task == spec.tag.task && *role == spec.tag.role
                && *attempt == spec.tag.attempt && *s == session)
    });
    if !announced {
        run.emit(SwarmEvent::TurnStarted {
            task: spec.tag.task.clone(),
            role: spec.tag.role,
            attempt: spec.tag.attempt,
            session: session.clone(),
            model: spec.model.to_string(),
        })?;
    }
    let mut resends = 0;
    let mut rate_limited = 0;
    // A turn that failed on a rate limit is sent again: its failure is not the answer.
    let mut failed_is_stale = false;
    loop {
        let mut signals = run.daemon.watch(&session);
        // Attached again so its updates and permission requests reach this client.
        let running = run.daemon.attach(&session, spec.cwd).await?;
        let recorded = recorded_turn(&run.home, &session, &line)?;
        let end = if running && recorded.prompted && recorded.ended.is_none() {
            wait_for_end(run, &spec.tag, &session, &mut signals, cancel).await?
        } else if recorded.prompted
            && finished(&recorded)
            && !(failed_is_stale && recorded.ended == Some(StopReason::Failed))
        {
            return finish(run, &spec.tag, &session, recorded);
        } else {
            failed_is_stale = false;
            prompt(run, &spec, &session, &mut signals, cancel).await?
        };
        run.daemon.unwatch(&session);
        if cancel.is_cancelled() {
            // What it spent before the cancel counts.
            let recorded = recorded_turn(&run.home, &session, &line)?;
            record_finished(run, &spec.tag, &session, &recorded, "cancelled")?;
            return Ok(TurnResult::Cancelled);
        }
        match end {
            PromptEnd::Stopped(reason) if reason != "cancelled" => {
                let recorded = recorded_turn(&run.home, &session, &line)?;
                return finish(run, &spec.tag, &session, recorded);
            }
            PromptEnd::Failed(message)
                if is_transient(&message) && rate_limited < MAX_RATE_LIMITED =>
            {
                rate_limited += 1;
                failed_is_stale = true;
                let wait = Duration::from_secs(1u64 << rate_limited.min(5));
                let until = tokio::time::Instant::now() + wait;
                run.pause_until(until);
                let at = kestrel_protocol::Timestamp {
                    millis: kestrel_protocol::Timestamp::now().millis
                        + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX),
                };
                run.emit(SwarmEvent::RateLimited { task: spec.tag.task.clone(), until: at })?;
                run.wait_for_pause().await;
            }
            PromptEnd::Failed(message) => {
                let recorded = recorded_turn(&run.home, &session, &line)?;
                record_finished(run, &spec.tag, &session, &recorded, "failed")?;
                return Ok(TurnResult::Failed { session, message });
            }
            // Cancelled by no one here: a person cancelled it from another client (the
            // record says `cancelled`), or its worker was restarted (`interrupted`, or not
            // closed yet). Or the daemon went away. Only a person's cancel ends the turn.
            PromptEnd::Stopped(_)
                if recorded_turn(&run.home, &session, &line)?.ended
                    == Some(StopReason::Cancelled) =>
            {
                let recorded = recorded_turn(&run.home, &session, &line)?;
                record_finished(run, &spec.tag, &session, &recorded, "cancelled")?;
                return Ok(TurnResult::Failed {
                    session,
                    message: "the turn was cancelled from another client".to_string(),
                });
            }
            PromptEnd::Stopped(_) | PromptEnd::Lost => {
                resends += 1;
                if resends > MAX_RESENDS {
                    let recorded = recorded_turn(&run.home, &session, &line)?;
                    record_finished(run, &spec.tag, &session, &recorded, "interrupted")?;
                    return Ok(TurnResult::Failed {
                        session,
                        message: format!(
                            "the {} turn was interrupted {MAX_RESENDS} times (its worker or the daemon kept dying)",
                            spec.tag.role.as_str()
                        ),
                    });
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// A turn slot (`max_parallel`); `None` when the run stops first. The budget and a
/// rate-limit pause are checked again once a slot is had: turns queued for a slot must
/// not start past them.
pub(crate) async fn take_slot(run: &Run) -> Result<Option<SemaphorePermit<'_>>, SwarmError> {
    loop {
        if run.stop.is_cancelled() || !run.within_budget()? {
            return Ok(None);
        }
        run.wait_for_pause().await;
        let Ok(slot) = run.turns.acquire().await else { return Ok(None) };
        if run.may_start_turn()? {
            return Ok(Some(slot));
        }
    }
}

/// Sends the prompt and waits for its answer, telling the run when the session waits
/// for a person.
async fn prompt(
    run: &Run,
    spec: &TurnSpec<'_>,
    session: &SessionId,
    signals: &mut mpsc::UnboundedReceiver<SessionSignal>,
    cancel: &CancellationToken,
) -> Result<PromptEnd, SwarmError> {
    let answer = run.daemon.prompt(session, &spec.prompt);
    tokio::pin!(answer);
    let mut waiting: Vec<String> = Vec::new();
    loop {
        tokio::select! {
            end = &mut answer => {
                if !waiting.is_empty() {
                    run.emit(SwarmEvent::InputGiven { task: spec.tag.task.clone(), session: session.clone() })?;
                }
                return Ok(end);
            }
            Some(signal) = signals.recv() => {
                on_signal(run, &spec.tag, session, signal, &mut waiting)?;
            }
            () = cancel.cancelled() => {
                run.daemon.cancel(session).await;
                return Ok(PromptEnd::Stopped("cancelled".to_string()));
            }
        }
    }
}

/// Waits for a turn that runs already (attached after a restart or a resume).
async fn wait_for_end(
    run: &Run,
    tag: &SwarmSessionTag,
    session: &SessionId,
    signals: &mut mpsc::UnboundedReceiver<SessionSignal>,
    cancel: &CancellationToken,
) -> Result<PromptEnd, SwarmError> {
    let mut waiting: Vec<String> = Vec::new();
    loop {
        tokio::select! {
            signal = signals.recv() => match signal {
                Some(SessionSignal::TurnEnded) => {
                    if !waiting.is_empty() {
                        run.emit(SwarmEvent::InputGiven { task: tag.task.clone(), session: session.clone() })?;
                    }
                    let recorded = recorded_turn(&run.home, session, &tag.prompt_line())?;
                    return Ok(match recorded.ended {
                        Some(StopReason::Cancelled | StopReason::Interrupted) | None => {
                            PromptEnd::Stopped("cancelled".to_string())
                        }
                        Some(StopReason::Failed) => {
                            PromptEnd::Failed(recorded.error.unwrap_or_else(|| "the turn failed".into()))
                        }
                        Some(StopReason::EndTurn | StopReason::MaxTurns) => {
                            PromptEnd::Stopped("end_turn".to_string())
                        }
                    });
                }
                Some(SessionSignal::Disconnected) | None => return Ok(PromptEnd::Lost),
                Some(signal) => on_signal(run, tag, session, signal, &mut waiting)?,
            },
            () = cancel.cancelled() => {
                run.daemon.cancel(session).await;
                return Ok(PromptEnd::Stopped("cancelled".to_string()));
            }
        }
    }
}

fn on_signal(
    run: &Run,
    tag: &SwarmSessionTag,
    session: &SessionId,
    signal: SessionSignal,
    waiting: &mut Vec<String>,
) -> Result<(), SwarmError> {
    match signal {
        SessionSignal::PermissionAsked { tool_call_id, title } => {
            if !waiting.contains(&tool_call_id) {
                waiting.push(tool_call_id);
                run.emit(SwarmEvent::NeedsInput {
                    task: tag.task.clone(),
                    session: session.clone(),
                    title,
                })?;
            }
        }
        SessionSignal::ToolCallMoved { tool_call_id } => {
            if let Some(index) = waiting.iter().position(|id| *id == tool_call_id) {
                waiting.remove(index);
                if waiting.is_empty() {
                    run.emit(SwarmEvent::InputGiven {
                        task: tag.task.clone(),
                        session: session.clone(),
                    })?;
                }
            }
        }
        SessionSignal::RateLimited { .. } => {
            run.pause_until(tokio::time::Instant::now() + Duration::from_secs(5));
        }
        SessionSignal::TurnEnded | SessionSignal::Disconnected => {}
    }
    Ok(())
}

pub(crate) fn finished(turn: &RecordedTurn) -> bool {
    matches!(turn.ended, Some(StopReason::EndTurn | StopReason::MaxTurns | StopReason::Failed))
}

/// The result of a finished turn, its `turn_finished` written once.
pub(crate) fn finish(
    run: &Run,
    tag: &SwarmSessionTag,
    session: &SessionId,
    turn: RecordedTurn,
) -> Result<TurnResult, SwarmError> {
    let reason = match turn.ended {
        Some(StopReason::Failed) => "failed",
        Some(StopReason::MaxTurns) => "max_turns",
        _ => "end_turn",
    };
    record_finished(run, tag, session, &turn, reason)?;
    if turn.ended == Some(StopReason::Failed) {
        let message = turn.error.clone().unwrap_or_else(|| "the turn failed".to_string());
        return Ok(TurnResult::Failed { session: session.clone(), message });
    }
    Ok(TurnResult::Ended { session: session.clone(), turn })
}

/// Writes `turn_finished` unless the log has it for this session and attempt already.
pub(crate) fn record_finished(
    run: &Run,
    tag: &SwarmSessionTag,
    session: &SessionId,
    turn: &RecordedTurn,
    reason: &str,
) -> Result<(), SwarmError> {
    let known = run.any_event(|event| {
        matches!(event, SwarmEvent::TurnFinished { task, role, attempt, session: s, .. }
            if *task == tag.task && *role == tag.role && *attempt == tag.attempt && s == session)
    });
    if known {
        return Ok(());
    }
    run.add_cost(turn.usage.cost_usd);
    run.emit(SwarmEvent::TurnFinished {
        task: tag.task.clone(),
        role: tag.role,
        attempt: tag.attempt,
        session: session.clone(),
        stop_reason: reason.to_string(),
        usage: turn.usage,
    })
}

/// A failure the provider may not repeat: a rate limit, a server error, a broken
/// stream. Such a turn is sent again after a pause of the whole run instead of using up
/// an attempt (a provider's outage would fail every task within seconds).
pub(crate) fn is_transient(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["429", "rate limit", "with http 5", "broke off", "timed out", "connection"]
        .iter()
        .any(|mark| lower.contains(mark))
}
