//! Permissions (spec 6, 7): whether the bot can relay in a channel (else it observes), and who may change a session.
//! Reads the gateway cache, falling back to REST for what the cache does not hold (threads, members).

use super::identity::Identity;
use super::rest::budget::RestBudget;
use super::rest::serenity::{call, is_member};
use super::rest::{RestError, WebhookLimit};
use crate::core::ids::{ChannelId, GuildId, UserId};
use crate::core::persona::Persona;
use serenity::all as discord;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

pub struct Access {
    /// serenity's REST client and gateway cache, known once the client is built.
    http: OnceLock<Arc<discord::Http>>,
    cache: OnceLock<Arc<discord::Cache>>,
    identity: Arc<Identity>,
    /// Role names, or role ids, whose members may steer sessions.
    control_roles: Vec<String>,
    /// The bot's global REST budget, which every lookup here (and every command reply) spends from.
    budget: Arc<RestBudget>,
    /// Channel -> its parent channel if it is a thread (`None` if not), once read: serenity's cache finds no thread
    /// by id, and a thread's parent never changes, so each thread is read over REST once, not at every command given
    /// in it (while the channel's messages wait for the command: found by a review) nor at every repost.
    parents: std::sync::Mutex<HashMap<ChannelId, Option<discord::ChannelId>>>,
    /// The accounts Discord said lately are members of a server. Held across a look, so that looks run one at a time:
    /// every configured channel of a server starts at once at boot, and each would otherwise ask for the same
    /// accounts, its calls queued in the global budget ahead of every channel's announcements (found by a review).
    members: tokio::sync::Mutex<KnownMembers>,
}

/// How long an account Discord said is a member of a server is taken for one without asking again.
const MEMBER_KNOWN_FOR: std::time::Duration = std::time::Duration::from_secs(600);

/// Accounts known to be members of a server, and since when. One said not to be is not kept: it may be invited
/// before the next start.
#[derive(Default)]
struct KnownMembers(HashMap<(discord::GuildId, discord::UserId), tokio::time::Instant>);

impl KnownMembers {
    /// Whether `user` was said to be a member of `guild` less than [`MEMBER_KNOWN_FOR`] ago; older answers go.
    fn knows(&mut self, guild: discord::GuildId, user: discord::UserId) -> bool {
        self.0.retain(|_, said| said.elapsed() < MEMBER_KNOWN_FOR);
        self.0.contains_key(&(guild, user))
    }

    fn remember(&mut self, guild: discord::GuildId, user: discord::UserId) {
        self.0.insert((guild, user), tokio::time::Instant::now());
    }
}

impl Access {
    pub fn new(identity: Arc<Identity>, control_roles: Vec<String>, budget: Arc<RestBudget>) -> Self {
        let (parents, members) = (std::sync::Mutex::default(), tokio::sync::Mutex::default());
        Self { http: OnceLock::new(), cache: OnceLock::new(), identity, control_roles, budget, parents, members }
    }

    pub fn budget(&self) -> &RestBudget {
        &self.budget
    }

    /// serenity's client is built: its REST client and cache are what every lookup goes through.
    pub fn connect(&self, http: Arc<discord::Http>, cache: Arc<discord::Cache>) {
        let _ = self.http.set(http);
        let _ = self.cache.set(cache);
    }

    pub fn http(&self) -> Result<&Arc<discord::Http>, RestError> {
        self.http.get().ok_or_else(|| RestError::Unavailable("not connected yet".into()))
    }

