//! Flag values for the engine's enums, parsed with their serde (kebab-case) names so that flags,
//! TOML configs and reports spell every value the same way.

use serde::de::DeserializeOwned;

/// Parses `s` as the kebab-case name of a variant of `T`.
pub fn parse<T: DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string())).map_err(|e| {
        let message = e.to_string();
        // serde says "unknown variant `x`, expected one of `a`, `b`": keep that part.
        message.split(" at line").next().unwrap_or(&message).replace('`', "'")
    })
}
