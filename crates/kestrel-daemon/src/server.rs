//! The daemon's main loop: bind the socket, serve each client on its own task, stop on
//! `_kestrel/daemon/stop`, SIGTERM/SIGINT or after `idle_exit` with no session and no
//! client; on the way out every worker is asked to exit and killed after a grace.

use crate::DaemonError;
use crate::log::DaemonLog;
use crate::router::Router;
use crate::settings::DaemonSettings;
use crate::severable::Severable;
use kestrel_platform::{Endpoint, IpcStream, Listener};
use kestrel_protocol::jsonrpc::{Connection, Incoming};
use kestrel_store::ensure_dir;
use std::sync::Arc;
use std::time::Duration;
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
    let socket = endpoint.socket_path().display().to_string();
    let idle_exit = settings.idle_exit;
    let router = Router::new(settings, log, socket);
    spawn_signal_handlers(&router)?;
    let period = (idle_exit / 4).clamp(Duration::from_millis(20), Duration::from_secs(1));
    let mut ticker = tokio::time::interval(period);
    let mut listener = listener;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(stream) => {
                    tokio::spawn(serve_client(router.clone(), stream));
                }
                Err(error) => router.log.line(format!("accept failed: {error}")),
            },
            () = router.shutdown.cancelled() => break,
            _ = ticker.tick() => {
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

/// One client, until it closes its side (or is cut off, or the daemon stops). Its
/// sessions keep running without it.
async fn serve_client(router: Arc<Router>, stream: IpcStream) {
    let gone = CancellationToken::new();
    let (read, write) = stream.into_split();
    let (connection, mut incoming) =
        Connection::start(Severable::new(read, &gone), Severable::new(write, &gone));
    let client = router.add_client(connection, gone.clone());
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
