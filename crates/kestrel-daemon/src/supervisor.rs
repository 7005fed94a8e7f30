//! A session's worker, supervised: one task per session starts the worker, reads its
//! output in order (relaying updates, answering for it, routing responses) and restarts
//! it with `session/load` when it dies. More than `max_restarts` restarts within
//! `restart_window` and the session is given up on. (Idle workers are stopped by the
//! daemon's one idle reaper, `idle.rs`.)

use crate::capacity::Slot;
use crate::client_link::ClientLink;
use crate::messages;
use crate::permission;
use crate::router::Router;
use crate::session::{HeldPrompt, LiveSession, Phase};
use crate::worker::{self, Pending, Relayed, StartedWorker, WorkerLine, WorkerLink};
use kestrel_platform::{Signal, exit_signal, kill_group};
use kestrel_protocol::acp;
use kestrel_protocol::jsonrpc::{Message, Notification, Request, RequestId, RpcError};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What the first request to a freshly started worker is.
#[derive(Debug)]
pub(crate) enum Bootstrap {
    /// A client's `session/new`.
    New { client: Arc<ClientLink>, id: RequestId, params: Value },
    /// A client's `session/load` of a session no worker had.
    Load { client: Arc<ClientLink>, id: RequestId, params: Value },
    /// A child session for `_kestrel/session/spawn`; the reply gets its id.
    Spawn { params: Value, reply: oneshot::Sender<Result<String, RpcError>> },
    /// A restart after a crash: `session/load` from the record.
    Restart,
}

/// What happened to a worker that stopped.
enum Outcome {
    Restart,
    Done,
}

/// Starts supervising `session` with a new worker whose first request is `bootstrap`;
/// the session holds `slot` (its worker's descriptors) until it leaves the daemon.
pub(crate) fn launch(
    router: Arc<Router>,
    session: Arc<LiveSession>,
    bootstrap: Bootstrap,
    slot: Slot,
) {
    tokio::spawn(async move {
        supervise(router, session, bootstrap).await;
        drop(slot);
    });
}

async fn supervise(router: Arc<Router>, session: Arc<LiveSession>, mut bootstrap: Bootstrap) {
    loop {
        let log_path = worker_log_path(&router, &session);
        let limit = router.capacity.workers_limit();
        let (reason, pending) = match worker::start(&router.settings.worker, &log_path, limit) {
            Ok(started) => {
                let link = started.link.clone();
                router.log.line(format!(
                    "worker {} started for session {}",
                    link.pid(),
                    session.id().unwrap_or("(new)")
                ));
                {
                    let mut state = session.state();
                    state.worker = Some(link.clone());
                    state.log_path = log_path;
                }
                tokio::spawn(run_bootstrap(
                    router.clone(),
                    session.clone(),
                    link.clone(),
                    bootstrap,
                ));
                let reason = run_worker(&router, &session, started).await;
                router.log.line(format!(
                    "worker {} of session {} {reason}",
                    link.pid(),
                    session.id().unwrap_or("(new)")
                ));
                (reason, link.take_pending())
            }
            Err(error) => {
                let reason = format!(
                    "could not be started ({}: {error})",
                    router.settings.worker.program.display()
                );
                router.log.line(format!(
                    "worker of session {} {reason}",
                    session.id().unwrap_or("(new)")
                ));
                let message = if kestrel_platform::out_of_files(&error) {
                    router.capacity.refusal()
                } else {
                    format!("the worker {reason}")
                };
                fail_bootstrap(bootstrap, RpcError::internal(message));
                (reason, Vec::new())
            }
        };
        match on_exit(&router, &session, pending, reason) {
            Outcome::Restart => {
                // The first restart is immediate; a worker that keeps dying waits longer.
                let recent = session.state().recent_restarts.len().saturating_sub(1) as u64;
                tokio::time::sleep(Duration::from_millis(100 * recent)).await;
                bootstrap = Bootstrap::Restart;
            }
            Outcome::Done => return,
        }
    }
}

