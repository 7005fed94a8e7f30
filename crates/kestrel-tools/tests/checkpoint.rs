//! Checkpoints and undo through the public API: a real session record, real tool
//! calls around which the checkpointer captures, and undo restoring, refusing and
//! forcing. Shell changes are seen through git snapshots, in a repository (whose
//! index, stash and working tree stay untouched) and outside one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checkpoint_support;
mod common;

use checkpoint_support::{Fixture, git};
use kestrel_protocol::{Mode, RecordItem};
use kestrel_tools::ToolContext;
use kestrel_tools::checkpoint::{
    Capture, CheckpointFiles, FileState, UndoError, UndoOptions, undo,
};
use serde_json::json;

#[tokio::test]
async fn file_tools_record_each_file_before_and_after() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.write("old.txt", "one\ntwo\n");
    fx.turn();
    let files =
        fx.call("write_file", json!({"path": "dir/new.txt", "content": "new\n"})).await.unwrap();
    assert_eq!(files.changes.len(), 1);
    assert_eq!(files.changes[0].path, fx.path("dir/new.txt"));
    assert_eq!(files.changes[0].before, FileState::Absent);
    assert!(matches!(files.changes[0].after, FileState::File { .. }));
    assert_eq!(files.call_id.as_deref(), Some("call_1"));
    assert_eq!(files.session, fx.record.id().to_string());

    let files = fx
        .call("edit_file", json!({"path": "old.txt", "old_string": "two", "new_string": "2"}))
        .await
        .unwrap();
    let FileState::File { sha256, .. } = &files.changes[0].before else { panic!() };
    // The old content is saved, privately.
    let blob = fx.blob(sha256);
    assert_eq!(std::fs::read_to_string(&blob).unwrap(), "one\ntwo\n");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&blob).unwrap().permissions().mode() & 0o777, 0o600);
    let checkpoints = fx.home_dir.path().join("checkpoints");
    assert_eq!(std::fs::metadata(&checkpoints).unwrap().permissions().mode() & 0o777, 0o700);

    // A call that changes nothing leaves no checkpoint.
    assert!(
        fx.call("write_file", json!({"path": "old.txt", "content": "one\n2\n"})).await.is_none()
    );
}

#[tokio::test]
async fn undo_restores_every_file_of_the_last_turn_and_records_it() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.write("kept.txt", "original\n");
    fx.write("gone.txt", "will be deleted\n");
    fx.turn();
    fx.call("write_file", json!({"path": "kept.txt", "content": "model's\n"})).await.unwrap();
    fx.call("write_file", json!({"path": "created.txt", "content": "new\n"})).await.unwrap();
    fx.call("shell", json!({"command": "rm gone.txt && echo more >> kept.txt"})).await.unwrap();
    assert_eq!(fx.read("kept.txt").unwrap(), "model's\nmore\n");

    let report = fx.undo(1, false).unwrap();
    assert_eq!(report.turns, [1]);
    assert_eq!(report.files.len(), 3, "{report:?}");
    assert_eq!(fx.read("kept.txt").unwrap(), "original\n");
    assert_eq!(fx.read("gone.txt").unwrap(), "will be deleted\n");
    assert!(fx.read("created.txt").is_none());

    let items = fx.items();
    let last_two = &items[items.len() - 2..];
    let RecordItem::Checkpoint { files } = &last_two[0] else { panic!("{last_two:?}") };
    let files: CheckpointFiles = serde_json::from_value(files.clone()).unwrap();
    assert_eq!(files.undo.unwrap().turns, [1]);
    let RecordItem::Notice { notice } = &last_two[1] else { panic!() };
    assert!(notice.message.contains("turn 1 put back 3 files"), "{}", notice.message);

    // An undone turn is not undone twice.
    let error = fx.undo(1, false).unwrap_err();
    assert!(matches!(error, UndoError::NothingToUndo { .. }), "{error}");
    assert!(error.to_string().contains("not undone already"), "{error}");
}

