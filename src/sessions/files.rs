//! The default store: the state folder's session files and history logs (the `store` module and its writer
//! thread), taken by one process at a time. A file store cannot be shared by several processes (each would write
//! the same files from its own copy of the sessions), so opening it takes an exclusive lock on
//! `<state>/turn-manager.lock`, and a second process on the same folder refuses to start.

use super::{Saver, SessionStore, SessionStoreError};
use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use crate::core::shards::ShardRange;
use crate::store::{LoadReport, Store, Writer};
use async_trait::async_trait;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The lock file's name in the state folder.
pub const LOCK_FILE: &str = "turn-manager.lock";

/// An exclusive lock on a state folder, held as long as this value lives (the system drops it with the process,
/// however it ends).
#[derive(Debug)]
pub struct FolderLock {
    _file: File,
    /// The folders synced because taking the lock made folders in them: what a test looks at.
    #[cfg(test)]
    synced: Vec<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "another turn-manager process seems to be running on the state folder {} (it holds {}): stop it first, or give \
         each process its own state folder, or share sessions between processes with --store postgres://...",
        dir.display(), lock.display()
    )]
    Taken { dir: PathBuf, lock: PathBuf },
    #[error("failed to lock the state folder {} with {}: {source}", dir.display(), lock.display())]
    Io { dir: PathBuf, lock: PathBuf, source: std::io::Error },
    #[error("cannot create the state folder {}: {source}", dir.display())]
    Create { dir: PathBuf, source: std::io::Error },
    #[error("the state folder {} is a file, not a folder: give a folder (it is created if missing)", dir.display())]
    NotAFolder { dir: PathBuf },
}

impl FolderLock {
    /// Takes the folder's lock (creating the folder), or says that another process has it.
    pub fn take(dir: &Path) -> Result<Self, LockError> {
        let lock = dir.join(LOCK_FILE);
        let failed = |source| LockError::Io { dir: dir.to_owned(), lock: lock.clone(), source };
        if dir.exists() && !dir.is_dir() {
            return Err(LockError::NotAFolder { dir: dir.to_owned() });
        }
        // Made durably here, where it is made: the store opened next finds it there, and a power cut soon after a
        // first start must not take the whole folder, journal and all, with it.
        let _synced = crate::store::create_folder_durably(dir)
            .map_err(|source| LockError::Create { dir: dir.to_owned(), source })?;
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock).map_err(failed)?;
        match try_lock(&file) {
            Ok(true) => Ok(Self {
                _file: file,
                #[cfg(test)]
                synced: _synced,
            }),
            Ok(false) => Err(LockError::Taken { dir: dir.to_owned(), lock }),
            Err(source) => Err(failed(source)),
        }
    }
}

/// Takes an exclusive lock on the whole file without waiting: false when another open file (in this process or
/// another) has it. The system drops it when the file is closed, so a process killed keeps nothing locked.
#[cfg(unix)]
fn try_lock(file: &File) -> std::io::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// No lock where flock is not available: one process per state folder is then up to the person running it.
#[cfg(not(unix))]
fn try_lock(_file: &File) -> std::io::Result<bool> {
    Ok(true)
}

/// The state folder as a [`SessionStore`]: the store's writer thread for saves, the blocking pool for reads.
pub struct FileSessions {
    store: Store,
    writer: Writer,
    dir: PathBuf,
    /// Released by [`SessionStore::close`], so that a bot stopped and started again in one process (the tests)
    /// finds its folder free.
    lock: Mutex<Option<FolderLock>>,
}

