//! How many sessions the daemon can hold: each worker costs it one descriptor (its
//! socket), so the open-file limit, raised to the hard limit at start, is what bounds
//! them. A session takes a slot before its worker starts and keeps it across restarts;
//! one that would not fit is refused with the limit, the count and the fix, while a
//! reserve stays free for clients, logs and restarts of the sessions already open.

use kestrel_platform::{OpenFileLimit, open_descriptors};
use kestrel_protocol::jsonrpc::RpcError;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Descriptors the daemon holds per worker: the socket that is its stdin and stdout.
pub(crate) const FILES_PER_WORKER: usize = 1;
/// Descriptors kept free beyond the sessions: clients, logs, the index, a worker being
/// spawned (its socket, its log, the exec check's pipe).
pub(crate) const RESERVE: usize = 32;

#[derive(Debug)]
pub(crate) struct Capacity {
    /// `None` where the limit cannot be read: nothing is refused up front.
    limit: Option<OpenFileLimit>,
    /// Descriptors the daemon had open before any client or worker.
    base: usize,
    slots: AtomicUsize,
}

/// A session's claim on a worker's descriptors; given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot(Arc<Capacity>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.slots.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Capacity {
    pub(crate) fn new(limit: Option<OpenFileLimit>) -> Arc<Self> {
        let base = open_descriptors().unwrap_or(16);
        Arc::new(Self { limit, base, slots: AtomicUsize::new(0) })
    }

    /// The soft limit workers get back (the one the daemon started with), when the
    /// daemon raised its own.
    pub(crate) fn workers_limit(&self) -> Option<u64> {
        self.limit.filter(|limit| limit.now > limit.before).map(|limit| limit.before)
    }

    /// About how many sessions fit with no client connected.
    pub(crate) fn sessions_that_fit(&self) -> Option<usize> {
        let limit = usize::try_from(self.limit?.now).unwrap_or(usize::MAX);
        Some(limit.saturating_sub(self.base + RESERVE) / FILES_PER_WORKER)
    }

    /// A slot for one more session's worker, with `clients` connected; refused (the
    /// error says why and how to fix it) when its descriptors would not fit.
    pub(crate) fn reserve(self: &Arc<Self>, clients: usize) -> Result<Slot, RpcError> {
        let Some(limit) = self.limit else {
            self.slots.fetch_add(1, Ordering::AcqRel);
            return Ok(Slot(self.clone()));
        };
        let limit = usize::try_from(limit.now).unwrap_or(usize::MAX);
        let fits = |slots: usize| {
            let needed = self.base + (slots + 1) * FILES_PER_WORKER + clients + RESERVE;
            (needed <= limit).then_some(slots + 1)
        };
        match self.slots.fetch_update(Ordering::AcqRel, Ordering::Acquire, fits) {
            Ok(_) => Ok(Slot(self.clone())),
            Err(_) => Err(RpcError::internal(self.refusal())),
        }
    }

    /// Why no other worker can start: the limit, the count and the fix.
    pub(crate) fn refusal(&self) -> String {
        let sessions = self.slots.load(Ordering::Acquire);
        let open = open_descriptors().map_or_else(|_| "?".to_owned(), |open| open.to_string());
        let Some(limit) = self.limit else {
            return format!(
                "cannot start another session: the daemon ran out of open files ({open} open, {sessions} live sessions)"
            );
        };
        let raised = if limit.now > limit.before {
            format!(", raised from {} at start", limit.before)
        } else {
            String::new()
        };
        let hard = limit.hard.map_or_else(|| "unlimited".to_owned(), |hard| hard.to_string());
        let suggested = (limit.now.saturating_mul(4)).max(65_536);
        format!(
            "cannot start another session: the daemon has {open} files open and its limit is {} \
             (RLIMIT_NOFILE{raised}; the hard limit is {hard}); {sessions} live sessions hold one each \
             and {RESERVE} stay free for clients and restarts. Raise the limit where the daemon \
             starts: `ulimit -n {suggested}` in that shell (above the hard limit: `nofile` in \
             /etc/security/limits.conf) or `LimitNOFILE={suggested}` in its systemd unit, then \
             `kestrel daemon stop` so the next client starts it anew. The sessions already open \
             are not affected",
            limit.now
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capacity(now: u64) -> Arc<Capacity> {
        let limit = OpenFileLimit { before: 16, now, hard: Some(now) };
        Arc::new(Capacity { limit: Some(limit), base: 10, slots: AtomicUsize::new(0) })
    }

    #[test]
    fn sessions_are_refused_once_their_files_would_pass_the_limit_and_slots_come_back() {
        let capacity = capacity(10 + RESERVE as u64 + 3);
        let held: Vec<Slot> = (0..3).map(|_| capacity.reserve(0).unwrap()).collect();
        let error = capacity.reserve(0).unwrap_err();
        assert!(error.message.contains(&format!("its limit is {}", 10 + RESERVE + 3)), "{error:?}");
        assert!(error.message.contains("3 live sessions"), "{}", error.message);
        assert!(error.message.contains("ulimit -n") && error.message.contains("LimitNOFILE"));
        assert!(error.message.contains("raised from 16"), "{}", error.message);
        assert!(capacity.reserve(0).is_err(), "still full");
        drop(held);
        assert!(capacity.reserve(0).is_ok(), "the slots were given back");
    }

    #[test]
    fn connected_clients_count_against_the_limit() {
        let capacity = capacity(10 + RESERVE as u64 + 3);
        assert!(capacity.reserve(3).is_err());
        assert!(capacity.reserve(2).is_ok());
        assert_eq!(capacity.workers_limit(), Some(16));
        assert_eq!(capacity.sessions_that_fit(), Some(3));
    }
}
