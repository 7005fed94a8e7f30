//! `shell` in the OS sandbox, for real: in auto a write outside the workspace fails
//! and succeeds in yolo, the workspace and /tmp are writable, the network follows
//! `[sandbox] network`, and without any sandbox auto refuses to run instead of running
//! unconfined. Directories live outside /tmp, which is writable (`unconfined.rs` of
//! kestrel-platform's tests).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{err, ok};
use kestrel_platform::{Sandbox, SandboxUnavailable};
use kestrel_protocol::Mode;
use kestrel_tools::{ShellTool, ToolContext, ToolOutput, ToolRegistry, Unconfined};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[path = "../../kestrel-platform/tests/support/unconfined.rs"]
mod unconfined;

fn scratch() -> tempfile::TempDir {
    unconfined::unconfined_scratch()
}

fn context(root: &Path, mode: Mode, network: bool) -> ToolContext {
    ToolContext { network, ..common::context(root, mode) }
}

async fn shell(tool: ShellTool, context: &ToolContext, command: &str) -> ToolOutput {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(tool));
    let arguments = json!({ "command": command }).to_string();
    tokio::time::timeout(Duration::from_secs(60), registry.call("shell", &arguments, context))
        .await
        .expect("the command finishes")
}

fn tools() -> Vec<(String, ShellTool)> {
    let landlock = Sandbox::landlock().expect("Landlock works on the test machine");
    let bubblewrap = Sandbox::bubblewrap().expect("bubblewrap is installed (.ci/run)");
    vec![
        ("default".into(), ShellTool::default()),
        (landlock.describe(), ShellTool::default().with_sandbox(Ok(landlock))),
        (bubblewrap.describe(), ShellTool::default().with_sandbox(Ok(bubblewrap))),
    ]
}

#[tokio::test]
async fn in_auto_a_write_outside_the_workspace_fails_and_in_yolo_it_succeeds() {
    for (name, tool) in tools() {
        let workspace = scratch();
        let outside = scratch();
        let target = outside.path().join("escape.txt");
        let command = format!("echo escaped > {}", target.display());

        let output =
            shell(tool.clone(), &context(workspace.path(), Mode::Auto, false), &command).await;
        let content = err(&output);
        assert!(
            content.contains("Permission denied") || content.contains("Read-only"),
            "{name}: {content}"
        );
        assert!(content.contains("runs in a sandbox"), "{name}: the model is told why: {content}");
        assert!(!target.exists(), "{name}");

        let output =
            shell(tool.clone(), &context(workspace.path(), Mode::Yolo, false), &command).await;
        ok(&output);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "escaped\n", "{name}");
    }
}

#[tokio::test]
async fn in_auto_the_workspace_and_tmp_are_writable() {
    for (name, tool) in tools() {
        let workspace = scratch();
        let ctx = context(workspace.path(), Mode::Auto, false);
        let temp = tempfile::Builder::new().prefix("kestrel-shell-").tempdir_in("/tmp").unwrap();
        let command = format!(
            "mkdir -p src && echo fn > src/lib.rs && echo t > {0}/t.txt && cat src/lib.rs {0}/t.txt",
            temp.path().display()
        );
        let output = shell(tool, &ctx, &command).await;
        assert!(ok(&output).contains("fn\nt\n"), "{name}: {}", output.content);
        assert!(workspace.path().join("src/lib.rs").is_file(), "{name}");
    }
}

#[tokio::test]
async fn the_network_is_off_in_auto_unless_the_setting_allows_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let command = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    for (name, tool) in tools() {
        let workspace = scratch();
        let output =
            shell(tool.clone(), &context(workspace.path(), Mode::Auto, false), &command).await;
        assert!(!err(&output).contains("connected\n"), "{name}");
        let output =
            shell(tool.clone(), &context(workspace.path(), Mode::Auto, true), &command).await;
        assert!(ok(&output).contains("connected"), "{name}: {}", output.content);
        // Outside auto the sandbox is not used at all.
        let output = shell(tool, &context(workspace.path(), Mode::Yolo, false), &command).await;
        assert!(ok(&output).contains("connected"), "{name}");
    }
}

#[tokio::test]
async fn read_only_mode_confines_even_a_command_that_got_through() {
    let workspace = scratch();
    let output = shell(
        ShellTool::default(),
        &context(workspace.path(), Mode::ReadOnly, false),
        "touch made.txt",
    )
    .await;
    err(&output);
    assert!(!workspace.path().join("made.txt").exists());
}

