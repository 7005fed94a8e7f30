//! Lenient reading of the models.dev `api.json` shape, and writing it back (the fields
//! this crate reads) for the cache. The catalog is maintained by others and grows new
//! fields and shapes: a field that does not fit is treated as absent, an entry without
//! what is required is left out, and only a catalog with no usable model is an error.

use super::pricing::{PriceTier, Pricing};
use super::{Catalog, CatalogModel, CatalogProvider};
use serde_json::{Map, Value, json};

/// `context_over_200k` prices apply from this many input tokens on.
const OVER_200K: u64 = 200_001;

/// The catalog in `value`; an error (the reason) when nothing usable is in it.
pub(super) fn catalog(value: &Value) -> Result<Catalog, String> {
    let Some(entries) = value.as_object() else {
        return Err(format!("expected an object of providers, found {}", kind(value)));
    };
    let mut catalog = Catalog::default();
    for (key, entry) in entries {
        if let Some(provider) = provider(key, entry) {
            catalog.insert(provider);
        }
    }
    if catalog.model_count() == 0 {
        return Err(
            "it lists no model (each provider needs a `models` object of models with an `id`)"
                .into(),
        );
    }
    Ok(catalog)
}

fn provider(key: &str, value: &Value) -> Option<CatalogProvider> {
    let entry = value.as_object()?;
    let models = entry.get("models")?.as_object()?;
    let models = models.values().filter_map(model).map(|model| (model.id.clone(), model)).collect();
    Some(CatalogProvider {
        // The key is what api.json is indexed by (and equals `id` there).
        id: key.to_owned(),
        name: string(entry.get("name")),
        api: string(entry.get("api")),
        env: strings(entry.get("env")),
        models,
    })
}

fn model(value: &Value) -> Option<CatalogModel> {
    let entry = value.as_object()?;
    let id = string(entry.get("id")).filter(|id| !id.is_empty())?;
    let modalities = entry.get("modalities");
    let limit = entry.get("limit");
    Some(CatalogModel {
        id,
        name: string(entry.get("name")),
        reasoning: boolean(entry.get("reasoning")),
        tool_call: capability(entry.get("tool_call")),
        attachment: boolean(entry.get("attachment")),
        input_modalities: strings(modalities.and_then(|m| m.get("input"))),
        output_modalities: strings(modalities.and_then(|m| m.get("output"))),
        pricing: entry.get("cost").and_then(pricing),
        context_window: count(limit.and_then(|l| l.get("context"))),
        max_output_tokens: count(limit.and_then(|l| l.get("output"))),
    })
}

/// Prices need at least an input or an output price; a missing one of the two is 0.
fn pricing(value: &Value) -> Option<Pricing> {
    let (input, output) = (price(value.get("input")), price(value.get("output")));
    if input.is_none() && output.is_none() {
        return None;
    }
    let mut tiers: Vec<PriceTier> = match value.get("tiers") {
        Some(Value::Array(tiers)) => tiers.iter().filter_map(tier).collect(),
        _ => Vec::new(),
    };
    // The older shape of a long-context price; the `tiers` list supersedes it.
    if tiers.is_empty()
        && let Some(over) = value.get("context_over_200k")
        && let Some(rates) = rates(over, OVER_200K)
    {
        tiers.push(rates);
    }
    tiers.sort_by_key(|tier| tier.from_input_tokens);
    Some(Pricing {
        input: input.unwrap_or(0.0),
        output: output.unwrap_or(0.0),
        cache_read: price(value.get("cache_read")),
        cache_write: price(value.get("cache_write")),
        tiers,
    })
}

/// A context tier: `{"tier": {"type": "context", "size": N}, rates...}` or, as the
/// catalog's sources write it, `{"context": {"min": N}, rates...}`.
fn tier(value: &Value) -> Option<PriceTier> {
    let threshold = match value.get("tier") {
        Some(tier) => {
            let kind = tier.get("type").and_then(Value::as_str).unwrap_or("context");
            if kind != "context" {
                return None;
            }
            count(tier.get("size"))?
        }
        None => count(value.get("context").and_then(|context| context.get("min")))?,
    };
    rates(value, threshold)
}

