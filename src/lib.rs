//! turn-manager: gives the floor to one AI agent persona at a time in a Discord channel.
//!
//! Layout:
//! - [`core`]: the pure engine. Signal detection, personas, configuration, and the per-channel session state
//!   machine. No Discord, no clock, no I/O: transitions take `now` and return effects and history events.
//! - [`files`]: reads persona folders and the configuration file from disk and hands their text to the core.
//! - [`store`]: persistence of sessions, atomic and durable, with the append-only history log.
//! - [`cli`]: the command-line subcommands (`check`, ...).
//! - [`bench`]: `turn-manager bench`, the real bot measured as a process through the local server.

pub mod bench;
pub mod cli;
pub mod core;
pub mod demo;
pub mod discord;
pub mod files;
pub mod store;
