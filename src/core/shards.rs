//! Discord's gateway sharding (spec 12): which shard a server's events come on, and the range of shards one process
//! runs, so that each process keeps only the sessions of its own servers.

use super::ids::GuildId;
use std::fmt;

/// One gateway shard: `id` of `total`. What a connection's READY (or its loss) concerns: the servers it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub id: u32,
    pub total: u32,
}

impl Shard {
    /// Whether this shard carries the events of `guild`.
    pub fn carries(&self, guild: GuildId) -> bool {
        ShardRange { first: self.id, last: self.id, total: self.total }.owns(guild)
    }
}

/// The shards one process runs: `first..=last` of `total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardRange {
    pub first: u32,
    pub last: u32,
    pub total: u32,
}

/// Discord's largest shard count worth accepting here (a bot in 2.5 million servers needs about 2,500).
const TOTAL_MAX: u32 = 65_536;

impl ShardRange {
    /// Every shard of `total` in this process.
    pub fn whole(total: u32) -> Self {
        Self { first: 0, last: total.saturating_sub(1), total }
    }

    /// Reads `A-B` (or a single shard `A`) of `total`, as `--shards` and `--total-shards` give them; the error says
    /// what is wrong.
    pub fn parse(range: &str, total: u32) -> Result<Self, String> {
        if total == 0 || total > TOTAL_MAX {
            return Err(format!("the total shard count must be between 1 and {TOTAL_MAX}, not {total}"));
        }
        let number = |text: &str| {
            text.trim().parse::<u32>().map_err(|_| format!("`{range}` is not a shard range: write it as A-B, e.g. 0-3"))
        };
        let (first, last) = match range.split_once('-') {
            Some((first, last)) => (number(first)?, number(last)?),
            None => (number(range)?, number(range)?),
        };
        if first > last {
            return Err(format!("the shard range {first}-{last} ends before it begins"));
        }
        if last >= total {
            return Err(format!(
                "shard {last} does not exist with {total} shards in all (they are numbered 0 to {})",
                total - 1
            ));
        }
        Ok(Self { first, last, total })
    }

    /// The shard a server's events come on: `(guild_id >> 22) % total`.
    pub fn shard_of(&self, guild: GuildId) -> u32 {
        ((guild.0 >> 22) % u64::from(self.total)) as u32
    }

    /// Whether this process runs the shard of `guild`.
    pub fn owns(&self, guild: GuildId) -> bool {
        (self.first..=self.last).contains(&self.shard_of(guild))
    }

    /// Whether this process runs shard 0, which gets the direct messages.
    pub fn has_first_shard(&self) -> bool {
        self.first == 0
    }
}

/// Whether a process running `shards` (all of them on one connection when `None`) registers the slash commands: one
/// process does it for all, the one with shard 0.
pub fn registers_commands(shards: Option<ShardRange>) -> bool {
    shards.is_none_or(|range| range.has_first_shard())
}

impl fmt::Display for ShardRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shards {}-{} of {}", self.first, self.last, self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_read_with_its_end_included_and_bad_ones_say_what_is_wrong() {
        assert_eq!(ShardRange::parse("0-3", 16), Ok(ShardRange { first: 0, last: 3, total: 16 }));
        assert_eq!(ShardRange::parse("5", 8), Ok(ShardRange { first: 5, last: 5, total: 8 }));
        assert!(ShardRange::parse("3-1", 8).unwrap_err().contains("ends before it begins"));
        assert!(ShardRange::parse("0-8", 8).unwrap_err().contains("numbered 0 to 7"));
        assert!(ShardRange::parse("a-b", 8).unwrap_err().contains("not a shard range"));
        assert!(ShardRange::parse("0-1", 0).unwrap_err().contains("between 1 and"));
    }

    #[test]
    fn a_server_belongs_to_the_shard_discord_sends_its_events_on() {
        // (guild_id >> 22) % total, Discord's formula: the example in Discord's documentation.
        let guild = GuildId(41_771_983_423_143_937);
        let range = ShardRange::parse("1-2", 4).unwrap();
        assert_eq!(range.shard_of(guild), ((41_771_983_423_143_937u64 >> 22) % 4) as u32);
        let on = |shard: u64| GuildId((shard + 4 * 1_000) << 22);
        assert!(!range.owns(on(0)) && range.owns(on(1)) && range.owns(on(2)) && !range.owns(on(3)));
        assert!(ShardRange::whole(1).owns(guild), "one shard has every server");
        assert!(!registers_commands(Some(range)) && registers_commands(Some(ShardRange::parse("0-1", 4).unwrap())));
        assert!(registers_commands(None), "one connection registers them");
        let shard = |id| Shard { id, total: 4 };
        assert!(shard(1).carries(on(1)) && !shard(1).carries(on(2)) && shard(3).carries(on(3)));
    }
}
