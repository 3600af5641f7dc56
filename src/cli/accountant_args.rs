//! The accountant a command uses, chosen by flags.

use anyhow::Result;
use clap::{Args, ValueEnum};
use dp_accounting::{Accountant, AnalyticGaussianAccountant, Conversion, OrderGrid, PrvAccountant, RdpAccountant};

/// Which sound accountant to use.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccountantKind {
    /// Rényi DP of the subsampled Gaussian (Mironov et al. 2019); what Opacus and TF Privacy report.
    Rdp,
    /// Privacy random variables (Gopi et al. 2021): a tight upper bound with a stated error.
    Prv,
    /// Exact analytic Gaussian (Balle & Wang 2018); full batches (q = 1) only.
    Analytic,
}

/// RDP order grid, as a flag value.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum GridFlag {
    /// Opacus/TF Privacy grid (1.1..10.9, 12..63): reproduces their epsilons.
    Standard,
    /// Standard grid plus orders near 1 and up to 4096: never worse, needed below epsilon ~0.1.
    Extended,
}

/// RDP-to-DP conversion, as a flag value.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ConversionFlag {
    /// Balle et al. 2020, Theorem 21 (tighter; what Opacus uses).
    Balle2020,
    /// Mironov 2017, Proposition 3 (what older TF Privacy versions use).
    Classic,
}

/// Flags that choose and tune the accountant.
#[derive(Args, Debug)]
pub struct AccountantArgs {
    /// Accountant that certifies the epsilon.
    #[arg(long, value_enum, default_value_t = AccountantKind::Rdp)]
    accountant: AccountantKind,

    /// RDP: order grid to optimize over.
    #[arg(long, value_enum, default_value = "extended")]
    rdp_orders: GridFlag,

    /// RDP: conversion from RDP to (epsilon, delta).
    #[arg(long, value_enum, default_value = "balle2020")]
    rdp_conversion: ConversionFlag,

    /// PRV: allowed error in epsilon [default: 0.004 * max(1, RDP epsilon)].
    #[arg(long, value_name = "E")]
    eps_error: Option<f64>,

    /// PRV: allowed error in delta [default: delta / 1000].
    #[arg(long, value_name = "D")]
    delta_error: Option<f64>,
}

impl AccountantArgs {
    /// The accountant these flags describe.
    pub fn build(&self) -> Result<Box<dyn Accountant>> {
        Ok(match self.accountant {
            AccountantKind::Rdp => {
                let grid = match self.rdp_orders {
                    GridFlag::Standard => OrderGrid::Standard,
                    GridFlag::Extended => OrderGrid::Extended,
                };
                let conversion = match self.rdp_conversion {
                    ConversionFlag::Balle2020 => Conversion::Balle2020,
                    ConversionFlag::Classic => Conversion::Classic,
                };
                Box::new(RdpAccountant::new(grid, conversion))
            }
            AccountantKind::Prv => Box::new(PrvAccountant { eps_error: self.eps_error, delta_error: self.delta_error }),
            AccountantKind::Analytic => Box::new(AnalyticGaussianAccountant),
        })
    }
}
