//! What the user allowed "always": command prefixes, files (or directories) the file
//! tools may write, and whole tools. Rules live for the session; "always and save"
//! also writes them to the user's `config.toml`, scoped to the project they were given
//! in (`[[permissions.project]]` with its `path`), so that they apply only to sessions
//! under that path. The file is edited in place (comments and layout kept), under a
//! lock, and replaced atomically. Only the user's file is written: a project's
//! `.kestrel/config.toml` may not grant permissions at all.

use super::analysis::matches_rule;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One thing the user allowed for good.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AllowRule {
    /// A tool and its subcommand ("cargo test" allows `cargo test --release`,
    /// "npm run build" allows `npm run build -- --watch`), or else exactly this command
    /// ("touch notes.txt" allows nothing more).
    CommandPrefix(String),
    /// Writes to this file, or to anything beneath this directory (absolute).
    Path(PathBuf),
    /// Any call of this tool (an MCP tool, `task`).
    Tool(String),
}

impl AllowRule {
    /// For people: "commands starting with `cargo test`".
    pub fn describe(&self) -> String {
        match self {
            AllowRule::CommandPrefix(prefix) => {
                if matches_rule(&words(prefix), false, prefix) {
                    format!("commands starting with `{prefix}`")
                } else {
                    format!("the command `{prefix}`")
                }
            }
            AllowRule::Path(path) => format!("writes to {}", path.display()),
            AllowRule::Tool(name) => format!("every call of `{name}`"),
        }
    }
}

/// The rules in force for a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    rules: Vec<AllowRule>,
}

impl AllowList {
    pub fn new() -> Self {
        Self::default()
    }

    /// The rules of the user's config: `[permissions] allow` (command prefixes) and
    /// `allow_write` (paths).
    pub fn from_config(commands: &[String], paths: &[PathBuf]) -> Self {
        let mut list = Self::new();
        for prefix in commands.iter().filter(|prefix| !prefix.trim().is_empty()) {
            list.add(AllowRule::CommandPrefix(
                prefix.split_whitespace().collect::<Vec<_>>().join(" "),
            ));
        }
        for path in paths {
            list.add(AllowRule::Path(path.clone()));
        }
        list
    }

    /// Adds the rules of one part of the user's config: command prefixes, paths and
    /// tool names (`[[permissions.project]]` of the project a session runs in).
    pub fn extend_from_config(&mut self, commands: &[String], paths: &[PathBuf], tools: &[String]) {
        let more = Self::from_config(commands, paths);
        for rule in more.rules {
            self.add(rule);
        }
        for tool in tools.iter().filter(|tool| !tool.trim().is_empty()) {
            self.add(AllowRule::Tool(tool.trim().to_string()));
        }
    }

    /// Adds a rule (once).
    pub fn add(&mut self, rule: AllowRule) {
        if !self.rules.contains(&rule) {
            self.rules.push(rule);
        }
    }

    pub fn rules(&self) -> &[AllowRule] {
        &self.rules
    }

    /// Whether a command whose leading literal words are `leading` is allowed;
    /// `complete` when they are all its words (none is computed).
    pub fn allows_command(&self, leading: &[String], complete: bool) -> bool {
        self.rules.iter().any(|rule| match rule {
            AllowRule::CommandPrefix(prefix) => matches_rule(leading, complete, prefix),
            AllowRule::Path(_) | AllowRule::Tool(_) => false,
        })
    }

    /// Whether writing `path` (absolute, normalised) is allowed.
    pub fn allows_path(&self, path: &Path) -> bool {
        self.rules.iter().any(|rule| match rule {
            AllowRule::Path(allowed) => path.starts_with(allowed),
            AllowRule::CommandPrefix(_) | AllowRule::Tool(_) => false,
        })
    }

    /// Whether every call of `tool` is allowed.
    pub fn allows_tool(&self, tool: &str) -> bool {
        self.rules.iter().any(|rule| matches!(rule, AllowRule::Tool(name) if name == tool))
    }
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

/// Why rules could not be saved.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, or `[permissions]` is not a table of arrays.
    #[error("cannot add permissions to {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// Adds `rules` to the entry of `project` (an absolute path: the workspace they were
/// given in) in `[[permissions.project]]` of the user's config file `config_file`
/// (created if missing), keeping everything else as it is. Concurrent savers are
/// serialised by a lock file; the new file replaces the old one by a rename, so a
/// reader sees the old or the new file, never half of one.
///
/// Fails when the file cannot be read, parsed or replaced; it is then left unchanged.
pub fn save_rules(
    config_file: &Path,
    project: &Path,
    rules: &[AllowRule],
) -> Result<(), SaveError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| SaveError::Io { action, path, source }
    };
    let directory = config_file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(directory).map_err(io("create", directory))?;
    let lock_path = config_file.with_extension("toml.lock");
    let lock = private_options()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(io("open", &lock_path))?;
    lock.lock().map_err(io("lock", &lock_path))?;

    let text = match std::fs::read_to_string(config_file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(io("read", config_file)(error)),
    };
    let updated = add_rules(&text, project, rules)
        .map_err(|message| SaveError::Invalid { path: config_file.to_path_buf(), message })?;
    if updated == text {
        return Ok(());
    }
    let temp_path = config_file.with_extension("toml.tmp");
    let mut temp = private_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp_path)
        .map_err(io("create", &temp_path))?;
    if let Ok(metadata) = std::fs::metadata(config_file) {
        // Keep the user's own mode on the file.
        let _ = temp.set_permissions(metadata.permissions());
    }
    temp.write_all(updated.as_bytes())
        .and_then(|()| temp.sync_all())
        .map_err(io("write", &temp_path))?;
    drop(temp);
    std::fs::rename(&temp_path, config_file).map_err(io("replace", config_file))?;
    drop(lock);
    Ok(())
}

