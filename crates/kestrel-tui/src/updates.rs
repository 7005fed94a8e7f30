//! What the daemon's messages do to the UI: `session/update`s of the open session into
//! the transcript and the status line, those of its subagents into their `task` cells,
//! permission requests into prompts, worker restarts into the status line, turns other
//! clients run into the working state.

use crate::app::{App, SessionState};
use crate::approval::Approval;
use crate::cell::{Cell, NoticeLevel};
use crate::client;
use crate::status::LinkState;
use crate::turn::Turn;
use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::Incoming;

/// Refusals in a row ("a prompt is already running") with no running turn announced,
/// after which a prompt goes back into the composer rather than again to the worker.
const MAX_BUSY_REFUSALS: u8 = 3;

impl App {
    pub(crate) fn incoming(&mut self, message: Incoming) {
        match message {
            Incoming::Notification(notification) => match notification.method.as_str() {
                "session/update" => {
                    let Ok(update) =
                        serde_json::from_value::<acp::SessionNotification>(notification.params)
                    else {
                        return;
                    };
                    let ours = match &self.session {
                        SessionState::Open(id) | SessionState::Opening(Some(id)) => {
                            update.session_id.0.as_ref() == id
                        }
                        SessionState::Opening(None) | SessionState::None => false,
                    };
                    if ours {
                        self.apply_update(update.update);
                    } else if let Some(call_id) = self.children.get(update.session_id.0.as_ref()) {
                        let call_id = call_id.clone();
                        self.transcript.child_update(&call_id, &update.update);
                    }
                }
                acp::kestrel::WORKER_RESTARTED => {
                    let Ok(restarted) = serde_json::from_value::<
                        acp::kestrel::WorkerRestartedNotification,
                    >(notification.params) else {
                        return;
                    };
                    if self.session_id() == Some(restarted.session_id.0.as_ref()) {
                        self.status.restarts = restarted.restarts;
                        if self.turn.is_some() {
                            self.restarted_in_turn = true;
                        }
                        self.withdraw_approvals(
                            "the session's worker stopped before it was answered",
                        );
                    }
                }
                acp::kestrel::SESSION_TURN => {
                    let Ok(turn) = serde_json::from_value::<acp::kestrel::SessionTurnNotification>(
                        notification.params,
                    ) else {
                        return;
                    };
                    self.session_turn(turn);
                }
                _ => {}
            },
            Incoming::Request(request) => {
                let Some(connection) = self.connection.clone() else { return };
                if request.method != "session/request_permission" {
                    client::refuse(&connection, request.id, &request.method);
                    return;
                }
                match serde_json::from_value::<acp::RequestPermissionRequest>(request.params) {
                    Ok(permission) => {
                        let mut approval = Approval::new(request.id, permission, &self.session_cwd);
                        let child = self.children.contains_key(&approval.session_id);
                        approval.from_subagent = child;
                        if child || self.shown_session_id() == Some(approval.session_id.as_str()) {
                            self.approvals.push_back(approval);
                            self.bell = true;
                            self.urgent = true;
                            self.transcript.scroll_to_bottom();
                        } else {
                            client::answer_permission(&connection, approval.id, None, None);
                        }
                    }
                    Err(_) => client::answer_permission(&connection, request.id, None, None),
                }
            }
        }
    }

    /// The daemon says a turn of a session started or ended (whoever prompted it). Every
    /// notice is remembered (a prompt refused as "already running" waits for the end of
    /// what runs); a turn this UI did not start is shown from them, its own ends with
    /// its prompt's answer.
    pub(crate) fn session_turn(&mut self, turn: acp::kestrel::SessionTurnNotification) {
        let id = turn.session_id.0.as_ref();
        match &self.session {
            SessionState::Open(open) if open == id => {}
            SessionState::Opening(Some(opening)) if opening == id => {
                // Newer than the load's answer, which may not be handled yet.
                self.turn_seen_while_opening = Some(turn.running);
                return;
            }
            SessionState::Open(_) | SessionState::Opening(_) | SessionState::None => return,
        }
        self.turn_running_remotely = turn.running;
        match (&self.turn, turn.running) {
            (None, true) => {
                self.turn = Some(Turn::observed());
                self.status.link = LinkState::Working;
                self.urgent = true;
            }
            (Some(running), false) if !running.is_ours() => {
                let result = turn.stop_reason.ok_or_else(|| {
                    turn.error.unwrap_or_else(|| "it ended with an error".to_owned())
                });
                self.turn_finished(result);
            }
            (Some(_), _) | (None, false) => {}
        }
    }

    /// A session just opened: one whose turn runs (another client's) is shown working
    /// until the daemon says the turn ended; the prompts typed meanwhile wait for it.
    pub(crate) fn observe_turn_on_open(&mut self, running_at_answer: bool) {
        let running = self.turn_seen_while_opening.take().unwrap_or(running_at_answer);
        self.turn_running_remotely = running;
        if running && self.turn.is_none() {
            self.turn = Some(Turn::observed());
            self.status.link = LinkState::Working;
        }
    }

