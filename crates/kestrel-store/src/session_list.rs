//! The ACP `session/list` answer built from the session index: one function for every
//! Kestrel agent that answers it (the daemon, a worker), so the answers cannot drift.

use crate::index::SessionSummary;
use kestrel_protocol::acp;
use serde_json::json;
use std::path::Path;

/// `session/list`'s answer: `sessions` (as [`crate::SessionIndex::list`] returns them,
/// most recently active first), those in `cwd` only when a directory is given. Each
/// entry's `title` is the first prompt, `updatedAt` the last activity, and
/// `_meta.kestrel` holds `model` (`provider/model`), `parentSessionId` and, when `live`
/// is given (only the daemon knows), whether a worker runs the session now.
pub fn list_sessions_response(
    sessions: &[SessionSummary],
    cwd: Option<&Path>,
    live: Option<&dyn Fn(&str) -> bool>,
) -> acp::ListSessionsResponse {
    let sessions = sessions
        .iter()
        .filter(|summary| cwd.is_none_or(|cwd| Path::new(&summary.cwd) == cwd))
        .map(|summary| {
            let id = summary.id.as_str();
            let mut kestrel = json!({
                "model": format!("{}/{}", summary.provider, summary.model),
                "parentSessionId": summary.parent_id.as_ref().map(|parent| parent.as_str()),
            });
            if let Some(live) = live {
                kestrel["live"] = live(id).into();
            }
            let mut meta = acp::Meta::new();
            meta.insert("kestrel".into(), kestrel);
            acp::SessionInfo::new(id.to_owned(), summary.cwd.clone())
                .title(summary.first_prompt.clone())
                .updated_at(summary.updated_at.to_string())
                .meta(meta)
        })
        .collect();
    acp::ListSessionsResponse::new(sessions)
}
