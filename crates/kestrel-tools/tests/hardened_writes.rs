//! The file tools against a workspace that changes under them: a sandboxed command
//! swapping a directory for a symlink to elsewhere between a tool's check and its
//! write must not get a single write outside the workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use common::{call, context, ok};
use kestrel_protocol::Mode;
use serde_json::json;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

const CALLS: usize = 200;

/// Keeps exchanging `<workspace>/sub`, a real directory, with `<workspace>/sub.alt`, a
/// symlink to `outside` (atomically, `renameat2(RENAME_EXCHANGE)`), until stopped: a
/// check can see a plain directory and the write meet the symlink.
struct Swapper {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<usize>>,
}

impl Swapper {
    fn start(workspace: &Path, outside: PathBuf) -> Self {
        std::os::unix::fs::symlink(&outside, workspace.join("sub.alt")).unwrap();
        Self::exchanging(&workspace.join("sub"), &workspace.join("sub.alt"))
    }

    /// Keeps exchanging the two existing entries `one` and `other`.
    fn exchanging(one: &Path, other: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let sub = CString::new(one.as_os_str().as_bytes()).unwrap();
        let alt = CString::new(other.as_os_str().as_bytes()).unwrap();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut swaps = 0;
            while !flag.load(Ordering::Relaxed) {
                // SAFETY: two NUL-terminated paths that outlive the call.
                let done = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        sub.as_ptr(),
                        libc::AT_FDCWD,
                        alt.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                assert_eq!(done, 0, "{}", std::io::Error::last_os_error());
                swaps += 1;
            }
            swaps
        });
        Self { stop, thread: Some(thread) }
    }

    fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().map(|thread| thread.join().unwrap()).unwrap_or(0)
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_in_during_writes_never_lets_a_write_out_of_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("sub")).unwrap();
    fs::write(dir.path().join("sub/edited.txt"), "x").unwrap();
    fs::write(outside.path().join("edited.txt"), "x").unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let swapper = Swapper::start(dir.path(), outside.path().to_path_buf());

    let (mut written, mut refused) = (0, 0);
    for index in 0..CALLS {
        let path = format!("sub/w{index}.txt");
        let write = call(&ctx, "write_file", json!({"path": path, "content": "w"})).await;
        let edit = call(
            &ctx,
            "edit_file",
            json!({"path": "sub/edited.txt", "old_string": "x", "new_string": "xy"}),
        )
        .await;
        let patch = format!("*** Begin Patch\n*** Add File: sub/p{index}.txt\n+p\n*** End Patch\n");
        let patched = call(&ctx, "apply_patch", json!({"patch": patch})).await;
        for output in [&write, &edit, &patched] {
            if output.is_error {
                refused += 1;
            } else {
                written += 1;
            }
        }
    }
    let swaps = swapper.finish();

    assert_eq!(entries(outside.path()), ["edited.txt"], "a write landed outside");
    assert_eq!(fs::read_to_string(outside.path().join("edited.txt")).unwrap(), "x");
    assert!(written > 0, "no write got through at all ({refused} refused, {swaps} swaps)");
    // Whatever got through is inside (in the real directory, under either name), and no
    // temporary file is left behind.
    let real = ["sub", "sub.alt"]
        .iter()
        .map(|name| dir.path().join(name))
        .find(|path| !fs::symlink_metadata(path).unwrap().file_type().is_symlink())
        .unwrap();
    let inside = entries(&real);
    assert!(inside.iter().any(|name| name.starts_with('w') || name.starts_with('p')));
    assert!(inside.iter().all(|name| !name.contains("kestrel-tmp")), "{inside:?}");
}

#[tokio::test]
async fn replacing_a_file_keeps_its_permissions_and_writes_through_an_inside_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("run.sh");
    fs::write(&script, "echo a\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o751)).unwrap();
    std::os::unix::fs::symlink("run.sh", dir.path().join("alias.sh")).unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "write_file", json!({"path": "alias.sh", "content": "echo b\n"})).await;
    ok(&output);
    let output = call(
        &ctx,
        "edit_file",
        json!({"path": "run.sh", "old_string": "echo b", "new_string": "echo c"}),
    )
    .await;
    ok(&output);
    assert_eq!(fs::read_to_string(&script).unwrap(), "echo c\n");
    assert_eq!(fs::metadata(&script).unwrap().permissions().mode() & 0o777, 0o751);
    assert!(fs::symlink_metadata(dir.path().join("alias.sh")).unwrap().file_type().is_symlink());
    assert_eq!(entries(dir.path()), ["alias.sh", "run.sh"], "no temporary file left behind");
}

