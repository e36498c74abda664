//! The persistence seam of the channel actors: claiming the channel (one process acts for it), durable saves (saved
//! before their effects), lazy saves for activity-only changes, and loading a channel's session. The stores of
//! `crate::sessions` implement it (the state folder's files, Postgres); the actor's unit tests use an in-memory
//! recorder on tokio's paused clock.

pub use crate::sessions::{Claim, Saver, SessionStoreError};
