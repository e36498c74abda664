//! The pure core: everything that decides what happens, with no Discord, no clock and no I/O in it.

pub mod config;
pub mod ids;
pub mod persona;
pub mod problems;
pub mod repeated_keys;
pub mod session;
pub mod shards;
pub mod signals;
pub mod templates;
pub mod timestamp;
