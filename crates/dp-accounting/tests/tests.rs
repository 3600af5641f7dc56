//! dp-accounting's reference-value tests as one binary (each file a module).

mod analytic_reference;
mod audit_reference;
mod bandmf_reference;
mod calibration;
mod opacus_reference;
mod repeat_and_select_reference;
mod tight_reference;
