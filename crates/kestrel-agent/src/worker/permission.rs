//! The worker's approver: asks the client with `session/request_permission` and turns
//! the answer into a decision. The tool call it names carries the policy's summary of
//! why it asks; the options are allow once, allow always (this session) and allow always
//! and save (to the user's config) when the policy can word a rule, and reject. A
//! cancelled turn stops waiting (the session races the request against its cancel token).

use crate::approval::{ApprovalDecision, ApprovalRequest, Approver};
use crate::worker::outbox::Outbox;
use crate::worker::tool_view;
use futures_util::future::BoxFuture;
use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::Connection;
use std::path::PathBuf;
use std::sync::OnceLock;

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const ALLOW_ALWAYS_SAVE: &str = "allow_always_save";
const REJECT_ONCE: &str = "reject_once";

/// Asks the worker's client.
pub(crate) struct ClientApprover {
    connection: Connection,
    outbox: Outbox,
    cwd: PathBuf,
    /// Known once the session is open (its id is made while opening it).
    session_id: OnceLock<acp::SessionId>,
}

impl ClientApprover {
    pub(crate) fn new(connection: Connection, outbox: Outbox, cwd: PathBuf) -> Self {
        Self { connection, outbox, cwd, session_id: OnceLock::new() }
    }

    pub(crate) fn set_session(&self, id: acp::SessionId) {
        let _ = self.session_id.set(id);
    }

    async fn ask(&self, request: ApprovalRequest) -> ApprovalDecision {
        let Some(session_id) = self.session_id.get() else {
            return deny("the session is not open yet");
        };
        // The `tool_call` update this request refers to must reach the client first.
        self.outbox.flush().await;
        let mut call = tool_view::tool_call(
            &request.call_id,
            &request.tool_name,
            &request.arguments,
            &self.cwd,
        );
        if !request.summary.is_empty() {
            call = call.content(vec![acp::ToolCallContent::from(acp::ContentBlock::from(
                request.summary.clone(),
            ))]);
        }
        let params = acp::RequestPermissionRequest::new(
            session_id.clone(),
            acp::ToolCallUpdate::from(call),
            options(&request),
        );
        let params = match serde_json::to_value(params) {
            Ok(params) => params,
            Err(error) => return deny(&format!("cannot encode the permission request: {error}")),
        };
        let method = acp::CLIENT_METHOD_NAMES.session_request_permission;
        let answer = match self.connection.request(method, params).await {
            Ok(answer) => answer,
            Err(error) => {
                return deny(&format!("the permission request failed: {}", error.message));
            }
        };
        let response: acp::RequestPermissionResponse = match serde_json::from_value(answer) {
            Ok(response) => response,
            Err(error) => {
                return deny(&format!("the client's permission answer is invalid: {error}"));
            }
        };
        match response.outcome {
            acp::RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                ALLOW_ONCE => ApprovalDecision::AllowOnce,
                ALLOW_ALWAYS => ApprovalDecision::AllowAlways,
                ALLOW_ALWAYS_SAVE => ApprovalDecision::AllowAlwaysAndSave,
                // A client may say why (the TUI asks): `_meta.kestrel.reason`.
                REJECT_ONCE => ApprovalDecision::Deny { reason: rejection_reason(&selected) },
                other => deny(&format!("the client chose an unknown option `{other}`")),
            },
            acp::RequestPermissionOutcome::Cancelled => {
                deny("the permission request was cancelled")
            }
            _ => deny("the client's permission answer has an unknown outcome"),
        }
    }
}

impl Approver for ClientApprover {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalDecision> {
        Box::pin(self.ask(request))
    }
}

/// Allow once; allow always, for this session or for good, when the policy words what
/// that would allow; reject.
fn options(request: &ApprovalRequest) -> Vec<acp::PermissionOption> {
    let once =
        acp::PermissionOption::new(ALLOW_ONCE, "Allow once", acp::PermissionOptionKind::AllowOnce);
    let reject =
        acp::PermissionOption::new(REJECT_ONCE, "Reject", acp::PermissionOptionKind::RejectOnce);
    if request.always.is_empty() {
        return vec![once, reject];
    }
    let rules: Vec<String> = request.always.iter().map(|rule| rule.describe()).collect();
    let rules = rules.join(", ");
    let always = acp::PermissionOption::new(
        ALLOW_ALWAYS,
        format!("Always allow {rules} in this session"),
        acp::PermissionOptionKind::AllowAlways,
    );
    let save = acp::PermissionOption::new(
        ALLOW_ALWAYS_SAVE,
        format!("Always allow {rules}, and save it to config.toml"),
        acp::PermissionOptionKind::AllowAlways,
    );
    vec![once, always, save, reject]
}

fn rejection_reason(selected: &acp::SelectedPermissionOutcome) -> Option<String> {
    let reason = selected.meta.as_ref()?.get("kestrel")?.get("reason")?.as_str()?.trim();
    (!reason.is_empty()).then(|| reason.to_string())
}

fn deny(reason: &str) -> ApprovalDecision {
    ApprovalDecision::Deny { reason: Some(reason.to_string()) }
}
