//! `kestrel models`: the models of the configured providers with their context window,
//! output limit and prices. The catalog is fetched in the foreground (with a short
//! timeout) when the cache is stale or `--refresh` asks, falling back to the cache and
//! then to the bundled snapshot; stderr says which was used. Providers' own `/models`
//! lists are merged in, so a model the catalog lacks still shows (with unknown limits).

use clap::Args;
use kestrel_model::{
    CatalogSettings, CatalogStore, FOREGROUND_FETCH_TIMEOUT, ListedModel, LoadedCatalog,
    ModelProfile, ProviderConfig, list_provider_models,
};
use kestrel_store::{Config, KestrelHome};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;

#[derive(Args)]
pub struct ModelsArgs {
    /// Only this provider's models.
    provider: Option<String>,
    /// Fetch the catalog now even if the cache is fresh.
    #[arg(long)]
    refresh: bool,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Ask the providers' own `/models` lists even when catalog fetching is off
    /// (`catalog_url = "off"`), e.g. a local server on an air-gapped machine.
    #[arg(long)]
    ask_providers: bool,
}

/// One line of the listing.
struct Row {
    provider: String,
    model: String,
    name: Option<String>,
    profile: ModelProfile,
    /// The config's `context_window`, the catalog's, or what the provider reports;
    /// `None` when only the default is known.
    context_window: Option<u64>,
    in_catalog: bool,
    listed_by_provider: bool,
}

