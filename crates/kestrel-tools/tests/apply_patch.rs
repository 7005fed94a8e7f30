//! The apply_patch engine and tool through their public API: summaries and diffs,
//! atomicity (also when a write fails half-way), line endings, permissions, and the
//! tool's workspace confinement.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use common::context;
use kestrel_protocol::Mode;
use kestrel_tools::apply_patch::{
    ApplyPatchTool, ChangeKind, HunkFailure, PatchError, PatchPlan, apply_patch, apply_patch_with,
    parse_patch,
};
use kestrel_tools::{Tool, ToolContext, ToolOutput};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn patch(body: &str) -> String {
    format!("*** Begin Patch\n{body}*** End Patch\n")
}

fn write(root: &Path, path: &str, content: &str) {
    let path = root.join(path);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

fn read(root: &Path, path: &str) -> String {
    fs::read_to_string(root.join(path)).unwrap()
}

/// Every file under `root` with its content, sorted; directories listed with a `/`.
fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            if path.is_dir() {
                out.push((format!("{name}/"), Vec::new()));
                stack.push(path);
            } else {
                out.push((name, fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_summary_lists_each_file_once_with_a_unified_diff() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/lib.rs", "pub fn a() {}\n");
    write(dir.path(), "old.txt", "bye\n");
    write(dir.path(), "from.txt", "moving\n");
    let summary = apply_patch(
        dir.path(),
        &patch(
            "*** Add File: new.txt\n+hi\n*** Update File: src/lib.rs\n@@\n-pub fn a() {}\n\
             +pub fn b() {}\n*** Delete File: old.txt\n*** Update File: from.txt\n\
             *** Move to: to.txt\n",
        ),
    )
    .unwrap();
    assert_eq!(summary.to_string(), "A new.txt\nM src/lib.rs\nD old.txt\nR from.txt -> to.txt");
    let kinds: Vec<&ChangeKind> = summary.files.iter().map(|file| &file.kind).collect();
    assert_eq!(
        kinds,
        [
            &ChangeKind::Added,
            &ChangeKind::Modified,
            &ChangeKind::Deleted,
            &ChangeKind::Moved { from: "from.txt".into() }
        ]
    );
    let lib = &summary.files[1];
    assert_eq!(lib.absolute, dir.path().join("src/lib.rs"));
    let diff = lib.diff.as_deref().unwrap();
    assert!(diff.starts_with("--- a/src/lib.rs\n+++ b/src/lib.rs\n"), "{diff}");
    assert!(diff.contains("-pub fn a() {}\n+pub fn b() {}\n"), "{diff}");
    assert!(summary.files[0].diff.as_deref().unwrap().contains("--- /dev/null\n+++ b/new.txt"));
    assert!(summary.files[2].diff.as_deref().unwrap().contains("+++ /dev/null"));
    assert_eq!(read(dir.path(), "to.txt"), "moving\n");
    assert!(!dir.path().join("from.txt").exists());
}

#[test]
fn a_plan_shows_the_changes_without_writing_them() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "one\n");
    let parsed = parse_patch(&patch("*** Update File: a.txt\n@@\n-one\n+two\n")).unwrap();
    let plan = PatchPlan::new(&parsed, |path| Ok(dir.path().join(path))).unwrap();
    assert_eq!(plan.summary().to_string(), "M a.txt");
    assert_eq!(read(dir.path(), "a.txt"), "one\n");
    plan.commit().unwrap();
    assert_eq!(read(dir.path(), "a.txt"), "two\n");
}

#[test]
fn a_failing_hunk_leaves_every_file_untouched_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "keep.txt", "keep\n");
    write(dir.path(), "code.py", "def f():\n    return 1\n");
    let before = snapshot(dir.path());
    let error = apply_patch(
        dir.path(),
        &patch(
            "*** Add File: new.txt\n+x\n*** Delete File: keep.txt\n*** Update File: code.py\n\
             @@\n def f():\n-    return 1\n+    return 2\n@@\n-    return 3\n+    return 4\n",
        ),
    )
    .unwrap_err();
    assert_eq!(snapshot(dir.path()), before);
    let PatchError::Hunk { path, hunk, failure } = &error else { panic!("{error:?}") };
    assert_eq!((path.as_str(), *hunk), ("code.py", 2));
    assert!(matches!(failure, HunkFailure::ContextNotFound { .. }));
    let message = error.to_string();
    assert!(message.starts_with("cannot update code.py, hunk 2:"), "{message}");
    assert!(message.contains("\n        return 3"), "{message}");
}

