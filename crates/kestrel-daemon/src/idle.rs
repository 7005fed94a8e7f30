//! Idle workers are stopped by one task for the whole daemon, not a timer per session:
//! it sleeps until the earliest moment a session with no client and nothing in flight
//! has been idle for `worker_idle`, and sleeps without a deadline while none is. An
//! idle daemon with thousands of sessions so wakes only when something happens.
//!
//! Why a wake-up is needed only while the reaper has no deadline: a session becomes a
//! candidate only through an event that also resets its idle clock (a client leaving,
//! a worker message), so its deadline is never earlier than one already set.

use crate::router::Router;
use crate::session::{LiveSession, Phase};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// What the sessions' events use to wake the reaper.
#[derive(Debug, Default)]
pub(crate) struct IdleReaper {
    wake: Notify,
    /// The reaper sleeps until a deadline (events need not wake it).
    armed: AtomicBool,
}

impl IdleReaper {
    /// A session may have become idle (its last client left, its worker said something).
    pub(crate) fn touch(&self) {
        if !self.armed.load(Ordering::Acquire) {
            self.wake.notify_one();
        }
    }
}

/// Runs until the daemon stops: stops the workers idle for `worker_idle`.
pub(crate) async fn run(router: Arc<Router>) {
    let worker_idle = router.settings.worker_idle;
    loop {
        router.idle.armed.store(false, Ordering::Release);
        let next = stop_idle_workers(&router, worker_idle);
        match next {
            Some(deadline) => {
                router.idle.armed.store(true, Ordering::Release);
                tokio::select! {
                    () = tokio::time::sleep_until(deadline.into()) => {}
                    () = router.idle.wake.notified() => {}
                    () = router.shutdown.cancelled() => return,
                }
            }
            None => tokio::select! {
                () = router.idle.wake.notified() => {}
                () = router.shutdown.cancelled() => return,
            },
        }
    }
}

/// Stops every worker idle long enough; returns when the next one will be.
fn stop_idle_workers(router: &Router, worker_idle: Duration) -> Option<Instant> {
    let now = Instant::now();
    let mut next: Option<Instant> = None;
    for session in router.sessions() {
        let Some(deadline) = idle_deadline(&session, worker_idle) else { continue };
        if deadline <= now {
            stop(router, &session, worker_idle);
        } else {
            next = Some(next.map_or(deadline, |next| next.min(deadline)));
        }
    }
    next
}

/// When the session's worker is due to stop, if it is a candidate at all: no client,
/// no permission waiting, live, and nothing in flight.
fn idle_deadline(session: &LiveSession, worker_idle: Duration) -> Option<Instant> {
    let state = session.state();
    let candidate = state.clients.is_empty()
        && state.permissions.is_empty()
        && !state.closing
        && session.phase() == Phase::Live
        && state.worker.as_ref().is_some_and(|worker| !worker.is_busy());
    candidate.then(|| state.idle_since + worker_idle)
}

fn stop(router: &Router, session: &LiveSession, worker_idle: Duration) {
    let worker = {
        let mut state = session.state();
        state.closing = true;
        state.worker.clone()
    };
    router.log.line(format!(
        "session {} idle with no client for {worker_idle:?}: stopping its worker",
        session.id().unwrap_or("?")
    ));
    if let Some(worker) = worker {
        worker.close_stdin();
    }
}