/// `logs/worker-<id>.log`; a session without an id yet logs to a temporary name that is
/// renamed once the worker names it.
fn worker_log_path(router: &Router, session: &LiveSession) -> PathBuf {
    static UNNAMED: AtomicU64 = AtomicU64::new(0);
    let logs = router.settings.home.logs_dir();
    match session.id() {
        Some(id) => logs.join(format!("worker-{id}.log")),
        None => logs.join(format!(
            "worker-new-{}-{}.log",
            std::process::id(),
            UNNAMED.fetch_add(1, Ordering::Relaxed)
        )),
    }
}

/// `initialize`, then the bootstrap request. A failure of a restart's set-up kills the
/// worker, so it counts against the restart budget like any crash.
async fn run_bootstrap(
    router: Arc<Router>,
    session: Arc<LiveSession>,
    link: WorkerLink,
    bootstrap: Bootstrap,
) {
    if let Err(error) = link.request("initialize", messages::initialize_worker_request()).await {
        router.log.line(format!("worker {} failed to initialize: {error}", link.pid()));
        match bootstrap {
            Bootstrap::Restart => {
                let _ = kill_group(link.pid(), Signal::Kill);
            }
            Bootstrap::New { .. } | Bootstrap::Load { .. } | Bootstrap::Spawn { .. } => {
                fail_bootstrap(
                    bootstrap,
                    RpcError::internal(format!("the worker failed to start: {error}")),
                );
                session.state().closing = true;
                link.close_stdin();
            }
        }
        return;
    }
    let sent = match bootstrap {
        Bootstrap::New { client, id, params } => {
            let pending =
                Pending::Client { client: client.clone(), id: id.clone(), kind: Relayed::New };
            (link.send_request("session/new", params, pending).await)
                .map_err(|error| (Some((client, id)), error))
        }
        Bootstrap::Load { client, id, params } => {
            session.state().loading = true;
            let pending =
                Pending::Client { client: client.clone(), id: id.clone(), kind: Relayed::Load };
            (link.send_request("session/load", params, pending).await)
                .map_err(|error| (Some((client, id)), error))
        }
        Bootstrap::Restart => {
            let params = session.state().load_params.clone();
            (link.send_request("session/load", params, Pending::RestartLoad).await)
                .map_err(|error| (None, error))
        }
        Bootstrap::Spawn { params, reply } => {
            let result = start_child(&router, &session, &link, params).await;
            if result.is_err() {
                session.state().closing = true;
                link.close_stdin();
            }
            let _ = reply.send(result);
            Ok(())
        }
    };
    // A failed send means the worker is already gone; its exit is handled by the reader.
    if let Err((Some((client, id)), error)) = sent {
        client.respond(id, Err(error));
    }
}

async fn start_child(
    router: &Arc<Router>,
    session: &Arc<LiveSession>,
    link: &WorkerLink,
    params: Value,
) -> Result<String, RpcError> {
    let response = link.request("session/new", params).await?;
    let Some(id) = response.get("sessionId").and_then(Value::as_str) else {
        return Err(RpcError::internal("the child worker's session/new answer has no sessionId"));
    };
    name_session(router, session, id, &response);
    Ok(id.to_owned())
}

/// The worker named its session: it joins the router under that id.
fn name_session(router: &Router, session: &Arc<LiveSession>, id: &str, response: &Value) {
    session.set_id(id);
    let named = router.settings.home.logs_dir().join(format!("worker-{id}.log"));
    {
        let mut state = session.state();
        if state.log_path != named && std::fs::rename(&state.log_path, &named).is_ok() {
            state.log_path = named;
        }
        state.snapshot = messages::snapshot_of(response);
        if let Value::Object(params) = &mut state.load_params {
            params.insert("sessionId".into(), Value::String(id.to_owned()));
        }
    }
    // New here: no parent (a spawned child's is noted by `spawn_child` next).
    router.lineage.note(id, None);
    router.register(id, session.clone());
    session.set_phase(Phase::Live);
}

