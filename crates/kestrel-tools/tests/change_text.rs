//! File changes carry both whole texts (for UIs that draw their own diff, like ACP's
//! `diff` content): created files have no before, deleted files no after, and a file
//! that is not UTF-8 has none.

mod common;

use common::{call, context, ok};
use kestrel_protocol::Mode;
use kestrel_tools::ChangeText;
use serde_json::json;

fn text(before: Option<&str>, after: Option<&str>) -> Option<ChangeText> {
    Some(ChangeText { before: before.map(str::to_string), after: after.map(str::to_string) })
}

#[tokio::test]
async fn write_and_edit_report_the_text_before_and_after() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "write_file", json!({"path": "a.txt", "content": "one\n"})).await;
    ok(&output);
    assert_eq!(output.changes[0].text, text(None, Some("one\n")));

    let output = call(&ctx, "write_file", json!({"path": "a.txt", "content": "two\n"})).await;
    ok(&output);
    assert_eq!(output.changes[0].text, text(Some("one\n"), Some("two\n")));

    let arguments = json!({"path": "a.txt", "old_string": "two", "new_string": "three"});
    let output = call(&ctx, "edit_file", arguments).await;
    ok(&output);
    assert_eq!(output.changes[0].text, text(Some("two\n"), Some("three\n")));
}

#[tokio::test]
async fn overwriting_a_binary_file_reports_no_text() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("blob.bin"), [0xff, 0xfe, 0x00]).unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "write_file", json!({"path": "blob.bin", "content": "text\n"})).await;
    ok(&output);
    assert_eq!(output.changes[0].text, None);
}

#[tokio::test]
async fn apply_patch_reports_added_updated_and_deleted_texts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep.txt"), "a\nb\n").unwrap();
    std::fs::write(dir.path().join("gone.txt"), "bye\n").unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let patch = "*** Begin Patch\n*** Add File: new.txt\n+hello\n*** Update File: keep.txt\n@@\n a\n-b\n+c\n*** Delete File: gone.txt\n*** End Patch\n";
    let output = call(&ctx, "apply_patch", json!({"patch": patch})).await;
    ok(&output);
    let texts: Vec<_> = output.changes.iter().map(|change| change.text.clone()).collect();
    assert_eq!(
        texts,
        [
            text(None, Some("hello\n")),
            text(Some("a\nb\n"), Some("a\nc\n")),
            text(Some("bye\n"), None)
        ]
    );
}
