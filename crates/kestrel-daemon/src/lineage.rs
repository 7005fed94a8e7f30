//! Which session started which (subagents), for every permission request (to ask the
//! clients of a subagent's ancestors) and every worker exit (to cancel its children).
//! Sessions this daemon creates are noted as they are named; the session index is read
//! only for a session the daemon has not heard of (one created elsewhere and loaded),
//! at most once per such session, never per request.

use crate::log::DaemonLog;
use kestrel_store::{KestrelHome, SessionIndex};
use std::collections::HashMap;
use std::sync::Mutex;

/// Parents by session id (`None`: a top-level session).
#[derive(Debug, Default)]
pub(crate) struct Lineage {
    parents: Mutex<HashMap<String, Option<String>>>,
}

impl Lineage {
    /// A session this daemon named (new, or spawned by `parent`).
    pub(crate) fn note(&self, id: &str, parent: Option<&str>) {
        self.lock().insert(id.to_owned(), parent.map(str::to_owned));
    }

    /// The parent of `id`, reading the index if `id` is unknown (then remembered, found
    /// or not, with every other session the index lists).
    pub(crate) fn parent_of(
        &self,
        home: &KestrelHome,
        log: &DaemonLog,
        id: &str,
    ) -> Option<String> {
        if let Some(parent) = self.lock().get(id) {
            return parent.clone();
        }
        let listed = SessionIndex::list(home);
        let mut parents = self.lock();
        match listed {
            Ok(sessions) => {
                log.line(format!(
                    "read the session index for the lineage of {id} ({} sessions)",
                    sessions.len()
                ));
                for session in sessions {
                    parents
                        .entry(session.id.to_string())
                        .or_insert_with(|| session.parent_id.map(|parent| parent.to_string()));
                }
                parents.entry(id.to_owned()).or_insert(None).clone()
            }
            // Not remembered: the next request tries again.
            Err(error) => {
                log.line(format!("cannot read the session index for {id}: {error}"));
                None
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<String>>> {
        self.parents.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