#[test]
fn a_write_failing_half_way_restores_what_was_already_written() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    write(dir.path(), "gone.txt", "gone\n");
    // A file where the patch needs a directory: only the write itself can fail on it.
    write(dir.path(), "blocker", "i am a file\n");
    let before = snapshot(dir.path());
    let error = apply_patch(
        dir.path(),
        &patch(
            "*** Add File: fresh/dir/new.txt\n+new\n*** Update File: a.txt\n@@\n-a\n+A\n\
             *** Delete File: gone.txt\n*** Add File: blocker/inside.txt\n+x\n",
        ),
    )
    .unwrap_err();
    let PatchError::WriteFailed { path, rollback, .. } = &error else { panic!("{error:?}") };
    assert_eq!(path, "blocker/inside.txt");
    assert!(rollback.contains("restored"), "{rollback}");
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_refused_path_stops_the_patch_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let error = apply_patch_with(
        &patch("*** Add File: fine.txt\n+ok\n*** Add File: secret/key\n+no\n"),
        |path| {
            if path.starts_with("secret") {
                Err(format!("{path} is off limits"))
            } else {
                Ok(dir.path().join(path))
            }
        },
    )
    .unwrap_err();
    assert!(matches!(&error, PatchError::PathRefused { path, .. } if path == "secret/key"));
    assert!(error.to_string().contains("off limits"));
    assert!(snapshot(dir.path()).is_empty());
}

#[test]
fn crlf_files_keep_crlf_and_added_files_use_lf() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "win.txt", "one\r\ntwo\r\nthree\r\n");
    apply_patch(
        dir.path(),
        &patch("*** Update File: win.txt\n@@\n one\n-two\n+2\n+2b\n three\n*** Add File: unix.txt\n+a\n+b\n"),
    )
    .unwrap();
    assert_eq!(read(dir.path(), "win.txt"), "one\r\n2\r\n2b\r\nthree\r\n");
    assert_eq!(read(dir.path(), "unix.txt"), "a\nb\n");
}

#[test]
fn ambiguous_context_is_an_error_listing_the_places() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "dup.txt", "x\ny\nx\ny\n");
    let error =
        apply_patch(dir.path(), &patch("*** Update File: dup.txt\n@@\n x\n-y\n+z\n")).unwrap_err();
    let PatchError::Hunk { failure, .. } = &error else { panic!("{error:?}") };
    assert_eq!(
        failure,
        &HunkFailure::Ambiguous { expected: vec!["x".into(), "y".into()], lines: vec![1, 3] }
    );
    assert_eq!(read(dir.path(), "dup.txt"), "x\ny\nx\ny\n");
}

#[test]
fn sources_must_be_files_and_updates_must_be_text() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("folder")).unwrap();
    fs::write(dir.path().join("blob.bin"), [0xff, 0xfe, 0x00, 0x41]).unwrap();
    let update = |path: &str| patch(&format!("*** Update File: {path}\n@@\n-a\n+b\n"));
    assert!(matches!(
        apply_patch(dir.path(), &update("folder")),
        Err(PatchError::IsDirectory { .. })
    ));
    assert!(matches!(apply_patch(dir.path(), &update("none")), Err(PatchError::NotFound { .. })));
    let error = apply_patch(dir.path(), &update("blob.bin")).unwrap_err();
    assert!(error.to_string().contains("not UTF-8"), "{error}");
    // Renaming or deleting a binary file needs no text.
    apply_patch(dir.path(), &patch("*** Update File: blob.bin\n*** Move to: b2.bin\n")).unwrap();
    assert_eq!(fs::read(dir.path().join("b2.bin")).unwrap(), [0xff, 0xfe, 0x00, 0x41]);
    apply_patch(dir.path(), &patch("*** Delete File: b2.bin\n")).unwrap();
    assert!(!dir.path().join("b2.bin").exists());
}

#[test]
fn a_syntax_error_names_the_line_of_the_patch() {
    let dir = tempfile::tempdir().unwrap();
    let error =
        apply_patch(dir.path(), "*** Begin Patch\n*** Add File: a\n+x\nnope\n*** End Patch")
            .unwrap_err();
    assert!(matches!(error, PatchError::Syntax { line: 4, .. }), "{error:?}");
    assert!(error.to_string().starts_with("invalid patch, line 4:"), "{error}");
}

