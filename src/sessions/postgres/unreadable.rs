//! Rows this process could not decode, each by the version it read, so that the orphan watch does not take them up
//! again every lease round (a claim, a read, an error line, a let-go) until someone changes them.

use crate::core::ids::ChannelId;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Channel → the row version (its `xmin`, which every UPDATE of the row changes, a person's by hand included) that
/// this build could not use. A newer build's format in a mixed-version rollout, or a row edited wrongly: left as it
/// is, for a process that can read it, or for the row to be mended.
#[derive(Debug, Default)]
pub(super) struct UnreadableRows(Mutex<HashMap<ChannelId, String>>);

impl UnreadableRows {
    /// Notes how a read of `channel`'s row at `version` went.
    pub(super) fn read(&self, channel: ChannelId, version: &str, readable: bool) {
        let mut rows = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if readable {
            rows.remove(&channel);
        } else {
            rows.insert(channel, version.to_owned());
        }
    }

    /// The rows to pass over, as two arrays for `unnest`: channel ids and versions.
    pub(super) fn as_arrays(&self) -> (Vec<i64>, Vec<String>) {
        let rows = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        rows.iter().map(|(channel, version)| (channel.0 as i64, version.clone())).unzip()
    }
}