    /// The permissions relay mode needs, by name, that the bot lacks in `channel`: Manage Messages and Manage
    /// Webhooks, without which it observes, and [`READ_HISTORY`], which observe mode needs as much (see
    /// [`read_history_notice`]).
    pub async fn relay_permissions_missing(&self, channel: ChannelId) -> Result<Vec<&'static str>, RestError> {
        let me = self.identity.user().ok_or_else(|| RestError::Unavailable("not connected yet".into()))?;
        // The gateway describes the server soon after connecting; the checks that need this wait for it.
        let (permissions, _) = self.standing(channel, discord::UserId::new(me.0), None, false).await?;
        let mut missing = Vec::new();
        if !permissions.manage_messages() {
            missing.push("Manage Messages");
        }
        if !permissions.manage_webhooks() {
            missing.push("Manage Webhooks");
        }
        if !permissions.read_message_history() {
            missing.push(READ_HISTORY);
        }
        Ok(missing)
    }

    /// The server `channel` (or thread) is in.
    pub async fn guild_of(&self, channel: ChannelId) -> Result<GuildId, RestError> {
        Ok(GuildId(self.home_channel(channel).await?.0.guild_id.get()))
    }

    /// Whether `member` may change the session in `channel`: administrators, Manage Channels there, or a member of
    /// a control role (named by id or by name). The refusal says what it takes.
    pub async fn may_manage(&self, channel: ChannelId, member: discord::Member) -> Result<(), String> {
        let standing = self.standing(channel, member.user.id, Some(member), true).await;
        self.judge(standing.map_err(|e| format!("I could not check: {e}"))?)
    }

    /// [`Access::may_manage`] for a user whose membership is not at hand (a command read back from the history):
    /// from the cache, else read over REST. `Err(None)`: the author is no member of the server (Discord answers 404
    /// for the member: a webhook's message, someone who left).
    pub async fn may_manage_user(&self, channel: ChannelId, user: UserId) -> Result<(), Option<String>> {
        match self.standing(channel, discord::UserId::new(user.0), None, true).await {
            Ok(standing) => self.judge(standing).map_err(Some),
            Err(e) if e.status() == Some(404) => Err(None),
            Err(e) => Err(Some(format!("I could not check: {e}"))),
        }
    }

    /// Whether a member's permissions in the channel and roles let it change the session, and if not, what would.
    fn judge(&self, (permissions, roles): (discord::Permissions, Vec<(u64, String)>)) -> Result<(), String> {
        if permissions.administrator()
            || permissions.manage_channels()
            || holds_control_role(&self.control_roles, &roles)
        {
            return Ok(());
        }
        let control = &self.control_roles;
        let roles = if control.is_empty() {
            String::new()
        } else {
            format!(", or the role{} {}", if control.len() == 1 { "" } else { "s" }, control.join(", "))
        };
        Err(format!(
            "You can't change the session here: that takes Administrator, Manage Channels in this channel{roles}. \
             Anyone may use `status` and `history`."
        ))
    }

    /// The ids of the control roles in `channel`'s server, for calling the managers (an escalation, a loop): the
    /// server's roles from the cache, or read over REST while the server is not in it yet (an escalation replayed
    /// from the outbox at start-up, before the gateway has described the server). Empty when none is configured.
    pub async fn control_role_ids(&self, channel: ChannelId) -> Result<Vec<u64>, RestError> {
        if self.control_roles.is_empty() {
            return Ok(Vec::new());
        }
        let (place, _) = self.home_channel(channel).await?;
        let cached = self.cache.get().and_then(|cache| {
            cache
                .guild(place.guild_id)
                .map(|guild| guild.roles.iter().map(|(id, role)| (id.get(), role.name.clone())).collect::<Vec<_>>())
        });
        let roles = match cached {
            Some(roles) => roles,
            None => call(&self.budget, "GET /guilds/{id}/roles", self.http()?.get_guild_roles(place.guild_id))
                .await?
                .into_iter()
                .map(|role| (role.id.get(), role.name))
                .collect(),
        };
        // The server's id is its @everyone role: never called, whoever lists it.
        Ok(roles
            .into_iter()
            .filter(|(id, _)| *id != place.guild_id.get())
            .filter(|role| holds_control_role(&self.control_roles, std::slice::from_ref(role)))
            .map(|(id, _)| id)
            .collect())
    }

    /// The control roles of `channel`'s server that calling the managers would name without notifying anyone: not
    /// mentionable, while the bot lacks Mention @everyone, @here, and All Roles there (found by a review: a role is
    /// pinged by a bot without that permission only if anyone may mention it). By name, from the cache only
    /// (`Unavailable` before the gateway has described the server).
    pub async fn control_roles_unpingable(&self, channel: ChannelId) -> Result<Vec<String>, RestError> {
        if self.control_roles.is_empty() {
            return Ok(Vec::new());
        }
        let me = self.identity.user().ok_or_else(|| RestError::Unavailable("not connected yet".into()))?;
        let (permissions, _) = self.standing(channel, discord::UserId::new(me.0), None, false).await?;
        if permissions.mention_everyone() {
            return Ok(Vec::new());
        }
        let (place, _) = self.home_channel(channel).await?;
        let guild = self
            .cache
            .get()
            .and_then(|cache| cache.guild(place.guild_id))
            .ok_or_else(|| RestError::Unavailable("this server is not in my cache yet".into()))?;
        let mut names: Vec<String> = guild
            .roles
            .values()
            .filter(|role| role.id.get() != place.guild_id.get() && !role.mentionable)
            .filter(|role| holds_control_role(&self.control_roles, &[(role.id.get(), role.name.clone())]))
            .map(|role| role.name.clone())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Of `users`, those Discord says are no members of `channel`'s server (`guild`, when known: a channel deleted
    /// since need not be read; see [`is_member`]): their personas can never answer there. A member the gateway's
    /// cache holds is not asked about (the cache holds few members without the privileged Server Members intent,
    /// which the bot does not ask for, so most are asked over REST); one whose look fails is left out: only Discord's
    /// own word counts. Nor is one Discord said is a member lately ([`KnownMembers`]); looks run one at a time.
    pub async fn not_members(
        &self,
        channel: ChannelId,
        guild: Option<GuildId>,
        users: &[UserId],
    ) -> Result<Vec<UserId>, RestError> {
        let guild = match guild {
            Some(guild) => discord::GuildId::new(guild.0),
            None => self.home_channel(channel).await?.0.guild_id,
        };
        let mut known = self.members.lock().await;
        let mut absent = Vec::new();
        for user in users {
            let id = discord::UserId::new(user.0);
            let cached = self.cache.get().and_then(|c| c.guild(guild).map(|g| g.members.contains_key(&id)));
            if cached == Some(true) || known.knows(guild, id) {
                continue;
            }
            match is_member(&self.budget, self.http()?, guild, id).await {
                Ok(true) => known.remember(guild, id),
                Ok(false) => absent.push(*user),
                Err(e) => tracing::debug!(%channel, %user, "could not look whether a persona is a member here: {e}"),
            }
        }
        Ok(absent)
    }

    /// A member's permissions in a channel (a thread counts as its parent) and its roles (id, name).
    /// A server not in the cache yet is read over REST when `guild_from_rest`, else `Unavailable`.
    async fn standing(
        &self,
        channel: ChannelId,
        user: discord::UserId,
        member: Option<discord::Member>,
        guild_from_rest: bool,
    ) -> Result<(discord::Permissions, Vec<(u64, String)>), RestError> {
        let (place, _) = self.home_channel(channel).await?;
        let member = match member {
            Some(member) => member,
            None => match self.cache.get().and_then(|c| c.guild(place.guild_id)?.members.get(&user).cloned()) {
                Some(member) => member,
                None => {
                    let member = self.http()?.get_member(place.guild_id, user);
                    call(&self.budget, "GET /guilds/{id}/members/{id}", member).await?
                }
            },
        };
        let cached = self.cache.get().and_then(|cache| {
            let guild = cache.guild(place.guild_id)?;
            Some((guild.user_permissions_in(&place, &member), role_names(&member, &guild.roles)))
        });
        if let Some(found) = cached {
            return Ok(found);
        }
        if !guild_from_rest {
            return Err(RestError::Unavailable("this server is not in my cache yet".into()));
        }
        // Not described by the gateway yet (a command read back from the history at start-up, before the server's
        // GUILD_CREATE): its roles and owner from REST.
        let guild = call(&self.budget, "GET /guilds/{id}", self.http()?.get_guild(place.guild_id)).await?;
        Ok((guild.user_permissions_in(&place, &member), role_names(&member, &guild.roles)))
    }

    /// The channel that holds permissions and webhooks for `channel`: itself, or a thread's parent (with the thread).
    pub async fn home_channel(
        &self,
        channel: ChannelId,
    ) -> Result<(discord::GuildChannel, Option<ChannelId>), RestError> {
        if let Some(Some(parent)) = self.known_parent(channel) {
            return Ok((self.guild_channel(parent).await?, Some(channel)));
        }
        let place = self.guild_channel(discord::ChannelId::new(channel.0)).await?;
        let parent = place.parent_id.filter(|_| place.thread_metadata.is_some());
        self.parents.lock().expect("parents lock").insert(channel, parent);
        match parent {
            Some(parent) => Ok((self.guild_channel(parent).await?, Some(channel))),
            None => Ok((place, None)),
        }
    }

    /// Where reposts for `channel` go: the channel that owns the webhooks (itself, or a thread's parent) and the
    /// thread to post in. Read once per channel.
    pub async fn webhook_route(&self, channel: ChannelId) -> Result<(ChannelId, Option<ChannelId>), RestError> {
        match self.known_parent(channel) {
            Some(Some(parent)) => Ok((ChannelId(parent.get()), Some(channel))),
            Some(None) => Ok((channel, None)),
            None => {
                let (home, thread) = self.home_channel(channel).await?;
                Ok((ChannelId(home.id.get()), thread))
            }
        }
    }

    /// The parent of `channel` if it is a thread (`Some(None)` if it is not), when known.
    fn known_parent(&self, channel: ChannelId) -> Option<Option<discord::ChannelId>> {
        self.parents.lock().expect("parents lock").get(&channel).copied()
    }

    async fn guild_channel(&self, id: discord::ChannelId) -> Result<discord::GuildChannel, RestError> {
        // Deprecated in favour of going through the guild, but it is the only lookup by channel id alone that does
        // not scan every guild.
        #[allow(deprecated)]
        let cached = self.cache.get().and_then(|cache| cache.channel(id).map(|c| c.clone()));
        if let Some(found) = cached {
            return Ok(found);
        }
        call(&self.budget, "GET /channels/{id}", self.http()?.get_channel(id))
            .await?
            .guild()
            .ok_or_else(|| RestError::Impossible("this is not a server channel".into()))
    }
}

