//! Element-wise activations (defined with their backend extension in `ops::activation`, named
//! here with the layers).

pub use crate::ops::activation::Activation;
