//! The thread a loopback server of the testkit runs on: its own current-thread tokio
//! runtime (so sync tests and async tests alike can use the server) accepting on a bound
//! listener and handing each connection to the server's handler, until dropped. Dropping
//! it joins the thread, which closes the listener and every open connection first.

use std::future::Future;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// A server's accept loop on its own thread. Dropping it stops it.
pub(crate) struct ServerThread {
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ServerThread {
    /// Serves `listener` on a thread called `name`, driven by `runtime`: `serve` gets each
    /// accepted connection as a task of that runtime. Fails if the thread cannot start or
    /// the listener cannot join the runtime.
    pub fn start<Serve, Served>(
        name: &str,
        listener: std::net::TcpListener,
        runtime: tokio::runtime::Runtime,
        serve: Serve,
    ) -> std::io::Result<ServerThread>
    where
        Serve: Fn(TcpStream) -> Served + Send + 'static,
        Served: Future<Output = ()> + Send + 'static,
    {
        listener.set_nonblocking(true)?;
        let (shutdown, shutdown_received) = oneshot::channel();
        let (ready, is_ready) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new().name(name.to_owned()).spawn(move || {
            runtime.block_on(async move {
                // The listener must be registered inside the runtime that drives it.
                let listener = match TcpListener::from_std(listener) {
                    Ok(listener) => listener,
                    Err(error) => {
                        let _ = ready.send(Err(error));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                accept_loop(listener, serve, shutdown_received).await;
            });
        })?;
        is_ready
            .recv()
            .map_err(|_| std::io::Error::other(format!("the {name} thread ended at start")))??;
        Ok(ServerThread { shutdown: Some(shutdown), thread: Some(thread) })
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop<Serve, Served>(
    listener: TcpListener,
    serve: Serve,
    mut shutdown: oneshot::Receiver<()>,
) where
    Serve: Fn(TcpStream) -> Served,
    Served: Future<Output = ()> + Send + 'static,
{
    loop {
        tokio::select! {
            // A send or a dropped sender both mean stop.
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(serve(stream));
                }
                // Out of descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            },
        }
    }
}