    /// The worker refused this UI's prompt because another client's turn runs (its
    /// prompt got there first). The prompt is never lost: it goes back to the front of
    /// the queue and the running turn is shown; it is sent when that turn ends (at once
    /// when its end was already heard). Refused again and again with no turn announced,
    /// it goes back into the composer instead, with the reason.
    pub(crate) fn prompt_refused_busy(&mut self, message: String) {
        let Some(turn) = self.turn.take() else { return };
        let Some(prompt) = turn.sent else {
            self.turn = Some(turn);
            return;
        };
        self.transcript.remove_last_user(&prompt.text);
        self.queue.push_front(prompt);
        self.busy_refusals = self.busy_refusals.saturating_add(1);
        if self.turn_running_remotely {
            self.turn = Some(Turn::observed());
            self.status.link = LinkState::Working;
        } else if self.busy_refusals < MAX_BUSY_REFUSALS {
            self.status.link = LinkState::Ready;
            self.pump();
        } else {
            self.busy_refusals = 0;
            self.status.link = LinkState::Ready;
            self.requeue_into_composer();
            self.notice(
                NoticeLevel::Warning,
                format!("not sent, it is back in the composer: {message}"),
            );
        }
        self.urgent = true;
    }

    /// A frame was flushed: a prompt at the front seen for the first time starts its
    /// guard now, and gets a frame once the guard has passed (its keys hint appears then).
    pub(crate) fn frame_flushed(&mut self) {
        if self.approvals.front_mut().is_some_and(|approval| approval.drawn()) {
            self.redraw_after_guard();
        }
    }

    /// A frame once a new prompt's guard has passed (its keys hint appears then).
    pub(crate) fn redraw_after_guard(&self) {
        let events = self.events.clone();
        tokio::spawn(async move {
            tokio::time::sleep(crate::approval::GUARD + std::time::Duration::from_millis(10)).await;
            let _ = events.send(crate::event::AppEvent::Redraw).await;
        });
    }

    fn apply_update(&mut self, update: acp::SessionUpdate) {
        let was_user = std::mem::replace(&mut self.last_update_was_user, false);
        match update {
            acp::SessionUpdate::UserMessageChunk(chunk) => {
                self.transcript.push_user_chunk(&chunk_text(&chunk.content), was_user);
                self.last_update_was_user = true;
            }
            acp::SessionUpdate::AgentMessageChunk(chunk) => {
                // The answer's first text is shown at once; the rest at the frame rate.
                self.urgent |= !self.transcript.answer_in_progress();
                self.transcript.push_answer(&chunk_text(&chunk.content))
            }
            acp::SessionUpdate::AgentThoughtChunk(chunk) => {
                self.transcript.push_thought(&chunk_text(&chunk.content))
            }
            acp::SessionUpdate::ToolCall(call) => self.transcript.tool_call(call),
            acp::SessionUpdate::ToolCallUpdate(update) => {
                let call_id = update.tool_call_id.0.to_string();
                if let Some(child) = self.transcript.tool_update(update) {
                    self.children.insert(child.clone(), call_id.clone());
                    if !self.transcript.tool_finished(&call_id)
                        && let Some(connection) = &self.connection
                    {
                        let cwd = self.session_cwd.clone();
                        client::attach_child(connection, child, cwd, self.events.clone());
                    }
                } else if self.transcript.tool_finished(&call_id) {
                    self.stop_following_children_of(&call_id);
                }
            }
            acp::SessionUpdate::Plan(plan) => self.transcript.push(Cell::Plan(plan.entries)),
            acp::SessionUpdate::UsageUpdate(usage) => {
                self.status.context_used = usage.used;
                self.status.context_size = usage.size;
                // Live requests only: not a replayed history's, not a compaction's estimate.
                let live = matches!(self.session, SessionState::Open(_)) && !self.compacting;
                if live {
                    self.status.tokens = self.status.tokens.saturating_add(usage.used);
                }
                if let Some(cost) = usage.cost {
                    self.status.cost = Some(cost.amount);
                }
            }
            acp::SessionUpdate::CurrentModeUpdate(mode) => {
                self.status.mode = Some(mode.current_mode_id.0.to_string());
                if let Some(modes) = &mut self.modes {
                    modes.current_mode_id = mode.current_mode_id;
                }
            }
            acp::SessionUpdate::ConfigOptionUpdate(update) => {
                self.set_config_options(update.config_options)
            }
            acp::SessionUpdate::Notice(notice) => {
                let level = match notice.severity {
                    acp::NoticeSeverity::Error => NoticeLevel::Error,
                    acp::NoticeSeverity::Warning => NoticeLevel::Warning,
                    _ => NoticeLevel::Info,
                };
                self.compaction_noticed |= self.compacting;
                let text = match notice.description {
                    Some(description) => format!("{}: {description}", notice.title),
                    None => notice.title,
                };
                self.transcript.push(Cell::Notice { level, text });
            }
            _ => {}
        }
    }

    /// Stops following the subagents of a finished `task` call (they keep their sessions).
    fn stop_following_children_of(&mut self, call_id: &str) {
        let finished: Vec<String> = self
            .children
            .iter()
            .filter(|(_, call)| call.as_str() == call_id)
            .map(|(child, _)| child.clone())
            .collect();
        for child in finished {
            if let Some(connection) = &self.connection {
                client::detach(connection, &child);
            }
        }
    }
}

/// The text of a content block (other kinds by a short label).
pub(crate) fn chunk_text(block: &acp::ContentBlock) -> String {
    match block {
        acp::ContentBlock::Text(text) => text.text.clone(),
        acp::ContentBlock::ResourceLink(link) => format!("@{}", link.name),
        acp::ContentBlock::Image(_) => "[image]".to_owned(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;
