//! Sandbox tests' harness: scratch directories outside every path the sandbox leaves
//! writable (`unconfined.rs`), both Linux backends, and commands run in their
//! own process group with their output collected. Every wait is bounded.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use kestrel_platform::{Sandbox, SandboxKind, SandboxPolicy, spawn_group};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

mod unconfined;

/// A fresh directory outside the sandbox's scratch paths.
pub fn scratch() -> tempfile::TempDir {
    unconfined::unconfined_scratch()
}

/// Landlock and bubblewrap, both of which the test machine must have.
pub fn backends() -> Vec<Sandbox> {
    let landlock = Sandbox::landlock().expect("Landlock works on the test machine");
    let bubblewrap =
        Sandbox::bubblewrap().expect("bubblewrap is installed on the test machine (.ci/run)");
    assert_eq!(landlock.kind(), SandboxKind::Landlock);
    assert_eq!(bubblewrap.kind(), SandboxKind::Bubblewrap);
    vec![landlock, bubblewrap]
}

/// Spawns `command` in its group, returns (success, stdout+stderr) within a minute.
pub async fn output_of(mut command: Command) -> (bool, String) {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let group = spawn_group(&mut command).unwrap();
    tokio::time::timeout(Duration::from_secs(60), async move {
        let mut group = group;
        let child = group.child_mut();
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (a, b) = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
        a.unwrap();
        b.unwrap();
        let status = group.wait().await.unwrap();
        out.extend(err);
        (status.success(), String::from_utf8_lossy(&out).into_owned())
    })
    .await
    .expect("the command finishes")
}

/// Runs `script` sandboxed under `policy` in `dir`; returns (success, stdout+stderr).
pub async fn run(
    sandbox: &Sandbox,
    policy: &SandboxPolicy,
    dir: &Path,
    script: &str,
) -> (bool, String) {
    let mut command = sandbox.command(script, policy).unwrap();
    command.current_dir(dir);
    output_of(command).await
}

/// Runs `script` in `workspace` under the usual policy there: the workspace writable,
/// the network off.
pub async fn run_in_workspace(sandbox: &Sandbox, workspace: &Path, script: &str) -> (bool, String) {
    run(sandbox, &SandboxPolicy::workspace_write(workspace, false), workspace, script).await
}
