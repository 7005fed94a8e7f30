//! A run with no model configured (no `--model`, `KESTREL_MODEL` or `model`): what the
//! environment offers (`kestrel_model::detect`) decides. One candidate is used, and
//! stderr says so and how to keep it; several or none stop with the list and the one
//! line of config.toml that chooses.

use kestrel_model::detect::{
    self, Candidate, KEYED_PROVIDERS, LOCAL_SERVERS, LocalServer, probe_local_servers,
};
use kestrel_model::{CatalogSettings, CatalogStore};
use kestrel_store::{Config, KestrelHome};

/// What the environment offers: keyed providers first, then local servers (probed
/// once), and what every local probe found.
pub struct Offer {
    pub candidates: Vec<Candidate>,
    pub servers: Vec<LocalServer>,
}

/// Looks at the keys and probes the local servers (blocking, up to the probe timeout).
pub fn offer(home: &KestrelHome, config: &Config) -> Offer {
    let catalog = CatalogStore::new(home, CatalogSettings::from_config(config)).load_offline();
    let mut candidates = detect::keyed_candidates(config, &catalog.catalog);
    let servers = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(probe_local_servers(config)),
        Err(_) => Vec::new(),
    };
    candidates.extend(detect::local_candidates(&servers));
    Offer { candidates, servers }
}

/// The model for `exec` with none configured: the only candidate (said on stderr), or
/// the message to exit 2 with.
pub fn choose_for_exec(home: &KestrelHome, config: &Config) -> Result<String, String> {
    let offer = offer(home, config);
    let config_file = home.config_file();
    let config_file = config_file.display();
    match offer.candidates.as_slice() {
        [only] => {
            eprintln!(
                "kestrel: no model configured; using {} ({}). To keep it, add to {config_file}:\n  \
                 model = \"{}\"",
                only.model_ref, only.reason, only.model_ref
            );
            Ok(only.model_ref.clone())
        }
        [] => Err(format!(
            "no model configured, and none found: {}, and no local server answers ({}). Set a \
             key or start a server, or choose a model with this line in {config_file}:\n  \
             model = \"PROVIDER/MODEL\"\n(or pass --model PROVIDER/MODEL)",
            keys_said(&key_states(config)),
            local_ports(config, &offer.servers),
        )),
        several => {
            let width = several.iter().map(|c| c.model_ref.len()).max().unwrap_or(0);
            let listed: Vec<String> = several
                .iter()
                .map(|candidate| format!("  {:width$}  {}", candidate.model_ref, candidate.reason))
                .collect();
            Err(format!(
                "no model configured, and {} are available:\n{}\nchoose one with this line in \
                 {config_file}:\n  model = \"{}\"\n(or pass --model PROVIDER/MODEL)",
                several.len(),
                listed.join("\n"),
                several[0].model_ref
            ))
        }
    }
}

/// `kestrel first-run-offer` (hidden; the UI asks it): the candidates as JSON lines,
/// `{"model", "reason"}`.
pub fn print_offer() -> std::process::ExitCode {
    let Ok(home) = KestrelHome::from_env() else { return std::process::ExitCode::from(2) };
    let cwd = std::env::current_dir().unwrap_or_else(|_| home.root().to_path_buf());
    let config = Config::load(&home, &cwd).unwrap_or_default();
    let mut out = String::new();
    for candidate in offer(&home, &config).candidates {
        let line = serde_json::json!({"model": candidate.model_ref, "reason": candidate.reason});
        out.push_str(&format!("{line}\n"));
    }
    print!("{out}");
    std::process::ExitCode::SUCCESS
}

/// Each keyed provider, its key variable, and whether that is set.
fn key_states(config: &Config) -> Vec<(String, String, bool)> {
    KEYED_PROVIDERS
        .iter()
        .map(|name| {
            let variable = config
                .providers
                .get(*name)
                .and_then(|settings| settings.api_key_env.clone())
                .unwrap_or_else(|| format!("{}_API_KEY", name.to_uppercase()));
            let set = std::env::var(&variable).is_ok_and(|key| !key.trim().is_empty());
            ((*name).to_owned(), variable, set)
        })
        .collect()
}

/// `no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENROUTER_API_KEY is set`; a key that is set
/// (so its provider offered nothing) is said to be set, and why it was not used.
fn keys_said(keys: &[(String, String, bool)]) -> String {
    let unset: Vec<&str> =
        keys.iter().filter(|(_, _, set)| !set).map(|(_, variable, _)| variable.as_str()).collect();
    let mut said = match unset.as_slice() {
        [] => Vec::new(),
        [one] => vec![format!("no {one} is set")],
        [rest @ .., last] => vec![format!("no {} or {last} is set", rest.join(", "))],
    };
    for (provider, variable, _) in keys.iter().filter(|(_, _, set)| *set) {
        said.push(format!(
            "{variable} is set, but the catalog names no default model for it; pass --model \
             {provider}/MODEL"
        ));
    }
    said.join("; ")
}

/// `Ollama at http://127.0.0.1:11434/v1, ...`: where the probes looked.
fn local_ports(config: &Config, servers: &[LocalServer]) -> String {
    let looked: Vec<String> = LOCAL_SERVERS
        .iter()
        .filter_map(|(name, label)| {
            let url = servers
                .iter()
                .find(|server| server.provider == *name)
                .map(|server| server.base_url.clone())
                .or_else(|| config.providers.get(*name).map(|p| p.base_url.clone()))?;
            Some(format!("{label} at {url}"))
        })
        .collect();
    looked.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(provider: &str, set: bool) -> (String, String, bool) {
        (provider.into(), format!("{}_API_KEY", provider.to_uppercase()), set)
    }

    #[test]
    fn unset_keys_are_listed_together() {
        let keys = [key("anthropic", false), key("openai", false), key("openrouter", false)];
        assert_eq!(
            keys_said(&keys),
            "no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENROUTER_API_KEY is set"
        );
    }

    #[test]
    fn a_set_key_without_a_default_model_is_said_to_be_set() {
        let keys = [key("anthropic", false), key("openai", true), key("openrouter", false)];
        assert_eq!(
            keys_said(&keys),
            "no ANTHROPIC_API_KEY or OPENROUTER_API_KEY is set; OPENAI_API_KEY is set, but the \
             catalog names no default model for it; pass --model openai/MODEL"
        );
    }
}
