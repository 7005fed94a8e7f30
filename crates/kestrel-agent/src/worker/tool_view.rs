//! How a tool call looks to an ACP client: a title people read ("shell: cargo test"), a
//! kind for the icon, the arguments as raw input and the files it touches (so an editor
//! can follow along). Built from the model-facing tool names of ARCHITECTURE §6.

use kestrel_protocol::acp;
use serde_json::Value;
use std::path::Path;

/// Titles longer than this are cut, so a long command stays one line in a UI.
const MAX_TITLE_CHARS: usize = 100;

/// The `tool_call` update announcing a call (status `pending`).
pub(crate) fn tool_call(call_id: &str, name: &str, arguments: &str, cwd: &Path) -> acp::ToolCall {
    let input = raw_input(arguments);
    acp::ToolCall::new(call_id.to_string(), title(name, &input))
        .name(name.to_string())
        .kind(kind(name))
        .status(acp::ToolCallStatus::Pending)
        .locations(locations(name, &input, cwd))
        .raw_input(input)
}

/// The arguments as JSON, or as a string when the model sent something that is not JSON.
pub(crate) fn raw_input(arguments: &str) -> Value {
    match serde_json::from_str(arguments) {
        Ok(value) => value,
        Err(_) if arguments.trim().is_empty() => Value::Object(serde_json::Map::new()),
        Err(_) => Value::String(arguments.to_string()),
    }
}

fn kind(name: &str) -> acp::ToolKind {
    match name {
        "read_file" | "list_dir" => acp::ToolKind::Read,
        "write_file" | "edit_file" | "apply_patch" => acp::ToolKind::Edit,
        "shell" => acp::ToolKind::Execute,
        "grep" | "glob" => acp::ToolKind::Search,
        "web_fetch" => acp::ToolKind::Fetch,
        "update_plan" => acp::ToolKind::Think,
        _ => acp::ToolKind::Other,
    }
}

fn title(name: &str, input: &Value) -> String {
    let text = |key: &str| input.get(key).and_then(Value::as_str).map(first_line);
    let detail = match name {
        "shell" => text("command"),
        "read_file" | "write_file" | "edit_file" => text("path"),
        "list_dir" => Some(text("path").unwrap_or_else(|| ".".to_string())),
        "grep" | "glob" => text("pattern").map(|pattern| match text("path") {
            Some(path) => format!("{pattern} in {path}"),
            None => pattern,
        }),
        "web_fetch" => text("url"),
        "task" => text("description"),
        "apply_patch" => {
            let paths = patch_paths(input);
            (!paths.is_empty()).then(|| paths.join(", "))
        }
        _ => None,
    };
    let title = match (name.strip_prefix("mcp__"), detail) {
        (Some(mcp), _) => format!("mcp: {}", mcp.replacen("__", "/", 1)),
        (None, Some(detail)) if !detail.is_empty() => format!("{name}: {detail}"),
        (None, Some(_) | None) => name.to_string(),
    };
    shorten(&title)
}

fn locations(name: &str, input: &Value, cwd: &Path) -> Vec<acp::ToolCallLocation> {
    let at = |path: &str| acp::ToolCallLocation::new(cwd.join(path));
    let path = input.get("path").and_then(Value::as_str);
    match (name, path) {
        ("read_file", Some(path)) => {
            let line = input.get("offset").and_then(Value::as_u64).map(saturating_u32);
            vec![at(path).line(line)]
        }
        ("write_file" | "edit_file" | "list_dir", Some(path)) => vec![at(path)],
        ("apply_patch", _) => patch_paths(input).iter().map(|path| at(path)).collect(),
        _ => Vec::new(),
    }
}

/// The files an `apply_patch` call names, in order, each once.
fn patch_paths(input: &Value) -> Vec<String> {
    let Some(patch) = input.get("patch").and_then(Value::as_str) else {
        return Vec::new();
    };
    let mut paths: Vec<String> = Vec::new();
    for line in patch.lines() {
        let path = ["*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "]
            .iter()
            .find_map(|marker| line.strip_prefix(marker))
            .map(str::trim);
        if let Some(path) = path
            && !path.is_empty()
            && !paths.iter().any(|known| known == path)
        {
            paths.push(path.to_string());
        }
    }
    paths
}

fn first_line(text: &str) -> String {
    let mut lines = text.trim().lines();
    let first = lines.next().unwrap_or_default().to_string();
    if lines.next().is_some() { format!("{first} …") } else { first }
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_TITLE_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn saturating_u32(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view(name: &str, arguments: Value) -> Value {
        serde_json::to_value(tool_call("c1", name, &arguments.to_string(), Path::new("/w")))
            .unwrap()
    }

    #[test]
    fn titles_kinds_and_locations_follow_the_tool() {
        let shell = view("shell", json!({"command": "cargo test\necho done"}));
        assert_eq!(shell["title"], "shell: cargo test …");
        assert_eq!(shell["kind"], "execute");
        assert!(shell.get("status").is_none(), "pending is ACP's default");
        assert_eq!(shell["rawInput"]["command"], "cargo test\necho done");
        assert!(shell.get("locations").is_none());

        let read = view("read_file", json!({"path": "src/a.rs", "offset": 10}));
        assert_eq!(read["title"], "read_file: src/a.rs");
        assert_eq!(read["kind"], "read");
        assert_eq!(read["locations"], json!([{"path": "/w/src/a.rs", "line": 10}]));

        let patch = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-x\n+y\n*** End Patch";
        let patch = view("apply_patch", json!({"patch": patch}));
        assert_eq!(patch["title"], "apply_patch: a.txt, b.txt");
        assert_eq!(patch["kind"], "edit");
        assert_eq!(patch["locations"], json!([{"path": "/w/a.txt"}, {"path": "/w/b.txt"}]));

        assert_eq!(view("grep", json!({"pattern": "fn main", "path": "src"}))["kind"], "search");
        assert_eq!(view("update_plan", json!({"plan": []}))["kind"], "think");
        assert_eq!(view("web_fetch", json!({"url": "https://x.y"}))["kind"], "fetch");
        assert_eq!(view("mcp__fs__read", json!({}))["title"], "mcp: fs/read");
    }

    #[test]
    fn broken_arguments_stay_visible_and_long_titles_are_cut() {
        let broken = serde_json::to_value(tool_call("c", "shell", "{not json", Path::new("/")));
        assert_eq!(broken.unwrap()["rawInput"], "{not json");
        let long = view("shell", json!({"command": "x".repeat(500)}));
        assert!(long["title"].as_str().unwrap().chars().count() <= MAX_TITLE_CHARS + 1);
    }
}
