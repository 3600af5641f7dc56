//! Where a problem's gradient sums run: on the host in f64 (`row_sums::HostRows`) or as Burn
//! tensors on a device (`device_rows::DeviceRows`), chosen once per problem.

use crate::device_rows::DeviceRows;
use crate::model::Model;
use crate::model_kind::ModelKind;
use crate::row_sums::{HostRows, RowSums};
use dp_data::TabularData;
use dp_kernels::backend::SelectedDevice;

/// Where the training loops of `input`, `dbdp` and `gradient` sum their gradients.
#[derive(Debug, Clone, Default)]
pub enum Compute {
    /// f64 on the host, one example at a time (exact; fastest for small tables).
    #[default]
    Host,
    /// f32 Burn tensors on an engine device: one batched pass per sum.
    Device(SelectedDevice),
}

impl Compute {
    /// The gradient sums of `model` (of family `kind`) over `data`, where this choice says.
    pub fn rows<'a>(&self, kind: ModelKind, model: &'a dyn Model, data: &'a TabularData) -> Box<dyn RowSums + 'a> {
        match self {
            Compute::Host => Box::new(HostRows { model, data }),
            Compute::Device(device) => Box::new(DeviceRows::new(kind, data, &device.device)),
        }
    }

    /// How reports name it.
    pub fn describe(&self) -> String {
        match self {
            Compute::Host => "host (f64)".into(),
            Compute::Device(d) => format!("{} ({}, f32)", d.backend, d.name),
        }
    }
}
