//! A UI opened with no model configured: after the first frame, `kestrel
//! first-run-offer` (this binary, so the UI links no HTTP client) says what the
//! environment offers (API keys, local model servers); a picker shows it, and the choice
//! is written to config.toml as `model = "..."`.

use crate::client::Events;
use crate::event::AppEvent;
use kestrel_store::KestrelHome;
use std::path::{Path, PathBuf};

/// A model the environment offers, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OfferedModel {
    pub(crate) model: String,
    pub(crate) reason: String,
}

/// Asks `program` what the environment offers, in the background; the answer comes as
/// [`AppEvent::ModelsOffered`] (empty when nothing was found or the probe failed).
pub(crate) fn look_for_models(program: PathBuf, events: Events) {
    tokio::spawn(async move {
        let output = tokio::process::Command::new(&program)
            .arg("first-run-offer")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await;
        let offered = output.map(|output| parse(&output.stdout)).unwrap_or_default();
        let _ = events.send(AppEvent::ModelsOffered(offered)).await;
    });
}

/// One JSON object a line: `{"model": "...", "reason": "..."}`.
fn parse(stdout: &[u8]) -> Vec<OfferedModel> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).ok()?;
            Some(OfferedModel {
                model: value.get("model")?.as_str()?.to_owned(),
                reason: value.get("reason").and_then(|r| r.as_str()).unwrap_or("").to_owned(),
            })
        })
        .collect()
}

/// Writes `model = "MODEL"` at the top of the user's config.toml (created, private, if
/// missing; top-level keys must come before the first table). Returns the file.
pub(crate) fn save_model(home: &KestrelHome, model: &str) -> Result<PathBuf, String> {
    let path = home.config_file();
    let old = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
    };
    let line = format!("model = {}\n", toml_string(model));
    write_private(&path, &format!("{line}{old}"))
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    Ok(path)
}

fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    std::io::Write::write_all(&mut options.open(path)?, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_are_read_one_a_line_and_junk_is_skipped() {
        let text = b"{\"model\":\"ollama/qwen3\",\"reason\":\"Ollama answers\"}\nnot json\n";
        assert_eq!(
            parse(text),
            [OfferedModel { model: "ollama/qwen3".into(), reason: "Ollama answers".into() }]
        );
    }

    #[test]
    fn the_model_line_goes_before_any_table() {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let home = KestrelHome::at(dir.path());
        std::fs::write(home.config_file(), "[sandbox]\nnetwork = true\n").ok();
        save_model(&home, "ollama/qwen3").ok();
        let text = std::fs::read_to_string(home.config_file()).unwrap_or_default();
        assert_eq!(text, "model = \"ollama/qwen3\"\n[sandbox]\nnetwork = true\n");
    }
}
