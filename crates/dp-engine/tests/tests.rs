//! dp-engine's oracle and integration tests as one binary (each file a module; `freed_memory`
//! runs alone: it measures its own process).

mod oracle;

mod dp_layers_oracle;
mod freeze;
mod layer_rules;
mod privacy_engine;
mod weights;
