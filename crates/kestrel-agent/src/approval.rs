//! Who decides whether a call that changes things may run. When the permission policy
//! (kestrel_tools::permission) says "ask", the call goes to an `Approver`: a client over
//! ACP, or nobody.

use futures_util::future::BoxFuture;
use kestrel_tools::permission::AllowRule;

/// What the user is asked about.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    pub call_id: String,
    pub tool_name: String,
    /// The call's arguments as the model sent them.
    pub arguments: String,
    /// What the call would do and why it needs approval ("run `cargo test` (...)"); in
    /// auto mode without a sandbox it starts with "no sandbox available: ...".
    pub summary: String,
    /// What "allow always" would allow (see `AllowRule::describe`); empty when only
    /// "allow once" makes sense (a command that cannot be checked).
    pub always: Vec<AllowRule>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalDecision {
    AllowOnce,
    /// Allow this and the same kind of call (the request's `always` rules) for the rest
    /// of the session.
    AllowAlways,
    /// Like `AllowAlways`, and also save the rules to `[permissions]` of the user's
    /// config.toml for later sessions.
    AllowAlwaysAndSave,
    /// Refuse; the reason, if any, goes back to the model.
    Deny {
        reason: Option<String>,
    },
}

/// Asks someone.
pub trait Approver: Send + Sync {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalDecision>;

    /// False when no one can answer: the call is then not run, and no one "denied" it.
    fn attended(&self) -> bool {
        true
    }
}

/// Why a call that needs approval is not run when no one can answer, with what would
/// let it run in `mode` (never "choose auto" to a session already in auto).
pub fn unattended_refusal(summary: &str, mode: kestrel_protocol::Mode) -> String {
    let other_mode = match mode {
        kestrel_protocol::Mode::Auto => "or run it with --mode yolo (no checks)",
        kestrel_protocol::Mode::ReadOnly
        | kestrel_protocol::Mode::Ask
        | kestrel_protocol::Mode::Yolo => {
            "or choose another --mode (auto: writes inside the workspace and sandboxed \
             commands; yolo: no checks)"
        }
    };
    format!(
        "not run: it needs approval, and no one is here to approve it (this run is \
         unattended). What needed approval: {summary}. To let it run, allow it with \
         `[permissions] allow` or `allow_write` in the user's config.toml, {other_mode}"
    )
}

/// For hosts with no one to ask (`kestrel exec --mode ask`): refuses at once, saying why,
/// instead of waiting forever.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unattended;

impl Approver for Unattended {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalDecision> {
        Box::pin(async move {
            ApprovalDecision::Deny {
                reason: Some(unattended_refusal(&request.summary, kestrel_protocol::Mode::Ask)),
            }
        })
    }

    fn attended(&self) -> bool {
        false
    }
}