#[tokio::test]
async fn undo_refuses_files_the_user_changed_since_and_force_keeps_their_content() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.write("a.txt", "a0\n");
    fx.write("b.txt", "b0\n");
    fx.turn();
    fx.call("write_file", json!({"path": "a.txt", "content": "a1\n"})).await.unwrap();
    fx.call("write_file", json!({"path": "b.txt", "content": "b1\n"})).await.unwrap();
    fx.write("b.txt", "the user's edit\n");

    let error = fx.undo(1, false).unwrap_err();
    let UndoError::Conflicts { files, turns, .. } = &error else { panic!("{error}") };
    assert_eq!(turns, &[1]);
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].path, fx.path("b.txt"));
    let message = error.to_string();
    assert!(
        message.contains("b.txt (changed since turn 1)") && message.contains("--force"),
        "{message}"
    );
    // Nothing was touched.
    assert_eq!(fx.read("a.txt").unwrap(), "a1\n");
    assert_eq!(fx.read("b.txt").unwrap(), "the user's edit\n");

    let report = fx.undo(1, true).unwrap();
    assert_eq!(report.overwritten, [fx.path("b.txt")]);
    assert_eq!(fx.read("a.txt").unwrap(), "a0\n");
    assert_eq!(fx.read("b.txt").unwrap(), "b0\n");
    // The user's edit is saved in the undo's checkpoint.
    let change = report.files.iter().find(|c| c.path == fx.path("b.txt")).unwrap();
    let FileState::File { sha256, .. } = &change.before else { panic!() };
    let blob = fx.blob(sha256);
    assert_eq!(std::fs::read_to_string(blob).unwrap(), "the user's edit\n");
}

#[tokio::test]
async fn undo_several_turns_goes_back_before_the_earliest() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.write("f.txt", "v0\n");
    for version in 1..=3 {
        fx.turn();
        fx.call("write_file", json!({"path": "f.txt", "content": format!("v{version}\n")}))
            .await
            .unwrap();
    }
    fx.turn(); // A turn that changes nothing does not count.
    let report = fx.undo(2, false).unwrap();
    assert_eq!(report.turns, [2, 3]);
    assert_eq!(fx.read("f.txt").unwrap(), "v1\n");
    let report = fx.undo(5, false).unwrap();
    assert_eq!(report.turns, [1]);
    assert_eq!(fx.read("f.txt").unwrap(), "v0\n");
    assert!(matches!(fx.undo(0, false), Err(UndoError::NoTurns)));
}

#[tokio::test]
async fn dry_run_changes_nothing_and_nothing_to_undo_says_so() {
    let mut fx = Fixture::new(Mode::Auto);
    assert!(matches!(fx.undo(1, false), Err(UndoError::NothingToUndo { undone: 0 })));
    fx.turn();
    fx.call("write_file", json!({"path": "x.txt", "content": "x"})).await.unwrap();
    let report =
        undo(&fx.home, &mut fx.record, &UndoOptions { turns: 1, force: false, dry_run: true })
            .unwrap();
    assert!(report.dry_run && report.files.len() == 1);
    assert!(fx.read("x.txt").is_some());
    assert!(!fx.items().iter().any(|item| matches!(item, RecordItem::Notice { .. })));
}

#[tokio::test]
async fn shell_changes_in_a_repository_are_seen_without_touching_its_index_or_stash() {
    let mut fx = Fixture::new(Mode::Auto);
    let root = fx.root();
    git(&root, &["init", "-q"]);
    fx.write(".gitattributes", "* text=auto\n");
    fx.write(".gitignore", "ignored/\n");
    fx.write("tracked.txt", "tracked\n");
    fx.write("crlf.txt", "a\r\nb\r\n");
    git(&root, &["add", "."]);
    git(&root, &["commit", "-q", "-m", "init"]);
    fx.write("staged.txt", "staged\n");
    git(&root, &["add", "staged.txt"]);
    fx.write("untracked.txt", "untracked\n");
    let status_before = git(&root, &["status", "--porcelain"]);

    fx.turn();
    let files = fx
        .call(
            "shell",
            json!({"command": "printf 'x\\r\\n' > crlf.txt && echo changed >> tracked.txt && rm untracked.txt && echo n > new.txt && mkdir -p ignored && echo i > ignored/i.txt"}),
        )
        .await
        .unwrap();
    // Ignored files are covered too (a small ignored directory is snapshotted whole).
    assert_eq!(
        fx.relative(&files),
        ["crlf.txt", "ignored/i.txt", "new.txt", "tracked.txt", "untracked.txt"]
    );
    fx.undo(1, false).unwrap();
    assert_eq!(std::fs::read(root.join("crlf.txt")).unwrap(), b"a\r\nb\r\n", "byte for byte");
    assert_eq!(fx.read("tracked.txt").unwrap(), "tracked\n");
    assert_eq!(fx.read("untracked.txt").unwrap(), "untracked\n");
    assert!(fx.read("new.txt").is_none());
    assert_eq!(git(&root, &["status", "--porcelain"]), status_before);
    assert_eq!(git(&root, &["stash", "list"]), "");
    assert!(
        git(&root, &["diff", "--cached", "--name-only"]).contains("staged.txt"),
        "the user's index is untouched"
    );
}