pub fn run(args: ModelsArgs) -> ExitCode {
    let (home, config) = match load() {
        Ok(loaded) => loaded,
        Err(message) => {
            eprintln!("kestrel: {message}");
            return ExitCode::from(2);
        }
    };
    let names: Vec<String> = match &args.provider {
        Some(name) if config.provider(name).is_none() => {
            eprintln!(
                "kestrel: unknown provider `{name}`: known providers are {}",
                config.provider_names().join(", ")
            );
            return ExitCode::from(2);
        }
        Some(name) => vec![name.clone()],
        None => config.provider_names().into_iter().map(str::to_owned).collect(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("kestrel: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let settings = CatalogSettings::from_config(&config);
    let store = CatalogStore::new(&home, settings.clone());
    let providers: Vec<ProviderConfig> = names
        .iter()
        .filter_map(|name| {
            config
                .provider(name)
                .map(|settings| kestrel_model::detect::provider_config(name, &settings))
        })
        .collect();
    // `off` means no network for the catalog, the providers' lists included, unless asked.
    let ask_providers = settings.url.is_some() || args.ask_providers;
    let (loaded, listed) = runtime.block_on(async {
        // The providers' lists are fetched while the catalog is.
        let lists: Vec<_> = providers
            .iter()
            .filter(|_| ask_providers)
            .map(|provider| {
                let (provider, settings) = (provider.clone(), settings.clone());
                tokio::spawn(async move { provider_list(&provider, &settings).await })
            })
            .collect();
        let loaded = store.load(args.refresh, FOREGROUND_FETCH_TIMEOUT).await;
        let mut listed = Vec::new();
        for list in lists {
            listed.push(list.await.ok().flatten());
        }
        (loaded, listed)
    });
    eprintln!("kestrel: model catalog: {}", loaded.source);
    if !ask_providers {
        eprintln!(
            "kestrel: the providers' own model lists were not asked for (catalog fetching is \
             off; --ask-providers asks them)"
        );
    }
    for warning in &loaded.warnings {
        eprintln!("kestrel: warning: {warning}");
    }
    let mut rows = Vec::new();
    let listed = listed.into_iter().chain(std::iter::repeat_with(|| None));
    for (provider, listed) in providers.iter().zip(listed) {
        let listed = match listed {
            Some(Ok(models)) => models,
            Some(Err(error)) => {
                eprintln!(
                    "kestrel: warning: cannot list the models of `{}`: {error}",
                    provider.name
                );
                Vec::new()
            }
            None => Vec::new(),
        };
        let context_override = config.provider(&provider.name).and_then(|p| p.context_window);
        rows.extend(provider_rows(&loaded, provider, context_override, listed));
    }
    let out = if args.json { json_lines(&rows) } else { table(&rows) };
    print!("{out}");
    ExitCode::SUCCESS
}

fn load() -> Result<(KestrelHome, Config), String> {
    let home = KestrelHome::from_env().map_err(|error| error.to_string())?;
    let cwd = std::env::current_dir()
        .map_err(|error| format!("cannot read the current directory: {error}"))?;
    let config = Config::load(&home, &cwd).map_err(|error| error.to_string())?;
    Ok((home, config))
}

/// The provider as the model crate sees it; the key when its variable is set.
/// The provider's own list; `None` when it needs a key that is not set (not an error:
/// most people configure only some providers).
async fn provider_list(
    provider: &ProviderConfig,
    settings: &CatalogSettings,
) -> Option<Result<Vec<ListedModel>, kestrel_model::CatalogError>> {
    if provider.api_key_env.is_some() && provider.api_key.is_none() {
        return None;
    }
    let ca_bundle = settings.ca_bundle.as_deref();
    Some(list_provider_models(provider, ca_bundle, FOREGROUND_FETCH_TIMEOUT).await)
}

/// The catalog's models of `provider` and the ones it lists itself, merged by id.
fn provider_rows(
    loaded: &LoadedCatalog,
    provider: &ProviderConfig,
    context_override: Option<u64>,
    listed: Vec<ListedModel>,
) -> Vec<Row> {
    // name, in the catalog, listed by the provider, the context length it reports
    let mut by_id: BTreeMap<String, (Option<String>, bool, bool, Option<u64>)> = BTreeMap::new();
    if let Some(entry) = loaded.catalog.provider(&provider.name) {
        for model in entry.models.values() {
            by_id.insert(model.id.clone(), (model.name.clone(), true, false, None));
        }
    }
    for model in listed {
        let slot = by_id.entry(model.id).or_insert((None, false, false, None));
        slot.2 = true;
        slot.3 = model.context_window;
        if slot.0.is_none() {
            slot.0 = model.name;
        }
    }
    by_id
        .into_iter()
        .map(|(model, (name, in_catalog, listed_by_provider, reported))| {
            let profile = loaded.catalog.profile(provider, &model);
            let known = !matches!(profile.origin, kestrel_model::ProfileOrigin::Unknown);
            // The config's figure over everything; the server's own over a default.
            let context_window =
                context_override.or(known.then_some(profile.context_window)).or(reported);
            Row {
                provider: provider.name.clone(),
                profile,
                context_window,
                model,
                name,
                in_catalog,
                listed_by_provider,
            }
        })
        .collect()
}

fn table(rows: &[Row]) -> String {
    let width = rows.iter().map(|row| row.provider.len() + row.model.len() + 1).max().unwrap_or(0);
    let width = width.max("MODEL".len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}  {:>8}  {:>7}  {:>9}  {:>10}  {:>10}",
        "MODEL", "CONTEXT", "OUTPUT", "INPUT $/M", "CACHED $/M", "OUTPUT $/M"
    );
    for row in rows {
        let context = tokens(row.context_window);
        let pricing = row.profile.pricing.as_ref();
        let _ = writeln!(
            out,
            "{:<width$}  {:>8}  {:>7}  {:>9}  {:>10}  {:>10}",
            format!("{}/{}", row.provider, row.model),
            context,
            tokens(row.profile.max_output_tokens),
            price(pricing.map(|p| p.input)),
            price(pricing.map(|p| p.cache_read.unwrap_or(p.input))),
            price(pricing.map(|p| p.output)),
        );
    }
    out
}

fn json_lines(rows: &[Row]) -> String {
    let mut out = String::new();
    for row in rows {
        let pricing = row.profile.pricing.as_ref().map(|pricing| {
            serde_json::json!({
                "input": pricing.input,
                "output": pricing.output,
                "cache_read": pricing.cache_read,
                "cache_write": pricing.cache_write,
            })
        });
        let line = serde_json::json!({
            "provider": row.provider,
            "model": row.model,
            "name": row.name,
            "context_window": row.context_window,
            "max_output_tokens": row.profile.max_output_tokens,
            "pricing": pricing,
            "in_catalog": row.in_catalog,
            "listed_by_provider": row.listed_by_provider,
        });
        let _ = writeln!(out, "{line}");
    }
    out
}

/// `200k`, `1.05M`, or `-` when unknown.
fn tokens(count: Option<u64>) -> String {
    match count {
        None => "-".into(),
        Some(count) if count >= 1_000_000 => {
            let millions = format!("{:.2}", count as f64 / 1e6);
            format!("{}M", millions.trim_end_matches('0').trim_end_matches('.'))
        }
        Some(count) if count >= 1_000 && count % 1_000 == 0 => format!("{}k", count / 1_000),
        Some(count) if count >= 1_000 => format!("{:.1}k", count as f64 / 1e3),
        Some(count) => count.to_string(),
    }
}

fn price(value: Option<f64>) -> String {
    match value {
        None => "-".into(),
        Some(value) if value > 0.0 && value < 0.01 => format!("{value:.4}"),
        Some(value) => format!("{value:.2}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_counts_and_prices_read_shortly() {
        assert_eq!(tokens(Some(200_000)), "200k");
        assert_eq!(tokens(Some(1_050_000)), "1.05M");
        assert_eq!(tokens(Some(1_000_000)), "1M");
        assert_eq!(tokens(Some(131_072)), "131.1k");
        assert_eq!(tokens(Some(512)), "512");
        assert_eq!(tokens(None), "-");
        assert_eq!(price(Some(3.0)), "3.00");
        assert_eq!(price(Some(0.0025)), "0.0025");
        assert_eq!(price(None), "-");
    }
}
