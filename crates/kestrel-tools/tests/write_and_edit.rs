mod common;

use common::{call, context, err, ok};
use kestrel_protocol::Mode;
use serde_json::json;
use std::fs;

#[tokio::test]
async fn write_file_creates_parents_and_reports_created_then_overwritten_with_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output =
        call(&ctx, "write_file", json!({"path": "deep/er/new.txt", "content": "a\nb\n"})).await;
    assert!(ok(&output).contains("Created deep/er/new.txt (2 lines"), "{}", output.content);
    assert_eq!(fs::read_to_string(dir.path().join("deep/er/new.txt")).unwrap(), "a\nb\n");
    assert_eq!(output.changes.len(), 1);
    assert_eq!(output.changes[0].path, dir.path().join("deep/er/new.txt"));
    assert!(output.changes[0].diff.as_deref().unwrap().contains("+a\n+b\n"));

    let output =
        call(&ctx, "write_file", json!({"path": "deep/er/new.txt", "content": "a\nc\n"})).await;
    assert!(ok(&output).contains("Overwrote"), "{}", output.content);
    let diff = output.changes[0].diff.as_deref().unwrap();
    assert!(diff.contains("--- a/deep/er/new.txt") && diff.contains("-b\n+c\n"), "{diff}");
}

#[tokio::test]
async fn write_through_a_symlink_leaving_the_workspace_is_refused_in_auto() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("escape")).unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output =
        call(&ctx, "write_file", json!({"path": "escape/pwned.txt", "content": "x"})).await;
    assert!(err(&output).contains("outside the workspace"), "{}", output.content);
    assert!(!outside.path().join("pwned.txt").exists());
}

#[tokio::test]
async fn writes_are_refused_in_read_only_mode() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::ReadOnly);
    let output = call(&ctx, "write_file", json!({"path": "a.txt", "content": "x"})).await;
    assert!(err(&output).contains("read-only"));
    fs::write(dir.path().join("b.txt"), "old").unwrap();
    let output =
        call(&ctx, "edit_file", json!({"path": "b.txt", "old_string": "old", "new_string": "new"}))
            .await;
    assert!(err(&output).contains("read-only"));
    assert_eq!(fs::read_to_string(dir.path().join("b.txt")).unwrap(), "old");
}

#[tokio::test]
async fn write_file_into_a_directory_path_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("d")).unwrap();
    let output =
        call(&context(dir.path(), Mode::Auto), "write_file", json!({"path": "d", "content": "x"}))
            .await;
    assert!(err(&output).contains("directory"));
}

#[tokio::test]
async fn edit_file_replaces_one_exact_match_and_reports_the_diff() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("m.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(
        &ctx,
        "edit_file",
        json!({"path": "m.rs", "old_string": "fn b() {}", "new_string": "fn b() { a() }"}),
    )
    .await;
    assert!(ok(&output).contains("line 2"), "{}", output.content);
    assert_eq!(fs::read_to_string(dir.path().join("m.rs")).unwrap(), "fn a() {}\nfn b() { a() }\n");
    let diff = output.changes[0].diff.as_deref().unwrap();
    assert!(diff.contains("-fn b() {}\n+fn b() { a() }\n"), "{diff}");
}

#[tokio::test]
async fn edit_file_with_zero_matches_fails_and_hints_at_whitespace() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("m.py"), "def f():\n\treturn 1\n").unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(
        &ctx,
        "edit_file",
        json!({"path": "m.py", "old_string": "def f():\n    return 1", "new_string": "x"}),
    )
    .await;
    let message = err(&output);
    assert!(message.contains("not found"), "{message}");
    assert!(message.contains("whitespace") && message.contains("line 1"), "{message}");

    let output = call(
        &ctx,
        "edit_file",
        json!({"path": "m.py", "old_string": "nothing", "new_string": "x"}),
    )
    .await;
    let message = err(&output);
    assert!(message.contains("not found") && !message.contains("whitespace"), "{message}");
}

#[tokio::test]
async fn edit_file_with_two_matches_needs_context_or_replace_all() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("t.txt"), "x = 1\ny = 2\nx = 1\n").unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let args = json!({"path": "t.txt", "old_string": "x = 1", "new_string": "x = 3"});
    let output = call(&ctx, "edit_file", args).await;
    let message = err(&output);
    assert!(message.contains("2 times") && message.contains("lines 1, 3"), "{message}");
    assert!(message.contains("replace_all"), "{message}");
    assert_eq!(fs::read_to_string(dir.path().join("t.txt")).unwrap(), "x = 1\ny = 2\nx = 1\n");

    let args =
        json!({"path": "t.txt", "old_string": "x = 1", "new_string": "x = 3", "replace_all": true});
    let output = call(&ctx, "edit_file", args).await;
    assert!(ok(&output).contains("2 occurrences"));
    assert_eq!(fs::read_to_string(dir.path().join("t.txt")).unwrap(), "x = 3\ny = 2\nx = 3\n");
}

#[tokio::test]
async fn edit_file_keeps_a_crlf_file_crlf() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("w.txt"), "one\r\ntwo\r\nthree\r\n").unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let args = json!({"path": "w.txt", "old_string": "one\ntwo\n", "new_string": "1\n2\nextra\n"});
    let output = call(&ctx, "edit_file", args).await;
    ok(&output);
    assert_eq!(
        fs::read_to_string(dir.path().join("w.txt")).unwrap(),
        "1\r\n2\r\nextra\r\nthree\r\n"
    );
}

#[tokio::test]
async fn edit_file_rejects_identical_strings_empty_old_string_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "same").unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(
        &ctx,
        "edit_file",
        json!({"path": "a.txt", "old_string": "same", "new_string": "same"}),
    )
    .await;
    assert!(err(&output).contains("the same"));
    let output =
        call(&ctx, "edit_file", json!({"path": "a.txt", "old_string": "", "new_string": "x"}))
            .await;
    assert!(err(&output).contains("empty"));
    let output =
        call(&ctx, "edit_file", json!({"path": "no.txt", "old_string": "a", "new_string": "b"}))
            .await;
    assert!(err(&output).contains("write_file"));
}

#[tokio::test]
async fn missing_arguments_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "write_file", json!({"path": "a.txt"})).await;
    let message = err(&output);
    assert!(message.contains("write_file") && message.contains("content"), "{message}");
}
