//! `kestrel acp`: an ACP agent on stdio for editors, bridged byte for byte to the
//! daemon (started if needed), so an editor's sessions live in the daemon like any
//! other and can be attached from the TUI. Stdout carries protocol messages only.

use kestrel_daemon::client;
use kestrel_store::KestrelHome;
use std::process::ExitCode;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// After the editor closes stdin, how long answers still on their way are passed on.
const DRAIN: Duration = Duration::from_secs(5);

pub fn run() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(&error),
    };
    let code = runtime.block_on(bridge());
    // tokio's stdin reader is a blocking thread that may still wait for the editor:
    // do not wait for it, or a dead daemon looks like a hung agent.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

async fn bridge() -> ExitCode {
    let home = match KestrelHome::from_env() {
        Ok(home) => home,
        Err(error) => return fail(&error),
    };
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(error) => return fail(&error),
    };
    let stream = match client::connect_or_start(&home, &program).await {
        Ok(stream) => stream,
        Err(error) => return fail(&error),
    };
    let (mut from_daemon, mut to_daemon) = stream.into_split();
    let upstream = async {
        let mut stdin = tokio::io::stdin();
        let copied = tokio::io::copy(&mut stdin, &mut to_daemon).await;
        let _ = to_daemon.shutdown().await;
        copied
    };
    let downstream = async {
        let mut stdout = tokio::io::stdout();
        let copied = tokio::io::copy(&mut from_daemon, &mut stdout).await;
        let _ = stdout.flush().await;
        copied
    };
    tokio::pin!(upstream, downstream);
    tokio::select! {
        // The editor is done: pass on what is still coming, briefly, then exit.
        _ = &mut upstream => {
            let _ = tokio::time::timeout(DRAIN, &mut downstream).await;
            ExitCode::SUCCESS
        }
        copied = &mut downstream => match copied {
            Ok(_) => {
                eprintln!("kestrel acp: the daemon closed the connection (see $KESTREL_HOME/logs/daemon.log)");
                ExitCode::from(1)
            }
            Err(error) => fail(&error),
        },
    }
}

fn fail(error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("kestrel acp: {error}");
    ExitCode::from(1)
}
