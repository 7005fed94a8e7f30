mod common;

use common::{call, context, err, ok};
use kestrel_protocol::Mode;
use kestrel_tools::builtin_tools;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// True once `pid` no longer runs (gone, or a zombie waiting for a reaper that is not us).
fn gone(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
        .unwrap_or(true)
}

async fn assert_gone_soon(pid: i32) {
    for _ in 0..100 {
        if gone(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("process {pid} is still running");
}

async fn read_pid(path: &Path) -> i32 {
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no pid written to {}", path.display());
}

#[tokio::test]
async fn exit_code_and_combined_output_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "shell", json!({"command": "echo out; echo err >&2; exit 0"})).await;
    let content = ok(&output);
    assert!(content.starts_with("Exit code: 0\nOutput:\n"), "{content}");
    assert!(content.contains("out\n") && content.contains("err\n"), "{content}");

    let output = call(&ctx, "shell", json!({"command": "echo failing; exit 3"})).await;
    let content = err(&output);
    assert!(content.contains("Exit code: 3") && content.contains("failing"), "{content}");
}

#[tokio::test]
async fn runs_in_the_cwd_or_the_given_workdir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "shell", json!({"command": "pwd"})).await;
    let real = dir.path().canonicalize().unwrap();
    assert!(ok(&output).contains(&real.display().to_string()), "{}", output.content);
    let output = call(&ctx, "shell", json!({"command": "pwd", "workdir": "sub"})).await;
    assert!(ok(&output).contains(&real.join("sub").display().to_string()));
    let output = call(&ctx, "shell", json!({"command": "pwd", "workdir": "missing"})).await;
    assert!(err(&output).contains("not an existing directory"));
}

#[tokio::test]
async fn a_command_reading_stdin_gets_eof_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(
        &ctx,
        "shell",
        json!({"command": "cat; read line; echo \"read=$? done\"", "timeout_ms": 20000}),
    )
    .await;
    let content = ok(&output);
    assert!(content.contains("read=1 done"), "{content}");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_tree() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(
        &ctx,
        "shell",
        json!({"command": "sleep 1000 & echo \"child=$!\"; wait", "timeout_ms": 1500}),
    )
    .await;
    let content = err(&output);
    assert!(content.contains("timed out after 1500 ms"), "{content}");
    let pid: i32 = content
        .split("child=")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .and_then(|pid| pid.trim().parse().ok())
        .unwrap_or_else(|| panic!("no child pid in {content}"));
    assert_gone_soon(pid).await;
}

#[tokio::test]
async fn a_command_trapping_sigterm_is_still_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let ctx = context(dir.path(), Mode::Auto);
    let command = format!(
        "trap 'echo got TERM' TERM; (trap '' TERM; exec sleep 1000) & echo $! > {}; \
         while true; do sleep 0.1; done",
        pid_file.display()
    );
    let output = call(&ctx, "shell", json!({"command": command, "timeout_ms": 1500})).await;
    let content = err(&output);
    assert!(content.contains("timed out"), "{content}");
    assert!(content.contains("killed by signal 9"), "SIGKILL ended it: {content}");
    assert_gone_soon(read_pid(&pid_file).await).await;
}

#[tokio::test]
async fn cancel_kills_the_tree_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let ctx = context(dir.path(), Mode::Auto);
    let command = format!("sleep 1000 & echo $! > {}; wait", pid_file.display());
    let call_ctx = ctx.clone();
    let running = tokio::spawn(async move {
        builtin_tools().call("shell", &json!({"command": command}).to_string(), &call_ctx).await
    });
    let pid = read_pid(&pid_file).await;
    ctx.cancel.cancel();
    let output = tokio::time::timeout(Duration::from_secs(30), running).await.unwrap().unwrap();
    assert!(err(&output).contains("cancelled"), "{}", output.content);
    assert_gone_soon(pid).await;
}

#[tokio::test]
async fn a_background_child_holding_the_pipes_does_not_hang_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let ctx = context(dir.path(), Mode::Auto);
    let command = format!("sleep 1000 & echo $! > {}; echo started", pid_file.display());
    let output = call(&ctx, "shell", json!({"command": command})).await;
    let content = ok(&output);
    assert!(content.contains("Exit code: 0") && content.contains("started"), "{content}");
    assert!(content.contains("background processes"), "{content}");
    assert_gone_soon(read_pid(&pid_file).await).await;
}

#[tokio::test]
async fn a_background_child_with_its_own_output_keeps_running() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let ctx = context(dir.path(), Mode::Auto);
    let command =
        format!("sleep 1000 > /dev/null 2>&1 & echo $! > {}; echo started", pid_file.display());
    let output = call(&ctx, "shell", json!({"command": command})).await;
    assert!(!ok(&output).contains("background processes"), "{}", output.content);
    let pid = read_pid(&pid_file).await;
    assert!(!gone(pid), "a detached server survives the call");
    // SAFETY: plain kill of the process this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

#[tokio::test]
async fn a_hundred_megabytes_of_output_is_truncated_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let command =
        "echo FIRST; head -c 100000000 /dev/zero | tr '\\0' 'x' | fold -w 100; echo; echo LAST";
    let output = call(&ctx, "shell", json!({"command": command, "timeout_ms": 300000})).await;
    let content = ok(&output);
    assert!(content.len() < 64 * 1024, "output bounded, got {} bytes", content.len());
    assert!(content.contains("FIRST") && content.trim_end().ends_with("LAST"), "{:.300}", content);
    assert!(content.contains("bytes (") && content.contains("lines) omitted"), "{:.300}", content);
}

#[tokio::test]
async fn bad_arguments_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    assert!(err(&call(&ctx, "shell", json!({"command": "  "})).await).contains("empty"));
    let output = call(&ctx, "shell", json!({"command": "true", "timeout_ms": 0})).await;
    assert!(err(&output).contains("timeout_ms"));
    let output = call(&ctx, "shell", json!({"command": "true", "timeout_ms": "soon"})).await;
    assert!(err(&output).contains("timeout_ms"), "{}", output.content);
}

#[tokio::test]
async fn a_call_cancelled_before_it_starts_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    for mode in [Mode::Auto, Mode::Yolo] {
        let ctx = context(dir.path(), mode);
        ctx.cancel.cancel();
        let command = format!("touch {}", marker.display());
        let output = call(&ctx, "shell", json!({ "command": command })).await;
        assert!(err(&output).contains("nothing was run"), "{mode:?}: {}", output.content);
        assert!(!marker.exists(), "{mode:?}: the cancelled command ran");
    }
}
