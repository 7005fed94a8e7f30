//! Snapshots of the workspace around shell calls, through the public API: they run no
//! code of the repository (filters), write nothing into the user's `.git`, cover ignored
//! files and nested repositories, and say plainly what they could not keep.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checkpoint_support;
mod common;

use checkpoint_support::{Fixture, git, header};
use kestrel_protocol::{Mode, RecordEntry, RecordItem};
use kestrel_store::{KestrelHome, SessionRecord};
use kestrel_tools::builtin_tools;
use kestrel_tools::checkpoint::{Capture, CheckpointFiles, Checkpointer, FileState, UndoError};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every file under `dir`, recursively.
fn count_files(dir: &Path) -> usize {
    let mut count = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(children) = std::fs::read_dir(&dir) else { continue };
        for child in children.flatten() {
            if child.file_type().unwrap().is_dir() {
                stack.push(child.path());
            } else {
                count += 1;
            }
        }
    }
    count
}

#[tokio::test]
async fn snapshots_and_undo_run_no_filter_the_repository_configures() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.repository();
    let marker = fx.home_dir.path().join("filter-ran");
    let script = fx.home_dir.path().join("filter.sh");
    std::fs::write(&script, format!("#!/bin/sh\ntouch '{}'\ncat\n", marker.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let root = fx.root();
    for kind in ["clean", "smudge", "process"] {
        git(&root, &["config", &format!("filter.evil.{kind}"), &script.display().to_string()]);
    }
    git(&root, &["config", "diff.evil.textconv", &script.display().to_string()]);
    std::fs::write(root.join(".git/info/attributes"), "* filter=evil diff=evil\n").unwrap();
    fx.write(".gitattributes", "* filter=evil diff=evil\n");
    fx.write("untracked.txt", "untracked\n");

    fx.turn();
    let files = fx
        .shell("echo changed >> tracked.txt && rm untracked.txt && echo new > new.txt")
        .await
        .unwrap();
    assert_eq!(fx.relative(&files), ["new.txt", "tracked.txt", "untracked.txt"]);
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("tracked.txt").unwrap(), "tracked\n");
    assert_eq!(fx.read("untracked.txt").unwrap(), "untracked\n");
    assert!(fx.read("new.txt").is_none());
    assert!(!marker.exists(), "a snapshot or undo ran the repository's filter");
}

#[tokio::test]
async fn snapshots_write_nothing_into_the_users_git_directory() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.repository();
    for index in 0..20 {
        fx.write(&format!("untracked/{index}.txt"), format!("untracked {index}\n"));
    }
    let objects = fx.root().join(".git/objects");
    let before = count_files(&objects);
    let index = std::fs::read(fx.root().join(".git/index")).unwrap();
    fx.turn();
    let files = fx.shell("rm -r untracked && echo more >> tracked.txt").await.unwrap();
    assert_eq!(files.changes.len(), 21);
    assert_eq!(count_files(&objects), before, "objects were written into the user's .git");
    assert_eq!(std::fs::read(fx.root().join(".git/index")).unwrap(), index);
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("untracked/7.txt").unwrap(), "untracked 7\n");
    assert_eq!(fx.read("tracked.txt").unwrap(), "tracked\n");
    // The snapshot's own objects live under the session's checkpoint directory.
    let private = fx.checkpoint_dir().join("snapshots.git/objects");
    assert!(count_files(&private) > 0);
}

