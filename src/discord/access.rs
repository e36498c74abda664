//! Permissions: whether the bot can relay in a channel (else it observes), and who may change a session (spec 6, 7).

use super::bot::Bot;
use super::effects::rest;
use super::to_channel;
use crate::core::ids::ChannelId;
use serenity::all as discord;

/// The permissions relay mode needs, by name, that the bot lacks in `channel`.
pub(super) async fn relay_permissions_missing(bot: &Bot, channel: ChannelId) -> Result<Vec<&'static str>, String> {
    let me = bot.user_id().ok_or("not connected yet")?;
    let (permissions, _) = standing(bot, channel, me, None).await?;
    let mut missing = Vec::new();
    if !permissions.manage_messages() {
        missing.push("Manage Messages");
    }
    if !permissions.manage_webhooks() {
        missing.push("Manage Webhooks");
    }
    Ok(missing)
}

/// What the bot says, once, when it cannot relay in a channel.
pub(super) fn fallback_notice(missing: &[&str]) -> String {
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

/// Whether `member` may change the session in `channel`: administrators, Manage Channels there, or a control role.
pub(super) async fn may_manage(bot: &Bot, channel: ChannelId, member: discord::Member) -> Result<(), String> {
    let (permissions, roles) = standing(bot, channel, member.user.id, Some(member)).await?;
    let control = &bot.config.control_roles;
    if permissions.administrator() || permissions.manage_channels() || roles.iter().any(|r| control.contains(r)) {
        return Ok(());
    }
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

/// A member's permissions in a channel (a thread counts as its parent) and the names of its roles.
async fn standing(
    bot: &Bot,
    channel: ChannelId,
    user: discord::UserId,
    member: Option<discord::Member>,
) -> Result<(discord::Permissions, Vec<String>), String> {
    let (place, _) = home_channel(bot, channel).await?;
    let member = match member {
        Some(member) => member,
        None => match bot.cache().and_then(|c| c.guild(place.guild_id)?.members.get(&user).cloned()) {
            Some(member) => member,
            None => rest(bot.http().get_member(place.guild_id, user)).await?,
        },
    };
    let cache = bot.cache().ok_or("not connected yet")?;
    let guild = cache.guild(place.guild_id).ok_or("this server is not known to me yet")?;
    let permissions = guild.user_permissions_in(&place, &member);
    let roles = member.roles.iter().filter_map(|id| guild.roles.get(id).map(|r| r.name.clone())).collect();
    Ok((permissions, roles))
}

/// The channel that holds permissions and webhooks for `channel`: itself, or a thread's parent (with the thread).
pub(super) async fn home_channel(
    bot: &Bot,
    channel: ChannelId,
) -> Result<(discord::GuildChannel, Option<ChannelId>), String> {
    let place = guild_channel(bot, to_channel(channel)).await?;
    match (place.thread_metadata.is_some(), place.parent_id) {
        (true, Some(parent)) => Ok((guild_channel(bot, parent).await?, Some(channel))),
        _ => Ok((place, None)),
    }
}

async fn guild_channel(bot: &Bot, id: discord::ChannelId) -> Result<discord::GuildChannel, String> {
    // Deprecated in favour of going through the guild, but it is the only lookup by channel id alone that does
    // not scan every guild.
    #[allow(deprecated)]
    let cached = bot.cache().and_then(|cache| cache.channel(id).map(|c| c.clone()));
    if let Some(found) = cached {
        return Ok(found);
    }
    rest(bot.http().get_channel(id)).await?.guild().ok_or_else(|| "this is not a server channel".to_owned())
}
