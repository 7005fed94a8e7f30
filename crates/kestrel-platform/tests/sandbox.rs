//! The sandbox for real, with each Linux backend: writes inside the writable roots
//! work, writes elsewhere fail, reads work everywhere, and the network is off unless
//! the policy allows it. The directories live outside /tmp (`support/unconfined.rs`),
//! because /tmp itself is writable in the sandbox.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kestrel_platform::SandboxPolicy;
use std::path::{Path, PathBuf};
use support::{backends, run, run_in_workspace, scratch};

fn policy(workspace: &Path, network: bool) -> SandboxPolicy {
    SandboxPolicy::workspace_write(workspace, network)
}

#[tokio::test]
async fn writes_inside_the_workspace_and_temp_work_and_outside_fail() {
    for sandbox in backends() {
        let name = sandbox.describe();
        let workspace = scratch();
        let outside = scratch();
        let target = outside.path().join("escape.txt");
        let policy = policy(workspace.path(), false);

        let (ok, output) = run(
            &sandbox,
            &policy,
            workspace.path(),
            "mkdir -p sub && echo in > sub/a.txt && mv sub/a.txt b.txt && rm -r sub && cat b.txt",
        )
        .await;
        // (A login shell's profile may complain about what it cannot write in $HOME.)
        assert!(ok, "{name}: {output}");
        assert!(output.starts_with("in\n"), "{name}: {output}");

        let temp_file =
            tempfile::Builder::new().prefix("kestrel-sandbox-").tempfile_in("/tmp").unwrap();
        let script = format!("echo tmp > {0} && cat {0}", temp_file.path().display());
        let (ok, output) = run(&sandbox, &policy, workspace.path(), &script).await;
        assert!(ok && output.starts_with("tmp\n"), "{name}: /tmp must be writable: {output}");

        let script = format!("echo out > {}", target.display());
        let (ok, output) = run(&sandbox, &policy, workspace.path(), &script).await;
        assert!(!ok, "{name}: the write outside must fail");
        assert!(
            output.contains("Permission denied") || output.contains("Read-only file system"),
            "{name}: {output}"
        );
        assert!(!target.exists(), "{name}");

        // Deleting and renaming outside fail too; reading outside works.
        std::fs::write(outside.path().join("keep.txt"), "kept\n").unwrap();
        let script = format!(
            "cat {0}/keep.txt; rm -f {0}/keep.txt; mv {0}/keep.txt {0}/moved.txt",
            outside.path().display()
        );
        let (_, output) = run(&sandbox, &policy, workspace.path(), &script).await;
        assert!(output.starts_with("kept\n"), "{name}: reads work everywhere: {output}");
        assert_eq!(
            std::fs::read_to_string(outside.path().join("keep.txt")).unwrap(),
            "kept\n",
            "{name}"
        );

        // The sandbox confines the command, never this process.
        std::fs::write(&target, "parent").unwrap();
    }
}

#[tokio::test]
async fn standard_devices_and_descriptors_stay_usable() {
    for sandbox in backends() {
        let name = sandbox.describe();
        let workspace = scratch();
        let script = "echo a > /dev/null && echo b > /dev/stdout && echo c >&2 && head -c 4 /dev/zero | wc -c";
        let (ok, output) = run_in_workspace(&sandbox, workspace.path(), script).await;
        assert!(ok, "{name}: {output}");
        assert!(
            output.contains('b') && output.contains('c') && output.contains('4'),
            "{name}: {output}"
        );
    }
}

#[tokio::test]
async fn read_only_policy_keeps_the_workspace_unchanged() {
    for sandbox in backends() {
        let name = sandbox.describe();
        let workspace = scratch();
        let policy = SandboxPolicy::read_only(false);
        let (ok, _) = run(&sandbox, &policy, workspace.path(), "echo x > new.txt").await;
        assert!(!ok, "{name}");
        assert!(!workspace.path().join("new.txt").exists(), "{name}");
        let (ok, output) = run(&sandbox, &policy, workspace.path(), "ls -a").await;
        assert!(ok, "{name}: {output}");
    }
}

#[tokio::test]
async fn network_is_off_unless_the_policy_allows_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    for sandbox in backends() {
        let name = sandbox.describe();
        assert!(sandbox.isolates_network(), "{name}");
        let workspace = scratch();
        let (ok, output) =
            run(&sandbox, &policy(workspace.path(), false), workspace.path(), &script).await;
        assert!(!ok, "{name}: connected with the network off: {output}");
        assert!(!output.contains("connected\n"), "{name}");

        let (ok, output) =
            run(&sandbox, &policy(workspace.path(), true), workspace.path(), &script).await;
        assert!(ok, "{name}: no connection with the network on: {output}");
        assert!(output.contains("connected"), "{name}");
    }
}

#[test]
fn scratch_paths_include_tmp_and_the_null_device() {
    let paths = SandboxPolicy::scratch_paths();
    assert!(paths.contains(&PathBuf::from("/tmp")));
    assert!(paths.contains(&PathBuf::from("/dev/null")));
    let policy = SandboxPolicy::workspace_write(Path::new("/w"), true);
    assert_eq!(policy.writable[0], PathBuf::from("/w"));
    assert!(policy.network);
}

/// What a contained command starts ends with it, a `setsid -f` daemon too (bubblewrap's
/// PID namespace, and Landlock's own), and its exit status comes through.
#[tokio::test]
async fn what_a_contained_command_leaves_running_ends_with_it() {
    for sandbox in backends() {
        let name = sandbox.describe();
        let workspace = scratch();
        let contained = SandboxPolicy { contained: true, ..policy(workspace.path(), false) };
        let script = "setsid -f sh -c 'while :; do echo x >> tick; sleep 0.05; done' \
                      </dev/null >/dev/null 2>&1; until [ -s tick ]; do sleep 0.05; done; \
                      echo started";
        let (ok, output) = run(&sandbox, &contained, workspace.path(), script).await;
        assert!(ok && output.contains("started"), "{name}: {output}");
        let tick = workspace.path().join("tick");
        let size = || std::fs::metadata(&tick).unwrap().len();
        let before = size();
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        assert_eq!(size(), before, "{name}: a process the command left is still running");

        let mut command = sandbox.command("exit 3", &contained).unwrap();
        let status = command.current_dir(workspace.path()).status().await.unwrap();
        assert_eq!(status.code(), Some(3), "{name}");

        // A timeout's SIGTERM to its process group ends it, no SIGKILL needed, though
        // the caller handles SIGTERM itself (as Kestrel does).
        extern "C" fn caught(_: libc::c_int) {}
        // SAFETY: a handler that does nothing, installed for this test process.
        unsafe { libc::signal(libc::SIGTERM, caught as *const () as libc::sighandler_t) };
        let mut command = sandbox.command("sleep 100", &contained).unwrap();
        command.current_dir(workspace.path()).stdin(std::process::Stdio::null());
        let mut group = kestrel_platform::spawn_group(&mut command).unwrap();
        let pid = group.child_mut().id().unwrap();
        // SAFETY: kill(2) of the process group this test started.
        unsafe { libc::kill(-(pid as i32), libc::SIGTERM) };
        let waited = tokio::time::timeout(std::time::Duration::from_secs(30), group.wait());
        let status = waited.await.expect("SIGTERM ends it").unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{name}: {status:?}");
    }
}
