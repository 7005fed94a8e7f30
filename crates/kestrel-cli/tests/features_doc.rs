//! docs/features.md names, for every user-facing feature, the test that proves it
//! (`crates/CRATE/tests/FILE.rs::test_name`). This fails when a named test no longer
//! exists (renamed, moved, deleted) or is `#[ignore]`d (it proves nothing in CI), or a
//! feature line names no test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A test a feature line points at.
#[derive(Debug, PartialEq)]
struct TestRef {
    line: usize,
    file: String,
    name: String,
}

/// Every `` `crates/…/*.rs::name` `` reference, and the feature lines (`- …`) without one.
fn references(doc: &str) -> (Vec<TestRef>, Vec<usize>) {
    let mut found = Vec::new();
    let mut bare = Vec::new();
    for (index, line) in doc.lines().enumerate() {
        let before = found.len();
        for quoted in line.split('`').skip(1).step_by(2) {
            let Some((file, name)) = quoted.split_once(".rs::") else { continue };
            if file.starts_with("crates/") {
                found.push(TestRef {
                    line: index + 1,
                    file: format!("{file}.rs"),
                    name: name.to_owned(),
                });
            }
        }
        if line.starts_with("- ") && found.len() == before {
            bare.push(index + 1);
        }
    }
    (found, bare)
}

/// What `source` says of a test function `name`.
#[derive(Debug, PartialEq)]
enum Defined {
    Test,
    Ignored,
    Missing,
}

/// Whether `source` defines a test function `name`: `fn name(` with a test attribute
/// on one of the few lines above it, and whether an `#[ignore` there skips it.
fn defines_test(source: &str, name: &str) -> Defined {
    let lines: Vec<&str> = source.lines().collect();
    let found = lines.iter().enumerate().find(|(at, line)| {
        let trimmed = line.trim_start();
        let signature = trimmed.strip_prefix("async ").unwrap_or(trimmed);
        signature
            .strip_prefix("fn ")
            .and_then(|rest| rest.strip_prefix(name))
            .is_some_and(|rest| rest.starts_with('(') || rest.starts_with('<'))
            && lines[at.saturating_sub(4)..*at]
                .iter()
                .any(|above| above.contains("#[test]") || above.contains("#[tokio::test"))
    });
    match found {
        None => Defined::Missing,
        Some((at, _)) if lines[at.saturating_sub(4)..at].iter().any(|a| a.contains("#[ignore")) => {
            Defined::Ignored
        }
        Some(_) => Defined::Test,
    }
}

/// What is wrong with `doc` as read against the files under `root`, one line each.
fn problems(doc: &str, root: &Path) -> Vec<String> {
    let (found, bare) = references(doc);
    let mut problems: Vec<String> =
        bare.iter().map(|line| format!("line {line}: a feature without a test")).collect();
    if found.is_empty() {
        problems.push("no test is named at all".into());
    }
    for reference in found {
        match std::fs::read_to_string(root.join(&reference.file)) {
            Ok(source) => match defines_test(&source, &reference.name) {
                Defined::Test => {}
                Defined::Ignored => problems.push(format!(
                    "line {}: {} `{}` is #[ignore]d",
                    reference.line, reference.file, reference.name
                )),
                Defined::Missing => problems.push(format!(
                    "line {}: {} has no test `{}`",
                    reference.line, reference.file, reference.name
                )),
            },
            Err(error) => problems
                .push(format!("line {}: cannot read {}: {error}", reference.line, reference.file)),
        }
    }
    problems
}

#[test]
fn every_test_named_in_features_md_exists() {
    let root = workspace_root();
    let doc = std::fs::read_to_string(root.join("docs/features.md")).unwrap();
    let problems = problems(&doc, &root);
    assert!(problems.is_empty(), "docs/features.md is out of date:\n{}", problems.join("\n"));
    let (found, _) = references(&doc);
    assert!(found.len() >= 100, "only {} tests named: the list lost its body", found.len());
}

/// The self-test's ignored test: proves nothing, so naming it in features.md is reported.
#[test]
#[ignore = "a fixture for the checker's self-test"]
fn an_ignored_fixture() {}

#[test]
fn a_renamed_test_a_missing_file_an_ignored_test_and_a_bare_feature_are_reported() {
    let root = workspace_root();
    let doc = "# Features\n\
        - real — `crates/kestrel-cli/tests/features_doc.rs::every_test_named_in_features_md_exists`\n\
        - renamed — `crates/kestrel-cli/tests/features_doc.rs::no_such_test`\n\
        - helper, not a test — `crates/kestrel-cli/tests/features_doc.rs::defines_test`\n\
        - moved — `crates/kestrel-cli/tests/gone.rs::anything`\n\
        - nothing proves this\n\
        - skipped — `crates/kestrel-cli/tests/features_doc.rs::an_ignored_fixture`\n";
    let problems = problems(doc, &root);
    assert_eq!(problems.len(), 5, "{problems:#?}");
    assert!(problems[0].starts_with("line 6: a feature without a test"), "{problems:#?}");
    assert!(problems[1].contains("line 3") && problems[1].contains("no_such_test"));
    assert!(problems[2].contains("line 4") && problems[2].contains("defines_test"));
    assert!(problems[3].contains("line 5: cannot read crates/kestrel-cli/tests/gone.rs"));
    assert!(problems[4].contains("line 7") && problems[4].contains("an_ignored_fixture"));
    assert!(problems[4].contains("#[ignore]d"), "{problems:#?}");
}
