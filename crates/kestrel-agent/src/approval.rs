//! Who decides whether a call that changes things may run. In `ask` mode every
//! non-read-only call goes through an `Approver`: a client over ACP, or nobody.

use futures_util::future::BoxFuture;

/// What the user is asked about.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    pub call_id: String,
    pub tool_name: String,
    /// The call's arguments as the model sent them.
    pub arguments: String,
}

/// The answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalDecision {
    AllowOnce,
    /// Allow this and the same kind of call for the rest of the session.
    AllowAlways,
    /// Refuse; the reason, if any, goes back to the model.
    Deny {
        reason: Option<String>,
    },
}

/// Asks someone.
pub trait Approver: Send + Sync {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalDecision>;
}

/// For hosts with no one to ask (`kestrel exec --mode ask`): refuses at once, saying why,
/// instead of waiting forever.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unattended;

impl Approver for Unattended {
    fn request(&self, _request: ApprovalRequest) -> BoxFuture<'_, ApprovalDecision> {
        Box::pin(async {
            ApprovalDecision::Deny {
                reason: Some(
                    "no one is here to approve it: this session runs unattended in ask mode \
                     (rerun with --mode auto to let it write inside the workspace)"
                        .to_string(),
                ),
            }
        })
    }
}