#[tokio::test]
async fn without_a_sandbox_auto_refuses_and_ask_runs_unconfined() {
    let none = || {
        ShellTool::default()
            .with_sandbox(Err(SandboxUnavailable { reason: "none on this test machine".into() }))
    };
    let workspace = scratch();
    let output =
        shell(none(), &context(workspace.path(), Mode::Auto, false), "touch ran.txt").await;
    let content = err(&output);
    assert!(content.starts_with("no sandbox available: none on this test machine"), "{content}");
    assert!(!workspace.path().join("ran.txt").exists(), "it must not run unconfined");

    // Approved calls run as in ask mode: unconfined.
    let approved = ToolContext {
        unconfined: Unconfined::Approved,
        ..context(workspace.path(), Mode::Ask, false)
    };
    let output = shell(none(), &approved, "touch ran.txt").await;
    ok(&output);
    assert!(workspace.path().join("ran.txt").exists());
    // Read-only mode runs its (parser-checked) commands even without a sandbox.
    let output = shell(none(), &context(workspace.path(), Mode::ReadOnly, false), "ls").await;
    assert!(ok(&output).contains("ran.txt"));
}

#[tokio::test]
async fn in_ask_known_read_only_commands_run_confined_and_approved_ones_do_not() {
    // The seccomp filter shows in /proc/self/status: mode 2 inside the sandbox.
    let status = "grep '^Seccomp:' /proc/self/status";
    for (name, tool) in tools() {
        let workspace = scratch();
        let ctx = context(workspace.path(), Mode::Ask, false);
        let output = shell(tool.clone(), &ctx, status).await;
        assert!(ok(&output).contains("Seccomp:\t2"), "{name}: {}", output.content);
        // The tool does not judge the line again: what the policy let through unasked
        // runs sandboxed even when it is not read-only now (a repository's config may
        // have changed since the decision).
        let output = shell(tool.clone(), &ctx, &format!("touch made.txt; {status}")).await;
        assert!(output.content.contains("Seccomp:\t2"), "{name}: {}", output.content);
        assert!(!workspace.path().join("made.txt").exists(), "{name}");
        // Not known read-only, so the policy asked and the user approved: unconfined.
        let approved = ToolContext { unconfined: Unconfined::Approved, ..ctx.clone() };
        let output = shell(tool, &approved, &format!("touch made.txt && {status}")).await;
        assert!(ok(&output).contains("Seccomp:\t0"), "{name}: {}", output.content);
        assert!(workspace.path().join("made.txt").exists(), "{name}");
    }
    // Without a sandbox, a read-only command still runs (unconfined).
    let none = ShellTool::default().with_sandbox(Err(SandboxUnavailable { reason: "none".into() }));
    let workspace = scratch();
    let output = shell(none, &context(workspace.path(), Mode::Ask, false), status).await;
    assert!(ok(&output).contains("Seccomp:\t0"), "{}", output.content);
}

#[tokio::test]
async fn in_auto_git_metadata_and_project_config_are_read_only_and_yolo_may_change_them() {
    for (name, tool) in tools() {
        let workspace = scratch();
        std::fs::create_dir_all(workspace.path().join(".git/hooks")).unwrap();
        std::fs::create_dir_all(workspace.path().join(".kestrel")).unwrap();
        let hook = workspace.path().join(".git/hooks/pre-commit");
        let config = workspace.path().join(".kestrel/config.toml");
        let command = "echo evil > .git/hooks/pre-commit; echo evil > .kestrel/config.toml; \
                       echo fine > notes.txt && cat notes.txt";
        let output =
            shell(tool.clone(), &context(workspace.path(), Mode::Auto, false), command).await;
        assert!(output.content.contains("fine"), "{name}: {}", output.content);
        assert!(!hook.exists() && !config.exists(), "{name}: {}", output.content);

        let output = shell(tool, &context(workspace.path(), Mode::Yolo, false), command).await;
        ok(&output);
        assert!(hook.exists() && config.exists(), "{name}");
    }
}

#[tokio::test]
async fn in_auto_a_command_creating_git_or_kestrel_metadata_is_reported_in_its_result() {
    for (name, tool) in tools() {
        let workspace = scratch();
        let ctx = context(workspace.path(), Mode::Auto, false);
        let command = "git init -q . && git config core.fsmonitor 'touch PWNED' \
                       && mkdir -p a/b .kestrel && git init -q a/b && echo DONE";
        let output = shell(tool.clone(), &ctx, command).await;
        let content = ok(&output);
        assert!(content.contains("DONE"), "{name}: {content}");
        assert!(
            content.contains("Warning: this command created .git, .kestrel, a/b/.git,"),
            "{name}: {content}"
        );
        assert!(content.contains("runs outside the sandbox"), "{name}: {content}");
        // Nothing new: no warning. And the new .git is read-only from now on.
        let output = shell(tool.clone(), &ctx, "git config core.fsmonitor false").await;
        assert!(!output.content.contains("Warning"), "{name}: {}", output.content);
        assert!(output.is_error, "{name}: {}", output.content);
    }
}
