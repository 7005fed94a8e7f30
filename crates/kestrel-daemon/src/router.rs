//! The router: which sessions have workers and which clients are connected, and what
//! each client request does — answered by the daemon (`initialize`, `session/list`,
//! the `_kestrel/...` extensions), relayed to a session's worker by `sessionId`, or
//! turned into an attach (`session/load` of a live session).

use crate::capacity::{Capacity, Slot};
use crate::client_link::{ClientId, ClientLink};
use crate::idle::IdleReaper;
use crate::lineage::Lineage;
use crate::log::DaemonLog;
use crate::messages;
use crate::permission;
use crate::session::{LiveSession, Phase, not_live};
use crate::settings::DaemonSettings;
use crate::status::{DaemonStatus, SessionStatus};
use crate::supervisor::{self, Bootstrap};
use crate::worker::{Pending, Relayed};
use kestrel_protocol::jsonrpc::{Connection, Notification, Request, RequestId, RpcError};
use kestrel_store::SessionIndex;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

/// The daemon's shared state.
#[derive(Debug)]
pub(crate) struct Router {
    pub(crate) settings: DaemonSettings,
    pub(crate) log: DaemonLog,
    /// Cancelled to stop the daemon.
    pub(crate) shutdown: CancellationToken,
    socket: String,
    sessions: Mutex<HashMap<String, Arc<LiveSession>>>,
    clients: Mutex<BTreeMap<ClientId, Arc<ClientLink>>>,
    next_client: AtomicU64,
    /// Since when the daemon has had no session and no client.
    idle_since: Mutex<Option<Instant>>,
    /// Told when the daemon becomes idle (no session, no client): its exit clock starts.
    pub(crate) became_idle: Notify,
    /// Room for workers under the open-file limit.
    pub(crate) capacity: Arc<Capacity>,
    /// Wakes the task that stops idle workers.
    pub(crate) idle: IdleReaper,
    /// Which session started which.
    pub(crate) lineage: Lineage,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Router {
    pub(crate) fn new(
        settings: DaemonSettings,
        log: DaemonLog,
        socket: String,
        capacity: Arc<Capacity>,
    ) -> Arc<Self> {
        Arc::new(Self {
            settings,
            log,
            shutdown: CancellationToken::new(),
            socket,
            sessions: Mutex::default(),
            clients: Mutex::default(),
            next_client: AtomicU64::new(1),
            idle_since: Mutex::new(Some(Instant::now())),
            became_idle: Notify::new(),
            capacity,
            idle: IdleReaper::default(),
            lineage: Lineage::default(),
        })
    }

    /// A new client: messages for it are written to `socket`, and so is what
    /// `connection` writes (read from `requests`).
    pub(crate) fn add_client<W, R>(
        &self,
        socket: W,
        connection: Connection,
        requests: R,
        gone: CancellationToken,
    ) -> Arc<ClientLink>
    where
        W: tokio::io::AsyncWrite + Unpin + Send + 'static,
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
    {
        let id = self.next_client.fetch_add(1, Ordering::Relaxed);
        let backlog = self.settings.client_backlog_bytes;
        let client = Arc::new(ClientLink::start(id, socket, connection, requests, gone, backlog));
        lock(&self.clients).insert(id, client.clone());
        *lock(&self.idle_since) = None;
        client
    }

    /// The client is gone: it leaves every session (which keep running).
    pub(crate) fn remove_client(&self, client: &ClientLink) {
        lock(&self.clients).remove(&client.id());
        for session in self.sessions() {
            session.detach(client.id());
        }
        self.idle.touch();
        self.note_if_idle();
    }

    pub(crate) fn register(&self, id: &str, session: Arc<LiveSession>) {
        lock(&self.sessions).insert(id.to_owned(), session.clone());
        *lock(&self.idle_since) = None;
        session.hold(&self.settings.home, &self.log);
    }

    /// Registers `session` under `id` unless another is there already.
    fn register_new(&self, id: &str, session: &Arc<LiveSession>) -> bool {
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(id) {
            return false;
        }
        sessions.insert(id.to_owned(), session.clone());
        drop(sessions);
        *lock(&self.idle_since) = None;
        session.hold(&self.settings.home, &self.log);
        true
    }

    /// Forgets `session` (only if `id` still maps to it).
    pub(crate) fn unregister(&self, id: &str, session: &Arc<LiveSession>) {
        let mut sessions = lock(&self.sessions);
        if sessions.get(id).is_some_and(|known| Arc::ptr_eq(known, session)) {
            // Released before the next session of this id can be registered and hold it.
            session.release_hold();
            sessions.remove(id);
        }
        drop(sessions);
        self.note_if_idle();
    }

    fn note_if_idle(&self) {
        if lock(&self.sessions).is_empty() && lock(&self.clients).is_empty() {
            lock(&self.idle_since).get_or_insert_with(Instant::now);
            self.became_idle.notify_one();
        }
    }

    /// A slot for one more worker, or the refusal (logged) naming the limit and the fix.
    fn reserve_worker(&self, what: &str) -> Result<Slot, RpcError> {
        let clients = lock(&self.clients).len();
        self.capacity.reserve(clients).inspect_err(|_| {
            self.log.line(format!(
                "{what} refused: the open-file limit leaves no room for another worker"
            ));
        })
    }

    /// How long the daemon has had no session and no client (`None`: it has some).
    pub(crate) fn idle_for(&self) -> Option<std::time::Duration> {
        lock(&self.idle_since).map(|since| since.elapsed())
    }

    pub(crate) fn session(&self, id: &str) -> Option<Arc<LiveSession>> {
        lock(&self.sessions).get(id).cloned()
    }

    pub(crate) fn sessions(&self) -> Vec<Arc<LiveSession>> {
        lock(&self.sessions).values().cloned().collect()
    }

    /// Handles one request of `client`. Requests of one client are handled in order;
    /// only waiting for a starting or restarting worker (bounded) takes long.
    pub(crate) async fn handle_request(
        self: &Arc<Self>,
        client: &Arc<ClientLink>,
        request: Request,
    ) {
        let Request { id, method, params } = request;
        match method.as_str() {
            "initialize" => match messages::client_takes_extensions(&params) {
                Ok(opted_in) => {
                    client.set_takes_extensions(opted_in);
                    client.respond(id, Ok(messages::initialize_response()));
                }
                Err(message) => {
                    client.respond(id, Err(RpcError::invalid_params(message)));
                }
            },

            "authenticate" => {
                client.respond(id, Ok(json!({})));
            }
            "session/new" => self.new_session(client, id, params),
            "session/load" => self.load_session(client, id, params).await,
            "session/list" => {
                client.respond(id, self.list(&params));
            }
            messages::SESSION_DETACH => {
                let result = session_id(&params).map(|session_id| {
                    if let Some(session) = self.session(session_id) {
                        session.detach(client.id());
                        self.idle.touch();
                    }
                    json!({})
                });
                client.respond(id, result);
            }
            messages::DAEMON_STATUS => {
                let status = serde_json::to_value(self.status())
                    .map_err(|error| RpcError::internal(error.to_string()));
                client.respond(id, status);
            }
            messages::DAEMON_STOP => {
                self.log.line("stop requested by a client");
                client.respond(id, Ok(json!({})));
                self.shutdown.cancel();
            }
            _ if params.get("sessionId").is_some() => self.relay(client, id, method, params).await,
            _ => {
                client.respond(id, Err(RpcError::method_not_found(&method)));
            }
        }
    }

    /// Handles a notification of `client`: `session/cancel` (which also answers
    /// waiting permission requests `cancelled`) and anything else with a `sessionId`
    /// go to the session's worker; the rest is ignored, as JSON-RPC asks.
    pub(crate) async fn handle_notification(&self, notification: Notification) {
        let Ok(session_id) = session_id(&notification.params) else { return };
        let Some(session) = self.session(session_id) else { return };
        if notification.method == "session/cancel" {
            permission::cancel_all(&session).await;
        }
        relay_to_worker(&session, &notification.method, notification.params).await;
    }

    /// The worker of `parent_id` crashed: the children it started would run their turns
    /// with nobody following them, so their turns are cancelled (each child's worker
    /// then cancels its own children).
    pub(crate) fn cancel_children(&self, parent_id: &str) {
        // Only live children have turns to cancel.
        let live: Vec<(String, Arc<LiveSession>)> =
            lock(&self.sessions).iter().map(|(id, s)| (id.clone(), s.clone())).collect();
        for (child_id, child) in live {
            if self.parent_of(&child_id).as_deref() == Some(parent_id) {
                self.cancel_orphan(child_id, child);
            }
        }
    }

    /// The session that started `id` (a subagent's parent), if any.
    pub(crate) fn parent_of(&self, id: &str) -> Option<String> {
        self.lineage.parent_of(&self.settings.home, &self.log, id)
    }

    /// Cancels the turn of `child_id`, whose parent's worker stopped: its waiting
    /// permission requests are answered `cancelled` and its worker gets `session/cancel`.
    pub(crate) fn cancel_orphan(&self, child_id: String, child: Arc<LiveSession>) {
        self.log.line(format!("cancelling child session {child_id}: its parent's worker stopped"));
        tokio::spawn(async move {
            permission::cancel_all(&child).await;
            relay_to_worker(&child, "session/cancel", json!({"sessionId": child_id})).await;
        });
    }

    fn new_session(self: &Arc<Self>, client: &Arc<ClientLink>, id: RequestId, params: Value) {
        if params.get("cwd").and_then(Value::as_str).is_none() {
            client.respond(
                id,
                Err(RpcError::invalid_params("session/new needs cwd (an absolute path)")),
            );
            return;
        }
        let slot = match self.reserve_worker("session/new") {
            Ok(slot) => slot,
            Err(error) => {
                client.respond(id, Err(error));
                return;
            }
        };
        let session = LiveSession::new(None, load_params(&params, None));
        session.attach(client);
        supervisor::launch(
            self.clone(),
            session,
            Bootstrap::New { client: client.clone(), id, params },
            slot,
        );
    }

    async fn load_session(
        self: &Arc<Self>,
        client: &Arc<ClientLink>,
        id: RequestId,
        params: Value,
    ) {
        let session_id = match session_id(&params).and_then(checked_id) {
            Ok(session_id) => session_id.to_owned(),
            Err(error) => {
                client.respond(id, Err(error));
                return;
            }
        };
        loop {
            if let Some(session) = self.session(&session_id) {
                if session.state().closing {
                    // Its worker is on its way out (idle): wait, then start a new one.
                    session.ended(self.settings.start_timeout).await;
                    self.unregister(&session_id, &session);
                    continue;
                }
                // Live elsewhere: attach (history, then the live stream).
                match session.live_worker(self.settings.start_timeout).await {
                    Ok(worker) => {
                        // One history at a time per client: loads sent without reading
                        // the answers must not pile histories up in the daemon.
                        if !session.state().attaching.insert(client.id()) {
                            let message = format!(
                                "a session/load of {session_id} by this client is already in progress"
                            );
                            client.respond(
                                id,
                                Err(RpcError::new(RpcError::INVALID_REQUEST, message)),
                            );
                            return;
                        }
                        session.detach(client.id());
                        let pending = Pending::History { client: client.clone(), id: id.clone() };
                        let params = json!({"sessionId": session_id});
                        if let Err(error) =
                            worker.send_request(messages::SESSION_HISTORY, params, pending).await
                        {
                            session.state().attaching.remove(&client.id());
                            client.respond(id, Err(error));
                        }
                    }
                    Err(error) => {
                        client.respond(id, Err(error));
                    }
                }
                return;
            }
            if let Err(error) = self.find_record(&session_id) {
                client.respond(id, Err(error));
                return;
            }
            let slot = match self.reserve_worker("session/load") {
                Ok(slot) => slot,
                Err(error) => {
                    client.respond(id, Err(error));
                    return;
                }
            };
            let session =
                LiveSession::new(Some(session_id.clone()), load_params(&params, Some(&session_id)));
            session.attach(client);
            if self.register_new(&session_id, &session) {
                supervisor::launch(
                    self.clone(),
                    session,
                    Bootstrap::Load { client: client.clone(), id, params },
                    slot,
                );
                return;
            }
            // Another client started it meanwhile: attach to that one.
            session.detach(client.id());
        }
    }

    fn find_record(&self, session_id: &str) -> Result<(), RpcError> {
        let found = SessionIndex::find(&self.settings.home, session_id);
        match found {
            Ok(summary) if summary.id.as_str() == session_id => Ok(()),
            Ok(_) | Err(_) => Err(RpcError::new(
                RpcError::RESOURCE_NOT_FOUND,
                format!("no session {session_id} in {}", self.settings.home.root().display()),
            )),
        }
    }

    async fn relay(&self, client: &Arc<ClientLink>, id: RequestId, method: String, params: Value) {
        let session =
            match session_id(&params).map(|session_id| (session_id, self.session(session_id))) {
                Ok((session_id, Some(session))) if session.state().closing => {
                    client.respond(id, Err(not_live(session_id)));
                    return;
                }
                Ok((_, Some(session))) => session,
                Ok((session_id, None)) => {
                    client.respond(id, Err(not_live(session_id)));
                    return;
                }
                Err(error) => {
                    client.respond(id, Err(error));
                    return;
                }
            };
        let worker = match session.live_worker(self.settings.start_timeout).await {
            Ok(worker) => worker,
            Err(error) => {
                client.respond(id, Err(error));
                return;
            }
        };
        let kind = if method == "session/prompt" { Relayed::Prompt } else { Relayed::Other };
        session.state().idle_since = Instant::now();
        // A second prompt while one runs is refused by the worker: no new turn. The start
        // is announced before the prompt leaves, so it is never heard after the turn's end.
        let pending = Pending::Client { client: client.clone(), id: id.clone(), kind };
        let mut started = false;
        let announce = || {
            started = true;
            session.announce_turn_start();
        };
        let sent = worker.send_turn_request(&method, params, pending, announce).await;
        if let Err(error) = sent {
            if started {
                session.announce_turn_end(&Err(error.clone()));
            }
            client.respond(id, Err(error));
        }
    }

    fn list(&self, params: &Value) -> Result<Value, RpcError> {
        let sessions = SessionIndex::list(&self.settings.home)
            .map_err(|error| RpcError::internal(format!("cannot list sessions: {error}")))?;
        let cwd = params.get("cwd").and_then(Value::as_str);
        let live = |id: &str| self.session(id).is_some();
        Ok(messages::list_response(&sessions, cwd, &live))
    }

    pub(crate) fn status(&self) -> DaemonStatus {
        let mut sessions: Vec<SessionStatus> = lock(&self.sessions)
            .iter()
            .map(|(id, session)| {
                let state = session.state();
                SessionStatus {
                    session_id: id.clone(),
                    worker_pid: state.worker.as_ref().map(|worker| worker.pid()),
                    clients: state.clients.len(),
                    restarts: state.restarts,
                    state: session.phase().label().to_owned(),
                }
            })
            .collect();
        sessions.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        DaemonStatus {
            pid: std::process::id(),
            socket: self.socket.clone(),
            clients: lock(&self.clients).len(),
            sessions,
        }
    }

    /// Starts a child session for a worker's `_kestrel/session/spawn`: a new worker
    /// with `session/new`, the mode and model asked for, then the prompt. Answers with
    /// the child's id once it exists; the child's turn runs on, attachable like any other.
    pub(crate) async fn spawn_child(self: &Arc<Self>, spawn: Value) -> Result<Value, RpcError> {
        let params = supervisor::child_new_params(&spawn)?;
        let slot = self.reserve_worker("_kestrel/session/spawn")?;
        let session = LiveSession::new(None, load_params(&params, None));
        let (reply, answer) = oneshot::channel();
        let bootstrap = Bootstrap::Spawn { params, reply };
        supervisor::launch(self.clone(), session.clone(), bootstrap, slot);
        let child_id = answer.await.unwrap_or_else(|_| Err(RpcError::closed()))?;
        let parent = spawn.get("parentSessionId").and_then(Value::as_str);
        self.lineage.note(&child_id, parent);
        // All or nothing: a child that cannot be set up and prompted is closed, not left
        // live without a turn (its worker exits and it leaves the router).
        if let Err(error) = self.start_child_turn(&session, &child_id, &spawn).await {
            let worker = {
                let mut state = session.state();
                state.closing = true;
                state.worker.clone()
            };
            if let Some(worker) = worker {
                worker.close_stdin();
            }
            self.log.line(format!("child session {child_id} closed: {}", error.message));
            return Err(error);
        }
        self.log.line(format!("spawned child session {child_id}"));
        Ok(json!({"sessionId": child_id}))
    }

    /// Sets a new child's mode and model and sends its prompt.
    async fn start_child_turn(
        &self,
        session: &Arc<LiveSession>,
        child_id: &str,
        spawn: &Value,
    ) -> Result<(), RpcError> {
        let worker = session.live_worker(self.settings.start_timeout).await?;
        if let Some(mode) = spawn.get("mode").and_then(Value::as_str) {
            worker
                .request("session/set_mode", json!({"sessionId": child_id, "modeId": mode}))
                .await?;
        }
        if let Some(model) = spawn.get("model").and_then(Value::as_str) {
            let params = json!({"sessionId": child_id, "configId": "model", "value": model});
            worker.request("session/set_config_option", params).await?;
        }
        let prompt = spawn.get("prompt").and_then(Value::as_str).unwrap_or_default();
        let params = json!({"sessionId": child_id, "prompt": [{"type": "text", "text": prompt}]});
        // The child's turn is answered to nobody: its result is in its record and updates.
        let start = || session.announce_turn_start();
        match worker.send_turn_request("session/prompt", params, Pending::ChildTurn, start).await {
            Ok(_) => Ok(()),
            Err(error) => {
                session.announce_turn_end(&Err(error.clone()));
                Err(error)
            }
        }
    }

    /// Asks every worker to exit (stdin closed), kills what is left after the grace
    /// period, and waits (bounded) for their supervisors to finish.
    pub(crate) async fn stop_all_workers(&self) {
        let sessions = self.sessions();
        for session in &sessions {
            let worker = {
                let mut state = session.state();
                state.closing = true;
                state.worker.clone()
            };
            if let Some(worker) = worker {
                worker.close_stdin();
            }
        }
        let deadline = Instant::now() + self.settings.stop_grace;
        while !lock(&self.sessions).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        for session in self.sessions() {
            let worker = session.state().worker.clone();
            if let Some(worker) = worker {
                let _ = kestrel_platform::kill_group(worker.pid(), kestrel_platform::Signal::Kill);
            }
        }
        let deadline = Instant::now() + self.settings.stop_grace;
        while !lock(&self.sessions).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// Sends a notification to `session`'s worker, if it has a live one.
async fn relay_to_worker(session: &LiveSession, method: &str, params: Value) {
    let worker = session.state().worker.clone();
    if let Some(worker) = worker
        && session.phase() == Phase::Live
    {
        let _ = worker.notify(method, params).await;
    }
}

/// `cwd` and `mcpServers` of a new or load request, for reloading after a crash.
fn load_params(params: &Value, session_id: Option<&str>) -> Value {
    let mut kept = json!({
        "cwd": params.get("cwd").cloned().unwrap_or(Value::Null),
        "mcpServers": params.get("mcpServers").cloned().unwrap_or_else(|| json!([])),
    });
    if let (Some(session_id), Value::Object(map)) = (session_id, &mut kept) {
        map.insert("sessionId".into(), Value::String(session_id.to_owned()));
    }
    kept
}

fn session_id(params: &Value) -> Result<&str, RpcError> {
    params
        .get("sessionId")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("params.sessionId (a string) is required"))
}

/// Session ids name files (`logs/worker-<id>.log`): letters, digits, `-` and `_` only.
fn checked_id(id: &str) -> Result<&str, RpcError> {
    let valid = !id.is_empty()
        && id.len() <= 128
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if valid {
        Ok(id)
    } else {
        Err(RpcError::invalid_params(format!("{id:?} is not a session id")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_that_could_name_other_files_are_refused() {
        assert!(checked_id("019a-b_c").is_ok());
        assert!(checked_id("../../etc/passwd").is_err());
        assert!(checked_id("").is_err());
        assert!(checked_id("a/b").is_err());
    }

    #[test]
    fn restarts_reload_with_the_original_cwd_and_mcp_servers() {
        let params = json!({"cwd": "/w", "mcpServers": [{"name": "fs"}], "sessionId": "x"});
        assert_eq!(
            load_params(&params, Some("s1")),
            json!({"cwd": "/w", "mcpServers": [{"name": "fs"}], "sessionId": "s1"})
        );
        assert_eq!(
            load_params(&json!({"cwd": "/w"}), None),
            json!({"cwd": "/w", "mcpServers": []})
        );
    }
}
