//! Flag values for the engine's enums, parsed with their serde (kebab-case) names so that flags,
//! TOML configs and reports spell every value the same way.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use dp_accounting::registry::{Choice, choose};
use serde::de::DeserializeOwned;

/// Parses `s` as the kebab-case name of a variant of `T`.
pub fn parse<T: DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string())).map_err(|e| {
        let message = e.to_string();
        // serde says "unknown variant `x`, expected one of `a`, `b`": keep that part.
        message.split(" at line").next().unwrap_or(&message).replace('`', "'")
    })
}

/// A flag's parser for one of dp-accounting's closed sets: its names, each with its line of help.
pub fn choice<T: Choice + Send + Sync>() -> impl TypedValueParser<Value = T> {
    let values = T::ALL.iter().map(|value| PossibleValue::new(value.name()).help(value.about()));
    PossibleValuesParser::new(values).try_map(|name| choose::<T>(&name))
}
