//! A session the daemon has a worker for: its attached clients, the worker link of the
//! moment, permission requests waiting for an answer, and its restart history. State is
//! behind a std mutex that is never held across an `.await`.

use crate::client_link::{ClientId, ClientLink};
use crate::log::DaemonLog;
use crate::messages;
use crate::worker::WorkerLink;
use kestrel_protocol::jsonrpc::{Message, Notification, RequestId, RpcError};
use kestrel_store::{KestrelHome, SessionHold};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Where a session's worker is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The first worker is starting (`initialize`, then `session/new` or `session/load`).
    Starting,
    /// The worker answers requests.
    Live,
    /// The worker died and a new one is loading the session from its record.
    Restarting,
    /// The daemon gave up on the session (it crashed in a loop); the text says why.
    Failed(String),
    /// The worker was stopped on purpose (idle, daemon stop) or never started.
    Closed,
}

impl Phase {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Live => "live",
            Phase::Restarting => "restarting",
            Phase::Failed(_) => "failed",
            Phase::Closed => "closed",
        }
    }
}

/// A permission request of the worker, asked of every attached client; the first
/// answer wins. With no client attached it waits for the next one.
#[derive(Debug)]
pub(crate) struct PendingPermission {
    /// The worker that asked (a restarted worker does not get an old worker's answer).
    pub(crate) worker_pid: u32,
    pub(crate) id: RequestId,
    pub(crate) params: Value,
    /// Clients asked so far.
    pub(crate) asked: BTreeSet<ClientId>,
}

/// A prompt whose worker died; answered once the restart is decided.
#[derive(Debug)]
pub(crate) struct HeldPrompt {
    pub(crate) client: Arc<ClientLink>,
    pub(crate) id: RequestId,
}

#[derive(Debug)]
pub(crate) struct SessionState {
    pub(crate) worker: Option<WorkerLink>,
    pub(crate) clients: BTreeMap<ClientId, Arc<ClientLink>>,
    /// Clients whose `session/load` waits for the worker's history: one at a time each.
    pub(crate) attaching: BTreeSet<ClientId>,
    pub(crate) permissions: Vec<PendingPermission>,
    pub(crate) held_prompts: Vec<HeldPrompt>,
    /// Restart times within the window (crash-loop detection).
    pub(crate) recent_restarts: VecDeque<Instant>,
    pub(crate) restarts: u32,
    /// The current worker's stderr log (renamed once a new session has its id).
    pub(crate) log_path: std::path::PathBuf,
    /// Why the last worker stopped, for notices.
    pub(crate) last_exit: String,
    /// The worker is being stopped on purpose: its exit is not a crash.
    pub(crate) closing: bool,
    /// A restarted worker is replaying history: its updates are not relayed.
    pub(crate) replaying: bool,
    /// The first worker replays the record for a client's `session/load`: its updates
    /// are history (a plain client gets no notices from them).
    pub(crate) loading: bool,
    /// Since when nothing happened and no client was attached (idle worker exit).
    pub(crate) idle_since: Instant,
    /// `cwd` and `mcpServers` the session was created or loaded with, for restarts.
    pub(crate) load_params: Value,
    /// The last `modes` / `configOptions` the worker reported, for attaching clients.
    pub(crate) snapshot: Value,
}

/// One session with a worker.
#[derive(Debug)]
pub(crate) struct LiveSession {
    id: OnceLock<String>,
    state: Mutex<SessionState>,
    phase: watch::Sender<Phase>,
    /// Held while the router lists the session, so that clean-up and `sessions rm`
    /// leave it alone between two workers (a restart) too.
    hold: Mutex<Option<SessionHold>>,
}

impl LiveSession {
    /// A session whose worker is about to start. `id` is `None` for `session/new`
    /// until the worker names it.
    pub(crate) fn new(id: Option<String>, load_params: Value) -> Arc<Self> {
        let cell = OnceLock::new();
        if let Some(id) = id {
            let _ = cell.set(id);
        }
        let (phase, _) = watch::channel(Phase::Starting);
        Arc::new(Self {
            id: cell,
            phase,
            hold: Mutex::new(None),
            state: Mutex::new(SessionState {
                worker: None,
                clients: BTreeMap::new(),
                attaching: BTreeSet::new(),
                permissions: Vec::new(),
                held_prompts: Vec::new(),
                recent_restarts: VecDeque::new(),
                restarts: 0,
                last_exit: String::new(),
                log_path: std::path::PathBuf::new(),
                closing: false,
                replaying: false,
                loading: false,
                idle_since: Instant::now(),
                load_params,
                snapshot: Value::Object(Default::default()),
            }),
        })
    }

    /// The session id, once known.
    pub(crate) fn id(&self) -> Option<&str> {
        self.id.get().map(String::as_str)
    }

    pub(crate) fn set_id(&self, id: &str) {
        let _ = self.id.set(id.to_owned());
    }

    /// Holds the session live on disk (see `kestrel_store::SessionHold`), waiting while
    /// a removal of its data runs. A hold that cannot be taken is logged; the session
    /// still runs (its worker's record lock protects it while the worker lives).
    pub(crate) fn hold(&self, home: &KestrelHome, log: &DaemonLog) {
        let Some(id) = self.id() else { return };
        let mut hold = self.hold.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if hold.is_some() {
            return;
        }
        let taken = match SessionHold::try_take(home, id) {
            Ok(Some(taken)) => Ok(taken),
            // A removal of its data runs (short): wait for it, off the runtime's threads.
            Ok(None) => wait_blocking(|| SessionHold::take(home, id)),
            Err(error) => Err(error),
        };
        match taken {
            Ok(taken) => *hold = Some(taken),
            Err(error) => log.line(format!("session {id}: cannot hold it live: {error}")),
        }
    }

