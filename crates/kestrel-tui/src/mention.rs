//! `@` file mentions: the workspace's files (honouring .gitignore, listed once in the
//! background when the first `@` is typed), fuzzy-matched against what follows the `@`.
//! A sent prompt carries each mentioned file that exists as an ACP resource link.

use crate::composer::Prompt;
use crate::fuzzy;
use serde_json::{Value, json};
use std::path::Path;

/// The listing stops here: a mention menu over more files is no help.
const MAX_FILES: usize = 20_000;
/// Matches shown in the menu.
pub(crate) const MENU_ITEMS: usize = 8;

/// The files under `cwd`, relative, sorted (directories left out).
pub(crate) fn list_files(cwd: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let walker = ignore::WalkBuilder::new(cwd).hidden(true).git_ignore(true).build();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|kind| kind.is_file()) {
            continue;
        }
        if let Ok(relative) = entry.path().strip_prefix(cwd) {
            files.push(relative.to_string_lossy().into_owned());
        }
        if files.len() >= MAX_FILES {
            break;
        }
    }
    files.sort();
    files
}

/// The files matching `query` (what follows the `@`), best first.
pub(crate) fn matches(query: &str, files: &[String]) -> Vec<String> {
    fuzzy::rank(query, files.iter().map(String::as_str), MENU_ITEMS)
        .into_iter()
        .filter_map(|index| files.get(index).cloned())
        .collect()
}

/// The prompt as ACP content blocks: the text, a resource link for every `@path` in it
/// that names an existing file under `cwd`, then the attached images.
pub(crate) fn prompt_blocks(prompt: &Prompt, cwd: &Path) -> Vec<Value> {
    let text = prompt.text.as_str();
    let mut blocks = vec![json!({"type": "text", "text": text})];
    let mut seen: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else { continue };
        let path = path.trim_end_matches([',', '.', ':', ';', ')', '!', '?']);
        if path.is_empty() || seen.iter().any(|known| known == path) {
            continue;
        }
        let full = cwd.join(path);
        if !full.is_file() {
            continue;
        }
        seen.push(path.to_owned());
        blocks.push(json!({
            "type": "resource_link",
            "name": path,
            "uri": format!("file://{}", full.display()),
        }));
    }
    for image in &prompt.images {
        blocks.push(json!({"type": "image", "mimeType": image.mime_type, "data": image.data}));
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_listed_without_ignored_ones_and_mentions_become_links() {
        let work = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(work.path().join("src")).unwrap();
        std::fs::create_dir_all(work.path().join(".git")).unwrap();
        std::fs::write(work.path().join(".gitignore"), "target/\n").unwrap();
        std::fs::create_dir_all(work.path().join("target")).unwrap();
        std::fs::write(work.path().join("target/junk"), "").unwrap();
        std::fs::write(work.path().join("src/main.rs"), "fn main() {}").unwrap();
        std::fs::write(work.path().join("README.md"), "hi").unwrap();
        let files = list_files(work.path());
        assert_eq!(files, ["README.md", "src/main.rs"]);
        assert_eq!(matches("main", &files), ["src/main.rs"]);
        let mut prompt = Prompt::text("look at @src/main.rs, not @nope.rs");
        prompt.images.push(crate::attachment::Image {
            path: "x.png".into(),
            mime_type: "image/png",
            data: "AQID".into(),
        });
        let blocks = prompt_blocks(&prompt, work.path());
        assert_eq!(blocks.len(), 3);
        let image: kestrel_protocol::acp::ContentBlock =
            serde_json::from_value(blocks[2].clone()).unwrap();
        assert!(matches!(image, kestrel_protocol::acp::ContentBlock::Image(_)));
        assert_eq!(blocks[1]["name"], "src/main.rs");
        let request: kestrel_protocol::acp::ContentBlock =
            serde_json::from_value(blocks[1].clone()).unwrap();
        assert!(matches!(request, kestrel_protocol::acp::ContentBlock::ResourceLink(_)));
    }
}
