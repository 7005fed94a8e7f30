//! `kestrel worker`: one session as an ACP agent on stdin/stdout (docs/protocol.md).
//! Only protocol messages are written to the output; logs go through
//! [`WorkerOptions::log`] (stderr, which the daemon captures). The worker runs until its
//! input closes, then cancels a running turn, closes the record and returns.

mod choices;
mod outbox;
mod permission;
mod prompt;
mod server;
mod session_meta;
mod tool_view;
mod updates;

use kestrel_model::ClientOptions;
use kestrel_protocol::Mode;
use kestrel_protocol::jsonrpc::Connection;
use kestrel_store::KestrelHome;
use outbox::Outbox;
use server::Server;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};

/// Where the worker's log lines go (never stdout).
pub type Logger = Arc<dyn Fn(&str) + Send + Sync>;

/// A cancelled turn normally ends at once; this long is waited for it on shutdown.
const TURN_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long queued output may take to be written on shutdown.
const OUTPUT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What the worker runs with, decided by its host from the environment.
#[derive(Clone)]
pub struct WorkerOptions {
    pub home: KestrelHome,
    /// `provider/model` overriding config and record (`KESTREL_MODEL`).
    pub model: Option<String>,
    /// The mode overriding config `mode` (`KESTREL_MODE`); `ask` when neither is set.
    pub mode: Option<Mode>,
    pub client_options: ClientOptions,
    pub log: Logger,
}

/// Serves ACP on `input`/`output` until `input` closes. A turn still running then is
/// cancelled and recorded as such before this returns.
pub async fn run_worker<R, W>(options: WorkerOptions, input: R, output: W)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (output, written) = SignalOnShutdown::new(output);
    let (connection, mut incoming) = Connection::start(input, output);
    let (outbox, outbox_task) = Outbox::start(connection.clone());
    let (finished, mut turns) = mpsc::channel(1);
    let mut server = Server::new(options, connection, outbox, finished);
    loop {
        tokio::select! {
            // A finished turn is taken back before the next request is looked at, so a
            // prompt sent right after an answer never finds the session busy.
            biased;
            Some(done) = turns.recv() => server.turn_finished(done).await,
            message = incoming.recv() => match message {
                Some(message) => server.handle(message).await,
                None => break,
            },
        }
    }
    if server.cancel_turn()
        && let Ok(Some(done)) = tokio::time::timeout(TURN_SHUTDOWN_GRACE, turns.recv()).await
    {
        server.turn_finished(done).await;
    }
    // Dropping the server closes the record (and its lock) and every connection handle,
    // so the writer drains what is queued and shuts the output down.
    drop(server);
    drop(turns);
    let _ = tokio::time::timeout(OUTPUT_SHUTDOWN_GRACE, async {
        let _ = outbox_task.await;
        let _ = written.await;
    })
    .await;
}

/// An output that reports when it has been shut down, i.e. everything queued before was
/// written: the connection's writer shuts its output down once every handle is gone.
struct SignalOnShutdown<W> {
    inner: W,
    done: Option<oneshot::Sender<()>>,
}

impl<W> SignalOnShutdown<W> {
    fn new(inner: W) -> (Self, oneshot::Receiver<()>) {
        let (done, wait) = oneshot::channel();
        (Self { inner, done: Some(done) }, wait)
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for SignalOnShutdown<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_shutdown(cx);
        if result.is_ready()
            && let Some(done) = self.done.take()
        {
            let _ = done.send(());
        }
        result
    }
}

impl<W> Drop for SignalOnShutdown<W> {
    fn drop(&mut self) {
        // A writer that stopped on an error never shuts down: say so anyway.
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}
