//! The accountant a command uses, chosen by flags whose values are dp-accounting's registry.

use super::enum_arg::choice;
use clap::Args;
use dp_accounting::{Accountant, AccountantName, AccountantOptions, Conversion, OrderGrid};
use std::sync::Arc;

/// The flags `account` and `calibrate` share: the delta, the accountant with its options, and
/// how the answer prints.
#[derive(Args, Debug)]
pub struct AccountantArgs {
    /// Target delta, in (0, 1); usually below 1/N.
    #[arg(long, short = 'd', value_name = "D")]
    pub delta: f64,

    /// Accountant that certifies the epsilon.
    #[arg(long, value_parser = choice::<AccountantName>(), default_value = "rdp")]
    accountant: AccountantName,

    /// RDP: order grid to optimize over.
    #[arg(long, value_parser = choice::<OrderGrid>(), default_value = "extended")]
    rdp_orders: OrderGrid,

    /// RDP: conversion from RDP to (epsilon, delta).
    #[arg(long, value_parser = choice::<Conversion>(), default_value = "balle2020")]
    rdp_conversion: Conversion,

    /// PRV: allowed error in epsilon [default: 0.004 * max(1, RDP epsilon)].
    #[arg(long, value_name = "E")]
    eps_error: Option<f64>,

    /// PRV: allowed error in delta [default: delta / 1000].
    #[arg(long, value_name = "D")]
    delta_error: Option<f64>,

    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

impl AccountantArgs {
    /// The accountant these flags describe.
    pub fn build(&self) -> Arc<dyn Accountant> {
        let options = AccountantOptions {
            rdp_orders: self.rdp_orders,
            rdp_conversion: self.rdp_conversion,
            eps_error: self.eps_error,
            delta_error: self.delta_error,
        };
        self.accountant.build(&options)
    }
}
