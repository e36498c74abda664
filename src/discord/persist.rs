//! The persistence seam of the channel actors: durable saves (on disk before their effects), lazy saves for
//! activity-only changes, and loading a channel's session. The store's writer thread implements it; the actor's unit
//! tests use an in-memory recorder on tokio's paused clock.

use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use crate::store::{Store, StoreError, Writer};
use async_trait::async_trait;

#[async_trait]
pub trait Saver: Send + Sync + 'static {
    /// Resolves once the session and its new events are on disk.
    async fn save_durable(&self, session: Session, events: Vec<HistoryEvent>) -> Result<(), StoreError>;
    /// An activity-only change: written with the channel's next durable save or within [`LAZY_SAVE_DELAY`] (the
    /// actor holds activity for the rest of the second spec 9 allows, to save a burst of it once).
    ///
    /// [`LAZY_SAVE_DELAY`]: crate::store::writer::LAZY_SAVE_DELAY
    fn save_lazy(&self, session: Session);
    /// The channel's saved session, if it has one.
    async fn load(&self, channel: ChannelId) -> Result<Option<Session>, StoreError>;
    /// Resolves once everything saved so far is on disk.
    async fn flush(&self);
}

/// The real thing: the store's writer thread for saves, a blocking-pool read for loads.
pub struct DiskSaver {
    pub store: Store,
    pub writer: Writer,
}

#[async_trait]
impl Saver for DiskSaver {
    async fn save_durable(&self, session: Session, events: Vec<HistoryEvent>) -> Result<(), StoreError> {
        self.writer.save_durable(session, events).await
    }

    fn save_lazy(&self, session: Session) {
        self.writer.save_lazy(session);
    }

    async fn load(&self, channel: ChannelId) -> Result<Option<Session>, StoreError> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || store.load_one(channel)).await {
            Ok(result) => result,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    async fn flush(&self) {
        self.writer.flush().await;
    }
}
