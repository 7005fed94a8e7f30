//! Runs every case of tests/apply_patch_scenarios/ (layout in its README) through the
//! engine: copy `input/` to a temporary directory, apply `patch.txt`, and compare the
//! whole tree with `expected/` byte for byte. A case with `error.txt` must be refused
//! with that text in the message and must leave the tree exactly as it was.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use kestrel_tools::apply_patch::apply_patch;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

type Tree = BTreeMap<PathBuf, Vec<u8>>;

fn read_tree(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, tree: &mut Tree) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, tree);
            } else {
                tree.insert(
                    path.strip_prefix(root).unwrap().to_path_buf(),
                    fs::read(&path).unwrap(),
                );
            }
        }
    }
    let mut tree = Tree::new();
    if root.is_dir() {
        walk(root, root, &mut tree);
    }
    tree
}

fn write_tree(root: &Path, tree: &Tree) {
    for (path, content) in tree {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
}

fn describe(tree: &Tree) -> String {
    tree.iter()
        .map(|(path, content)| {
            format!("  {}: {:?}", path.display(), String::from_utf8_lossy(content))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn run_scenario(dir: &Path) -> Result<(), String> {
    let patch = fs::read_to_string(dir.join("patch.txt")).map_err(|e| format!("patch.txt: {e}"))?;
    let input = read_tree(&dir.join("input"));
    let expected = read_tree(&dir.join("expected"));
    let wanted_error = fs::read_to_string(dir.join("error.txt")).ok();
    let work = tempfile::tempdir().unwrap();
    write_tree(work.path(), &input);

    match (apply_patch(work.path(), &patch), &wanted_error) {
        (Ok(_), None) => {}
        (Ok(summary), Some(wanted)) => {
            return Err(format!("applied ({summary}) but should fail with {:?}", wanted.trim()));
        }
        (Err(error), None) => return Err(format!("failed: {error}")),
        (Err(error), Some(wanted)) => {
            let message = error.to_string();
            if !message.contains(wanted.trim()) {
                return Err(format!("error {message:?} does not contain {:?}", wanted.trim()));
            }
            if expected != input {
                return Err("a refused patch must expect the input tree unchanged".to_string());
            }
        }
    }
    let actual = read_tree(work.path());
    if actual != expected {
        return Err(format!(
            "tree differs\nexpected:\n{}\nactual:\n{}",
            describe(&expected),
            describe(&actual)
        ));
    }
    Ok(())
}

#[test]
fn every_scenario_leaves_exactly_the_expected_tree() {
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apply_patch_scenarios");
    let mut cases: Vec<PathBuf> = fs::read_dir(&suite)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 40, "the suite has only {} scenarios", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let name = case.file_name().unwrap().to_string_lossy().to_string();
            run_scenario(case).err().map(|why| format!("{name}: {why}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}