#[tokio::test]
async fn yolo_still_writes_through_a_symlink_leaving_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    let ctx = context(dir.path(), Mode::Yolo);
    let output = call(&ctx, "write_file", json!({"path": "out/f.txt", "content": "x"})).await;
    ok(&output);
    assert_eq!(fs::read_to_string(outside.path().join("f.txt")).unwrap(), "x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_into_git_never_gets_a_write_into_git() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join(".git")).unwrap();
    fs::write(dir.path().join(".git/config"), "[core]\n").unwrap();
    fs::create_dir(dir.path().join("sub")).unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let swapper = Swapper::start(dir.path(), dir.path().join(".git"));
    let mut refusals = Vec::new();
    for _ in 0..CALLS {
        let output =
            call(&ctx, "write_file", json!({"path": "sub/config", "content": "evil"})).await;
        if output.is_error {
            refusals.push(output.content.clone());
        }
    }
    let swaps = swapper.finish();
    assert_eq!(
        fs::read_to_string(dir.path().join(".git/config")).unwrap(),
        "[core]\n",
        "a write landed in .git ({swaps} swaps)"
    );
    assert_eq!(entries(&dir.path().join(".git")), ["config"]);
    for refusal in &refusals {
        assert!(
            refusal.contains("symlink") || refusal.contains(".git"),
            "unclear refusal: {refusal}"
        );
    }
}

#[tokio::test]
async fn a_name_of_250_bytes_can_be_written_edited_and_patched() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("{}.txt", "n".repeat(246));
    assert_eq!(name.len(), 250);
    let ctx = context(dir.path(), Mode::Auto);
    ok(&call(&ctx, "write_file", json!({"path": name, "content": "a\n"})).await);
    ok(&call(&ctx, "edit_file", json!({"path": name, "old_string": "a", "new_string": "b"})).await);
    let patch = format!("*** Begin Patch\n*** Update File: {name}\n@@\n-b\n+c\n*** End Patch\n");
    ok(&call(&ctx, "apply_patch", json!({"patch": patch})).await);
    assert_eq!(fs::read_to_string(dir.path().join(&name)).unwrap(), "c\n");
    assert_eq!(entries(dir.path()), [name]);
}

#[tokio::test]
async fn writing_a_hard_linked_file_keeps_the_link() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "old\n").unwrap();
    fs::hard_link(dir.path().join("a.txt"), dir.path().join("b.txt")).unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    ok(&call(&ctx, "write_file", json!({"path": "a.txt", "content": "new\n"})).await);
    assert_eq!(fs::read_to_string(dir.path().join("b.txt")).unwrap(), "new\n");
    ok(&call(
        &ctx,
        "edit_file",
        json!({"path": "b.txt", "old_string": "new", "new_string": "newer"}),
    )
    .await);
    assert_eq!(fs::read_to_string(dir.path().join("a.txt")).unwrap(), "newer\n");
    assert_eq!(fs::metadata(dir.path().join("a.txt")).unwrap().nlink(), 2);
    assert_eq!(entries(dir.path()), ["a.txt", "b.txt"]);
}

#[tokio::test]
async fn a_file_without_write_permission_is_refused_except_in_yolo() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("locked.txt");
    fs::write(&file, "keep\n").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o444)).unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "write_file", json!({"path": "locked.txt", "content": "x"})).await;
    let message = common::err(&output);
    assert!(message.contains("no write permission"), "{message}");
    let output = call(
        &ctx,
        "edit_file",
        json!({"path": "locked.txt", "old_string": "keep", "new_string": "x"}),
    )
    .await;
    assert!(common::err(&output).contains("no write permission"));
    assert_eq!(fs::read_to_string(&file).unwrap(), "keep\n");
    let yolo = context(dir.path(), Mode::Yolo);
    ok(&call(&yolo, "write_file", json!({"path": "locked.txt", "content": "x"})).await);
    assert_eq!(fs::read_to_string(&file).unwrap(), "x");
}

