//! The built-in mechanisms by name: what a configuration file or the CLI names, the options each
//! reads ([`MechanismOptions`]'s keys), and how each is built from them. Adding a built-in
//! mechanism is its file and one line of [`BUILTIN`]. An option of another mechanism is refused
//! with the mechanisms that do read it.

use super::registered::{MechanismName, MechanismOptions, Registered};
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

/// The built-in mechanism `name` with its `options`; an option it does not read is refused,
/// naming the mechanisms that do.
pub fn named(name: MechanismName, options: &MechanismOptions) -> Result<Arc<dyn Mechanism>> {
    let entry = entry(name)?;
    if let Some(key) = options.keys().into_iter().find(|key| !entry.options.contains(key)) {
        let readers: Vec<String> =
            BUILTIN.iter().filter(|e| e.options.contains(&key)).map(|e| format!("the {} mechanism", e.name)).collect();
        let reason = format!("`{key}` applies to {} only, not to the {name} mechanism", readers.join(" or "));
        return Err(EngineError::invalid("mechanism option", reason));
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
            let built = named(e.name, &MechanismOptions::default()).expect("defaults build");
            assert_eq!(built.name(), e.name.to_string());
        }
        assert_eq!(BUILTIN.len(), 6, "every name has its line");
    }

    #[test]
    fn every_option_is_read_by_a_mechanism_and_every_key_read_is_an_option() {
        let read: Vec<&str> = BUILTIN.iter().flat_map(|e| e.options.iter().copied()).collect();
        assert!(MechanismOptions::KEYS.iter().all(|key| read.contains(key)), "{read:?}");
        assert!(read.iter().all(|key| MechanismOptions::KEYS.contains(key)), "{read:?}");
        let all =
            MechanismOptions { ls_sigma: Some(1.0), ls_scope: Some(Default::default()), sensitivity_every: Some(2) };
        assert_eq!(all.keys(), MechanismOptions::KEYS);
    }

    #[test]
    fn an_option_of_another_mechanism_is_refused_naming_its_readers() {
        let options = MechanismOptions { ls_sigma: Some(2.0), ..MechanismOptions::default() };
        let err = named(MechanismName::Gaussian, &options).err().expect("refused").to_string();
        assert!(
            err.contains("`ls_sigma` applies to the ls-sgd mechanism or the ls-adam mechanism only, not to the gaussian mechanism"),
            "{err}"
        );
        assert!(named(MechanismName::LsSgd, &options).is_ok());
        let every = MechanismOptions { sensitivity_every: Some(0), ..MechanismOptions::default() };
        assert!(named(MechanismName::OptimizedPaper, &every).is_ok(), "checked with the run's settings");
        assert!(named(MechanismName::LsAdam, &every).is_err());
    }
}
