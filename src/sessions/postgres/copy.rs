//! Every session and history of the database at once, for `convert`: read in one consistent snapshot, written in
//! one transaction (all or nothing), with the checks that keep a copy from clobbering a running bot's sessions.

use super::rows::{APPEND_EVENTS, decode_event, decode_session, event_rows, session_row};
use crate::core::ids::ChannelId;
use crate::sessions::convert::SavedChannel;
use sqlx::PgPool;

fn failed(action: &'static str) -> impl FnOnce(sqlx::Error) -> anyhow::Error {
    move |e| anyhow::anyhow!("the database failed to {action}: {e}")
}

/// Every session with its whole history, by channel, as of one instant (a repeatable-read transaction), the problems
/// met, and how many channels were not copied whole: a session this build cannot read is left out, and so is an
/// event, each said, as a folder's are (found by a review: one such row stopped the whole copy, so a database could
/// not be copied back to files until it was mended by hand).
pub async fn read_all(pool: &PgPool) -> anyhow::Result<(Vec<SavedChannel>, Vec<String>, usize)> {
    let mut tx = pool.begin().await.map_err(failed("start reading"))?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .execute(&mut *tx)
        .await
        .map_err(failed("start reading"))?;
    let sessions: Vec<(i64, String)> =
        sqlx::query_as("SELECT channel_id, session::text FROM sessions ORDER BY channel_id")
            .fetch_all(&mut *tx)
            .await
            .map_err(failed("read the sessions"))?;
    // The whole history in one statement, walked beside the sessions (both in channel order): events of a channel
    // without a session are passed over.
    let events: Vec<(i64, String)> =
        sqlx::query_as("SELECT channel_id, event::text FROM history ORDER BY channel_id, n")
            .fetch_all(&mut *tx)
            .await
            .map_err(failed("read the history"))?;
    // Everything is in hand: the snapshot is not needed while it is decoded.
    tx.commit().await.map_err(failed("finish reading"))?;
    let mut events = events.into_iter().peekable();
    let (mut channels, mut problems, mut left_behind) = (Vec::with_capacity(sessions.len()), Vec::new(), 0);
    for (id, json) in sessions {
        let channel = ChannelId(id as u64);
        while events.next_if(|(of, _)| *of < id).is_some() {}
        let session = match decode_session(channel, &json) {
            Ok(session) => session,
            Err(e) => {
                left_behind += 1;
                problems.push(format!("{e}: not copied (its row stays in the database)"));
                continue;
            }
        };
        let (mut history, mut unread) = (Vec::new(), 0);
        while let Some((_, json)) = events.next_if(|(of, _)| *of == id) {
            match decode_event(&json) {
                Some(event) => history.push(event),
                None => unread += 1,
            }
        }
        if unread > 0 {
            left_behind += 1;
            problems.push(format!(
                "channel {channel}: {unread} event(s) of its history are no event this build reads, so they are not \
                 copied"
            ));
        }
        channels.push(SavedChannel { session, history });
    }
    Ok((channels, problems, left_behind))
}

/// How many sessions and history events the database holds.
pub async fn count(pool: &PgPool) -> anyhow::Result<(i64, i64)> {
    sqlx::query_as("SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM history)")
        .fetch_one(pool)
        .await
        .map_err(failed("count the sessions"))
}

/// How many channels a running bot holds now (a live lease).
pub async fn live_leases(pool: &PgPool) -> anyhow::Result<i64> {
    let (live,): (i64,) = sqlx::query_as("SELECT count(*) FROM leases WHERE expires_at > now()")
        .fetch_one(pool)
        .await
        .map_err(failed("read the leases"))?;
    Ok(live)
}

/// Writes every channel in one transaction, after emptying the tables when `replace` (else they must be empty).
/// The rows carry no lease (epoch 0): the first bot to claim a channel starts its epochs above it.
pub async fn write_all(pool: &PgPool, channels: &[SavedChannel], replace: bool) -> anyhow::Result<()> {
    let mut tx = pool.begin().await.map_err(failed("start writing"))?;
    if replace {
        sqlx::query("DELETE FROM history").execute(&mut *tx).await.map_err(failed("empty the history"))?;
        sqlx::query("DELETE FROM sessions").execute(&mut *tx).await.map_err(failed("empty the sessions"))?;
    }
    for channel in channels {
        let session = &channel.session;
        let row = session_row(session, 0, 0).map_err(anyhow::Error::from)?;
        row.upsert().execute(&mut *tx).await.map_err(failed("write a session"))?;
        // In slices, so that a long history is not one enormous statement.
        for events in channel.history.chunks(1_000) {
            let (ats, events) = event_rows(session.channel_id, events).map_err(anyhow::Error::from)?;
            sqlx::query(APPEND_EVENTS)
                .bind(row.channel_id)
                .bind(ats)
                .bind(events)
                .execute(&mut *tx)
                .await
                .map_err(failed("write a channel's history"))?;
        }
    }
    tx.commit().await.map_err(failed("commit the copy"))
}