#[tokio::test]
async fn a_patch_rolled_back_restores_a_deleted_symlink_as_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("target.txt"), "t\n").unwrap();
    std::os::unix::fs::symlink("target.txt", dir.path().join("link.txt")).unwrap();
    fs::write(dir.path().join("blocker"), "a file\n").unwrap();
    let ctx = context(dir.path(), Mode::Auto);
    let patch = "*** Begin Patch\n*** Delete File: link.txt\n*** Add File: blocker/inside.txt\n+x\n\
                 *** End Patch\n";
    let output = call(&ctx, "apply_patch", json!({"patch": patch})).await;
    assert!(common::err(&output).contains("restored"), "{}", output.content);
    let link = dir.path().join("link.txt");
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(fs::read_link(&link).unwrap(), Path::new("target.txt"));
    assert_eq!(entries(dir.path()), ["blocker", "link.txt", "target.txt"]);
}

/// A write outside the workspace that the user approved (or `allow_write` covered)
/// writes exactly the file its path resolved to when it was judged: once the path leads
/// elsewhere (its last component or a directory on the way swapped for a symlink), each
/// file tool refuses and nothing is written there.
#[tokio::test]
async fn a_granted_write_outside_the_workspace_writes_only_the_granted_file() {
    let dir = tempfile::tempdir().unwrap();
    let approved = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let file = approved.path().canonicalize().unwrap().join("notes.txt");
    let nested = approved.path().canonicalize().unwrap().join("new/dir/deep.txt");
    let ctx = kestrel_tools::ToolContext {
        granted_writes: vec![file.clone(), nested.clone()],
        ..context(dir.path(), Mode::Ask)
    };
    // Granted: written, missing directories made on the way.
    ok(&call(&ctx, "write_file", json!({"path": file, "content": "one\n"})).await);
    ok(&call(&ctx, "write_file", json!({"path": nested, "content": "deep\n"})).await);
    assert_eq!(fs::read_to_string(&nested).unwrap(), "deep\n");
    ok(&call(&ctx, "edit_file", json!({"path": file, "old_string": "one", "new_string": "two"}))
        .await);
    let update = format!(
        "*** Begin Patch\n*** Update File: {}\n-two\n+three\n*** End Patch\n",
        file.display()
    );
    ok(&call(&ctx, "apply_patch", json!({"patch": update})).await);
    assert_eq!(fs::read_to_string(&file).unwrap(), "three\n");
    // Not granted: a sibling of the granted file.
    let sibling = approved.path().join("other.txt");
    let refused = call(&ctx, "write_file", json!({"path": sibling, "content": "x"})).await;
    assert!(refused.is_error && !sibling.exists(), "{}", refused.content);

    // The granted name now a symlink to elsewhere: every tool refuses.
    let target = elsewhere.path().join("victim.txt");
    fs::write(&target, "keep\n").unwrap();
    fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&target, &file).unwrap();
    let patch = format!("*** Begin Patch\n*** Add File: {}\n+x\n*** End Patch\n", file.display());
    for (tool, arguments) in [
        ("write_file", json!({"path": file, "content": "x"})),
        ("edit_file", json!({"path": file, "old_string": "keep", "new_string": "x"})),
        ("apply_patch", json!({"patch": patch})),
    ] {
        let output = call(&ctx, tool, arguments).await;
        assert!(output.is_error, "{tool} wrote through the swapped-in symlink: {}", output.content);
    }
    assert_eq!(fs::read_to_string(&target).unwrap(), "keep\n");

    // The granted file's directory swapped for a symlink: refused as well.
    fs::remove_file(&file).unwrap();
    let moved = tempfile::tempdir().unwrap();
    fs::rename(approved.path(), moved.path().join("was")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), approved.path()).unwrap();
    let output = call(&ctx, "write_file", json!({"path": file, "content": "x"})).await;
    assert!(output.is_error, "{}", output.content);
    assert_eq!(entries(elsewhere.path()), ["victim.txt"]);
    fs::remove_file(approved.path()).unwrap();
}