#[tokio::test]
async fn a_large_untracked_file_is_not_snapshotted_and_undo_says_it_cannot_restore_it() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.repository();
    fx.write("big.bin", vec![7u8; 17 * 1024 * 1024]);
    let objects = fx.root().join(".git/objects");
    let before = count_files(&objects);
    fx.turn();
    let files = fx.shell("rm big.bin && echo more >> tracked.txt").await.unwrap();
    assert_eq!(count_files(&objects), before);
    let big = files.changes.iter().find(|change| change.path == fx.path("big.bin")).unwrap();
    let FileState::Unsaved { reason } = &big.before else { panic!("{big:?}") };
    assert!(reason.contains("not snapshotted"), "{reason}");

    let error = fx.undo(1, false).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("big.bin") && message.contains("not snapshotted"), "{message}");
    assert_eq!(fx.read("tracked.txt").unwrap(), "tracked\nmore\n", "nothing was undone");
    let report = fx.undo(1, true).unwrap();
    assert_eq!(fx.read("tracked.txt").unwrap(), "tracked\n");
    assert!(report.skipped.iter().any(|skipped| skipped.path == fx.path("big.bin")), "{report:?}");
    assert!(!fx.path("big.bin").exists());
}

#[tokio::test]
async fn ignored_files_deleted_by_a_command_are_restored_or_reported() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.repository();
    fx.write(".gitignore", "build/\n.env\nnode_modules/\n");
    fx.write(".env", "SECRET=1\n");
    fx.write("build/out/a.o", "object\n");
    for index in 0..1_001 {
        fx.write(&format!("node_modules/pkg/{index}.js"), "x");
    }
    fx.turn();
    let files = fx.shell("rm -rf build .env node_modules && echo x >> tracked.txt").await.unwrap();
    assert_eq!(fx.relative(&files), [".env", "build/out/a.o", "node_modules", "tracked.txt"]);

    let error = fx.undo(1, false).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("node_modules") && message.contains("more than 1000 files"),
        "{message}"
    );
    let report = fx.undo(1, true).unwrap();
    assert_eq!(fx.read(".env").unwrap(), "SECRET=1\n");
    assert_eq!(fx.read("build/out/a.o").unwrap(), "object\n");
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert_eq!(report.skipped[0].path, fx.path("node_modules"));
}

#[tokio::test]
async fn files_of_nested_repositories_are_covered_in_and_outside_a_repository() {
    for outer_is_repository in [false, true] {
        let mut fx = Fixture::new(Mode::Auto);
        if outer_is_repository {
            fx.repository();
        }
        let inner = fx.path("vendor/lib");
        std::fs::create_dir_all(&inner).unwrap();
        git(&inner, &["init", "-q"]);
        fx.write("vendor/lib/code.rs", "fn lib() {}\n");
        git(&inner, &["add", "."]);
        git(&inner, &["commit", "-q", "-m", "lib"]);
        fx.write("vendor/lib/scratch.txt", "untracked in the inner repository\n");
        let inner_objects = count_files(&inner.join(".git/objects"));

        fx.turn();
        let files = fx
            .shell("rm vendor/lib/code.rs vendor/lib/scratch.txt && echo n > vendor/lib/new.rs")
            .await
            .unwrap();
        assert_eq!(
            fx.relative(&files),
            ["vendor/lib/code.rs", "vendor/lib/new.rs", "vendor/lib/scratch.txt"]
        );
        assert_eq!(count_files(&inner.join(".git/objects")), inner_objects);
        fx.undo(1, false).unwrap();
        assert_eq!(fx.read("vendor/lib/code.rs").unwrap(), "fn lib() {}\n");
        assert_eq!(
            fx.read("vendor/lib/scratch.txt").unwrap(),
            "untracked in the inner repository\n"
        );
        assert!(fx.read("vendor/lib/new.rs").is_none());
    }
}

#[tokio::test]
async fn commands_judged_read_only_get_a_snapshot_in_auto_and_yolo() {
    for mode in [Mode::Auto, Mode::Yolo] {
        let mut fx = Fixture::new(mode);
        fx.write("kept.txt", "kept\n");
        let capture = fx
            .checkpointer
            .before_call("shell", &json!({"command": "ls"}).to_string(), &fx.context)
            .await
            .unwrap();
        assert!(matches!(capture, Capture::Snapshot(_)), "{mode:?}: {capture:?}");
        // A command that changes files all the same is undoable.
        fx.turn();
        fx.shell("cat kept.txt > /dev/null; rm kept.txt").await.unwrap();
        fx.undo(1, false).unwrap();
        assert_eq!(fx.read("kept.txt").unwrap(), "kept\n");
    }
}

