//! A session: the turn loop (model → tools → model), project instructions, the
//! session record as the turn goes, the exec host that runs it headless and the worker
//! that serves it over ACP.

mod approval;
mod compaction;
mod context;
mod control;
mod error;
mod event;
mod exec;
mod history;
mod images;
mod instructions;
mod provider_context;
mod session;
mod setup;
mod subagent;
mod swarm_role;
mod worker;

pub use approval::{ApprovalDecision, ApprovalRequest, Approver, Unattended};
pub use control::{ModelChoice, SessionControl};
pub use error::AgentError;
pub use event::AgentEvent;
pub use exec::{ExecOptions, ExecOutput, ResumeTarget, run_exec};
pub use history::History;
pub use instructions::{InstructionFile, find_instructions, repository_root};
pub use session::{CompactionReport, EventSink, Session, SessionSettings, TurnResult};
pub use setup::{
    Launch, ResolvedModel, choose_model, open_child_session, open_session, open_swarm_session,
    resolve_model, resume_session, system_prompt,
};
pub use subagent::{
    ChildOutcome, ChildRequest, ChildSession, ProcessHost, SubagentHost, TASK_TOOL,
};
pub use worker::{Logger, WorkerOptions, run_worker};