fn rates(value: &Value, from_input_tokens: u64) -> Option<PriceTier> {
    let (input, output) = (price(value.get("input")), price(value.get("output")));
    if input.is_none() && output.is_none() {
        return None;
    }
    Some(PriceTier {
        from_input_tokens,
        input: input.unwrap_or(0.0),
        output: output.unwrap_or(0.0),
        cache_read: price(value.get("cache_read")),
        cache_write: price(value.get("cache_write")),
    })
}

/// The catalog as JSON in the shape it was read from.
pub(super) fn to_value(catalog: &Catalog) -> Value {
    let mut providers = Map::new();
    for provider in catalog.providers() {
        let models: Map<String, Value> =
            provider.models.values().map(|model| (model.id.clone(), model_value(model))).collect();
        let mut entry = Map::new();
        entry.insert("id".into(), json!(provider.id));
        insert_some(&mut entry, "name", provider.name.as_ref().map(|name| json!(name)));
        insert_some(&mut entry, "api", provider.api.as_ref().map(|api| json!(api)));
        entry.insert("env".into(), json!(provider.env));
        entry.insert("models".into(), Value::Object(models));
        providers.insert(provider.id.clone(), Value::Object(entry));
    }
    Value::Object(providers)
}

fn model_value(model: &CatalogModel) -> Value {
    let mut entry = Map::new();
    entry.insert("id".into(), json!(model.id));
    insert_some(&mut entry, "name", model.name.as_ref().map(|name| json!(name)));
    insert_some(&mut entry, "reasoning", model.reasoning.map(Value::Bool));
    insert_some(&mut entry, "tool_call", model.tool_call.map(Value::Bool));
    insert_some(&mut entry, "attachment", model.attachment.map(Value::Bool));
    entry.insert(
        "modalities".into(),
        json!({"input": model.input_modalities, "output": model.output_modalities}),
    );
    if let Some(pricing) = &model.pricing {
        let mut cost =
            rates_value(pricing.input, pricing.output, pricing.cache_read, pricing.cache_write);
        let tiers: Vec<Value> = pricing
            .tiers
            .iter()
            .map(|tier| {
                let mut value =
                    rates_value(tier.input, tier.output, tier.cache_read, tier.cache_write);
                value.insert(
                    "tier".into(),
                    json!({"type": "context", "size": tier.from_input_tokens}),
                );
                Value::Object(value)
            })
            .collect();
        if !tiers.is_empty() {
            cost.insert("tiers".into(), Value::Array(tiers));
        }
        entry.insert("cost".into(), Value::Object(cost));
    }
    let mut limit = Map::new();
    insert_some(&mut limit, "context", model.context_window.map(|n| json!(n)));
    insert_some(&mut limit, "output", model.max_output_tokens.map(|n| json!(n)));
    if !limit.is_empty() {
        entry.insert("limit".into(), Value::Object(limit));
    }
    Value::Object(entry)
}

fn rates_value(
    input: f64,
    output: f64,
    cache_read: Option<f64>,
    cache_write: Option<f64>,
) -> Map<String, Value> {
    let mut rates = Map::new();
    rates.insert("input".into(), json!(input));
    rates.insert("output".into(), json!(output));
    insert_some(&mut rates, "cache_read", cache_read.map(|price| json!(price)));
    insert_some(&mut rates, "cache_write", cache_write.map(|price| json!(price)));
    rates
}

fn insert_some(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.into(), value);
    }
}

fn string(value: Option<&Value>) -> Option<String> {
    value?.as_str().map(str::to_owned)
}

/// The strings of an array; other elements are skipped.
fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => {
            items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        }
        _ => Vec::new(),
    }
}

fn boolean(value: Option<&Value>) -> Option<bool> {
    value?.as_bool()
}

/// A boolean, or an object saying `{"supported": bool, ...}`.
fn capability(value: Option<&Value>) -> Option<bool> {
    match value? {
        Value::Bool(supported) => Some(*supported),
        Value::Object(details) => details.get("supported").and_then(Value::as_bool),
        _ => None,
    }
}