/// A member's roles (id, name), as the server's roles name them.
fn role_names(member: &discord::Member, roles: &HashMap<discord::RoleId, discord::Role>) -> Vec<(u64, String)> {
    member.roles.iter().filter_map(|id| roles.get(id).map(|role| (id.get(), role.name.clone()))).collect()
}

/// Whether one of `roles` (id, name) is a control role: an entry that is a snowflake names a role by id and matches
/// only that id (a role merely *named* "1234..." does not count); any other entry matches a role's name.
fn holds_control_role(control: &[String], roles: &[(u64, String)]) -> bool {
    control.iter().any(|entry| match crate::core::ids::parse_snowflake(entry) {
        Ok(id) => roles.iter().any(|(role, _)| *role == id),
        Err(_) => roles.iter().any(|(_, name)| name == entry),
    })
}

/// Read Message History, by name: Discord needs it to read a message back (a repost's files, a catch-up after an
/// absence) and to add a reaction, so relay mode and observe mode both lack something without it.
pub const READ_HISTORY: &str = "Read Message History";

/// Of the permissions missing, those whose lack makes the bot observe rather than relay.
pub fn missing_for_relay<'a>(missing: &[&'a str]) -> Vec<&'a str> {
    missing.iter().copied().filter(|name| *name != READ_HISTORY).collect()
}

