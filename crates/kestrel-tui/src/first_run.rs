//! A UI opened with no model configured: after the first frame, `kestrel
//! first-run-offer` (this binary, so the UI links no HTTP client) says what the
//! environment offers (API keys, local model servers); a picker shows it, and the choice
//! is written to config.toml as `model = "..."`.

use crate::client::Events;
use crate::event::AppEvent;
use kestrel_store::KestrelHome;
use std::path::PathBuf;

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
/// missing; top-level keys must come before the first table). Returns the file. The new
/// text goes to a temporary file that replaces the old one, so a crash leaves the old
/// config, and a symlinked config.toml keeps its link: its target is what is replaced.
pub(crate) fn save_model(home: &KestrelHome, model: &str) -> Result<PathBuf, String> {
    let path = home.config_file();
    let target = match std::fs::canonicalize(&path) {
        Ok(target) => target,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => path.clone(),
        Err(error) => return Err(format!("cannot resolve {}: {error}", path.display())),
    };
    let old = match std::fs::read_to_string(&target) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
    };
    let line = format!("model = {}\n", toml_string(model));
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    kestrel_store::replace_file(&target, format!("{line}{old}").as_bytes())
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    Ok(path)
}

fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
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

    #[cfg(unix)]
    #[test]
    fn a_symlinked_config_keeps_its_link_and_its_target_is_replaced_privately() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let home = KestrelHome::at(dir.path().join("home"));
        std::fs::create_dir_all(home.root()).ok();
        let real = dir.path().join("dotfiles-config.toml");
        std::fs::write(&real, "[sandbox]\nnetwork = true\n").ok();
        std::os::unix::fs::symlink(&real, home.config_file()).ok();
        save_model(&home, "ollama/qwen3").unwrap_or_else(|error| panic!("{error}"));
        let link =
            std::fs::symlink_metadata(home.config_file()).map(|m| m.file_type().is_symlink());
        assert!(link.unwrap_or(false), "config.toml is still a symlink");
        let text = std::fs::read_to_string(&real).unwrap_or_default();
        assert_eq!(text, "model = \"ollama/qwen3\"\n[sandbox]\nnetwork = true\n");
        let mode = std::fs::metadata(&real).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!(mode, 0o600);
        let leftovers = std::fs::read_dir(dir.path()).map(|d| d.count()).unwrap_or(0);
        assert_eq!(leftovers, 2, "no temporary file is left beside the target");
    }
}
