//! The swarm orchestrator (ARCHITECTURE §10): a task graph run through implementer,
//! reviewer and verifier, merged in dependency order into one integration branch, every
//! step recorded so a killed run resumes exactly where it stopped. An ACP client of the
//! daemon (each role an ordinary session), plus git worktrees and sandboxed clones.

mod cleanup;
mod client;
mod climb;
mod context;
mod error;
mod events;
mod failpoint;
mod git;
mod merge;
mod outcome;
mod plan;
mod prompts;
mod ray;
mod run;
mod scheduler;
mod task;
mod turn;
mod verify;

pub use climb::{ClimbRequest, climb};
pub use error::SwarmError;
pub use events::{Console, describe};
pub use ray::node::node;
pub use run::{Input, Launch, RunRequest, cancel, resume, retry, run};
