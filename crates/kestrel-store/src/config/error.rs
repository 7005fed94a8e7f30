//! Why loading fails, and where: TOML errors turned into `file:line:column` with the
//! dotted key they concern.

use std::path::{Path, PathBuf};

/// Why the configuration could not be loaded. Every variant names the file to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Bad TOML, an unknown key or a value of the wrong type, at a position in the file.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Parse { path: PathBuf, line: usize, column: usize, message: String },

    /// Valid TOML with a setting that makes no sense (e.g. an MCP server with neither
    /// `command` nor `url`).
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },

    /// A provider that is not built in must say where it is.
    #[error(
        "{}: [providers.{provider}] has no `base_url`: add one, e.g. base_url = \"http://127.0.0.1:8080/v1\" (including the API version prefix)",
        path.display()
    )]
    MissingBaseUrl { provider: String, path: PathBuf },

    /// A model reference that is not `<provider>/<model id>`.
    #[error(
        "invalid model `{model_ref}`: {reason}; expected \"<provider>/<model id>\", e.g. \"anthropic/claude-sonnet-4-5\""
    )]
    InvalidModelRef { model_ref: String, reason: &'static str },
}

/// A TOML error as `file:line:column: message`, with the key path added when the
/// message does not already name it.
pub(super) fn positioned(path: &Path, text: &str, error: &toml::de::Error) -> ConfigError {
    let Some(offset) = error.span().map(|span| span.start.min(text.len())) else {
        return ConfigError::Invalid {
            path: path.to_path_buf(),
            message: error.to_string().trim().to_owned(),
        };
    };
    let (line, column) = line_column(text, offset);
    let before = text.get(..offset).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let mut message = error.message().trim().to_owned();
    if let Some(key) = key_at(text, line_start)
        && (key.contains('.') || !message.contains(&format!("`{key}`")))
    {
        message.push_str(&format!(" (in `{key}`)"));
    }
    ConfigError::Parse { path: path.to_path_buf(), line, column, message }
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let line = before.matches('\n').count() + 1;
    (line, before[line_start..].chars().count() + 1)
}

/// The dotted key of the line starting at `line_start`: the nearest `[table]` header
/// above it plus the key before `=`. A best-effort reading for messages only.
fn key_at(text: &str, line_start: usize) -> Option<String> {
    let line = text.get(line_start..)?.lines().next().unwrap_or("").trim();
    let header = |line: &str| {
        let inner = line.strip_prefix('[')?.trim_start_matches('[');
        Some(inner.split(']').next()?.trim().to_owned())
    };
    if line.starts_with('[') {
        return header(line);
    }
    let key =
        line.split_once('=').map(|(key, _)| key.trim().to_owned()).filter(|key| !key.is_empty());
    let table = text
        .get(..line_start)?
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .and_then(header);
    match (table, key) {
        (Some(table), Some(key)) => Some(format!("{table}.{key}")),
        (table, key) => table.or(key),
    }
}
