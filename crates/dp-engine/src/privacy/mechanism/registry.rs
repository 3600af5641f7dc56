//! The built-in mechanisms by name: what a configuration file or the CLI names, the option keys
//! each reads, and how each is built from them (into its own typed options). Adding a built-in
//! mechanism is its file and one line of [`BUILTIN`]. An option of another mechanism is refused
//! with the mechanisms that do read it.

use super::registered::{MechanismName, Registered};
use super::{Mechanism, gaussian, laplacian_smoothing, optimized, optimized_paper, unperturbed};
use crate::error::{EngineError, Result};
use std::sync::Arc;

/// The built-in mechanisms, one line each.
pub const BUILTIN: [Registered; 6] = [
    unperturbed::REGISTERED,
    gaussian::REGISTERED,
    laplacian_smoothing::LS_SGD,
    laplacian_smoothing::LS_ADAM,
    optimized::REGISTERED,
    optimized_paper::REGISTERED,
];

/// The entry of `name`, refused when BUILTIN lacks its line (never another mechanism instead).
fn entry(name: MechanismName) -> Result<&'static Registered> {
    BUILTIN
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| EngineError::invalid("mechanism", format!("{name} has no line in the registry")))
}

/// The built-in mechanism `name` with its `options` (configuration keys to values); a key it
/// does not read is refused, naming the mechanisms that do.
pub fn named(name: MechanismName, options: &toml::Table) -> Result<Arc<dyn Mechanism>> {
    let entry = entry(name)?;
    if let Some(key) = options.keys().find(|k| !entry.options.contains(&k.as_str())) {
        let readers: Vec<String> = BUILTIN
            .iter()
            .filter(|e| e.options.contains(&key.as_str()))
            .map(|e| format!("--mechanism {}", e.name))
            .collect();
        return Err(if readers.is_empty() {
            EngineError::invalid(
                "setting",
                format!("`{key}` is not a setting of a run, nor an option of any mechanism"),
            )
        } else {
            let reason = format!("`{key}` applies to {} only, not to --mechanism {name}", readers.join(" or "));
            EngineError::invalid("mechanism option", reason)
        });
    }
    (entry.build)(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_has_one_entry_building_the_mechanism_of_that_name() {
        for e in &BUILTIN {
            assert_eq!(BUILTIN.iter().filter(|o| o.name == e.name).count(), 1);
            let built = named(e.name, &toml::Table::new()).expect("defaults build");
            assert_eq!(built.name(), e.name.to_string());
        }
        assert_eq!(BUILTIN.len(), 6, "every name has its line");
    }

    #[test]
    fn an_option_of_another_mechanism_is_refused_naming_its_readers() {
        let mut options = toml::Table::new();
        options.insert("ls_sigma".into(), toml::Value::Float(2.0));
        let err = named(MechanismName::Gaussian, &options).err().expect("refused").to_string();
        assert!(err.contains("ls_sigma") && err.contains("ls-sgd or --mechanism ls-adam"), "{err}");
        assert!(named(MechanismName::LsSgd, &options).is_ok());
        options.insert("epoch".into(), toml::Value::Integer(3));
        let err = named(MechanismName::LsSgd, &options).err().expect("refused").to_string();
        assert!(err.contains("epoch") && err.contains("nor an option of any mechanism"), "{err}");
    }

    #[test]
    fn a_mistyped_option_value_is_refused() {
        let mut options = toml::Table::new();
        options.insert("sensitivity_every".into(), toml::Value::String("often".into()));
        assert!(named(MechanismName::OptimizedPaper, &options).is_err());
    }
}