#[tokio::test]
async fn shell_changes_outside_a_repository_use_a_private_one() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.write("notes/a.md", "a\n");
    fx.turn();
    let files =
        fx.call("shell", json!({"command": "echo b > notes/a.md && echo c > c.md"})).await.unwrap();
    assert_eq!(files.changes.len(), 2);
    assert!(!fx.root().join(".git").exists(), "no repository is made in the workspace");
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("notes/a.md").unwrap(), "a\n");
    assert!(fx.read("c.md").is_none());
}

#[tokio::test]
async fn read_only_mode_captures_nothing_and_other_modes_snapshot_every_command() {
    let mut fx = Fixture::new(Mode::Auto);
    // Judged read-only, snapshotted all the same: a misjudged command must not lose work.
    let capture = fx
        .checkpointer
        .before_call("shell", &json!({"command": "ls && git status"}).to_string(), &fx.context)
        .await
        .unwrap();
    assert!(matches!(capture, Capture::Snapshot(_)));
    let context = ToolContext { mode: Mode::ReadOnly, ..fx.context.clone() };
    let capture = fx
        .checkpointer
        .before_call("shell", &json!({"command": "rm -rf x"}).to_string(), &context)
        .await
        .unwrap();
    assert!(matches!(capture, Capture::Nothing));
    let capture = fx
        .checkpointer
        .before_call("shell", &json!({"command": "make"}).to_string(), &fx.context)
        .await
        .unwrap();
    assert!(matches!(capture, Capture::Snapshot(_)));
}

#[tokio::test]
async fn a_write_through_a_symlink_is_recorded_at_its_target() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.write("real.txt", "real\n");
    std::os::unix::fs::symlink(fx.path("real.txt"), fx.path("link.txt")).unwrap();
    fx.turn();
    let files =
        fx.call("write_file", json!({"path": "link.txt", "content": "via link\n"})).await.unwrap();
    assert_eq!(files.changes[0].path, fx.path("real.txt"));
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("real.txt").unwrap(), "real\n");
    assert!(fx.path("link.txt").is_symlink());
}

#[tokio::test]
async fn a_snapshot_runs_no_hook_a_command_planted_in_the_repository() {
    let mut fx = Fixture::new(Mode::Auto);
    let root = fx.root();
    fx.repository();
    let marker = fx.home_dir.path().join("hook-ran");
    let hook = root.join(".git/hooks/post-index-change");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    fx.turn();
    fx.call("shell", json!({"command": "echo changed >> tracked.txt"})).await.unwrap();
    assert!(!marker.exists(), "the snapshot ran the repository's hook");
}

#[test]
fn undo_does_not_follow_a_symlink_planted_at_its_temporary_name() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut fx = Fixture::new(Mode::Auto);
    fx.write("f.txt", "before\n");
    fx.turn();
    rt.block_on(fx.call("write_file", json!({"path": "f.txt", "content": "after\n"}))).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "untouched").unwrap();
    // Plant a link at the name a pid-based temp file would take.
    let link = fx.root().join(format!(".f.txt.kestrel-undo-{}", std::process::id()));
    std::os::unix::fs::symlink(&victim, link).unwrap();
    fx.undo(1, false).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    assert_eq!(fx.read("f.txt").unwrap(), "before\n");
    assert!(!std::fs::symlink_metadata(fx.path("f.txt")).unwrap().file_type().is_symlink());
}

#[tokio::test]
async fn a_directory_swapped_for_a_symlink_is_listed_and_nothing_outside_is_touched() {
    let mut fx = Fixture::new(Mode::Auto);
    let outside = tempfile::tempdir().unwrap();
    let shared = outside.path().canonicalize().unwrap();
    std::fs::write(shared.join("dataset.csv"), "shared data\n").unwrap();
    std::os::unix::fs::symlink(&shared, fx.path("data")).unwrap();
    fx.turn();
    fx.call("shell", json!({"command": "rm data && mkdir data && echo copy > data/dataset.csv"}))
        .await
        .unwrap();
    let command = format!("rm -rf data && ln -s {} data", shared.display());
    fx.call("shell", json!({ "command": command })).await.unwrap();

    for force in [false, true] {
        match fx.undo(1, force) {
            Err(error @ UndoError::Conflicts { .. }) => {
                assert!(!force);
                let UndoError::Conflicts { unrestorable, .. } = &error else { unreachable!() };
                let dataset = unrestorable.iter().find(|c| c.path == fx.path("data/dataset.csv"));
                let dataset = dataset.unwrap_or_else(|| panic!("{error}"));
                assert!(dataset.reason.contains("symlink"), "{dataset}");
                assert!(error.to_string().contains("no option restores it"), "{error}");
            }
            Ok(report) => {
                assert!(force);
                assert!(
                    report.skipped.iter().any(|c| c.path == fx.path("data/dataset.csv")),
                    "{report:?}"
                );
            }
            Err(error) => panic!("{error}"),
        }
        assert_eq!(std::fs::read_to_string(shared.join("dataset.csv")).unwrap(), "shared data\n");
    }
}

