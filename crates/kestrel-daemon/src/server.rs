//! The daemon's main loop: raise the open-file limit, bind the socket, sweep what dead
//! workers left running, serve each client on its own task, stop on
//! `_kestrel/daemon/stop`, SIGTERM/SIGINT or after `idle_exit` with no session and no
//! client; on the way out every worker is asked to exit and killed after a grace.

use crate::DaemonError;
use crate::capacity::Capacity;
use crate::log::DaemonLog;
use crate::router::Router;
use crate::settings::DaemonSettings;
use crate::severable::Severable;
use crate::{idle, orphans};
use kestrel_platform::{Endpoint, IpcStream, Listener};
use kestrel_protocol::jsonrpc::{Connection, Incoming};
use kestrel_store::ensure_dir;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Runs the daemon until it is stopped or idles out. Must be called inside a tokio
/// runtime; the process is expected to exit when it returns.
///
/// Fails when the socket cannot be bound, e.g. [`kestrel_platform::IpcError::AlreadyRunning`]
/// when another daemon serves this home.
pub async fn run(settings: DaemonSettings) -> Result<(), DaemonError> {
    let logs = settings.home.logs_dir();
    ensure_dir(&logs)?;
    let log = DaemonLog::open(&logs.join("daemon.log"));
    // Raised before anything is open: each worker costs a descriptor.
    let limit = kestrel_platform::raise_open_file_limit();
    let endpoint = Endpoint::new(&settings.home.run_dir());
    let listener = match Listener::bind(&endpoint) {
        Ok(listener) => listener,
        Err(error) => {
            log.line(format!("not starting: {error}"));
            return Err(error.into());
        }
    };
    log.line(format!(
        "listening on {} (worker idle {:?}, daemon idle {:?})",
        endpoint.socket_path().display(),
        settings.worker_idle,
        settings.idle_exit
    ));
    let capacity = Capacity::new(limit.as_ref().ok().copied());
    log.line(describe_limit(&limit, &capacity));
    // Only the daemon holding the pid lock gets here: no other supervises this home.
    if orphans::sweep(&settings.home, &log) > 0 {
        let (home, second_log) = (settings.home.clone(), logs.join("daemon.log"));
        tokio::spawn(async move {
            tokio::time::sleep(orphans::SECOND_LOOK).await;
            orphans::sweep(&home, &DaemonLog::open(&second_log));
        });
    }
    let socket = endpoint.socket_path().display().to_string();
    let idle_exit = settings.idle_exit;
    let router = Router::new(settings, log, socket, capacity);
    spawn_signal_handlers(&router)?;
    tokio::spawn(idle::run(router.clone()));
    let mut listener = listener;
    loop {
        // No timer while the daemon has sessions or clients: it sleeps until it is idle.
        let exit_at = router.idle_for().map(|idle| Instant::now() + idle_exit.saturating_sub(idle));
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(stream) => {
                    tokio::spawn(serve_client(router.clone(), stream));
                }
                Err(error) => {
                    router.log.line(format!("accept failed: {error}"));
                    // Out of descriptors, accept fails at once every time: do not spin.
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            () = router.shutdown.cancelled() => break,
            () = router.became_idle.notified() => {}
            () = sleep_until(exit_at) => {
                if router.idle_for().is_some_and(|idle| idle >= idle_exit) {
                    router.log.line(format!("no session and no client for {idle_exit:?}: exiting"));
                    break;
                }
            }
        }
    }
    // No new client is accepted that would not be served; the pid lock is kept until
    // the workers are stopped, so `connect_or_start` waits for this daemon to exit.
    listener.close();
    router.shutdown.cancel();
    router.stop_all_workers().await;
    router.log.line("stopped");
    drop(listener);
    Ok(())
}

/// Bytes of a client connection's own requests waiting to be written.
const REQUESTS_PIPE: usize = 64 * 1024;

/// After a failed accept, before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Sleeps until `at`, or forever.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// The log line about the open-file limit: raised or not, and what it leaves room for.
fn describe_limit(
    limit: &std::io::Result<kestrel_platform::OpenFileLimit>,
    capacity: &Capacity,
) -> String {
    let fit = capacity.sessions_that_fit().map_or_else(String::new, |fit| {
        format!("; room for about {fit} sessions (one descriptor each)")
    });
    match limit {
        Ok(limit) if limit.now > limit.before => format!(
            "open files: soft limit raised from {} to {} (the hard limit){fit}",
            limit.before, limit.now
        ),
        Ok(limit) => format!(
            "open files: limit {} (hard limit {}){fit}",
            limit.now,
            limit.hard.map_or_else(|| "unlimited".to_owned(), |hard| hard.to_string())
        ),
        Err(error) => format!("open files: cannot read the limit: {error}"),
    }
}

/// One client, until it closes its side (or is cut off, or the daemon stops). Its
/// sessions keep running without it.
async fn serve_client(router: Arc<Router>, stream: IpcStream) {
    let gone = CancellationToken::new();
    let (read, write) = stream.into_split();
    // The connection reads the client and writes only its own requests, into a pipe
    // the client's writer copies to the socket with everything else.
    let (requests_in, requests_out) = tokio::io::duplex(REQUESTS_PIPE);
    let (connection, mut incoming) = Connection::start(Severable::new(read, &gone), requests_in);
    let socket = Severable::new(write, &gone);
    let client = router.add_client(socket, connection, requests_out, gone.clone());
    loop {
        let message = tokio::select! {
            message = incoming.recv() => message,
            () = gone.cancelled() => None,
            () = router.shutdown.cancelled() => None,
        };
        match message {
            Some(Incoming::Request(request)) => router.handle_request(&client, request).await,
            Some(Incoming::Notification(notification)) => {
                router.handle_notification(notification).await
            }
            None => break,
        }
    }
    if gone.is_cancelled() {
        router.log.line(format!("client {} cut off: it stopped reading", client.id()));
    }
    // Answers still queued are written before the connection closes.
    router.remove_client(&client);
}

#[cfg(unix)]
fn spawn_signal_handlers(router: &Arc<Router>) -> Result<(), DaemonError> {
    use tokio::signal::unix::{SignalKind, signal};
    for kind in [SignalKind::terminate(), SignalKind::interrupt()] {
        let mut stream = signal(kind)
            .map_err(|source| DaemonError::Io { action: "listen for signals", source })?;
        let router = router.clone();
        tokio::spawn(async move {
            if stream.recv().await.is_some() {
                router.log.line("signalled to stop");
                router.shutdown.cancel();
            }
        });
    }
    Ok(())
}