fn fail_bootstrap(bootstrap: Bootstrap, error: RpcError) {
    match bootstrap {
        Bootstrap::New { client, id, .. } | Bootstrap::Load { client, id, .. } => {
            client.respond(id, Err(error));
        }
        Bootstrap::Spawn { reply, .. } => {
            let _ = reply.send(Err(error));
        }
        Bootstrap::Restart => {}
    }
}

/// Reads the worker until it closes its output, then waits for it; returns why it stopped.
async fn run_worker(
    router: &Arc<Router>,
    session: &Arc<LiveSession>,
    started: StartedWorker,
) -> String {
    let StartedWorker { mut process, link, mut output } = started;
    while let Some(line) = output.next().await {
        match line {
            WorkerLine::Message(message, raw) => {
                session.state().idle_since = Instant::now();
                handle_message(router, session, &link, message, raw);
                // The end of a turn may leave the session idle.
                router.idle.touch();
            }
            WorkerLine::Garbage(error) => {
                router.log.line(format!(
                    "worker {} wrote a line that is not JSON-RPC: {}",
                    link.pid(),
                    error.message
                ));
            }
        }
    }
    link.close_stdin();
    drop(output);
    let status = match tokio::time::timeout(router.settings.stop_grace, process.wait()).await {
        Ok(Ok(status)) => Some(status),
        Ok(Err(_)) | Err(_) => {
            let _ = process.signal(Signal::Kill);
            process.wait().await.ok()
        }
    };
    // Whatever the worker left running goes with it: its own group, and the groups of
    // the shell commands and MCP servers it started (listed by the worker itself).
    let _ = kill_group(process.id(), Signal::Kill);
    let listed = router.settings.home.worker_groups_file(process.id());
    match kestrel_platform::kill_groups_listed_in(&listed, Signal::Kill) {
        Ok(0) => {}
        Ok(killed) => router
            .log
            .line(format!("killed {killed} process group(s) worker {} left running", process.id())),
        Err(error) => router.log.line(format!("cannot read {}: {error}", listed.display())),
    }
    match status {
        Some(status) => match (status.code(), exit_signal(&status)) {
            (_, Some(signal)) => format!("killed by signal {signal}"),
            (Some(code), None) => format!("exited with status {code}"),
            (None, None) => "exited".to_owned(),
        },
        None => "exited (status unknown)".to_owned(),
    }
}

fn handle_message(
    router: &Arc<Router>,
    session: &Arc<LiveSession>,
    link: &WorkerLink,
    message: Message,
    raw: String,
) {
    match message {
        // A worker cancelling one of its subagents: routed like a client's cancel.
        Message::Notification(notification)
            if notification.method == "session/cancel"
                && notification.params.get("sessionId").and_then(Value::as_str) != session.id() =>
        {
            let router = router.clone();
            tokio::spawn(async move { router.handle_notification(notification).await });
        }
        Message::Notification(notification) => relay_notification(session, notification, raw),
        Message::Request(request) => handle_request(router, session, link, request),
        Message::Response { id, result } => {
            let settle = |pending, turn_running| {
                handle_response(router, session, link, pending, result, turn_running)
            };
            if link.settle_answer(&id, settle).is_none() {
                router.log.line(format!("worker {} answered unknown request {id}", link.pid()));
            }
        }
    }
}