/// A price in USD per million tokens: a finite, non-negative number.
fn price(value: Option<&Value>) -> Option<f64> {
    value?.as_f64().filter(|price| price.is_finite() && *price >= 0.0)
}

/// A positive token count (written as an integer or a whole float).
fn count(value: Option<&Value>) -> Option<u64> {
    let value = value?;
    if let Some(count) = value.as_u64() {
        return (count > 0).then_some(count);
    }
    let float = value.as_f64().filter(|float| float.is_finite() && *float >= 1.0)?;
    // Whole numbers only; anything else is not a count.
    (float.fract() == 0.0 && float <= u64::MAX as f64).then_some(float as u64)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: Value) -> Result<Catalog, String> {
        catalog(&value)
    }

    #[test]
    fn odd_entries_are_left_out_and_odd_fields_read_as_absent() {
        let parsed = parse(json!({
            "good": {"models": {
                "full": {"id": "full", "name": "Full", "reasoning": true,
                         "tool_call": {"supported": true, "parallel": false},
                         "attachment": "yes", "modalities": {"input": ["text", 7], "output": "text"},
                         "cost": {"input": 1.5, "output": "x", "cache_read": -1},
                         "limit": {"context": 128000.0, "output": 0}, "brand_new_field": [1, 2]},
                "bare": {"id": "bare"},
                "no-id": {"name": "Nameless"},
                "not-an-object": 42,
                "empty-id": {"id": ""}
            }},
            "no-models": {"id": "no-models"},
            "models-not-an-object": {"models": ["a"]},
            "a-string": "provider",
        }))
        .unwrap();
        assert_eq!(parsed.providers().count(), 1);
        let good = parsed.provider("good").unwrap();
        assert_eq!(good.models.keys().collect::<Vec<_>>(), ["bare", "full"]);
        let full = &good.models["full"];
        assert_eq!(full.tool_call, Some(true));
        assert_eq!(full.attachment, None);
        assert_eq!(full.input_modalities, ["text"]);
        assert!(full.output_modalities.is_empty());
        let pricing = full.pricing.as_ref().unwrap();
        assert_eq!((pricing.input, pricing.output, pricing.cache_read), (1.5, 0.0, None));
        assert_eq!((full.context_window, full.max_output_tokens), (Some(128_000), None));
        assert_eq!(good.models["bare"], CatalogModel { id: "bare".into(), ..Default::default() });
    }

    #[test]
    fn a_catalog_without_any_model_is_an_error_saying_why() {
        for (value, says) in [
            (json!([1, 2]), "an array"),
            (json!("html"), "a string"),
            (json!({}), "no model"),
            (json!({"p": {"models": {"m": {"name": "no id"}}}}), "no model"),
            (json!({"error": {"message": "rate limited"}}), "no model"),
        ] {
            let error = parse(value).unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn both_tier_shapes_and_the_older_over_200k_price_are_read() {
        let parsed = parse(json!({"p": {"models": {
            "tiers": {"id": "tiers", "cost": {"input": 2, "output": 10, "tiers": [
                {"tier": {"type": "context", "size": 272000}, "input": 4, "output": 15},
                {"context": {"min": 128000}, "input": 3, "output": 12},
                {"tier": {"type": "time_of_day", "size": 1}, "input": 9, "output": 9}
            ]}},
            "older": {"id": "older", "cost": {"input": 2, "output": 10,
                "context_over_200k": {"input": 4, "output": 20, "cache_read": 0.4}}}
        }}}))
        .unwrap();
        let provider = parsed.provider("p").unwrap();
        let tiers = &provider.models["tiers"].pricing.as_ref().unwrap().tiers;
        let starts: Vec<_> = tiers.iter().map(|tier| tier.from_input_tokens).collect();
        assert_eq!(starts, [128_000, 272_000], "sorted; unknown tier kinds left out");
        let older = &provider.models["older"].pricing.as_ref().unwrap().tiers;
        assert_eq!(older.len(), 1);
        assert_eq!((older[0].from_input_tokens, older[0].cache_read), (200_001, Some(0.4)));
    }
}
