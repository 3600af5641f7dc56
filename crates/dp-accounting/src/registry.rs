//! The built-in accountants by name, as Opacus's `accountants/registry.py`: one list of their
//! names, the options that tune them and how each is built, which the engine and the CLI both use.
//! A name, a grid and a conversion are each a [`Choice`]: a closed set of values with a name and a
//! one-line description, so whoever offers them (a flag, a config file) reads both from here.

use crate::accountant::Accountant;
use crate::analytic_gaussian::AnalyticGaussianAccountant;
use crate::error::{AccountingError, Result};
use crate::prv::PrvAccountant;
use crate::rdp::{Conversion, OrderGrid, RdpAccountant};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A closed set of named values, each with a one-line description.
pub trait Choice: Copy + Sized + 'static {
    /// Every value, in the order they are offered.
    const ALL: &'static [Self];
    /// The value's name, as written in flags and config files.
    fn name(self) -> &'static str;
    /// One line saying what the value does.
    fn about(self) -> &'static str;
}

/// The value of `T` named `name`, or an error listing the names there are.
pub fn choose<T: Choice>(name: &str) -> Result<T> {
    T::ALL.iter().copied().find(|value| value.name() == name).ok_or_else(|| {
        let names: Vec<_> = T::ALL.iter().map(|value| format!("'{}'", value.name())).collect();
        AccountingError::Unknown { name: name.to_string(), expected: names.join(", ") }
    })
}

/// A sound accountant built into the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccountantName {
    /// Rényi DP of the subsampled Gaussian (Mironov et al. 2019).
    Rdp,
    /// Privacy random variables (Gopi et al. 2021).
    Prv,
    /// The exact analytic Gaussian (Balle & Wang 2018).
    Analytic,
}

impl Choice for AccountantName {
    const ALL: &'static [Self] = &[AccountantName::Rdp, AccountantName::Prv, AccountantName::Analytic];

    fn name(self) -> &'static str {
        match self {
            AccountantName::Rdp => "rdp",
            AccountantName::Prv => "prv",
            AccountantName::Analytic => "analytic",
        }
    }

    fn about(self) -> &'static str {
        match self {
            AccountantName::Rdp => {
                "Rényi DP of the subsampled Gaussian (Mironov et al. 2019); what Opacus and TF Privacy report"
            }
            AccountantName::Prv => {
                "Privacy random variables (Gopi et al. 2021): a tight upper bound with a stated error"
            }
            AccountantName::Analytic => "Exact analytic Gaussian (Balle & Wang 2018); full batches (q = 1) only",
        }
    }
}

impl AccountantName {
    /// The accountant this name stands for, tuned by `options` (each accountant reads its own).
    pub fn build(self, options: &AccountantOptions) -> Arc<dyn Accountant> {
        match self {
            AccountantName::Rdp => Arc::new(RdpAccountant::new(options.rdp_orders, options.rdp_conversion)),
            AccountantName::Prv => {
                Arc::new(PrvAccountant { eps_error: options.eps_error, delta_error: options.delta_error })
            }
            AccountantName::Analytic => Arc::new(AnalyticGaussianAccountant),
        }
    }
}

/// What tunes the built-in accountants; each reads only its own fields. The default is each
/// accountant's own default (the RDP accountant's extended grid and Balle et al.'s conversion,
/// the PRV accountant's error bounds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AccountantOptions {
    /// RDP: the orders to optimise over.
    pub rdp_orders: OrderGrid,
    /// RDP: the conversion from RDP to (epsilon, delta).
    pub rdp_conversion: Conversion,
    /// PRV: allowed error in epsilon (None: 0.004 * max(1, RDP epsilon)).
    pub eps_error: Option<f64>,
    /// PRV: allowed error in delta (None: delta / 1000).
    pub delta_error: Option<f64>,
}

impl Default for AccountantOptions {
    fn default() -> Self {
        AccountantOptions {
            rdp_orders: OrderGrid::Extended,
            rdp_conversion: Conversion::Balle2020,
            eps_error: None,
            delta_error: None,
        }
    }
}

impl Choice for OrderGrid {
    const ALL: &'static [Self] = &[OrderGrid::Standard, OrderGrid::Extended];

    fn name(self) -> &'static str {
        match self {
            OrderGrid::Standard => "standard",
            OrderGrid::Extended => "extended",
        }
    }

    fn about(self) -> &'static str {
        match self {
            OrderGrid::Standard => "Opacus/TF Privacy grid (1.1..10.9, 12..63): reproduces their epsilons",
            OrderGrid::Extended => {
                "Standard grid plus orders near 1 and up to 4096: never worse, needed below epsilon ~0.1"
            }
        }
    }
}

impl Choice for Conversion {
    const ALL: &'static [Self] = &[Conversion::Balle2020, Conversion::Classic];

    fn name(self) -> &'static str {
        match self {
            Conversion::Balle2020 => "balle2020",
            Conversion::Classic => "classic",
        }
    }

    fn about(self) -> &'static str {
        match self {
            Conversion::Balle2020 => "Balle et al. 2020, Theorem 21 (tighter; what Opacus uses)",
            Conversion::Classic => "Mironov 2017, Proposition 3 (what older TF Privacy versions use)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::PrivacyLedger;

    /// Each choice's name is the one serde writes, so a flag and a config file agree.
    fn names_match_serde<T: Choice + Serialize>() {
        for &value in T::ALL {
            assert_eq!(serde_json::to_value(value).unwrap(), serde_json::json!(value.name()));
            assert!(choose::<T>(value.name()).is_ok());
        }
    }

    #[test]
    fn every_name_is_serdes_and_parses_back() {
        names_match_serde::<AccountantName>();
        names_match_serde::<OrderGrid>();
        names_match_serde::<Conversion>();
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let message = choose::<AccountantName>("gdp").unwrap_err().to_string();
        assert!(message.contains("'gdp'") && message.contains("'rdp', 'prv', 'analytic'"), "{message}");
    }

    #[test]
    fn each_name_builds_the_accountant_it_names_with_its_options() {
        for &name in AccountantName::ALL {
            assert_eq!(name.build(&AccountantOptions::default()).name(), name.name());
        }
        // The MNIST tutorial run: Opacus's standard grid and classic conversion give a larger
        // epsilon than the defaults, so the options reach the accountant.
        let ledger = PrivacyLedger::homogeneous(1.1, 256.0 / 60000.0, 14_062).unwrap();
        let epsilon =
            |options: &AccountantOptions| AccountantName::Rdp.build(options).epsilon(&ledger, 1e-5).unwrap().epsilon;
        let classic = AccountantOptions {
            rdp_orders: OrderGrid::Standard,
            rdp_conversion: Conversion::Classic,
            ..AccountantOptions::default()
        };
        assert!(epsilon(&classic) > epsilon(&AccountantOptions::default()) + 0.1);
    }
}
