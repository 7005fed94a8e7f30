//! `grep` over a generated tree of 100,000 files stops at its result cap and says so.
//! (How fast it is belongs to `bench/grep-100k.sh`, not to an assertion.)

mod common;

use common::{call, context, ok};
use kestrel_protocol::Mode;
use serde_json::json;

const DIRS: usize = 100;
const FILES_PER_DIR: usize = 1_000;

#[tokio::test]
async fn grep_in_a_tree_of_100k_files_stops_at_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    for d in 0..DIRS {
        let sub = dir.path().join(format!("d{d:03}"));
        std::fs::create_dir(&sub).unwrap();
        for f in 0..FILES_PER_DIR {
            std::fs::write(sub.join(format!("f{f:04}.txt")), format!("needle {d} {f}\nhay\n"))
                .unwrap();
        }
    }
    let ctx = context(dir.path(), Mode::Auto);
    let output = call(&ctx, "grep", json!({"pattern": "^needle", "max_results": 25})).await;
    let content = ok(&output);
    let hits = content.lines().filter(|line| line.contains(":1:needle ")).count();
    assert_eq!(hits, 25, "{content}");
    assert!(content.contains("[results capped at 25 lines"), "{content}");

    // The default cap applies too.
    let output = call(&ctx, "grep", json!({"pattern": "needle"})).await;
    let content = ok(&output);
    assert!(
        content.contains("[results capped at"),
        "{}",
        &content[content.len().saturating_sub(200)..]
    );
    assert!(content.lines().count() < 1_000);
}