/// Relays a worker's notification to the attached clients, each as it opted in: a
/// `notice` as it is or as a plain client gets it (none while a load replays the
/// record: that is history), Kestrel's extensions only to clients that take them.
fn relay_notification(session: &LiveSession, notification: Notification, raw: String) {
    let mut notice = None;
    {
        let mut state = session.state();
        if state.replaying {
            return;
        }
        if notification.method == "session/update"
            && let Some(update) = notification.params.get("update")
        {
            messages::apply_to_snapshot(&mut state.snapshot, update);
            if messages::is_notice(update) {
                let live = !state.loading;
                let id = session.id().unwrap_or_default();
                notice =
                    Some(live.then(|| messages::notice_for_plain_client(id, update)).flatten());
            }
        }
    }
    match notice {
        Some(plain) => session.fan_out_notice(&raw, plain.as_ref()),
        None => session.fan_out(&notification.method, &raw),
    }
}

fn handle_request(
    router: &Arc<Router>,
    session: &Arc<LiveSession>,
    link: &WorkerLink,
    request: Request,
) {
    match request.method.as_str() {
        "session/request_permission" => {
            permission::ask_all(router, session, link, request.id, request.params)
        }
        messages::SESSION_SPAWN => {
            let (router, session, link) = (router.clone(), session.clone(), link.clone());
            tokio::spawn(async move {
                let result = router.spawn_child(request.params).await;
                let child_id = result
                    .as_ref()
                    .ok()
                    .and_then(|response| response.get("sessionId"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let delivered = link.respond(request.id, result).await.is_ok();
                // A parent whose worker stopped while the child was starting had its
                // children cancelled before this one had a turn: nobody follows it.
                let parent_lives = session
                    .state()
                    .worker
                    .as_ref()
                    .is_some_and(|worker| worker.pid() == link.pid());
                if let Some(child_id) = child_id
                    && (!delivered || !parent_lives)
                    && let Some(child) = router.session(&child_id)
                {
                    router.cancel_orphan(child_id, child);
                }
            });
        }
        method => {
            let error = RpcError::method_not_found(method);
            let link = link.clone();
            tokio::spawn(async move {
                let _ = link.respond(request.id, Err(error)).await;
            });
        }
    }
}

fn handle_response(
    router: &Arc<Router>,
    session: &Arc<LiveSession>,
    link: &WorkerLink,
    pending: Pending,
    result: Result<Value, RpcError>,
    turn_running: bool,
) {
    match pending {
        Pending::Daemon(reply) => {
            let _ = reply.send(result);
        }
        Pending::Client { client, id, kind } => {
            match (kind, &result) {
                (Relayed::New, Ok(response)) => {
                    match response.get("sessionId").and_then(Value::as_str) {
                        Some(session_id) => name_session(router, session, session_id, response),
                        None => close(session, link),
                    }
                }
                (Relayed::Load, Ok(response)) => {
                    {
                        let mut state = session.state();
                        state.snapshot = messages::snapshot_of(response);
                        state.loading = false;
                    }
                    session.set_phase(Phase::Live);
                }
                (Relayed::New | Relayed::Load, Err(_)) => close(session, link),
                (Relayed::Prompt | Relayed::Other, _) => {}
            }
            let ends_turn = kind == Relayed::Prompt && !turn_running;
            let end = ends_turn.then(|| result.clone());
            client.respond(id, result);
            if let Some(end) = end {
                session.announce_turn_end(&end);
            }
        }
        Pending::ChildTurn => {
            if !turn_running {
                session.announce_turn_end(&result);
            }
        }
        Pending::History { client, id } => {
            session.state().attaching.remove(&client.id());
            match result {
                Ok(history) => {
                    // In stream order: a turn whose answer came before the history is over.
                    attach_with_history(router, session, &client, id, &history, turn_running);
                }
                Err(error) => {
                    client.respond(id, Err(error));
                }
            }
        }
        Pending::RestartLoad => match result {
            Ok(response) => {
                // The restarted worker's answer (its mode and model, from the record)
                // is what attaching clients are told from now on.
                session.state().snapshot = messages::snapshot_of(&response);
                restarted(router, session);
            }
            Err(error) => {
                router.log.line(format!(
                    "restarted worker {} could not load the session: {error}",
                    link.pid()
                ));
                let _ = kill_group(link.pid(), Signal::Kill);
            }
        },
    }
}

fn close(session: &LiveSession, link: &WorkerLink) {
    session.state().closing = true;
    link.close_stdin();
}

/// An attaching client gets the history, then joins the live stream, then its answer
/// (saying whether a turn runs) and any permission request still waiting: all in stream
/// order, so nothing is missed or seen twice, and the end of a running turn reaches it
/// as `_kestrel/session/turn`.
fn attach_with_history(
    router: &Router,
    session: &Arc<LiveSession>,
    client: &Arc<ClientLink>,
    id: RequestId,
    history: &Value,
    turn_running: bool,
) {
    let session_id = session.id().unwrap_or_default().to_owned();
    if let Some(updates) = history.get("updates").and_then(Value::as_array) {
        // Notices are live events: a plain client gets none in a history.
        let wanted = |update: &&Value| client.takes_extensions() || !messages::is_notice(update);
        for update in updates.iter().filter(wanted) {
            let params = messages::session_update(&session_id, update.clone());
            client.notify_history("session/update", params);
        }
    }
    session.attach(client);
    let answer = messages::attach_response(&session.state().snapshot, turn_running);
    client.respond(id, Ok(answer));
    permission::offer(session, client);
    permission::offer_descendants(router, session, client);
}

/// The restarted worker has loaded the session: tell every attached client, answer the
/// prompts the dead worker left open (their turn ended), and only then relay again. In
/// this order a client hears the restart before the end of the turn it interrupted, and
/// that end before the start of any turn prompted since (those prompts wait for
/// `Phase::Live`).
fn restarted(router: &Router, session: &LiveSession) {
    let (held, clients, reason, restarts) = {
        let mut state = session.state();
        state.replaying = false;
        let held = std::mem::take(&mut state.held_prompts);
        let clients: Vec<Arc<ClientLink>> = state.clients.values().cloned().collect();
        (held, clients, state.last_exit.clone(), state.restarts)
    };
    let session_id = session.id().unwrap_or_default().to_owned();
    router.log.line(format!("session {session_id} restarted ({restarts} so far)"));
    let text = format!(
        "The session's worker stopped ({reason}) and was restarted; the interrupted turn was not resumed."
    );
    for client in clients {
        client.notify(
            messages::WORKER_RESTARTED,
            messages::restarted(&session_id, &reason, restarts),
        );
        let warning = acp::NoticeSeverity::Warning;
        let notice =
            messages::daemon_notice(&session_id, warning, &text, client.takes_extensions());
        client.notify("session/update", notice);
    }
    let turn_ended = !held.is_empty();
    for HeldPrompt { client, id } in held {
        client.respond(id, Ok(messages::prompt_cancelled()));
    }
    if turn_ended {
        session.announce_turn_end(&Ok(messages::prompt_cancelled()));
    }
    session.set_phase(Phase::Live);
}

/// Decides what a stopped worker means: a crash of a live session is restarted (within
/// the budget); anything else ends the session's time in the daemon.
fn on_exit(
    router: &Router,
    session: &Arc<LiveSession>,
    pending: Vec<Pending>,
    reason: String,
) -> Outcome {
    let phase = session.phase();
    // First: a child whose spawn ends from now on sees its parent gone and is cancelled
    // by its spawn; one that ended before is found below.
    session.state().worker = None;
    if !session.state().closing && matches!(phase, Phase::Live | Phase::Restarting) {
        router.cancel_children(session.id().unwrap_or_default());
    }
    let mut state = session.state();
    state.worker = None;
    state.permissions.clear();
    // Their history requests die with the worker (answered below with an error).
    state.attaching.clear();
    state.last_exit = reason.clone();
    let crashed = !state.closing && matches!(phase, Phase::Live | Phase::Restarting);
    if crashed {
        let now = Instant::now();
        let window = router.settings.restart_window;
        state.recent_restarts.retain(|at| now.duration_since(*at) < window);
        state.recent_restarts.push_back(now);
        if state.recent_restarts.len() <= router.settings.max_restarts {
            state.restarts += 1;
            state.replaying = true;
            let mut others = Vec::new();
            for entry in pending {
                match entry {
                    Pending::Client { client, id, kind: Relayed::Prompt } => {
                        state.held_prompts.push(HeldPrompt { client, id });
                    }
                    other => others.push(other),
                }
            }
            drop(state);
            session.set_phase(Phase::Restarting);
            let error = RpcError::internal(format!(
                "the session's worker {reason}; it is being restarted: try again"
            ));
            // A child's turn is not held for anyone: it ends here (a client's prompt
            // ends when the restart answers it).
            let child_turn_ended = others.iter().any(Pending::is_turn);
            fail_all(others, &error);
            if child_turn_ended {
                session.announce_turn_end(&Ok(messages::prompt_cancelled()));
            }
            return Outcome::Restart;
        }
    }
    let held = std::mem::take(&mut state.held_prompts);
    let clients: Vec<Arc<ClientLink>> = state.clients.values().cloned().collect();
    drop(state);
    let turn_ended = !held.is_empty() || pending.iter().any(Pending::is_turn);
    let session_id = session.id().unwrap_or_default().to_owned();
    let error = if crashed {
        let message = format!(
            "session {session_id}: the worker crashed {} times within {:?} (last: {reason}); gave up. The record is kept: session/load it to try again; see logs/worker-{session_id}.log",
            router.settings.max_restarts + 1,
            router.settings.restart_window
        );
        router.log.line(&message);
        session.set_phase(Phase::Failed(message.clone()));
        for client in &clients {
            let error = acp::NoticeSeverity::Error;
            let as_notice = client.takes_extensions();
            let notice = messages::daemon_notice(&session_id, error, &message, as_notice);
            client.notify("session/update", notice);
        }
        RpcError::internal(message)
    } else {
        session.set_phase(Phase::Closed);
        RpcError::internal(format!("the session's worker stopped ({reason})"))
    };
    for HeldPrompt { client, id } in held {
        client.respond(id, Err(error.clone()));
    }
    fail_all(pending, &error);
    if turn_ended {
        session.announce_turn_end(&Err(error));
    }
    if let Some(id) = session.id() {
        router.unregister(id, session);
    }
    Outcome::Done
}

fn fail_all(pending: Vec<Pending>, error: &RpcError) {
    for entry in pending {
        match entry {
            Pending::Client { client, id, .. } | Pending::History { client, id } => {
                client.respond(id, Err(error.clone()));
            }
            Pending::Daemon(reply) => {
                let _ = reply.send(Err(error.clone()));
            }
            Pending::RestartLoad | Pending::ChildTurn => {}
        }
    }
}

/// The `session/new` params of a child session asked for with `_kestrel/session/spawn`.
pub(crate) fn child_new_params(spawn: &Value) -> Result<Value, RpcError> {
    let Some(cwd) = spawn.get("cwd").and_then(Value::as_str) else {
        return Err(RpcError::invalid_params("_kestrel/session/spawn needs cwd"));
    };
    let Some(parent) = spawn.get("parentSessionId").and_then(Value::as_str) else {
        return Err(RpcError::invalid_params("_kestrel/session/spawn needs parentSessionId"));
    };
    // The parent's client-given MCP servers; the child loads the configured ones itself.
    let servers = spawn.get("mcpServers").filter(|servers| servers.is_array());
    let servers = servers.cloned().unwrap_or_else(|| json!([]));
    Ok(json!({
        "cwd": cwd,
        "mcpServers": servers,
        "_meta": {"kestrel": {"parentSessionId": parent}},
    }))
}