#[tokio::test]
async fn undo_refuses_a_file_changed_outside_the_session_between_the_turns() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.write("f.txt", "A\n");
    fx.turn();
    fx.call("write_file", json!({"path": "f.txt", "content": "B model turn 1\n"})).await.unwrap();
    fx.write("f.txt", "C the user's edit\n");
    fx.turn();
    fx.call("write_file", json!({"path": "f.txt", "content": "D model turn 2\n"})).await.unwrap();

    let error = fx.undo(2, false).unwrap_err();
    let UndoError::Conflicts { files, .. } = &error else { panic!("{error}") };
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(files[0].reason, "changed outside the session between turn 1 and turn 2", "{error}");
    assert!(error.to_string().contains("--force"), "{error}");
    assert_eq!(fx.read("f.txt").unwrap(), "D model turn 2\n");
    // Undoing only turn 2 gives the user's edit back.
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("f.txt").unwrap(), "C the user's edit\n");
}

#[tokio::test]
async fn a_call_without_a_snapshot_says_so_in_its_result_and_the_record() {
    let mut fx = Fixture::new(Mode::Auto);
    // A workspace that cannot be snapshotted (here: gone).
    let context = common::context(&fx.root().join("missing"), Mode::Auto);
    let capture = fx.checkpointer.before_call("shell", r#"{"command":"true"}"#, &context).await;
    let capture = capture.unwrap();
    let note = capture.uncovered_note().unwrap_or_else(|| panic!("{capture:?}"));
    assert!(note.contains("no checkpoint could be made"), "{note}");
    assert!(note.contains("undo cannot restore"), "{note}");
    let item = fx.checkpointer.after_call(capture, "call_x").await;
    let Some(RecordItem::Notice { notice }) = item else { panic!("{item:?}") };
    assert!(notice.message.contains("no checkpoint for call call_x"), "{}", notice.message);
}

#[tokio::test]
async fn a_workspace_reached_through_a_symlink_is_checkpointed_and_undone() {
    let mut fx = Fixture::new(Mode::Auto);
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("project");
    std::os::unix::fs::symlink(fx.root(), &link).unwrap();
    fx.context = common::context(&link, Mode::Auto);
    fx.write("old.txt", "old\n");
    fx.turn();
    fx.call("write_file", json!({"path": "new/deep.txt", "content": "new\n"})).await.unwrap();
    fx.call("write_file", json!({"path": "old.txt", "content": "changed\n"})).await.unwrap();
    fx.call("shell", json!({"command": "echo more >> old.txt"})).await.unwrap();
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("old.txt").unwrap(), "old\n");
    assert!(fx.read("new/deep.txt").is_none());
}

#[tokio::test]
async fn changes_between_calls_not_made_by_one_get_a_notice() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.write("a.txt", "a\n");
    fx.turn();
    fx.call("shell", json!({"command": "echo 1 >> a.txt"})).await.unwrap();
    assert!(fx.checkpointer.take_notice().is_none());
    // A file tool's change between two shell calls is a call's: no notice.
    fx.call("write_file", json!({"path": "tool.txt", "content": "t\n"})).await.unwrap();
    fx.call("shell", json!({"command": "echo 2 >> a.txt"})).await.unwrap();
    assert!(fx.checkpointer.take_notice().is_none());
    // A change nobody's call made (a background process, someone else) is noticed.
    fx.write("background.txt", "b\n");
    fx.call("shell", json!({"command": "echo 3 >> a.txt"})).await.unwrap();
    let Some(RecordItem::Notice { notice }) = fx.checkpointer.take_notice() else { panic!() };
    assert!(notice.message.contains("files changed between tool calls"), "{}", notice.message);
    assert!(notice.message.contains("background.txt"), "{}", notice.message);
    assert!(!notice.message.contains("tool.txt") && !notice.message.contains("a.txt"));
    assert!(fx.checkpointer.take_notice().is_none(), "taken once");
}
