//! A session: the turn loop (model → tools → model), project instructions, the
//! session record as the turn goes, and the exec host that runs it headless.

mod approval;
mod error;
mod event;
mod exec;
mod history;
mod instructions;
mod session;
mod setup;

pub use approval::{ApprovalDecision, ApprovalRequest, Approver, Unattended};
pub use error::AgentError;
pub use event::AgentEvent;
pub use exec::{ExecOptions, ExecOutput, ResumeTarget, run_exec};
pub use history::History;
pub use instructions::{InstructionFile, find_instructions, repository_root};
pub use session::{EventSink, Session, SessionSettings, TurnResult};
pub use setup::{Launch, ResolvedModel, open_session, resolve_model, system_prompt};
