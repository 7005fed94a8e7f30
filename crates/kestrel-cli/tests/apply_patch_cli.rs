//! `kestrel apply-patch` as a user runs it: the patch on stdin, applied in the cwd,
//! the summary on stdout and exit 0; or the reason on stderr, exit 1, nothing written.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `kestrel apply-patch` in `dir` with `patch` on stdin, killed after 30 s.
fn apply_patch(dir: &Path, patch: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .arg("apply-patch")
        .current_dir(dir)
        .env("KESTREL_HOME", dir.join(".kestrel-home"))
        .env("KESTREL_CATALOG_URL", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(patch.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("kestrel apply-patch did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn applies_a_patch_from_stdin_in_the_cwd_and_prints_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("main.py"), "print('hi')\nexit(0)\n").unwrap();
    fs::write(dir.path().join("stale.txt"), "stale\n").unwrap();
    let output = apply_patch(
        dir.path(),
        "*** Begin Patch\n*** Add File: docs/notes.md\n+# Notes\n*** Update File: main.py\n@@\n\
         -print('hi')\n+print('hello')\n exit(0)\n*** Delete File: stale.txt\n*** End Patch\n",
    );
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "A docs/notes.md\nM main.py\nD stale.txt\n"
    );
    assert_eq!(fs::read_to_string(dir.path().join("docs/notes.md")).unwrap(), "# Notes\n");
    assert_eq!(
        fs::read_to_string(dir.path().join("main.py")).unwrap(),
        "print('hello')\nexit(0)\n"
    );
    assert!(!dir.path().join("stale.txt").exists());
}

#[test]
fn a_failing_patch_exits_1_with_the_reason_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("main.py"), "print('hi')\n").unwrap();
    let output = apply_patch(
        dir.path(),
        "*** Begin Patch\n*** Add File: new.txt\n+new\n*** Update File: main.py\n@@\n\
         -print('bye')\n+print('ciao')\n*** End Patch\n",
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.starts_with("kestrel apply-patch: cannot update main.py, hunk 1:"), "{stderr}");
    assert!(stderr.contains("print('bye')"), "{stderr}");
    assert!(!dir.path().join("new.txt").exists());
    assert_eq!(fs::read_to_string(dir.path().join("main.py")).unwrap(), "print('hi')\n");
}

#[test]
fn text_that_is_not_a_patch_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let output = apply_patch(dir.path(), "diff --git a/x b/x\n");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("must start with `*** Begin Patch`"), "{stderr}");
}

fn files_under(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(root).unwrap().display().to_string();
                out.push((name, fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The project's scenario suite (crates/kestrel-tools/tests/apply_patch_scenarios)
/// through the binary, as `../shared/conformance/run-apply-patch.sh` runs its suite.
#[test]
fn the_scenario_suite_passes_through_the_binary() {
    let suite =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../kestrel-tools/tests/apply_patch_scenarios");
    let mut cases: Vec<_> =
        fs::read_dir(&suite).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    cases.sort();
    assert!(cases.len() >= 40, "only {} scenarios in {}", cases.len(), suite.display());
    let mut failures = Vec::new();
    for case in &cases {
        let work = tempfile::tempdir().unwrap();
        for (name, content) in files_under(&case.join("input")) {
            let path = work.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }
        let patch = fs::read_to_string(case.join("patch.txt")).unwrap();
        let output = apply_patch(work.path(), &patch);
        let want_code = if case.join("error.txt").exists() { 1 } else { 0 };
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        if output.status.code() != Some(want_code) {
            failures.push(format!("{name}: exit {:?}, want {want_code}", output.status.code()));
        }
        let mut actual = files_under(work.path());
        actual.retain(|(path, _)| !path.starts_with(".kestrel-home"));
        if actual != files_under(&case.join("expected")) {
            failures.push(format!("{name}: the tree differs from expected/"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
