//! Crash points for tests of resume: with `KESTREL_SWARM_FAILPOINT=<name>` the
//! orchestrator aborts at that point, as a kill -9 would leave it. `commit`: after the
//! implementer's work is committed, before its event; `merge`: after the merge commit,
//! before its check and event; `climb-measured`: after a climb's experiment was measured
//! and decided, before a kept one is merged; `climb-merge`: after a kept experiment's merge
//! commit, before its event; `climb-look`: after a look of a measurement was recorded.
//! `<name>:<task>` aborts at that point of that task only (where a point knows its task).
//! One point holds instead of aborting: `climb-keep-late:<task>`, a kept experiment left
//! unmerged by a kill waits to be merged until no other running experiment is undecided
//! (as if it lost the race for the gate). Nothing happens without the variable.

pub fn hit(name: &str) {
    if std::env::var("KESTREL_SWARM_FAILPOINT").is_ok_and(|point| point == name) {
        std::process::abort();
    }
}

/// [`hit`] at a point of `task`: `<name>` or `<name>:<task>`.
pub fn hit_for(name: &str, task: &str) {
    if is_set_for(name, task) {
        std::process::abort();
    }
}

/// Whether the point is `<name>` or `<name>:<task>` (for a point that holds).
pub fn is_set_for(name: &str, task: &str) -> bool {
    let matches = |point: String| {
        point == name
            || point.strip_prefix(name).and_then(|rest| rest.strip_prefix(':')) == Some(task)
    };
    std::env::var("KESTREL_SWARM_FAILPOINT").is_ok_and(matches)
}
