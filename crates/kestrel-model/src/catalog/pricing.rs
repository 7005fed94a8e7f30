//! Prices and limits as a session uses them: what one request cost, and how big the
//! model's context window is. A model the catalog does not know gets
//! [`DEFAULT_CONTEXT_WINDOW`] and costs nothing (ARCHITECTURE §7).

use super::CatalogMatch;
use crate::TokenUsage;

/// The context window assumed for a model the catalog does not list. 128k is what most
/// current open models (Llama, Qwen, DeepSeek, GLM) offer; erring small makes
/// compaction start early rather than a request overflow.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// The context window assumed for a model the catalog does not list served on this
/// machine: local servers (Ollama, llama.cpp, LM Studio) often run small models with
/// a small context, and a compaction too late is a failed request.
pub const LOCAL_DEFAULT_CONTEXT_WINDOW: u64 = 32_768;

/// A model's prices in USD per million tokens.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pricing {
    pub input: f64,
    pub output: f64,
    /// Input read from the provider's prompt cache; the input price when `None`.
    pub cache_read: Option<f64>,
    /// Input written to the prompt cache (Anthropic); [`CACHE_WRITE_FACTOR`] × `input`
    /// when `None`.
    pub cache_write: Option<f64>,
    /// Higher prices for long prompts, sorted by threshold.
    pub tiers: Vec<PriceTier>,
}

/// Prices that apply to a whole request once its input reaches a size (e.g. OpenAI's
/// long-context pricing above 272k input tokens).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTier {
    /// The tier applies to requests with at least this many input tokens.
    pub from_input_tokens: u64,
    pub input: f64,
    pub output: f64,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
}

/// What a cache write costs, as a multiple of the input price, when the catalog gives no
/// `cache_write` price: Anthropic's 5-minute cache writes (the kind Kestrel asks for).
pub const CACHE_WRITE_FACTOR: f64 = 1.25;

impl Pricing {
    /// What a request with these token counts cost, in USD, per million:
    /// `(input - cached - written) × input + cached × cache_read + written × cache_write
    /// + output × output`, at the rates of the highest tier the request's input reached.
    /// Reasoning tokens are part of `output_tokens` and billed as output.
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        let (input, output, cache_read, cache_write) =
            match self.tiers.iter().rev().find(|tier| usage.input_tokens >= tier.from_input_tokens)
            {
                Some(tier) => (tier.input, tier.output, tier.cache_read, tier.cache_write),
                None => (self.input, self.output, self.cache_read, self.cache_write),
            };
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let written = usage.cache_write_tokens.min(usage.input_tokens - cached);
        let uncached = usage.input_tokens - cached - written;
        let cost = uncached as f64 * input
            + cached as f64 * cache_read.unwrap_or(input)
            + written as f64 * cache_write.unwrap_or(input * CACHE_WRITE_FACTOR)
            + usage.output_tokens as f64 * output;
        cost / 1_000_000.0
    }
}

/// Where a profile's numbers came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileOrigin {
    /// The catalog lists the model under the provider in use.
    Catalog { provider_id: String },
    /// Only another catalog provider lists it: the limits hold, the prices are an
    /// estimate (or zero for a server on this machine).
    OtherProvider { provider_id: String },
    /// No catalog entry: default limits, zero cost.
    Unknown,
}

/// What a session needs to know about its model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelProfile {
    /// Tokens of context, input and output together.
    pub context_window: u64,
    pub max_output_tokens: Option<u64>,
    /// `None`: costs are reported as 0.
    pub pricing: Option<Pricing>,
    pub origin: ProfileOrigin,
    /// Whether the model takes images as input (the catalog's `modalities.input` has
    /// `image`; without modalities, `attachment`). False for a model the catalog does not
    /// know: an image sent to a text-only model fails the request.
    pub accepts_images: bool,
}

impl ModelProfile {
    /// A model the catalog does not know: default limits, no price.
    pub fn unknown() -> Self {
        Self {
            context_window: DEFAULT_CONTEXT_WINDOW,
            max_output_tokens: None,
            pricing: None,
            origin: ProfileOrigin::Unknown,
            accepts_images: false,
        }
    }

    pub(super) fn from_match(found: &CatalogMatch<'_>) -> Self {
        let provider_id = found.provider_id.to_owned();
        Self {
            context_window: found.model.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW),
            max_output_tokens: found.model.max_output_tokens,
            pricing: found.model.pricing.clone(),
            origin: if found.exact {
                ProfileOrigin::Catalog { provider_id }
            } else {
                ProfileOrigin::OtherProvider { provider_id }
            },
            accepts_images: if found.model.input_modalities.is_empty() {
                found.model.attachment == Some(true)
            } else {
                found.model.input_modalities.iter().any(|modality| modality == "image")
            },
        }
    }

    /// A model the catalog does not know on a server on this machine: the smaller local
    /// default window, no price.
    pub fn unknown_local() -> Self {
        Self { context_window: LOCAL_DEFAULT_CONTEXT_WINDOW, ..Self::unknown() }
    }

    /// The same limits at no cost (a model served on this machine).
    pub fn without_prices(self) -> Self {
        Self { pricing: None, ..self }
    }

    /// What a request with these token counts cost, in USD; 0 without prices.
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        self.pricing.as_ref().map_or(0.0, |pricing| pricing.cost(usage))
    }
}