/// What the bot says when a session starts in a channel where it lacks Read Message History: either display mode
/// works only in part (found by a review: the relay of a file was refused and the notice blamed Manage Messages).
pub fn read_history_notice() -> String {
    format!(
        "⚠️ I'm missing the **{READ_HISTORY}** permission in this channel. Without it I can't read back what was \
         posted while I was away (after a restart or a lost connection), repost a message that has files, or react ✅ \
         in observe mode. Grant it to me here; the session goes on meanwhile."
    )
}

/// What the bot says once when Discord refuses observe mode's ✅ on a completed turn.
pub fn reactions_refused_notice() -> String {
    format!(
        "⚠️ Discord refused my ✅ on a completed turn (403): I need the **Add Reactions** and **{READ_HISTORY}** \
         permissions in this channel to mark completed turns. The turns go on meanwhile."
    )
}

/// What the bot says when a session starts where calling the managers would notify nobody (see
/// [`Access::control_roles_unpingable`]).
pub fn unpingable_roles_notice(names: &[String]) -> String {
    let (roles, it, is) = match names {
        [one] => (format!("the control role **{one}**"), "it", "isn't"),
        _ => (format!("the control roles **{}**", names.join("**, **")), "them", "aren't"),
    };
    format!(
        "⚠️ I can't ping {roles} here: {it} {is} mentionable, and I lack **Mention @everyone, @here, and All Roles**. \
         When an agent escalates or the session loops I'll name {it} without notifying anyone. Make {it} mentionable \
         (Server Settings → Roles → Allow anyone to @mention this role) or grant me that permission."
    )
}