#[tokio::test]
async fn a_second_snapshot_reuses_what_it_knows_and_still_sees_every_change() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.repository();
    for index in 0..50 {
        fx.write(&format!("src/{index}.rs"), format!("// {index}\n"));
    }
    fx.turn();
    assert!(fx.shell("true").await.is_none(), "nothing changed");
    let files = fx.shell("echo changed > src/3.rs && chmod +x src/4.rs").await.unwrap();
    assert_eq!(fx.relative(&files), ["src/3.rs", "src/4.rs"]);
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("src/3.rs").unwrap(), "// 3\n");
    let mode = std::fs::metadata(fx.path("src/4.rs")).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o111, 0);
}

/// Not a test: the numbers of bench/checkpoint-snapshots.sh (first and second snapshot of
/// the repository at `KESTREL_BENCH_REPO`). Prints; asserts nothing about time.
#[tokio::test]
#[ignore = "a benchmark: run by bench/checkpoint-snapshots.sh"]
#[allow(clippy::print_stderr)]
async fn bench_snapshots_of_a_large_repository() {
    let Some(repo) = std::env::var_os("KESTREL_BENCH_REPO") else {
        eprintln!("set KESTREL_BENCH_REPO to a repository to measure");
        return;
    };
    let root = PathBuf::from(repo).canonicalize().unwrap();
    let home_dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(home_dir.path());
    let mut checkpointer = Checkpointer::new(&home, "bench");
    let context = common::context(&root, Mode::Auto);
    let arguments = json!({"command": "true"}).to_string();
    for round in ["first", "second", "third"] {
        let started = std::time::Instant::now();
        let capture = checkpointer.before_call("shell", &arguments, &context).await.unwrap();
        let elapsed = started.elapsed();
        assert!(matches!(capture, Capture::Snapshot(_)), "{capture:?}");
        eprintln!("{round} snapshot: {:.0} ms", elapsed.as_secs_f64() * 1000.0);
    }
    let store = home_dir.path().join("checkpoints/bench/snapshots.git");
    let output = Command::new("du").arg("-sk").arg(&store).output().unwrap();
    eprintln!("private store: {}", String::from_utf8_lossy(&output.stdout).trim());
}

#[tokio::test]
async fn an_object_planted_in_a_nested_repository_is_never_read_as_a_files_content() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.write("precious.txt", "precious\n");
    // A repository inside the workspace whose store claims precious.txt's id for
    // other content (git does not check ids when it reads).
    let inner = fx.path("sub");
    std::fs::create_dir_all(&inner).unwrap();
    git(&inner, &["init", "-q"]);
    let scratch = tempfile::tempdir().unwrap();
    git(scratch.path(), &["init", "-q"]);
    std::fs::write(scratch.path().join("evil"), "planted\n").unwrap();
    let evil = git(scratch.path(), &["hash-object", "-w", "evil"]).trim().to_string();
    let target = git(&fx.root(), &["hash-object", "precious.txt"]).trim().to_string();
    let planted = inner.join(".git/objects").join(&target[..2]);
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::copy(
        scratch.path().join(".git/objects").join(&evil[..2]).join(&evil[2..]),
        planted.join(&target[2..]),
    )
    .unwrap();

    fx.turn();
    let files = fx.shell("rm precious.txt").await.unwrap();
    // Nested repositories' stores are not alternates: precious.txt's own bytes were kept.
    assert!(matches!(files.changes[0].before, FileState::File { .. }), "{files:?}");
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("precious.txt").unwrap(), "precious\n");
}

