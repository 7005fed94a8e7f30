//! `[permissions]`: what `ask` mode runs without asking, globally and per project
//! directory. Only the user's file may set it (see `layer`).

use super::ConfigError;
use super::file::ProjectPermissionsTable;
use std::path::PathBuf;

/// `[permissions]`: what `ask` mode runs without asking. Read from the user's file only
/// (a project's file may not set it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PermissionSettings {
    /// Command prefixes ("cargo test") that run without asking.
    pub allow: Vec<String>,
    /// Files, or directories (everything beneath), the file tools write without asking.
    pub allow_write: Vec<PathBuf>,
    /// `[[permissions.project]]`: rules for sessions under one directory only (what
    /// "always and save" writes).
    pub projects: Vec<ProjectPermissions>,
}

/// The rules of one `[[permissions.project]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProjectPermissions {
    /// Absolute: the rules apply to sessions whose workspace is this directory or under it.
    pub path: PathBuf,
    pub allow: Vec<String>,
    pub allow_write: Vec<PathBuf>,
    /// Tools (`mcp__server__tool`) that run without asking, in read-only mode too.
    pub allow_tools: Vec<String>,
}

/// `[[permissions.project]]` entries, each with an absolute `path`.
pub(super) fn project_permissions(
    tables: Vec<ProjectPermissionsTable>,
    path: impl Fn() -> PathBuf,
) -> Result<Vec<ProjectPermissions>, ConfigError> {
    tables
        .into_iter()
        .map(|table| {
            if !table.path.is_absolute() {
                return Err(ConfigError::Invalid {
                    path: path(),
                    message: format!(
                        "`path = \"{}\"` in [[permissions.project]] must be an absolute path",
                        table.path.display()
                    ),
                });
            }
            Ok(ProjectPermissions {
                path: table.path,
                allow: table.allow,
                allow_write: table.allow_write,
                allow_tools: table.allow_tools,
            })
        })
        .collect()
}