impl FileSessions {
    /// Locks and opens (creating) the state folder, and starts its writer thread. A folder that is a file, or that
    /// cannot be made for want of rights or because a file is in its path, is a setup error (exit status 2): a
    /// start cannot succeed until a person changes something, so systemd must not start it again every 5 s (found by
    /// a review: it exited 1). A folder another process holds is no such error: the holder may be a process
    /// stopping while its successor starts.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        let lock = FolderLock::take(dir).map_err(|e| {
            use std::io::ErrorKind::{NotADirectory, PermissionDenied, ReadOnlyFilesystem};
            match &e {
                LockError::NotAFolder { .. } => crate::errors::SetupError(e.to_string()).into(),
                LockError::Create { source, .. }
                    if matches!(source.kind(), PermissionDenied | NotADirectory | ReadOnlyFilesystem) =>
                {
                    crate::errors::SetupError(crate::errors::with_causes(&e)).into()
                }
                _ => anyhow::Error::from(e),
            }
        })?;
        let store = Store::open(dir)?;
        Ok(Self { writer: Writer::spawn(store.clone()), store, dir: dir.to_owned(), lock: Mutex::new(Some(lock)) })
    }

    /// Runs a read of the store off the async workers.
    async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Store) -> Result<T, crate::store::StoreError> + Send + 'static,
    ) -> Result<T, SessionStoreError> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || read(&store)).await {
            Ok(result) => Ok(result?),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

#[async_trait]
impl Saver for FileSessions {
    async fn save_durable(&self, session: Session, events: Vec<HistoryEvent>) -> Result<(), SessionStoreError> {
        Ok(self.writer.save_durable(session, events).await?)
    }

    fn save_lazy(&self, session: Session) {
        self.writer.save_lazy(session);
    }

    async fn load(&self, channel: ChannelId) -> Result<Option<Session>, SessionStoreError> {
        self.read(move |store| store.load_one(channel)).await
    }

    async fn flush(&self) {
        self.writer.flush().await;
    }
}

#[async_trait]
impl SessionStore for FileSessions {
    async fn broken(&self) -> String {
        self.writer.stopped().await;
        "the store's writer thread failed (see the panic above)".to_owned()
    }

    /// Every session of the folder: the bot keeps those of its shards.
    async fn load_all(&self, _shards: Option<ShardRange>) -> Result<LoadReport, SessionStoreError> {
        let report = self.read(Store::load_all).await?;
        self.writer.look_ahead();
        Ok(report)
    }

    async fn history_tail(&self, channel: ChannelId, n: usize) -> Result<Vec<HistoryEvent>, SessionStoreError> {
        self.read(move |store| store.read_log_tail(channel, n)).await
    }

    async fn history(&self, channel: ChannelId) -> Result<Vec<HistoryEvent>, SessionStoreError> {
        self.read(move |store| store.read_log(channel)).await
    }

    async fn close(&self) {
        self.writer.flush().await;
        self.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    }

    fn describe(&self) -> String {
        format!("the state folder {}", self.dir.display())
    }

    fn files(&self) -> Option<&Store> {
        Some(&self.store)
    }

    fn into_saver(self: Arc<Self>) -> Arc<dyn Saver> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::{FileSessions, FolderLock, LockError};
    use crate::sessions::SessionStore;

    /// Found by a review: the cause was shown twice, and the failure was called one to lock the folder.
    #[test]
    fn a_state_folder_that_cannot_be_made_says_so_and_its_cause_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "").unwrap();
        let Err(error) = FolderLock::take(&dir.path().join("file/state")) else { panic!("refused") };
        let said = crate::errors::with_causes(&error); // as the command line tells it
        assert!(said.starts_with("cannot create the state folder"), "{said}");
        assert_eq!(said.matches("os error").count(), 1, "{said}");
    }

    #[tokio::test]
    async fn a_second_opening_of_a_state_folder_is_refused_until_the_first_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let first = FileSessions::open(dir.path()).unwrap();
        let error = FileSessions::open(dir.path()).err().expect("the folder is taken").to_string();
        assert!(error.contains("another turn-manager process seems to be running on the state folder"), "{error}");
        assert!(error.contains(&dir.path().display().to_string()), "names the folder: {error}");
        assert!(matches!(FolderLock::take(dir.path()), Err(LockError::Taken { .. })));
        first.close().await;
        FileSessions::open(dir.path()).expect("free again once closed");
    }

    #[test]
    fn a_state_folder_the_lock_makes_is_made_durable_in_each_new_folders_parent() {
        let dir = tempfile::tempdir().unwrap();
        let above = dir.path().join("srv");
        std::fs::create_dir(&above).unwrap();
        let state = above.join("bot").join("state");
        let lock = FolderLock::take(&state).unwrap();
        assert_eq!(lock.synced, [above.clone(), above.join("bot")], "each new folder's parent");
        drop(lock);
        assert!(FolderLock::take(&state).unwrap().synced.is_empty(), "nothing made, nothing synced");
    }

    /// A state folder no start can use until a person changes something is a setup error (exit status 2, which
    /// systemd does not restart); one another process holds is not.
    #[tokio::test]
    async fn a_state_folder_no_start_can_use_is_a_setup_error_and_one_held_is_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "").unwrap();
        let status = |path: &std::path::Path| match FileSessions::open(path) {
            Err(e) => crate::errors::exit_status_of(&e),
            Ok(_) => 0,
        };
        assert_eq!(status(&dir.path().join("file")), crate::errors::EXIT_SETUP, "a file");
        assert_eq!(status(&dir.path().join("file/state")), crate::errors::EXIT_SETUP, "a file in its path");
        let held = FileSessions::open(&dir.path().join("state")).unwrap();
        assert_eq!(status(&dir.path().join("state")), 1, "held by another process: it may be stopping");
        held.close().await;
    }

    #[test]
    fn a_file_given_as_the_state_folder_is_refused_saying_so() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state");
        std::fs::write(&file, "not a folder").unwrap();
        let Err(error) = FolderLock::take(&file) else { panic!("a file taken for a folder") };
        let error = error.to_string();
        assert!(error.contains("is a file, not a folder") && error.contains("state"), "{error}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a folder", "left as it is");
    }
}