#[tokio::test]
async fn a_file_whose_name_holds_a_newline_is_snapshotted_too() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.write("odd\nname.txt", "odd\n");
    fx.turn();
    let files = fx.shell("rm odd*name.txt").await.unwrap();
    assert_eq!(files.changes.len(), 1);
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("odd\nname.txt").unwrap(), "odd\n");
}

#[tokio::test]
async fn kestrels_own_directory_inside_the_workspace_is_never_snapshotted() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().canonicalize().unwrap();
    std::fs::write(root.join(".gitignore"), "state/\n").unwrap();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    // The home is inside an ignored directory, which snapshots otherwise walk.
    let home = KestrelHome::at(root.join("state/home"));
    let mut record = SessionRecord::create(&home, header(&root)).unwrap();
    let mut checkpointer = Checkpointer::new(&home, record.id().as_str());
    let context = common::context(&root, Mode::Auto);
    for round in 0..2 {
        let arguments = json!({"command": format!("echo {round} >> a.txt")}).to_string();
        let capture = checkpointer.before_call("shell", &arguments, &context).await.unwrap();
        let output = builtin_tools().call("shell", &arguments, &context).await;
        assert!(!output.is_error, "{}", output.content);
        let item = checkpointer.after_call(capture, "call").await.unwrap();
        record.append(&RecordEntry::now(item.clone())).unwrap();
        let RecordItem::Checkpoint { files } = item else { panic!("{item:?}") };
        let files: CheckpointFiles = serde_json::from_value(files).unwrap();
        let paths: Vec<PathBuf> = files.changes.into_iter().map(|change| change.path).collect();
        assert_eq!(paths, [root.join("a.txt")], "round {round}");
    }
}

