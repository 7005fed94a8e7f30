//! `kestrel doctor`: what a newcomer (or a bug report) needs to know at a glance: the
//! config file and whether it parses, the model and what a run without one would use,
//! which API keys are set (never their values), which providers answer, the sandbox
//! backend, the daemon, and the disk used under `$KESTREL_HOME`.

use crate::first_run;
use kestrel_store::{Config, KestrelHome, dir_size};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::process::ExitCode;

pub fn run() -> ExitCode {
    let home = match KestrelHome::from_env() {
        Ok(home) => home,
        Err(error) => {
            eprintln!("kestrel: {error}");
            return ExitCode::from(2);
        }
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| home.root().to_path_buf());
    let mut out = String::new();
    let config_file = home.config_file();
    let config = match Config::load(&home, &cwd) {
        Ok(config) => {
            let files: Vec<String> =
                config.sources.iter().map(|p| p.display().to_string()).collect();
            let said = if files.is_empty() {
                format!("{} (not found: built-in defaults)", config_file.display())
            } else {
                format!("{}: ok", files.join(", "))
            };
            line(&mut out, "config", &said);
            config
        }
        Err(error) => {
            line(&mut out, "config", &format!("ERROR: {error}"));
            Config::default()
        }
    };
    let config_ok = out.lines().next().is_some_and(|first| !first.contains("ERROR"));
    let offer = first_run::offer(&home, &config);
    let model = match (&config.model, offer.candidates.as_slice()) {
        (Some(model), _) => format!("{model} (configured)"),
        (None, [only]) => format!("none configured: runs use {} ({})", only.model_ref, only.reason),
        (None, []) => "none configured and none found: set a key or start a local server".into(),
        (None, several) => format!(
            "none configured: {} found ({}); choose one with `model = \"...\"`",
            several.len(),
            several.iter().map(|c| c.model_ref.as_str()).collect::<Vec<_>>().join(", ")
        ),
    };
    line(&mut out, "model", &model);
    // Several providers may share a variable; a set says each once.
    let variables: BTreeSet<&String> =
        config.providers.values().filter_map(|settings| settings.api_key_env.as_ref()).collect();
    let secrets: Vec<String> = variables
        .iter()
        .filter_map(|variable| std::env::var(variable).ok())
        .map(|key| key.trim().to_owned())
        .filter(|key| !key.is_empty())
        .collect();
    let keys: Vec<String> = variables
        .iter()
        .map(|variable| {
            let set = std::env::var(variable).is_ok_and(|key| !key.trim().is_empty());
            format!("{variable} {}", if set { "set" } else { "not set" })
        })
        .collect();
    line(&mut out, "keys", &keys.join(", "));
    for (index, said) in providers(&config, &offer.servers).into_iter().enumerate() {
        line(&mut out, if index == 0 { "providers" } else { "" }, &said);
    }
    let sandbox = match kestrel_platform::Sandbox::detect(config.sandbox.network) {
        Ok(sandbox) => sandbox.describe(),
        Err(unavailable) => format!("none ({})", unavailable.reason),
    };
    line(&mut out, "sandbox", &sandbox);
    let daemon = match kestrel_daemon::client::endpoint(&home).running_pid() {
        Some(pid) => format!("running (pid {pid})"),
        None => "not running (started by the first client that needs it)".into(),
    };
    line(&mut out, "daemon", &daemon);
    let parts = [
        ("sessions", home.sessions_dir()),
        ("checkpoints", home.checkpoints_dir()),
        ("cache", home.cache_dir()),
        ("logs", home.logs_dir()),
    ];
    let sizes: Vec<String> =
        parts.iter().map(|(name, dir)| format!("{name} {}", megabytes(dir_size(dir)))).collect();
    let total = megabytes(dir_size(home.root()));
    line(
        &mut out,
        "disk",
        &format!("{total} under {} ({})", home.root().display(), sizes.join(", ")),
    );
    // A provider's error body may echo the key it was sent.
    for secret in &secrets {
        out = out.replace(secret.as_str(), "[redacted]");
    }
    print!("{out}");
    if config_ok { ExitCode::SUCCESS } else { ExitCode::from(2) }
}

/// One line per provider: its URL and whether it answers.
fn providers(config: &Config, servers: &[kestrel_model::detect::LocalServer]) -> Vec<String> {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return Vec::new();
    };
    let checked = runtime.block_on(kestrel_model::detect::check_providers(config, servers));
    let width = checked.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    checked.into_iter().map(|(name, said)| format!("{name:width$}  {said}")).collect()
}

fn line(out: &mut String, label: &str, text: &str) {
    let _ = writeln!(out, "{label:<10} {text}");
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}