    /// Releases the hold: the daemon no longer serves the session.
    pub(crate) fn release_hold(&self) {
        self.hold.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
    }

    /// The session's state. A poisoned lock (a panic elsewhere) still yields the state:
    /// the daemon keeps serving the other sessions.
    pub(crate) fn state(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn phase(&self) -> Phase {
        self.phase.borrow().clone()
    }

    pub(crate) fn set_phase(&self, phase: Phase) {
        self.phase.send_replace(phase);
    }

    /// Waits until the session is live and returns its worker. Fails when it failed or
    /// closed, or is not live within `timeout`.
    pub(crate) async fn live_worker(&self, timeout: Duration) -> Result<WorkerLink, RpcError> {
        let mut phases = self.phase.subscribe();
        let waited = tokio::time::timeout(timeout, async {
            loop {
                let phase = phases.borrow_and_update().clone();
                match phase {
                    Phase::Live => return Ok(()),
                    Phase::Failed(reason) => return Err(RpcError::internal(reason)),
                    Phase::Closed => return Err(not_live(self.id().unwrap_or("?"))),
                    Phase::Starting | Phase::Restarting => {}
                }
                if phases.changed().await.is_err() {
                    return Err(not_live(self.id().unwrap_or("?")));
                }
            }
        })
        .await;
        match waited {
            Ok(Ok(())) => {
                self.state().worker.clone().ok_or_else(|| not_live(self.id().unwrap_or("?")))
            }
            Ok(Err(error)) => Err(error),
            Err(_) => Err(RpcError::internal(format!(
                "session {} did not become ready within {timeout:?}; see its worker log",
                self.id().unwrap_or("?")
            ))),
        }
    }

    /// Waits (at most `timeout`) until the session has left the daemon: closed or
    /// given up on.
    pub(crate) async fn ended(&self, timeout: Duration) {
        let mut phases = self.phase.subscribe();
        let _ = tokio::time::timeout(timeout, async {
            loop {
                match *phases.borrow_and_update() {
                    Phase::Closed | Phase::Failed(_) => return,
                    Phase::Starting | Phase::Live | Phase::Restarting => {}
                }
                if phases.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
    }

    /// Adds `client` to the clients that receive this session's updates.
    pub(crate) fn attach(&self, client: &Arc<ClientLink>) {
        let mut state = self.state();
        state.clients.insert(client.id(), client.clone());
        state.idle_since = Instant::now();
    }

    /// Removes `client`; true when it was attached.
    pub(crate) fn detach(&self, client: ClientId) -> bool {
        let mut state = self.state();
        let was = state.clients.remove(&client).is_some();
        if was {
            for permission in &mut state.permissions {
                permission.asked.remove(&client);
            }
            // The idle clock starts when the last attached client leaves.
            state.idle_since = Instant::now();
        }
        was
    }

    /// Tells every attached client that this session's turn started
    /// (`_kestrel/session/turn` `running: true`).
    pub(crate) fn announce_turn_start(&self) {
        self.announce_turn(None);
    }

    /// Tells every attached client that this session's turn ended with `end`, the
    /// prompt's answer (its stop reason) or error (its message).
    pub(crate) fn announce_turn_end(&self, end: &Result<Value, RpcError>) {
        self.announce_turn(Some(end));
    }

    fn announce_turn(&self, end: Option<&Result<Value, RpcError>>) {
        let Some(id) = self.id() else { return };
        let params = messages::session_turn(id, end);
        let method = messages::SESSION_TURN;
        let notification = Notification { method: method.to_owned(), params };
        self.fan_out(method, &Message::Notification(notification).to_line());
    }

    /// Sends the notification `line` (of `method`) to every attached client that takes
    /// it (never waits; see `ClientLink`).
    pub(crate) fn fan_out(&self, method: &str, line: &str) {
        let clients: Vec<Arc<ClientLink>> = self.state().clients.values().cloned().collect();
        for client in clients {
            client.relay_notification(method, line.to_owned());
        }
    }

    /// Relays a worker's `notice` update: `line` as it is to clients that opted in
    /// (`session.notices`), `plain` (a warning or an error as an agent message of its
    /// own) to the others, who get nothing when there is no `plain`.
    pub(crate) fn fan_out_notice(&self, line: &str, plain: Option<&Value>) {
        let clients: Vec<Arc<ClientLink>> = self.state().clients.values().cloned().collect();
        for client in clients {
            if client.takes_extensions() {
                client.send_line(line.to_owned());
            } else if let Some(plain) = plain {
                client.notify("session/update", plain.clone());
            }
        }
    }
}

/// The error for a request naming a session that has no worker.
pub(crate) fn not_live(id: &str) -> RpcError {
    RpcError::new(
        RpcError::RESOURCE_NOT_FOUND,
        format!("session {id} is not open in the daemon: send session/load first"),
    )
}

/// Runs `blocking` (a file lock) from code the router's tasks call: on a multi-thread
/// runtime (the daemon's) the thread's other tasks move to another thread meanwhile.
fn wait_blocking<T>(blocking: impl FnOnce() -> T) -> T {
    let flavor = tokio::runtime::Handle::try_current().map(|handle| handle.runtime_flavor());
    match flavor {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(blocking),
        _ => blocking(),
    }
}
