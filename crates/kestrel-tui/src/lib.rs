//! Kestrel's interactive terminal UI: an ACP client of the daemon (ARCHITECTURE §2, §4).
//! It paints at once and takes typing before the daemon is up, starts the daemon after
//! the first frame and the session's worker with the first prompt, and shows the
//! conversation full-screen with its own scrolling.

mod actions;
mod app;
mod approval;
mod attachment;
mod cell;
mod client;
mod commands;
mod composer;
mod diff_view;
mod error;
mod event;
mod first_run;
mod fuzzy;
mod highlight;
mod keys;
mod lookup;
mod markdown;
mod mention;
mod picker;
mod rewind;
mod run;
mod status;
mod swarm_table;
mod swarm_view;
mod terminal;
mod theme;
mod tool_cell;
mod transcript;
mod turn;
mod ui;
mod updates;
mod wrap;

#[cfg(test)]
mod test_support;

pub use error::TuiError;
pub use run::{ResumeTarget, StartOptions, TuiExit, run};