#[tokio::test]
async fn undo_puts_back_each_file_with_its_own_permission_bits() {
    use std::os::unix::fs::PermissionsExt;
    let mut fx = Fixture::new(Mode::Auto);
    fx.repository();
    let modes = [("secret.key", 0o600), ("script.sh", 0o750), ("shared.txt", 0o664)];
    for (name, mode) in modes {
        fx.write(name, format!("{name}\n"));
        std::fs::set_permissions(fx.path(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    fx.turn();
    let files = fx.shell("rm secret.key script.sh && chmod 600 shared.txt").await.unwrap();
    assert_eq!(fx.relative(&files), ["script.sh", "secret.key", "shared.txt"]);
    fx.undo(1, false).unwrap();
    for (name, mode) in modes {
        assert_eq!(fx.read(name).unwrap(), format!("{name}\n"));
        let now = std::fs::metadata(fx.path(name)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(now, mode, "{name}: {now:o}");
    }
}

#[tokio::test]
async fn in_yolo_a_command_that_deletes_git_leaves_files_undo_says_were_not_saved() {
    let mut fx = Fixture::new(Mode::Yolo);
    fx.repository();
    fx.turn();
    fx.shell("rm -rf .git && git init -q && echo rewritten > tracked.txt").await.unwrap();
    let error = fx.undo(1, false).unwrap_err();
    let UndoError::Conflicts { files, unrestorable: unsaved, .. } = &error else {
        panic!("{error}")
    };
    assert!(files.is_empty(), "{error}");
    assert_eq!(unsaved.len(), 1, "{error}");
    let message = error.to_string();
    assert!(
        message.contains("tracked.txt") && message.contains("no option restores it"),
        "{message}"
    );
    assert!(!message.contains("rerun with --force"), "{message}");
    assert_eq!(fx.read("tracked.txt").unwrap(), "rewritten\n");
}

#[tokio::test]
async fn a_fifo_planted_as_a_repositorys_alternates_does_not_hold_snapshots_up() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.repository();
    fx.turn();
    let command = "mkdir -p sub/.git/objects/info && mkfifo sub/.git/objects/info/alternates \
                   && echo nested > sub/f.txt && echo new > new.txt";
    let files = fx.shell(command).await.unwrap();
    assert!(fx.relative(&files).contains(&"new.txt".to_string()), "{files:?}");
    // The workspace repository's own alternates (yolo could plant it) as well.
    let own = fx.path(".git/objects/info/alternates");
    std::fs::create_dir_all(own.parent().unwrap()).unwrap();
    let status = Command::new("mkfifo").arg(&own).status().unwrap();
    assert!(status.success());
    // Each bounded by the fixture's timeouts (git would wait on the FIFO for minutes).
    fx.turn();
    let files = fx.shell("echo second >> new.txt && echo more >> tracked.txt").await.unwrap();
    assert_eq!(fx.relative(&files), ["new.txt", "tracked.txt"]);
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("new.txt").unwrap(), "new\n");
    assert_eq!(fx.read("tracked.txt").unwrap(), "tracked\n");
}

#[tokio::test]
async fn ignore_files_cannot_hide_tracked_files_or_hang_or_crash_a_snapshot() {
    let mut fx = Fixture::new(Mode::Auto);
    git(&fx.root(), &["init", "-q"]);
    for index in 0..1_001 {
        fx.write(&format!("src/{index:04}.rs"), format!("// {index}\n"));
    }
    fx.write("src/main.rs", "fn main() {}\n");
    git(&fx.root(), &["add", "."]);
    git(&fx.root(), &["commit", "-q", "-m", "init"]);
    fx.turn();
    // `.ignore` is not git's: never read. A `.gitignore` of `*` does not hide tracked
    // files. Ignore files that are FIFOs or links to devices are not read at all.
    let command = "printf '*\\n' > .ignore && printf '*\\n' > .gitignore \
                   && mkdir -p sub deep && mkfifo sub/.ignore sub/.gitignore \
                   && ln -s /dev/zero deep/.gitignore && ln -s /dev/zero deep/.ignore";
    fx.shell(command).await.unwrap();
    fx.turn();
    let files = fx.shell("echo clobbered > src/main.rs && rm src/0005.rs").await.unwrap();
    assert_eq!(fx.relative(&files), ["src/0005.rs", "src/main.rs"]);
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("src/main.rs").unwrap(), "fn main() {}\n");
    assert_eq!(fx.read("src/0005.rs").unwrap(), "// 5\n");
}

#[tokio::test]
async fn a_change_inside_a_large_ignored_directory_is_reported_not_lost() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.repository();
    fx.write(".gitignore", "node_modules/\n");
    for index in 0..1_001 {
        fx.write(&format!("node_modules/{index}.js"), "x");
    }
    fx.turn();
    assert!(fx.shell("ls node_modules > /dev/null").await.is_none(), "nothing changed");
    let files = fx.shell("echo new > node_modules/added.js && rm node_modules/7.js").await.unwrap();
    assert_eq!(fx.relative(&files), ["node_modules"]);
    let FileState::Unsaved { reason } = &files.changes[0].before else { panic!("{files:?}") };
    assert!(reason.contains("added, removed or renamed"), "{reason}");
    let message = fx.undo(1, false).unwrap_err().to_string();
    assert!(message.contains("node_modules") && message.contains("not saved"), "{message}");
}

#[tokio::test]
async fn ignore_files_above_the_workspace_do_not_apply() {
    let mut fx = Fixture::new(Mode::Auto);
    fx.write(".gitignore", "*\n");
    fx.context = common::context(&fx.root().join("ws"), Mode::Auto);
    for index in 0..1_001 {
        fx.write(&format!("src/{index:04}.rs"), "x\n");
    }
    fx.turn();
    let files = fx.shell("echo clobbered > src/0005.rs").await.unwrap();
    assert_eq!(fx.relative(&files), ["src/0005.rs"]);
    fx.undo(1, false).unwrap();
    assert_eq!(fx.read("src/0005.rs").unwrap(), "x\n");
}