/// Whether `url` points at this machine (`localhost`, 127.0.0.0/8, `::1`): a server there
/// is the user's own and bills nothing.
pub fn is_local_url(url: &str) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url.trim()) else { return false };
    let Some(host) = parsed.host_str() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") || host.to_ascii_lowercase().ends_with(".localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_writes_cost_the_cache_write_price_or_a_quarter_more_than_input() {
        let mut pricing = Pricing {
            input: 3.0,
            output: 15.0,
            cache_read: Some(0.3),
            cache_write: Some(3.75),
            tiers: Vec::new(),
        };
        // Anthropic: 25 plain + 2000 read + 100 written input tokens, 10 output.
        let usage = TokenUsage {
            input_tokens: 2_125,
            cached_input_tokens: 2_000,
            output_tokens: 10,
            reasoning_tokens: 0,
            cache_write_tokens: 100,
        };
        let expected = (25.0 * 3.0 + 2_000.0 * 0.3 + 100.0 * 3.75 + 10.0 * 15.0) / 1e6;
        assert!(close(pricing.cost(&usage), expected), "{}", pricing.cost(&usage));
        pricing.cache_write = None;
        let expected = (25.0 * 3.0 + 2_000.0 * 0.3 + 100.0 * 3.0 * 1.25 + 10.0 * 15.0) / 1e6;
        assert!(close(pricing.cost(&usage), expected), "{}", pricing.cost(&usage));
        // Counts that do not add up never make a negative count.
        let odd = TokenUsage { input_tokens: 50, cache_write_tokens: 100, ..usage };
        assert!(pricing.cost(&odd) >= 0.0);
    }

    fn usage(input: u64, cached: u64, output: u64, reasoning: u64) -> TokenUsage {
        TokenUsage {
            input_tokens: input,
            cached_input_tokens: cached,
            output_tokens: output,
            reasoning_tokens: reasoning,
            cache_write_tokens: 0,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn cost_splits_cached_input_and_bills_reasoning_as_output() {
        let pricing = Pricing {
            input: 3.0,
            output: 15.0,
            cache_read: Some(0.3),
            cache_write: Some(3.75),
            tiers: Vec::new(),
        };
        // 1000 uncached × 3 + 9000 cached × 0.3 + 500 output (200 of them reasoning) × 15
        let cost = pricing.cost(&usage(10_000, 9_000, 500, 200));
        assert!(close(cost, (1_000.0 * 3.0 + 9_000.0 * 0.3 + 500.0 * 15.0) / 1e6), "{cost}");
        assert_eq!(pricing.cost(&TokenUsage::default()), 0.0);
    }

    #[test]
    fn cached_input_without_a_cache_price_costs_the_input_price() {
        let pricing = Pricing { input: 2.0, output: 8.0, ..Pricing::default() };
        assert!(close(pricing.cost(&usage(1_000, 600, 0, 0)), 2_000.0 / 1e6));
        // More cached than input (a provider's rounding) never makes a negative count.
        assert!(close(pricing.cost(&usage(100, 500, 0, 0)), 100.0 * 2.0 / 1e6));
    }

    #[test]
    fn a_long_prompt_pays_the_tier_it_reached() {
        let pricing = Pricing {
            input: 5.0,
            output: 30.0,
            cache_read: Some(0.5),
            cache_write: None,
            tiers: vec![PriceTier {
                from_input_tokens: 272_000,
                input: 10.0,
                output: 45.0,
                cache_read: Some(1.0),
                cache_write: None,
            }],
        };
        assert!(close(
            pricing.cost(&usage(271_999, 0, 1_000, 0)),
            (271_999.0 * 5.0 + 30_000.0) / 1e6
        ));
        let long = pricing.cost(&usage(300_000, 100_000, 1_000, 0));
        assert!(close(long, (200_000.0 * 10.0 + 100_000.0 * 1.0 + 45_000.0) / 1e6), "{long}");
    }

    #[test]
    fn an_unknown_model_has_default_limits_and_costs_nothing() {
        let profile = ModelProfile::unknown();
        assert_eq!(profile.context_window, DEFAULT_CONTEXT_WINDOW);
        assert_eq!(profile.cost(&usage(1_000_000, 0, 1_000_000, 0)), 0.0);
    }

    #[test]
    fn local_urls_are_loopback_hosts_only() {
        for local in [
            "http://127.0.0.1:11434/v1",
            "http://localhost:8080/v1",
            "http://[::1]:1/v1",
            "http://127.8.9.1/v1",
        ] {
            assert!(is_local_url(local), "{local}");
        }
        for remote in [
            "https://api.openai.com/v1",
            "http://10.0.0.2/v1",
            "not a url",
            "http://127.0.0.1.example.com/",
        ] {
            assert!(!is_local_url(remote), "{remote}");
        }
    }
}
