//! turn-manager: gives the floor to one AI agent persona at a time in a Discord channel.
//!
//! Layout:
//! - [`core`]: the pure engine. Signal detection, personas, configuration, and the per-channel session state
//!   machine. No Discord, no clock, no I/O: transitions take `now` and return effects and history events.
//! - [`files`]: reads persona folders and the configuration file from disk and hands their text to the core.
//! - [`store`]: persistence of sessions, atomic and durable, with the append-only history log.
//! - [`cli`]: the command-line subcommands (`check`, ...).
//! - [`soak`]: `turn-manager soak`, the bot as a process killed and restarted at random against the local server, and
//!   the invariants it (and the fault tests) check.

pub mod cli;
pub mod core;
pub mod demo;
pub mod discord;
pub mod files;
pub mod soak;
pub mod store;
