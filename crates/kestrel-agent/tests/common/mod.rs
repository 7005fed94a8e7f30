//! A home and a workspace for a session against the scripted model server.

#![allow(dead_code)]

use kestrel_agent::Launch;
use kestrel_model::ClientOptions;
use kestrel_protocol::Mode;
use kestrel_store::{Config, KestrelHome};
use kestrel_testkit::ScriptedServer;
use std::path::PathBuf;
use tempfile::TempDir;

/// A temporary `$KESTREL_HOME` with a config and a temporary workspace (`cwd`).
pub struct TestHome {
    pub home: KestrelHome,
    pub cwd: PathBuf,
    pub config_file: PathBuf,
    _dirs: (TempDir, TempDir),
}

impl TestHome {
    /// `config` is the text of config.toml; `{base_url}` in it becomes `server`'s address.
    pub fn new(server: &ScriptedServer, config: &str) -> Self {
        kestrel_model::install_crypto_provider();
        let home_dir = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let cwd = work.path().canonicalize().unwrap();
        let config_file = home_dir.path().join("config.toml");
        std::fs::write(&config_file, config.replace("{base_url}", &server.base_url())).unwrap();
        let home = KestrelHome::at(home_dir.path());
        Self { home, cwd, config_file, _dirs: (home_dir, work) }
    }

    /// The launch of a session here on `model` in `mode`.
    pub fn launch(&self, model: &str, mode: Mode) -> Launch {
        Launch {
            config: Config::load(&self.home, &self.cwd).unwrap(),
            home: self.home.clone(),
            cwd: self.cwd.clone(),
            model: Some(model.into()),
            mode,
            reasoning: None,
            max_turns: None,
            client_options: ClientOptions::default(),
        }
    }
}
