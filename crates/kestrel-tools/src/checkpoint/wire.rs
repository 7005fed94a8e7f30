//! Undo on the wire (`_kestrel/session/undo`, docs/protocol.md): its params as
//! [`UndoOptions`], a report as the answer, and a refusal as the error (-32010 with
//! every refusing file, -32011 when there is nothing to undo).

use super::{Conflict, FileState, UndoError, UndoOptions, UndoReport};
use kestrel_protocol::acp::kestrel::{
    NOTHING_TO_UNDO, RefusedFile, UNDO_REFUSED, UndoAction, UndoRefusal, UndoSessionRequest,
    UndoSessionResponse, UndoneFile,
};
use kestrel_protocol::jsonrpc::RpcError;

/// The options `request` asks for.
///
/// Fails (invalid params) on `turns: 0`.
pub fn undo_options(request: &UndoSessionRequest) -> Result<UndoOptions, RpcError> {
    let turns = match request.turns {
        None => 1,
        Some(0) => return Err(RpcError::invalid_params(UndoError::NoTurns.to_string())),
        Some(turns) => usize::try_from(turns).unwrap_or(usize::MAX),
    };
    Ok(UndoOptions { turns, force: request.force, dry_run: request.dry_run })
}

impl UndoReport {
    /// The answer to `_kestrel/session/undo` for this report.
    pub fn into_response(self) -> UndoSessionResponse {
        let files = self
            .files
            .into_iter()
            .map(|change| {
                let action = match change.after {
                    FileState::Absent => UndoAction::Removed,
                    FileState::File { .. }
                    | FileState::Symlink { .. }
                    | FileState::Unsaved { .. } => UndoAction::Restored,
                };
                UndoneFile { path: change.path, action }
            })
            .collect();
        UndoSessionResponse {
            turns: self.turns,
            files,
            overwritten: self.overwritten,
            skipped: self.skipped.into_iter().map(refused).collect(),
            dry_run: self.dry_run,
        }
    }
}

impl UndoError {
    /// The error answer to `_kestrel/session/undo` for this refusal.
    pub fn into_rpc(self) -> RpcError {
        let message = self.to_string();
        match self {
            UndoError::NoTurns => RpcError::invalid_params(message),
            UndoError::NothingToUndo { .. } => RpcError::new(NOTHING_TO_UNDO, message),
            UndoError::Conflicts { turns, files, unrestorable } => {
                let files = files.into_iter().chain(unrestorable).map(refused).collect();
                let mut error = RpcError::new(UNDO_REFUSED, message);
                error.data = serde_json::to_value(UndoRefusal { turns, files }).ok();
                error
            }
            UndoError::Store(_) | UndoError::Save { .. } | UndoError::Restore { .. } => {
                RpcError::internal(message)
            }
        }
    }
}

fn refused(conflict: Conflict) -> RefusedFile {
    RefusedFile { path: conflict.path, reason: conflict.reason }
}