/// A granted write races a process that keeps swapping a directory on the granted
/// path with a symlink to elsewhere: each write lands in the granted directory or is
/// refused, never in the symlink's target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_write_never_follows_a_directory_swapped_for_a_symlink_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = tempfile::tempdir().unwrap();
    let outside_path = outside.path().canonicalize().unwrap();
    fs::create_dir(outside_path.join("sub")).unwrap();
    let file = outside_path.join("sub/f.txt");
    // Its directory made by the first write: none is ever made where the symlink leads.
    let nested = outside_path.join("sub/new/f.txt");
    let ctx = kestrel_tools::ToolContext {
        granted_writes: vec![file.clone(), nested.clone()],
        ..context(dir.path(), Mode::Ask)
    };
    let swapper = Swapper::start(&outside_path, victim.path().to_path_buf());
    let mut written = 0;
    for round in 0..CALLS * 2 {
        let content = format!("{round}");
        let path = if round % 2 == 0 { &file } else { &nested };
        let output = call(&ctx, "write_file", json!({"path": path, "content": content})).await;
        written += usize::from(!output.is_error);
        assert!(
            entries(victim.path()).is_empty(),
            "round {round}: the write followed the swapped-in symlink: {}",
            output.content
        );
    }
    let swaps = swapper.finish();
    assert!(swaps > 0);
    assert!(entries(victim.path()).is_empty(), "{written} writes, {swaps} swaps");
}

/// A granted write's directory keeps being exchanged with another directory, so the
/// directory the call looked up is not always the one it then opens: that refusal names
/// the directory that changed (not "the workspace", which did not), and a refused call
/// wrote nothing in either directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_write_whose_directory_was_replaced_names_that_directory() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let outside_path = outside.path().canonicalize().unwrap();
    let (sub, other) = (outside_path.join("sub"), outside_path.join("sub.alt"));
    fs::create_dir(&sub).unwrap();
    fs::create_dir(&other).unwrap();
    let rounds = CALLS * 10;
    let files: Vec<PathBuf> = (0..rounds).map(|round| sub.join(format!("f{round}.txt"))).collect();
    let ctx = kestrel_tools::ToolContext {
        granted_writes: files.clone(),
        ..context(dir.path(), Mode::Ask)
    };
    let swapper = Swapper::exchanging(&sub, &other);
    let mut refused = Vec::new();
    for (round, file) in files.iter().enumerate() {
        let output = call(&ctx, "write_file", json!({"path": file, "content": "x"})).await;
        if output.is_error {
            refused.push((round, output.content.clone()));
            if refused.len() == 5 {
                break;
            }
        }
    }
    let swaps = swapper.finish();
    assert!(!refused.is_empty(), "no call met a replaced directory in {swaps} swaps");
    for (round, message) in &refused {
        assert!(
            message.contains(&format!("{} changed after the write", sub.display())),
            "{message}"
        );
        assert!(message.contains("nothing was written"), "{message}");
        assert!(!message.contains("workspace"), "{message}");
        let name = format!("f{round}.txt");
        assert!(!entries(&sub).contains(&name) && !entries(&other).contains(&name), "{message}");
    }
}

/// The workspace moved away and another directory made at its path (a sandboxed
/// command may, where the workspace's parent is writable, as `/tmp`): the file tools
/// refuse to write there rather than write into the stranger.
#[tokio::test]
async fn a_workspace_replaced_by_another_directory_gets_no_write() {
    let parent = tempfile::tempdir().unwrap();
    let workspace = parent.path().canonicalize().unwrap().join("ws");
    fs::create_dir(&workspace).unwrap();
    let ctx = kestrel_tools::ToolContext {
        workspace_pin: Some(kestrel_tools::workspace::WorkspacePin::of(&workspace).unwrap()),
        ..context(&workspace, Mode::Auto)
    };
    ok(&call(&ctx, "write_file", json!({"path": "a.txt", "content": "x"})).await);
    fs::rename(&workspace, parent.path().join("moved")).unwrap();
    fs::create_dir(&workspace).unwrap();
    for (tool, arguments) in [
        ("write_file", json!({"path": "b.txt", "content": "x"})),
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Add File: c.txt\n+x\n*** End Patch\n"}),
        ),
    ] {
        let output = call(&ctx, tool, arguments).await;
        assert!(output.is_error, "{tool}: {}", output.content);
        assert!(output.content.contains("no longer the directory"), "{tool}: {}", output.content);
    }
    assert!(entries(&workspace).is_empty(), "{:?}", entries(&workspace));
}
