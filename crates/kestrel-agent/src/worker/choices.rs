//! What a client may choose for a session: its mode (ACP session modes, ids are Kestrel's
//! mode names) and its model (the `model` session config option, values `provider/model`).

use crate::setup::Launch;
use kestrel_model::{CatalogSettings, CatalogStore, list_provider_models};
use kestrel_protocol::{Mode, acp};
use kestrel_store::{Config, KestrelHome};
use std::time::Duration;

/// How long the provider's own model list may take (asked in the background).
const PROVIDER_LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// The config option id of the model selector.
pub(crate) const MODEL_OPTION: &str = "model";

/// The four modes, `current` selected.
pub(crate) fn modes(current: Mode) -> acp::SessionModeState {
    let available = Mode::ALL
        .into_iter()
        .map(|mode| {
            let (name, description) = match mode {
                Mode::ReadOnly => ("Read only", "Reads and searches; changes nothing"),
                Mode::Ask => ("Ask", "Asks before file writes and commands"),
                Mode::Auto => (
                    "Auto",
                    "Writes inside the workspace and runs sandboxed commands without asking",
                ),
                Mode::Yolo => ("Yolo", "No checks at all"),
            };
            acp::SessionMode::new(mode.as_str(), name).description(description.to_string())
        })
        .collect();
    acp::SessionModeState::new(current.as_str(), available)
}

/// The session's config options: the model selector offering `models`, `current` chosen.
pub(crate) fn config_options(current: &str, models: &[String]) -> Vec<acp::SessionConfigOption> {
    let mut values: Vec<&str> = models.iter().map(String::as_str).collect();
    if !values.contains(&current) {
        values.push(current);
    }
    let options: Vec<acp::SessionConfigSelectOption> = values
        .into_iter()
        .map(|model| acp::SessionConfigSelectOption::new(model.to_string(), model.to_string()))
        .collect();
    let selector =
        acp::SessionConfigOption::select(MODEL_OPTION, "Model", current.to_string(), options)
            .description("The model this session talks to, as provider/model".to_string())
            .category(acp::SessionConfigOptionCategory::Model);
    vec![selector]
}

/// Adds `model` to the offered models once.
pub(crate) fn offer(models: &mut Vec<String>, model: &str) {
    if !models.iter().any(|known| known == model) {
        models.push(model.to_string());
    }
}

/// What the model selector offers at first: the configured model, the current one, then
/// every model the catalog (cached, or the bundled snapshot: no network here) lists for
/// the current model's provider, as `provider/model`.
pub(crate) fn offered_models(
    home: &KestrelHome,
    config: &Config,
    configured: Option<&str>,
    current: &str,
) -> Vec<String> {
    let mut models = Vec::new();
    if let Some(configured) = configured {
        offer(&mut models, configured);
    }
    offer(&mut models, current);
    let Some((provider, _)) = current.split_once('/') else { return models };
    let catalog = CatalogStore::new(home, CatalogSettings::from_config(config)).load_offline();
    if let Some(entry) = catalog.catalog.provider(provider) {
        for id in entry.models.keys() {
            offer(&mut models, &format!("{provider}/{id}"));
        }
    }
    models
}

/// The model selected and the models offered; shared with the task that adds the
/// provider's own list.
#[derive(Debug, Clone)]
pub(crate) struct ModelChoices {
    pub(crate) current: String,
    pub(crate) offered: Vec<String>,
}

impl ModelChoices {
    pub(crate) fn options(&self) -> Vec<acp::SessionConfigOption> {
        config_options(&self.current, &self.offered)
    }
}

/// The models the current model's provider lists itself (`GET {base_url}/models`), as
/// `provider/model`; empty when catalog fetching is off (`catalog_url = "off"` keeps
/// Kestrel off the network for lists, as `kestrel models` does) or the list fails.
pub(crate) async fn provider_models(launch: &Launch, current: &str) -> Vec<String> {
    let Some((provider, _)) = current.split_once('/') else { return Vec::new() };
    if CatalogSettings::from_config(&launch.config).url.is_none() {
        return Vec::new();
    }
    let resolved =
        crate::setup::resolve_model(&launch.config, &launch.home, current, &launch.client_options);
    let Ok(resolved) = resolved else { return Vec::new() };
    let ca_bundle = launch.config.ca_bundle.as_deref();
    match list_provider_models(&resolved.provider, ca_bundle, PROVIDER_LIST_TIMEOUT).await {
        Ok(listed) => listed.into_iter().map(|model| format!("{provider}/{}", model.id)).collect(),
        Err(_) => Vec::new(),
    }
}
