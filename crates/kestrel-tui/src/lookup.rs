//! What the UI looks up in the home without the daemon, off the UI thread: the session
//! to resume, a resumed session's usage so far, the config for the status line.

use crate::client::Events;
use crate::event::{AppEvent, ConfigSummary};
use kestrel_store::KestrelHome;

/// Reads a resumed session's usage so far from the index (in the background): the
/// status line and /cost count the whole session, not just this window's requests.
pub(crate) fn read_session_totals(home: &KestrelHome, session_id: &str, events: &Events) {
    let home = home.clone();
    let events = events.clone();
    let session_id = session_id.to_owned();
    tokio::task::spawn_blocking(move || {
        let Ok(summary) = kestrel_store::SessionIndex::find(&home, &session_id) else {
            return;
        };
        let usage = summary.usage;
        let tokens = usage.input_tokens.saturating_add(usage.output_tokens);
        let event = AppEvent::SessionTotals { session_id, tokens, cost: usage.cost };
        let _ = events.blocking_send(event);
    });
}

/// A session by id or unique prefix, else by a unique suffix (a subagent's short id as
/// shown under its `task` call); the prefix search's error when neither finds one.
pub(crate) fn find_session(
    home: &KestrelHome,
    query: &str,
) -> Result<kestrel_store::SessionSummary, kestrel_store::StoreError> {
    let error = match kestrel_store::SessionIndex::find(home, query) {
        Ok(summary) => return Ok(summary),
        Err(error) => error,
    };
    if query.len() < 4 {
        return Err(error);
    }
    let sessions = kestrel_store::SessionIndex::list(home).unwrap_or_default();
    let mut matching = sessions.into_iter().filter(|summary| summary.id.as_str().ends_with(query));
    match (matching.next(), matching.next()) {
        (Some(summary), None) => Ok(summary),
        _ => Err(error),
    }
}

pub(crate) fn load_config(home: &KestrelHome, cwd: &std::path::Path) -> ConfigSummary {
    let exists = home.config_file().exists();
    match kestrel_store::Config::load(home, cwd) {
        Ok(config) => ConfigSummary {
            model: config.model,
            mode: config.mode.map(|mode| mode.as_str().to_owned()),
            network: config.sandbox.network,
            exists,
            error: None,
        },
        Err(error) => {
            ConfigSummary { exists, error: Some(error.to_string()), ..ConfigSummary::default() }
        }
    }
}
