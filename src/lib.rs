//! turn-manager: gives the floor to one AI agent persona at a time in a Discord channel.
//!
//! Layout:
//! - [`core`]: the pure engine. Signal detection, personas, configuration, and the per-channel session state
//!   machine. No Discord, no clock, no I/O: transitions take `now` and return effects and history events.
//! - [`errors`]: an error told with its causes, each once.
//! - [`files`]: reads persona folders and the configuration file from disk and hands their text to the core.
//! - [`store`]: persistence of sessions, atomic and durable, with the append-only history log.
//! - [`sessions`]: where sessions are kept, behind one seam: the state folder's files (locked for one process) or
//!   Postgres, shared by every process with fenced leases; `convert` copies from one to the other.
//! - [`discord`]: the Discord layer: the gateway routes each event to its channel's actor, which asks the core, saves
//!   (with the outbox) and hands the effects to the channel's sender, behind a small network trait.
//! - [`metrics`]: Prometheus metrics (`run --metrics ADDR`): what the bot counts and times, and the exporter serving
//!   them; nothing is recorded without it.
//! - [`demo`]: the local Discord-compatible server set up for the bot (the demo and the end-to-end tests).
//! - [`cli`]: the command-line subcommands (`run`, `demo`, `check`, `invite`, `sandbox`, `soak`, `bench`).
//! - [`soak`]: `turn-manager soak`, the bot as a process killed and restarted at random against the local server, and
//!   the invariants it (and the fault tests) check.
//! - [`bench`]: `turn-manager bench`, the real bot measured as a process through the local server.

pub mod bench;
pub mod cli;
pub mod core;
pub mod demo;
pub mod discord;
pub mod errors;
pub mod files;
pub mod metrics;
pub mod sessions;
pub mod soak;
pub mod store;