#[cfg(unix)]
#[test]
fn updates_keep_the_mode_bits_and_write_through_symlinks() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "run.sh", "echo a\n");
    fs::set_permissions(dir.path().join("run.sh"), fs::Permissions::from_mode(0o751)).unwrap();
    write(dir.path(), "real.txt", "real\n");
    std::os::unix::fs::symlink("real.txt", dir.path().join("link.txt")).unwrap();
    apply_patch(
        dir.path(),
        &patch(
            "*** Update File: run.sh\n*** Move to: bin/run.sh\n@@\n-echo a\n+echo b\n\
             *** Update File: link.txt\n@@\n-real\n+changed\n",
        ),
    )
    .unwrap();
    let mode = fs::metadata(dir.path().join("bin/run.sh")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o751);
    assert!(fs::symlink_metadata(dir.path().join("link.txt")).unwrap().file_type().is_symlink());
    assert_eq!(read(dir.path(), "real.txt"), "changed\n");
}

#[test]
fn no_temporary_files_are_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    apply_patch(
        dir.path(),
        &patch("*** Update File: a.txt\n@@\n-a\n+b\n*** Add File: c/d.txt\n+d\n"),
    )
    .unwrap();
    let names: Vec<String> = snapshot(dir.path()).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["a.txt", "c/", "c/d.txt"]);
}

async fn call(context: &ToolContext, arguments: serde_json::Value) -> ToolOutput {
    tokio::time::timeout(Duration::from_secs(30), ApplyPatchTool.run(arguments, context))
        .await
        .expect("apply_patch did not finish within 30 s")
}

#[tokio::test]
async fn the_tool_applies_a_patch_and_reports_changes_with_diffs() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/lib.rs", "fn a() {}\n");
    let definition = ApplyPatchTool.definition();
    assert_eq!(definition.name, "apply_patch");
    assert_eq!(definition.parameters["required"], serde_json::json!(["patch"]));
    assert!(!ApplyPatchTool.is_read_only());
    let output = call(
        &context(dir.path(), Mode::Auto),
        serde_json::json!({"patch": patch("*** Add File: new.txt\n+hi\n*** Update File: src/lib.rs\n@@\n-fn a() {}\n+fn b() {}\n")}),
    )
    .await;
    assert!(!output.is_error, "{}", output.content);
    assert_eq!(output.content, "A new.txt\nM src/lib.rs");
    let paths: Vec<PathBuf> = output.changes.iter().map(|change| change.path.clone()).collect();
    assert_eq!(paths, [dir.path().join("new.txt"), dir.path().join("src/lib.rs")]);
    assert!(output.changes[1].diff.as_deref().unwrap().contains("+fn b() {}"));
    assert_eq!(read(dir.path(), "src/lib.rs"), "fn b() {}\n");
}

#[tokio::test]
async fn the_tool_refuses_paths_outside_the_workspace_including_move_targets() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("ws");
    write(&root, "inside.txt", "in\n");
    let ctx = context(&root, Mode::Auto);
    let before = snapshot(outer.path());

    let output =
        call(&ctx, serde_json::json!({"patch": patch("*** Add File: ../escape.txt\n+x\n")})).await;
    assert!(output.is_error);
    assert!(output.content.contains("outside the workspace"), "{}", output.content);

    let output = call(
        &ctx,
        serde_json::json!({"patch": patch("*** Update File: inside.txt\n*** Move to: ../moved.txt\n")}),
    )
    .await;
    assert!(output.is_error);
    assert!(output.content.contains("outside the workspace"), "{}", output.content);
    assert_eq!(snapshot(outer.path()), before);

    let yolo = context(&root, Mode::Yolo);
    let output =
        call(&yolo, serde_json::json!({"patch": patch("*** Add File: ../escape.txt\n+x\n")})).await;
    assert!(!output.is_error, "{}", output.content);
    assert_eq!(read(outer.path(), "escape.txt"), "x\n");
}

#[tokio::test]
async fn the_tool_writes_nothing_in_read_only_mode() {
    let dir = tempfile::tempdir().unwrap();
    let output = call(
        &context(dir.path(), Mode::ReadOnly),
        serde_json::json!({"patch": patch("*** Add File: a.txt\n+x\n")}),
    )
    .await;
    assert!(output.is_error);
    assert!(output.content.contains("read-only"), "{}", output.content);
    assert!(snapshot(dir.path()).is_empty());
}

#[tokio::test]
async fn the_tool_reports_bad_arguments_and_bad_patches_as_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, serde_json::json!({"diff": "x"})).await;
    assert!(output.is_error);
    assert!(output.content.contains("`patch`"), "{}", output.content);
    let output =
        call(&ctx, serde_json::json!({"patch": "*** Begin Patch\n*** Oops\n*** End Patch"})).await;
    assert!(output.is_error);
    assert!(output.content.contains("line 2"), "{}", output.content);
    assert!(output.changes.is_empty());
}