/// What the bot says when a session starts with personas whose accounts are not members of the server: they can
/// never answer, and each of their turns would time out with nothing saying why.
pub fn absent_personas_notice(personas: &[&Persona]) -> String {
    let named: Vec<String> = personas.iter().map(|p| format!("**{}** ({})", p.display_name, p.id)).collect();
    let files: Vec<&str> = personas.iter().map(|p| p.source.as_str()).collect();
    let (is_not, their, agents, accounts, turns) = match personas {
        [_] => ("isn't a member", "its", "agent", "account", "its turns"),
        _ => ("aren't members", "their", "agents", "accounts", "each of their turns"),
    };
    format!(
        "⚠️ {} {is_not} of this server, so {their} {agents} can't answer here: {turns} will time out. Invite {their} bot \
         {accounts} to the server, or, if the id is wrong, fix `discordUserId` in {} and restart me. The session goes \
         on meanwhile.",
        named.join(", "),
        files.join(", ")
    )
}

/// What the bot says, once, when it cannot relay in a channel.
pub fn fallback_notice(missing: &[&str]) -> String {
    let (names, them) = match missing {
        [one] => (format!("the **{one}** permission"), "it"),
        _ => (format!("the **{}** permissions", missing.join("** and **")), "them"),
    };
    format!(
        "⚠️ I can't relay messages in this channel: I'm missing {names}. Falling back to observe mode: agents' \
         messages stay as they posted them (the signal stays visible) and I react ✅ to each completed turn. Grant \
         me {them}, then `!turn stop` and `!turn start` to relay."
    )
}

/// What the bot says, once, when a relay finds no webhook of its own in the channel and Discord lets it make none.
pub fn webhooks_full_notice(limit: WebhookLimit) -> String {
    let full = match limit {
        WebhookLimit::Channel => "this channel has 15 webhooks, Discord's most, and none is mine",
        WebhookLimit::Server => "this server has 1,000 webhooks, Discord's most, and none in this channel is mine",
    };
    format!(
        "⚠️ I can't relay messages in this channel: {full}. Switching to observe mode: agents' messages stay as they \
         posted them and I react ✅ to each completed turn. Delete a webhook (Server Settings → Integrations → \
         Webhooks), then `!turn stop` and `!turn start` to relay."
    )
}

