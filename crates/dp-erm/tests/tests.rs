//! dp-erm's oracle tests as one binary (each file a module).

mod common;

mod device_rows;
mod oracles;
