//! Discord permissions: the bits the bot's behaviour depends on, computed from roles and channel overwrites the
//! way Discord does (owner, @everyone, roles, administrator, then @everyone, role and member overwrites).

use crate::world::{Channel, Guild, OverwriteTarget};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Permissions(u64);

impl Permissions {
    pub const ADMINISTRATOR: Self = Self(1 << 3);
    pub const MANAGE_CHANNELS: Self = Self(1 << 4);
    pub const ADD_REACTIONS: Self = Self(1 << 6);
    pub const VIEW_CHANNEL: Self = Self(1 << 10);
    pub const SEND_MESSAGES: Self = Self(1 << 11);
    pub const MANAGE_MESSAGES: Self = Self(1 << 13);
    pub const EMBED_LINKS: Self = Self(1 << 14);
    pub const ATTACH_FILES: Self = Self(1 << 15);
    pub const READ_MESSAGE_HISTORY: Self = Self(1 << 16);
    pub const MENTION_EVERYONE: Self = Self(1 << 17);
    pub const MANAGE_WEBHOOKS: Self = Self(1 << 29);
    pub const USE_APPLICATION_COMMANDS: Self = Self(1 << 31);
    pub const CREATE_PUBLIC_THREADS: Self = Self(1 << 35);
    pub const CREATE_PRIVATE_THREADS: Self = Self(1 << 36);
    pub const SEND_MESSAGES_IN_THREADS: Self = Self(1 << 38);
    pub const ALL: Self = Self(u64::MAX >> 14);
    /// What @everyone gets in a new server, roughly: see, talk, embed links, attach files, react, read history,
    /// use commands, start and talk in threads.
    pub const EVERYONE_DEFAULT: Self = Self(
        Self::VIEW_CHANNEL.0
            | Self::SEND_MESSAGES.0
            | Self::EMBED_LINKS.0
            | Self::ATTACH_FILES.0
            | Self::ADD_REACTIONS.0
            | Self::READ_MESSAGE_HISTORY.0
            | Self::USE_APPLICATION_COMMANDS.0
            | Self::CREATE_PUBLIC_THREADS.0
            | Self::CREATE_PRIVATE_THREADS.0
            | Self::SEND_MESSAGES_IN_THREADS.0,
    );
    /// What each of the two users of a DM channel may do in it.
    pub const IN_DM: Self = Self(
        Self::VIEW_CHANNEL.0
            | Self::SEND_MESSAGES.0
            | Self::EMBED_LINKS.0
            | Self::ATTACH_FILES.0
            | Self::ADD_REACTIONS.0
            | Self::READ_MESSAGE_HISTORY.0,
    );

    pub const fn empty() -> Self {
        Self(0)
    }

    pub const fn from_bits(bits: u64) -> Self {
        Self(bits)
    }

    pub const fn bits(self) -> u64 {
        self.0
    }

    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    pub const fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// Discord's name of the first missing permission, for 403 messages and logs.
    pub fn name_of(self) -> &'static str {
        match self {
            Self::MANAGE_MESSAGES => "Manage Messages",
            Self::MANAGE_WEBHOOKS => "Manage Webhooks",
            Self::SEND_MESSAGES => "Send Messages",
            Self::ADD_REACTIONS => "Add Reactions",
            Self::VIEW_CHANNEL => "View Channel",
            Self::READ_MESSAGE_HISTORY => "Read Message History",
            Self::EMBED_LINKS => "Embed Links",
            Self::ATTACH_FILES => "Attach Files",
            Self::CREATE_PUBLIC_THREADS => "Create Public Threads",
            Self::CREATE_PRIVATE_THREADS => "Create Private Threads",
            _ => "a permission",
        }
    }
}

impl std::ops::BitOr for Permissions {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

/// Guild-level permissions of a member: @everyone and its roles (all of them for the owner or an administrator).
pub fn base(guild: &Guild, user: u64) -> Permissions {
    if guild.owner_id == user {
        return Permissions::ALL;
    }
    let Some(member_roles) = guild.members.get(&user) else { return Permissions::empty() };
    let mut perms = Permissions::empty();
    for role in &guild.roles {
        if role.id == guild.id || member_roles.contains(&role.id) {
            perms = perms | role.permissions;
        }
    }
    if perms.contains(Permissions::ADMINISTRATOR) { Permissions::ALL } else { perms }
}

/// A member's permissions in a channel, after the channel's overwrites.
pub fn compute(guild: &Guild, channel: &Channel, user: u64) -> Permissions {
    let base = base(guild, user);
    // `base` already grants everything to the owner and to administrators; overwrites do not apply to them.
    if base == Permissions::ALL {
        return Permissions::ALL;
    }
    let member_roles = guild.members.get(&user).cloned().unwrap_or_default();
    let mut perms = base;
    let apply = |perms: Permissions, allow: Permissions, deny: Permissions| perms.without(deny).union(allow);
    for o in channel.overwrites.iter().filter(|o| o.target == OverwriteTarget::Role(guild.id)) {
        perms = apply(perms, o.allow, o.deny);
    }
    let (mut allow, mut deny) = (Permissions::empty(), Permissions::empty());
    for o in &channel.overwrites {
        if let OverwriteTarget::Role(id) = o.target
            && id != guild.id
            && member_roles.contains(&id)
        {
            allow = allow | o.allow;
            deny = deny | o.deny;
        }
    }
    perms = apply(perms, allow, deny);
    for o in channel.overwrites.iter().filter(|o| o.target == OverwriteTarget::Member(user)) {
        perms = apply(perms, o.allow, o.deny);
    }
    perms
}
