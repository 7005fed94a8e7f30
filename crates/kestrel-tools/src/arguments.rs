//! Parsing a tool's JSON arguments into its typed struct, leniently: weaker models
//! send numbers and booleans as strings ("10", "true"), which is accepted here.

use crate::ToolOutput;
use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer};

/// Parses `arguments` for the tool `tool`; the error output names the tool and the
/// field that was wrong, so the model can resend the call.
pub(crate) fn parse<T: DeserializeOwned>(
    tool: &str,
    arguments: serde_json::Value,
) -> Result<T, ToolOutput> {
    serde_path_to_error::deserialize(arguments).map_err(|error| {
        let field = error.path().to_string();
        let inner = error.into_inner();
        if field == "." {
            ToolOutput::error(format!("invalid arguments for `{tool}`: {inner}"))
        } else {
            ToolOutput::error(format!("invalid arguments for `{tool}`: `{field}`: {inner}"))
        }
    })
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Number(serde_json::Number),
    Text(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum BoolOrText {
    Bool(bool),
    Text(String),
}

/// `deserialize_with` for an optional non-negative integer given as a number or text.
pub(crate) fn optional_u64<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    let Some(value) = Option::<NumberOrText>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let parsed = match &value {
        NumberOrText::Number(number) => number.as_u64().or_else(|| {
            number.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64)
        }),
        NumberOrText::Text(text) => text.trim().parse::<u64>().ok(),
    };
    match parsed {
        Some(number) => Ok(Some(number)),
        None => {
            let shown = match value {
                NumberOrText::Number(number) => number.to_string(),
                NumberOrText::Text(text) => format!("\"{text}\""),
            };
            Err(de::Error::custom(format!("expected a non-negative integer, got {shown}")))
        }
    }
}

/// `deserialize_with` for an optional boolean given as a boolean or "true"/"false".
pub(crate) fn optional_bool<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<bool>, D::Error> {
    match Option::<BoolOrText>::deserialize(deserializer)? {
        None => Ok(None),
        Some(BoolOrText::Bool(value)) => Ok(Some(value)),
        Some(BoolOrText::Text(text)) => match text.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            _ => Err(de::Error::custom(format!("expected true or false, got \"{text}\""))),
        },
    }
}
