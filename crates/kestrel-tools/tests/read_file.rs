mod common;

use common::{call, context, err, ok};
use kestrel_protocol::Mode;
use serde_json::json;
use std::fs;

#[tokio::test]
async fn lines_are_numbered_like_cat_n_and_paged_with_offset_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=10).map(|n| format!("line {n}\r\n")).collect();
    fs::write(dir.path().join("a.txt"), text).unwrap();
    let ctx = context(dir.path(), Mode::Auto);

    let output = call(&ctx, "read_file", json!({"path": "a.txt"})).await;
    let content = ok(&output);
    assert!(content.starts_with("     1\tline 1\n     2\tline 2\n"), "{content}");
    assert!(!content.contains('\r'), "CR is not shown: {content:?}");

    let output = call(&ctx, "read_file", json!({"path": "a.txt", "offset": 4, "limit": 2})).await;
    let content = ok(&output);
    assert!(content.starts_with("     4\tline 4\n     5\tline 5\n"), "{content}");
    assert!(!content.contains("line 6"), "{content}");
    assert!(content.contains("offset=6"), "says how to page on: {content}");
    assert!(content.contains("10 lines"), "gives the total of a small file: {content}");

    // Numbers sent as text by weaker models are accepted.
    let output = call(&ctx, "read_file", json!({"path": "a.txt", "offset": "9"})).await;
    assert!(ok(&output).contains("    10\tline 10"));
}

#[tokio::test]
async fn an_offset_past_the_end_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "read_file", json!({"path": "a.txt", "offset": 50})).await;
    let message = err(&output);
    assert!(message.contains("past the end") && message.contains("2 lines"), "{message}");
    let output = call(&ctx, "read_file", json!({"path": "a.txt", "offset": 0})).await;
    assert!(err(&output).contains("1-based"));
}

#[tokio::test]
async fn a_binary_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("blob.bin"), b"ELF\x00\x01\x02 binary").unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "read_file", json!({"path": "blob.bin"})).await;
    assert!(err(&output).contains("binary"), "{}", output.content);
}

#[tokio::test]
async fn a_directory_points_to_list_dir_and_a_missing_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("src")).unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "read_file", json!({"path": "src"})).await;
    assert!(err(&output).contains("list_dir"), "{}", output.content);
    let output = call(&ctx, "read_file", json!({"path": "nope.txt"})).await;
    assert!(err(&output).contains("does not exist"), "{}", output.content);
}

#[tokio::test]
async fn a_huge_file_is_read_only_as_far_as_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.log");
    let text: String = (1..=3000).map(|n| format!("entry {n}\n")).collect();
    fs::write(&path, &text).unwrap();
    // A sparse tail: 4 GB on paper, nothing on disk. Reading it whole would never finish.
    fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(4 << 30).unwrap();
    let ctx = context(dir.path(), Mode::Auto);

    let output = call(&ctx, "read_file", json!({"path": "huge.log"})).await;
    let content = ok(&output);
    assert!(content.contains("  2000\tentry 2000\n"), "default limit is 2000 lines");
    assert!(!content.contains("entry 2001"));
    assert!(content.contains("offset=2001"), "says how to page: {content:.200}");
    assert!(content.contains("4294967296 bytes"), "gives the size: {}", tail(content));

    let output =
        call(&ctx, "read_file", json!({"path": "huge.log", "offset": 2999, "limit": 2})).await;
    let content = ok(&output);
    assert!(content.starts_with("  2999\tentry 2999\n  3000\tentry 3000\n"), "{content}");
}

#[tokio::test]
async fn a_very_long_line_is_cut_with_a_marker() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("min.js"), format!("{}\nshort\n", "x".repeat(100_000))).unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "read_file", json!({"path": "min.js"})).await;
    let content = ok(&output);
    assert!(content.contains("[... line cut ...]"), "{}", tail(content));
    assert!(content.contains("     2\tshort"), "{}", tail(content));
    assert!(content.len() < 5_000, "cut to about 2000 characters");
}

#[tokio::test]
async fn reading_outside_the_workspace_is_refused_outside_yolo() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret.txt"), "s\n").unwrap();
    let path = outside.path().join("secret.txt").display().to_string();
    let output = call(&context(dir.path(), Mode::Auto), "read_file", json!({"path": path})).await;
    assert!(err(&output).contains("outside the workspace"), "{}", output.content);
    let output = call(&context(dir.path(), Mode::Yolo), "read_file", json!({"path": path})).await;
    assert!(ok(&output).contains("1\ts"));
}

#[tokio::test]
async fn an_empty_file_says_it_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("empty"), "").unwrap();
    let output =
        call(&context(dir.path(), Mode::Auto), "read_file", json!({"path": "empty"})).await;
    assert!(ok(&output).contains("empty"));
}

fn tail(text: &str) -> &str {
    let start = text.char_indices().rev().nth(300).map_or(0, |(index, _)| index);
    &text[start..]
}

#[tokio::test]
async fn a_fifo_is_refused_instead_of_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = std::ffi::CString::new(dir.path().join("pipe").display().to_string()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "read_file", json!({"path": "pipe"})).await;
    assert!(err(&output).contains("not a regular file"), "{}", output.content);
    let output = call(&ctx, "write_file", json!({"path": "pipe", "content": "x"})).await;
    assert!(err(&output).contains("not a regular file"), "{}", output.content);
}