fn private_options() -> OpenOptions {
    let mut options = File::options();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// `text` with the rules added to the `[[permissions.project]]` entry of `project`
/// (`allow`, `allow_write`, `allow_tools`), a new entry if there is none.
fn add_rules(text: &str, project: &Path, rules: &[AllowRule]) -> Result<String, String> {
    let mut document: toml_edit::DocumentMut =
        text.parse().map_err(|error: toml_edit::TomlError| error.to_string())?;
    let project_text = project.display().to_string();
    let permissions = document
        .entry("permissions")
        .or_insert_with(|| {
            let mut table = toml_edit::Table::new();
            table.set_implicit(true);
            toml_edit::Item::Table(table)
        })
        .as_table_like_mut()
        .ok_or("`permissions` is not a table")?;
    let projects = permissions
        .entry("project")
        .or_insert(toml_edit::Item::ArrayOfTables(toml_edit::ArrayOfTables::new()))
        .as_array_of_tables_mut()
        .ok_or("`permissions.project` is not an array of tables (`[[permissions.project]]`)")?;
    let position = projects
        .iter()
        .position(|entry| entry.get("path").and_then(|path| path.as_str()) == Some(&project_text));
    let entry = match position {
        Some(index) => projects.get_mut(index).ok_or("the project entry vanished")?,
        None => {
            let mut entry = toml_edit::Table::new();
            entry.insert("path", toml_edit::value(project_text.clone()));
            projects.push(entry);
            let last = projects.len() - 1;
            projects.get_mut(last).ok_or("the project entry vanished")?
        }
    };
    for rule in rules {
        let (key, value) = match rule {
            AllowRule::CommandPrefix(prefix) => ("allow", prefix.clone()),
            AllowRule::Path(path) => ("allow_write", path.display().to_string()),
            AllowRule::Tool(name) => ("allow_tools", name.clone()),
        };
        let item = entry.entry(key).or_insert(toml_edit::value(toml_edit::Array::new()));
        let array = item
            .as_array_mut()
            .ok_or_else(|| format!("`{key}` of the project `{project_text}` is not an array"))?;
        if !array.iter().any(|existing| existing.as_str() == Some(value.as_str())) {
            array.push(value);
        }
    }
    Ok(document.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_added_to_the_project_entry_keeping_comments() {
        let text = "# mine\nmodel = \"a/b\"\n\n[permissions]\nallow = [\"ls\"] # keep\n\n\
                    [[permissions.project]]\npath = \"/other\"\nallow = [\"make\"]\n";
        let rules = [
            AllowRule::CommandPrefix("cargo test".into()),
            AllowRule::Path("/w/notes".into()),
            AllowRule::Tool("mcp__x__y".into()),
        ];
        let updated = add_rules(text, Path::new("/w"), &rules).unwrap();
        let again = add_rules(&updated, Path::new("/w"), &rules).unwrap();
        assert_eq!(again, updated, "saving twice adds nothing");
        assert!(updated.starts_with("# mine\nmodel = \"a/b\"\n"), "{updated}");
        assert!(updated.contains("allow = [\"ls\"] # keep"), "{updated}");
        assert!(updated.contains("path = \"/other\"\nallow = [\"make\"]"), "{updated}");
        assert!(
            updated.contains(
                "[[permissions.project]]\npath = \"/w\"\nallow = [\"cargo test\"]\n\
                 allow_write = [\"/w/notes\"]\nallow_tools = [\"mcp__x__y\"]"
            ),
            "{updated}"
        );
    }

    #[test]
    fn a_permissions_key_that_is_not_a_table_is_an_error() {
        let rule = [AllowRule::CommandPrefix("ls".into())];
        let error = add_rules("permissions = 3\n", Path::new("/w"), &rule).unwrap_err();
        assert!(error.contains("not a table"), "{error}");
        let error = add_rules("[permissions]\nproject = 3\n", Path::new("/w"), &rule).unwrap_err();
        assert!(error.contains("not an array of tables"), "{error}");
    }

    #[test]
    fn prefixes_match_whole_words_only() {
        let list = AllowList::from_config(&["cargo  test".into()], &[]);
        assert!(list.allows_command(&words("cargo test --release"), true));
        assert!(!list.allows_command(&words("cargo testing"), true));
        assert!(!list.allows_command(&words("cargo"), true));
        assert!(!AllowList::from_config(&["".into()], &[]).allows_command(&words("rm"), true));
    }
}
