//! A turn of the open session as this UI sees it: its own (its prompt's answer ends
//! it) or another client's (the daemon's `_kestrel/session/turn` ends it).

use crate::composer::Prompt;
use std::time::Instant;

/// A running turn.
#[derive(Debug, Clone)]
pub(crate) struct Turn {
    pub(crate) started: Instant,
    /// Esc or ctrl+c asked to stop it.
    pub(crate) interrupted: bool,
    /// It was stopped to send a new message at once (Tab while it ran).
    pub(crate) steered: bool,
    /// The prompt this UI sent for it: the prompt's answer ends the turn (and a refused
    /// prompt goes back to the queue). `None` for another client's turn, which the
    /// daemon's `_kestrel/session/turn` ends.
    pub(crate) sent: Option<Prompt>,
}

impl Turn {
    /// A turn this UI's prompt started.
    pub(crate) fn ours(prompt: Prompt) -> Self {
        Self { sent: Some(prompt), ..Self::observed() }
    }

    /// A turn someone else started, seen running here.
    pub(crate) fn observed() -> Self {
        Self { started: Instant::now(), interrupted: false, steered: false, sent: None }
    }

    /// Whether this UI's prompt started it.
    pub(crate) fn is_ours(&self) -> bool {
        self.sent.is_some()
    }
}
