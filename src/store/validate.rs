//! What a session file must hold to be used: a session the engine could not have written (a running turn without a
//! deadline, a pause without its remaining time, a floor held by a persona outside the roster, a persona twice in
//! the roster, a duration past a century) is refused at load,
//! so the last good copy is used instead of a session that would misbehave or panic later.

use crate::core::ids::ChannelId;
use crate::core::session::{SESSION_FORMAT_VERSION, Session, SessionStatus};

/// Checks a session read from `channel`'s file; the error says what is wrong, for the log and the person reading it.
pub fn check_session(session: &Session, channel: ChannelId) -> Result<(), String> {
    if session.channel_id != channel {
        return Err(format!("it holds channel {} instead", session.channel_id));
    }
    if session.version > SESSION_FORMAT_VERSION {
        return Err(format!("format version {} is newer than this build understands", session.version));
    }
    match session.status {
        SessionStatus::Running if session.turn_timeout_at.is_none() => {
            return Err("it is running but has no turnTimeoutAt".into());
        }
        SessionStatus::Running if session.turn_started_at.is_none() => {
            return Err("it is running but has no turnStartedAt".into());
        }
        SessionStatus::Paused if session.paused_remaining_ms.is_none() => {
            return Err("it is paused but has no pausedRemainingMs".into());
        }
        _ => {}
    }
    if session.is_active() && !session.active_agent.as_ref().is_some_and(|a| session.roster.contains(a)) {
        return Err("its active persona is not in its roster".into());
    }
    if let Some(twice) = session.roster.iter().enumerate().find(|(n, p)| session.roster[..*n].contains(p)) {
        return Err(format!("its roster lists {} twice", twice.1));
    }
    // Durations the engine adds to instants: one past a century either way (a hand edit) would overflow that
    // arithmetic. Some are negative at times (a pause after the deadline, within the grace; a clock set back).
    let within = |ms: i128| ms.abs() <= i128::from(CENTURY_MS);
    let durations = [
        ("pausedRemainingMs", session.paused_remaining_ms.map_or(0, i128::from)),
        ("turnPausedMs", i128::from(session.turn_paused_ms)),
        ("turnExtendedSeconds", i128::from(session.turn_extended_seconds) * 1000),
        ("turnTimeoutSeconds", i128::from(session.turn_timeout_seconds) * 1000),
    ];
    if let Some((field, _)) = durations.iter().find(|(_, ms)| !within(*ms)) {
        return Err(format!("its {field} is out of range (over a century)"));
    }
    if session.round == u32::MAX {
        return Err("its round is out of range".into());
    }
    Ok(())
}

/// A hundred years, in milliseconds: more than any turn lasts, far less than what overflows a date.
const CENTURY_MS: i64 = 100 * 366 * 86_400 * 1000;