/// What the bot says, once, when Discord refuses it a relay mid-session (a permission was taken away).
pub fn lost_permission_notice(missing: &[&str]) -> String {
    let what = match missing {
        [] => "a permission relay mode needs (Manage Messages or Manage Webhooks)".to_owned(),
        [one] => format!("the **{one}** permission"),
        _ => format!("the **{}** permissions", missing.join("** and **")),
    };
    format!(
        "⚠️ Discord refused to let me relay a message: I lost {what} in this channel. Switching to observe mode: \
         agents' messages stay as they posted them and I react ✅ to each completed turn. Grant it back, then \
         `!turn stop` and `!turn start` to relay."
    )
}

#[cfg(test)]
mod tests {
    use super::{Access, KnownMembers, MEMBER_KNOWN_FOR, discord, holds_control_role};
    use crate::core::ids::{ChannelId, GuildId, UserId};
    use std::sync::Arc;

    /// Found by a flaky test: the look read the channel to find its server, and a channel deleted just after its
    /// start was read after it was gone (a 404, and no look). The server the session knows is asked about directly.
    #[tokio::test]
    async fn a_look_with_the_server_known_asks_only_for_the_members() {
        let json = "Content-Type: application/json\r\n";
        let unknown_member = r#"{"message": "Unknown Member", "code": 10007}"#;
        let (base, mut asked) =
            crate::discord::rest::http::tests::answering("404 Not Found", json, unknown_member).await;
        let budget = Arc::new(crate::discord::rest::budget::RestBudget::new(0));
        let access = Access::new(Arc::default(), Vec::new(), budget);
        let http = discord::HttpBuilder::new("t").proxy(base).ratelimiter_disabled(true).build();
        access.connect(Arc::new(http), Arc::new(discord::Cache::new()));
        let absent = access.not_members(ChannelId(5), Some(GuildId(1)), &[UserId(2)]).await;
        assert_eq!(absent.unwrap(), [UserId(2)]);
        let first = asked.recv().await.unwrap();
        assert!(first.starts_with("get /api/v10/guilds/1/members/2 "), "{first}");
        assert!(asked.try_recv().is_err(), "one call");
    }

    #[tokio::test(start_paused = true)]
    async fn an_account_said_to_be_a_member_is_not_asked_about_again_for_ten_minutes() {
        let (guild, user) = (discord::GuildId::new(1), discord::UserId::new(2));
        let mut known = KnownMembers::default();
        assert!(!known.knows(guild, user));
        known.remember(guild, user);
        assert!(known.knows(guild, user));
        assert!(!known.knows(discord::GuildId::new(3), user), "a member of one server only");
        tokio::time::advance(MEMBER_KNOWN_FOR).await;
        assert!(!known.knows(guild, user), "asked again once the answer is old");
        assert!(known.0.is_empty(), "old answers go");
    }

    #[test]
    fn control_roles_match_by_id_or_by_name_and_an_id_never_matches_a_name() {
        let control = vec!["Moderators".to_owned(), "123456789012345678".to_owned()];
        assert!(holds_control_role(&control, &[(5, "Moderators".into())]), "by name");
        assert!(holds_control_role(&control, &[(123_456_789_012_345_678, "Staff".into())]), "by id");
        assert!(!holds_control_role(&control, &[(6, "123456789012345678".into())]), "a role named like the id");
        assert!(!holds_control_role(&control, &[(6, "moderators".into())]), "names are exact");
        assert!(!holds_control_role(&[], &[(5, "Moderators".into())]));
    }
}
