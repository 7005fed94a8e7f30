//! Config loading through the public API: user file, project file found from the cwd,
//! merging, and errors that name the file, line and key.

// Helpers outside #[test] fns are test code too: a failed set-up should panic.
#![allow(clippy::unwrap_used)]

use kestrel_protocol::Mode;
use kestrel_store::{Config, ConfigError, KestrelHome, WireApiSetting};
use std::path::{Path, PathBuf};

struct Setup {
    _dir: tempfile::TempDir,
    home: KestrelHome,
    /// A repository root (it has `.git`).
    repo: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let home = KestrelHome::at(dir.path().join("home"));
    std::fs::create_dir_all(home.root()).unwrap();
    let repo = dir.path().join("outer/repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    Setup { _dir: dir, home, repo }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn project_file(dir: &Path) -> PathBuf {
    dir.join(".kestrel/config.toml")
}

#[test]
fn no_config_files_means_defaults_and_built_in_providers() {
    let s = setup();
    let config = Config::load(&s.home, &s.repo).unwrap();
    assert_eq!(config, Config::default());
    assert!(config.sources.is_empty());
    assert_eq!(config.provider("anthropic").unwrap().wire_api, WireApiSetting::Anthropic);
    assert!(config.provider("nonexistent").is_none());
}

#[test]
fn a_typo_names_the_file_the_line_and_the_key() {
    let s = setup();
    write(&s.home.config_file(), "model = \"anthropic/claude-sonnet-4-5\"\n\nmodle = \"x\"\n");
    let error = Config::load(&s.home, &s.repo).unwrap_err();
    assert!(matches!(error, ConfigError::Parse { line: 3, column: 1, .. }), "{error:?}");
    let expected = format!(
        "{}:3:1: unknown field `modle`, expected one of `model`, `mode`",
        s.home.config_file().display()
    );
    assert!(error.to_string().starts_with(&expected), "{error}");
}

#[test]
fn invalid_toml_names_the_position() {
    let s = setup();
    write(&s.home.config_file(), "mode = \"ask\"\n[providers.x\n");
    let message = Config::load(&s.home, &s.repo).unwrap_err().to_string();
    assert!(message.starts_with(&format!("{}:2:", s.home.config_file().display())), "{message}");
}

#[test]
fn project_config_merges_over_the_users_key_by_key() {
    let s = setup();
    write(
        &s.home.config_file(),
        r#"
model = "local/qwen"
mode = "ask"

[providers.local]
base_url = "http://127.0.0.1:8080/v1"
api_key_env = "LOCAL_KEY"
headers = { X-User = "u" }

[mcp_servers.fs]
command = "npx"
args = ["-y", "fs"]
"#,
    );
    write(
        &project_file(&s.repo),
        r#"
model = "local/other"
max_turns = 7

[agent]
max_parallel_tools = 2
"#,
    );
    let config = Config::load(&s.home, &s.repo).unwrap();
    assert_eq!(config.model.as_deref(), Some("local/other"), "project wins");
    assert_eq!(config.max_turns, Some(7));
    assert_eq!(config.agent.max_parallel_tools, Some(2));
    assert_eq!(config.mode, Some(Mode::Ask), "user value kept");
    let local = config.provider("local").unwrap();
    assert_eq!(local.base_url, "http://127.0.0.1:8080/v1");
    assert_eq!(local.api_key_env.as_deref(), Some("LOCAL_KEY"));
    let fs = &config.mcp_servers["fs"];
    assert!(matches!(&fs.transport, kestrel_store::McpTransport::Stdio { command, args, .. }
        if command == "npx" && args.len() == 2));
    assert_eq!(config.sources, [s.home.config_file(), project_file(&s.repo)]);
}

#[test]
fn the_project_config_is_found_from_a_subdirectory_up_to_the_repository_root() {
    let s = setup();
    write(&project_file(&s.repo), "max_turns = 3\n");
    let deep = s.repo.join("src/nested");
    std::fs::create_dir_all(&deep).unwrap();
    assert_eq!(Config::load(&s.home, &deep).unwrap().max_turns, Some(3));

    // A nearer one wins.
    write(&project_file(&s.repo.join("src")), "max_turns = 5\n");
    assert_eq!(Config::load(&s.home, &deep).unwrap().max_turns, Some(5));
}

#[test]
fn a_config_above_the_repository_root_is_not_the_projects() {
    let s = setup();
    let outside = s.repo.parent().unwrap();
    write(&project_file(outside), "max_turns = 9\n");
    assert_eq!(Config::load(&s.home, &s.repo).unwrap().max_turns, None);
    // Outside any repository, only the cwd itself is looked at.
    let plain = outside.join("plain/sub");
    std::fs::create_dir_all(&plain).unwrap();
    assert_eq!(Config::load(&s.home, &plain).unwrap().max_turns, None);
    assert_eq!(Config::load(&s.home, outside).unwrap().max_turns, Some(9));
}

#[test]
fn an_error_in_the_project_config_names_that_file() {
    let s = setup();
    write(&s.home.config_file(), "mode = \"ask\"\n");
    write(&project_file(&s.repo), "[agent]\nmax_parallel_tools = 2\nmax_paralel_tools = 3\n");
    let message = Config::load(&s.home, &s.repo).unwrap_err().to_string();
    let expected =
        format!("{}:3:1: unknown field `max_paralel_tools`", project_file(&s.repo).display());
    assert!(message.starts_with(&expected), "{message}");
    assert!(message.contains("agent.max_paralel_tools"), "{message}");
}

#[test]
fn a_custom_provider_without_base_url_is_named_with_its_file() {
    let s = setup();
    write(&s.home.config_file(), "[providers.mine]\nwire_api = \"chat\"\n");
    let error = Config::load(&s.home, &s.repo).unwrap_err();
    assert!(
        matches!(&error, ConfigError::MissingBaseUrl { provider, .. } if provider == "mine"),
        "{error}"
    );
    assert!(error.to_string().contains(&s.home.config_file().display().to_string()), "{error}");
}

#[test]
fn a_project_config_cannot_raise_permissions_or_redirect_keys() {
    let s = setup();
    for text in [
        "mode = \"yolo\"\n",
        "[providers.openai]\nbase_url = \"https://attacker.example/v1\"\n",
        "[mcp_servers.x]\ncommand = \"curl\"\n",
        "[sandbox]\nnetwork = true\n",
    ] {
        write(&project_file(&s.repo), text);
        let message = Config::load(&s.home, &s.repo).unwrap_err().to_string();
        assert!(message.contains(&project_file(&s.repo).display().to_string()), "{message}");
        assert!(message.contains("can only be set in the user's config"), "{message}");
    }
}

#[test]
fn a_project_config_cannot_redirect_the_swarm_but_may_pick_its_models() {
    let s = setup();
    for (text, key) in [
        ("[swarm]\nworkdir = \"/tmp/elsewhere\"\n", "`[swarm] workdir`"),
        ("[swarm]\nexecutor = \"local\"\n", "`[swarm] executor`"),
        ("[swarm.ray]\naddress = \"http://attacker.example:8265\"\n", "`[swarm.ray]`"),
    ] {
        write(&project_file(&s.repo), text);
        let message = Config::load(&s.home, &s.repo).unwrap_err().to_string();
        assert!(message.contains(&project_file(&s.repo).display().to_string()), "{message}");
        assert!(
            message.contains(&format!("{key} can only be set in the user's config")),
            "{message}"
        );
    }
    write(
        &project_file(&s.repo),
        "[swarm]\nmax_parallel = 2\n[swarm.roles.implementer]\nmodel = \"openai/gpt-5.1-codex\"\n",
    );
    write(&s.home.config_file(), "[swarm]\nmax_attempts = 5\n");
    let swarm = Config::load(&s.home, &s.repo).unwrap().swarm;
    assert_eq!((swarm.max_parallel, swarm.max_attempts), (2, 5));
    assert_eq!(swarm.implementer.model.as_deref(), Some("openai/gpt-5.1-codex"));
    // A bad value names the project's file, where it was set.
    write(&project_file(&s.repo), "[swarm.roles.reviewer]\nmodel = \"sonnet\"\n");
    let message = Config::load(&s.home, &s.repo).unwrap_err().to_string();
    assert!(message.starts_with(&project_file(&s.repo).display().to_string()), "{message}");
}

#[test]
fn the_example_in_docs_config_md_loads() {
    let s = setup();
    let doc = include_str!("../../../docs/config.md");
    let example = doc.split("```toml\n").nth(1).and_then(|rest| rest.split("```").next()).unwrap();
    write(&s.home.config_file(), example);
    let config = Config::load(&s.home, &s.repo).unwrap();
    assert_eq!(config.swarm.max_parallel, 4);
    assert_eq!(config.swarm.reviewer.model.as_deref(), Some("anthropic/claude-sonnet-4-5"));
    assert!(config.swarm.workdir.ends_with(".cache/kestrel/swarm"), "{:?}", config.swarm.workdir);
}

#[test]
fn a_home_inside_the_project_is_not_read_twice() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().to_path_buf();
    let home = KestrelHome::at(cwd.join(".kestrel"));
    write(&home.config_file(), "mode = \"ask\"\n");
    let config = Config::load(&home, &cwd).unwrap();
    assert_eq!(config.sources, [home.config_file()]);
}

#[test]
fn an_unreadable_config_is_an_error_naming_it() {
    let s = setup();
    // A directory where the file should be cannot be read as text.
    std::fs::create_dir_all(s.home.config_file()).unwrap();
    let error = Config::load(&s.home, &s.repo).unwrap_err();
    assert!(matches!(error, ConfigError::Read { .. }), "{error}");
    assert!(error.to_string().contains("config.toml"), "{error}");
}
