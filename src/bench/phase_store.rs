//! Where the bot of a phase keeps its sessions, the same way whatever the store: its state folder, or a database of
//! its own ([`PhaseDatabase`]). Saved sessions are put there from a state folder made by the real engine and store
//! ([`super::saved`]) with the crate's own `convert`, and read back from outside by the two fields the phases need
//! ([`super::state`]): the files, or the rows.

use super::database::PhaseDatabase;
use super::layout::StoreChoice;
use crate::sessions::convert::convert;
use crate::sessions::location::{PostgresUrl, StoreLocation};
use anyhow::Context as _;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A phase's store, as the bot under test is given it.
pub enum PhaseStore {
    /// The state folder (`run --state`).
    Folder(PathBuf),
    /// A database of the phase's own (`run --store`, given as `TM_STORE`).
    Database(PhaseDatabase),
}

/// Saved sessions ready to be given to bot after bot: a state folder, or a database to copy.
pub enum SavedSessions {
    Folder(PathBuf),
    Database(PhaseDatabase),
}

impl PhaseStore {
    /// An empty store: the folder `state` (not made yet: the bot makes it), or a new database.
    pub async fn new(choice: &StoreChoice, state: &Path) -> anyhow::Result<Self> {
        Ok(match choice {
            StoreChoice::Files => PhaseStore::Folder(state.to_owned()),
            StoreChoice::Postgres(server) => PhaseStore::Database(PhaseDatabase::create(server, None).await?),
        })
    }

    /// The database the bot is given, if the sessions are not in its state folder.
    pub fn database(&self) -> Option<&PostgresUrl> {
        match self {
            PhaseStore::Folder(_) => None,
            PhaseStore::Database(db) => Some(&db.url),
        }
    }

    /// Where [`super::saved::generate`] should write sessions meant for this store: the state folder itself, or a
    /// folder beside it whose sessions [`PhaseStore::take_saved`] then copies in.
    pub fn saved_folder(&self, scratch: &Path) -> PathBuf {
        match self {
            PhaseStore::Folder(state) => state.clone(),
            PhaseStore::Database(_) => scratch.to_owned(),
        }
    }

    /// Puts the sessions written to `folder` (by [`PhaseStore::saved_folder`]) where the bot will find them.
    pub async fn take_saved(&self, folder: &Path) -> anyhow::Result<()> {
        match self {
            PhaseStore::Folder(state) if state == folder => Ok(()),
            PhaseStore::Folder(state) => copy_state(folder, state),
            PhaseStore::Database(db) => copy_into(folder, &db.url).await,
        }
    }

    /// Empties the store, or makes it a copy of `saved`, before another bot starts on it.
    pub async fn reset(&mut self, saved: Option<&SavedSessions>) -> anyhow::Result<()> {
        match self {
            PhaseStore::Folder(state) => {
                set_aside(state)?;
                if let Some(SavedSessions::Folder(saved)) = saved {
                    copy_state(saved, state)?;
                }
            }
            PhaseStore::Database(db) => {
                let template = match saved {
                    Some(SavedSessions::Database(db)) => Some(db),
                    _ => None,
                };
                // The old one is dropped once the new one is in its place.
                *db = PhaseDatabase::create(&db.server.clone(), template).await?;
            }
        }
        Ok(())
    }

    /// Each channel's saved session as JSON text, where it has one: its file, or its row.
    pub async fn session_texts(&self, channels: &[u64]) -> anyhow::Result<HashMap<u64, String>> {
        match self {
            PhaseStore::Folder(state) => {
                let files: Vec<(u64, PathBuf)> = channels.iter().map(|c| (*c, session_file(state, *c))).collect();
                let texts = tokio::task::spawn_blocking(move || {
                    files
                        .into_iter()
                        .filter_map(|(channel, path)| Some((channel, std::fs::read_to_string(path).ok()?)))
                        .collect()
                })
                .await?;
                Ok(texts)
            }
            PhaseStore::Database(db) => db.session_texts(channels).await,
        }
    }
}

impl SavedSessions {
    /// The sessions of `folder` as the store needs them: the folder itself, or a database filled from it once.
    pub async fn from_folder(choice: &StoreChoice, folder: &Path) -> anyhow::Result<Self> {
        Ok(match choice {
            StoreChoice::Files => SavedSessions::Folder(folder.to_owned()),
            StoreChoice::Postgres(server) => {
                let db = PhaseDatabase::create(server, None).await?;
                copy_into(folder, &db.url).await?;
                SavedSessions::Database(db)
            }
        })
    }
}

/// Moves the last bot's state folder out of the way, to be deleted with the work folder at the end of the run. Not
/// deleted now: ext4 without a journal (the development machine's disk) does not reuse an inode for a minute or more
/// after its file is deleted, so each file the next bot creates would first scan past the thousands just deleted; in
/// a `perf` of `bench --only turns` that was most of the store's CPU, paid by whichever build ran second.
fn set_aside(state: &Path) -> anyhow::Result<()> {
    if !state.exists() {
        return Ok(());
    }
    let name = state.file_name().map_or_else(Default::default, |n| n.to_string_lossy().into_owned());
    let aside = (1..)
        .map(|n| state.with_file_name(format!("{name}.replaced-{n}")))
        .find(|aside| !aside.exists())
        .expect("some name is free");
    std::fs::rename(state, &aside).with_context(|| format!("moving {} aside", state.display()))
}

/// A channel's session file in a state folder.
pub fn session_file(state: &Path, channel: u64) -> PathBuf {
    state.join("channels").join(format!("{channel}.json"))
}

/// `turn-manager convert --from folder --to database`: every session and its history, in one transaction.
async fn copy_into(folder: &Path, database: &PostgresUrl) -> anyhow::Result<()> {
    let (from, to) = (StoreLocation::Folder(folder.to_owned()), StoreLocation::Postgres(database.clone()));
    let converted = convert(&from, &to, false).await.with_context(|| format!("copying {from} into {to}"))?;
    anyhow::ensure!(converted.problems.is_empty(), "copying {from}: {}", converted.problems.join("; "));
    Ok(())
}

/// The whole state folder, as a graceful stop leaves it: the sessions, their logs and the (empty) journal.
fn copy_state(from: &Path, to: &Path) -> anyhow::Result<()> {
    copy_folder(from, to)?;
    copy_folder(&from.join("channels"), &to.join("channels"))
}

/// Copies the files of a folder (not its subfolders).
fn copy_folder(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            continue;
        }
        std::fs::copy(entry.path(), to.join(entry.file_name()))
            .with_context(|| format!("copying {}", entry.path().display()))?;
    }
    Ok(())
}
