//! ARCHITECTURE §4: the crates depend on each other only along the allowed edges.
//! Reads `cargo metadata` so a new edge fails here, not in review.

use std::collections::BTreeSet;
use std::process::Command;

fn allowed(from: &str, to: &str) -> bool {
    let targets: &[&str] = match from {
        "kestrel-protocol" => &[],
        "kestrel-platform" => &["kestrel-protocol"],
        "kestrel-store" => &["kestrel-platform", "kestrel-protocol"],
        "kestrel-model" => &["kestrel-store", "kestrel-platform", "kestrel-protocol"],
        "kestrel-tools" => {
            &["kestrel-store", "kestrel-platform", "kestrel-protocol", "kestrel-model"]
        }
        "kestrel-agent" => &[
            "kestrel-tools",
            "kestrel-model",
            "kestrel-store",
            "kestrel-platform",
            "kestrel-protocol",
        ],
        "kestrel-daemon" | "kestrel-tui" | "kestrel-swarm" => {
            &["kestrel-store", "kestrel-platform", "kestrel-protocol"]
        }
        "kestrel-cli" => return to != "kestrel-testkit",
        "kestrel-testkit" => &["kestrel-protocol", "kestrel-platform", "kestrel-store"],
        _ => &[],
    };
    targets.contains(&to)
}

#[test]
fn crate_dependencies_follow_the_architecture() {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).expect("valid JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(names.contains("kestrel-protocol") && names.contains("kestrel-cli"));
    let mut bad = Vec::new();
    for package in packages {
        let from = package["name"].as_str().expect("name");
        for dependency in package["dependencies"].as_array().expect("dependencies") {
            let to = dependency["name"].as_str().expect("name");
            if !names.contains(to) {
                continue;
            }
            // Any crate may use the testkit in its tests.
            let dev_only = dependency["kind"].as_str() == Some("dev");
            if dev_only && to == "kestrel-testkit" {
                continue;
            }
            if !allowed(from, to) {
                bad.push(format!("{from} -> {to}{}", if dev_only { " (dev)" } else { "" }));
            }
        }
    }
    assert!(bad.is_empty(), "edges ARCHITECTURE §4 does not allow: {bad:?}");
}

#[test]
fn no_rust_file_is_over_1500_lines() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut long = Vec::new();
    let mut stack = vec![root.join("crates")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let lines = std::fs::read_to_string(&path).map(|t| t.lines().count()).unwrap_or(0);
                if lines > 1500 {
                    long.push(format!("{} ({lines} lines)", path.display()));
                }
            }
        }
    }
    assert!(long.is_empty(), "files over 1,500 lines: {long:?}");
}
