//! One config file as a layer: where it is found, how it is read and checked (alone, so
//! an error points into it), what a project's file may not set, and how layers merge.

use super::ConfigError;
use super::error::positioned;
use super::file::ConfigFile;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Top-level keys a project's `.kestrel/config.toml` may not set.
const USER_ONLY_KEYS: [&str; 7] =
    ["mode", "providers", "mcp_servers", "sandbox", "permissions", "ca_bundle", "storage"];

/// Keys of `[swarm]` a project's file may not set: where the orchestrator writes and
/// which cluster runs the turns are the user's to say.
const USER_ONLY_SWARM_KEYS: [&str; 3] = ["workdir", "executor", "ray"];

/// One parsed file: its path (for errors) and its raw table (for merging).
pub(super) struct Layer {
    pub(super) path: PathBuf,
    pub(super) table: toml::Table,
}

impl Layer {
    /// Reads and checks one file; `None` when it does not exist.
    pub(super) fn read(path: &Path) -> Result<Option<Layer>, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Layer::parse(path, &text).map(Some),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ConfigError::Read { path: path.to_path_buf(), source }),
        }
    }

    /// Checks `text` against the schema (for positioned errors), then keeps it as a table.
    pub(super) fn parse(path: &Path, text: &str) -> Result<Layer, ConfigError> {
        let parse_error = |error: toml::de::Error| positioned(path, text, &error);
        toml::from_str::<ConfigFile>(text).map_err(parse_error)?;
        let table = toml::from_str::<toml::Table>(text).map_err(parse_error)?;
        Ok(Layer { path: path.to_path_buf(), table })
    }

    /// Whether this file has `[section.name]`.
    pub(super) fn defines(&self, section: &str, name: &str) -> bool {
        self.table
            .get(section)
            .and_then(toml::Value::as_table)
            .is_some_and(|t| t.contains_key(name))
    }

    /// A repository's own config must not raise its permissions, run commands or send
    /// the user's API keys elsewhere: those settings belong to the user's file alone.
    pub(super) fn refuse_user_only_keys(&self) -> Result<(), ConfigError> {
        if let Some(key) = USER_ONLY_KEYS.iter().find(|key| self.sets(key)) {
            return Err(ConfigError::Invalid {
                path: self.path.clone(),
                message: format!(
                    "`{key}` can only be set in the user's config ($KESTREL_HOME/config.toml): \
                     a repository may not change providers, modes, sandboxing or commands to run"
                ),
            });
        }
        if let Some(key) = USER_ONLY_SWARM_KEYS.iter().find(|key| self.defines("swarm", key)) {
            let shown =
                if *key == "ray" { "[swarm.ray]".to_owned() } else { format!("[swarm] {key}") };
            return Err(ConfigError::Invalid {
                path: self.path.clone(),
                message: format!(
                    "`{shown}` can only be set in the user's config ($KESTREL_HOME/config.toml): \
                     a repository may not redirect where the swarm orchestrator writes or \
                     which cluster it runs on"
                ),
            });
        }
        Ok(())
    }

    /// Whether this file sets the top-level `key`.
    pub(super) fn sets(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    /// Whether this file sets the dotted key `path` (`["swarm", "roles", "planner"]`).
    pub(super) fn sets_path(&self, path: &[&str]) -> bool {
        let Some((last, tables)) = path.split_last() else { return false };
        let mut table = &self.table;
        for key in tables {
            match table.get(*key).and_then(toml::Value::as_table) {
                Some(inner) => table = inner,
                None => return false,
            }
        }
        table.contains_key(*last)
    }
}

/// Tables merge key by key, recursively; anything else in `over` replaces what is in `base`.
pub(super) fn merge_tables(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(base_table)), toml::Value::Table(over_table)) => {
                merge_tables(base_table, over_table);
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// The nearest `.kestrel/config.toml` from `cwd` up to the repository root; outside a
/// repository only `cwd` itself is looked at.
pub(super) fn find_project_config(cwd: &Path) -> Option<PathBuf> {
    let candidate =
        |dir: &Path| Some(dir.join(".kestrel").join("config.toml")).filter(|path| path.is_file());
    let Some(root) = cwd.ancestors().find(|dir| dir.join(".git").exists()) else {
        return candidate(cwd);
    };
    cwd.ancestors().take_while(|dir| dir.starts_with(root)).find_map(candidate)
}

/// Whether two paths are the same file (e.g. `$KESTREL_HOME` is `<cwd>/.kestrel`).
pub(super) fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_merge_recursively_and_scalars_are_replaced() {
        let mut base: toml::Table = toml::from_str("a = 1\n[t]\nx = 1\ny = [1]\n").unwrap();
        let over: toml::Table = toml::from_str("a = 2\n[t]\ny = [2]\nz = 3\n").unwrap();
        merge_tables(&mut base, over);
        let expected: toml::Table = toml::from_str("a = 2\n[t]\nx = 1\ny = [2]\nz = 3\n").unwrap();
        assert_eq!(base, expected);
    }
}
