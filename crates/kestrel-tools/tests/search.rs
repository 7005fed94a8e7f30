mod common;

use common::{call, context, err, ok};
use kestrel_protocol::Mode;
use serde_json::json;
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

#[allow(clippy::unwrap_used)] // test fixture setup
fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[tokio::test]
async fn grep_prints_path_line_text_relative_to_the_cwd_and_honours_gitignore() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "target/\n*.log\n");
    write(root, "src/main.rs", "fn main() {\n    needle();\n}\n");
    write(root, "src/lib.rs", "// Needle in caps\n");
    write(root, "target/out.rs", "needle();\n");
    write(root, "debug.log", "needle\n");
    write(root, ".hidden/x.rs", "needle\n");
    fs::write(root.join("blob.bin"), b"needle\x00\x01").unwrap();
    let ctx = context(root, Mode::Auto);

    let output = call(&ctx, "grep", json!({"pattern": "needle"})).await;
    assert_eq!(ok(&output), "src/main.rs:2:    needle();");

    let output = call(&ctx, "grep", json!({"pattern": "needle", "case_insensitive": true})).await;
    assert_eq!(ok(&output), "src/lib.rs:1:// Needle in caps\nsrc/main.rs:2:    needle();");

    let output =
        call(&ctx, "grep", json!({"pattern": "needle", "path": "src", "glob": "lib*"})).await;
    assert!(ok(&output).contains("No matches"), "{}", output.content);
}

#[tokio::test]
async fn grep_stops_at_max_results_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    for file in 0..20 {
        let text: String = (0..50).map(|n| format!("hit {n}\n")).collect();
        write(dir.path(), &format!("f{file:02}.txt"), &text);
    }
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "grep", json!({"pattern": "^hit", "max_results": 5})).await;
    let content = ok(&output);
    assert_eq!(content.lines().filter(|line| line.starts_with("f00.txt:")).count(), 5);
    assert!(content.contains("capped at 5"), "{content}");
    let output = call(&ctx, "grep", json!({"pattern": "^hit"})).await;
    assert_eq!(ok(&output).lines().filter(|line| line.contains(":hit")).count(), 100);
}

#[tokio::test]
async fn grep_reports_an_invalid_regex_and_a_missing_path() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "grep", json!({"pattern": "fn (unclosed"})).await;
    let message = err(&output);
    assert!(message.contains("invalid regex") && message.contains("unclosed"), "{message}");
    let output = call(&ctx, "grep", json!({"pattern": "x", "path": "nowhere"})).await;
    assert!(err(&output).contains("does not exist"));
    let output = call(&ctx, "grep", json!({"pattern": "x", "glob": "a["})).await;
    assert!(err(&output).contains("invalid glob"));
}

#[tokio::test]
async fn glob_lists_matches_newest_first_honouring_gitignore() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "ignored/\n");
    write(root, "old.rs", "");
    write(root, "src/mid.rs", "");
    write(root, "src/deep/new.rs", "");
    write(root, "ignored/skip.rs", "");
    write(root, "notes.md", "");
    let now = SystemTime::now();
    for (path, age) in [("old.rs", 300), ("src/mid.rs", 200), ("src/deep/new.rs", 100)] {
        let file = fs::File::options().write(true).open(root.join(path)).unwrap();
        file.set_modified(now - Duration::from_secs(age)).unwrap();
    }
    let ctx = context(root, Mode::Auto);

    let output = call(&ctx, "glob", json!({"pattern": "*.rs"})).await;
    assert_eq!(ok(&output), "src/deep/new.rs\nsrc/mid.rs\nold.rs");
    let output = call(&ctx, "glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(ok(&output), "src/mid.rs");
    let output = call(&ctx, "glob", json!({"pattern": "**/*.rs", "path": "src"})).await;
    assert_eq!(ok(&output), "src/deep/new.rs\nsrc/mid.rs");
    let output = call(&ctx, "glob", json!({"pattern": "*.py"})).await;
    assert!(ok(&output).contains("No files match"));
    let output = call(&ctx, "glob", json!({"pattern": "{unclosed"})).await;
    assert!(err(&output).contains("invalid glob"), "{}", output.content);
}

#[tokio::test]
async fn list_dir_draws_an_indented_tree_with_directories_marked() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "build/\n");
    write(root, "Cargo.toml", "");
    write(root, "src/lib.rs", "");
    write(root, "src/a/b/deep.rs", "");
    write(root, "build/junk", "");
    fs::create_dir_all(root.join(".git/objects")).unwrap();
    let ctx = context(root, Mode::Auto);

    let output = call(&ctx, "list_dir", json!({})).await;
    assert_eq!(ok(&output), "./\n  .gitignore\n  Cargo.toml\n  src/\n    a/\n    lib.rs");
    let output = call(&ctx, "list_dir", json!({"path": "src", "depth": 3})).await;
    assert_eq!(ok(&output), "src/\n  a/\n    b/\n      deep.rs\n  lib.rs");
    let output = call(&ctx, "list_dir", json!({"path": "Cargo.toml"})).await;
    assert!(err(&output).contains("read_file"));
    let output = call(&ctx, "list_dir", json!({"path": "nope"})).await;
    assert!(err(&output).contains("cannot list"));
}

#[tokio::test]
async fn list_dir_caps_a_huge_directory_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..600 {
        fs::write(dir.path().join(format!("f{n:03}")), "").unwrap();
    }
    let output = call(&context(dir.path(), Mode::Auto), "list_dir", json!({})).await;
    let content = ok(&output);
    assert_eq!(content.lines().count(), 1 + 500 + 1, "root, 500 entries, note");
    assert!(content.contains("capped at 500"));
}

#[tokio::test]
async fn search_tools_are_confined_to_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    for (tool, arguments) in [
        ("grep", json!({"pattern": "x", "path": ".."})),
        ("glob", json!({"pattern": "*", "path": "/"})),
        ("list_dir", json!({"path": ".."})),
    ] {
        let output = call(&ctx, tool, arguments).await;
        assert!(err(&output).contains("outside the workspace"), "{tool}: {}", output.content);
    }
}
