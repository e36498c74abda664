//! `turn-manager invite --client-id ID`: the OAuth2 URL with the scopes and exactly the permissions the bot uses.

use super::InviteArgs;
use crate::core::ids::parse_snowflake;
use std::process::ExitCode;

pub fn run(args: &InviteArgs) -> ExitCode {
    match invite_url(&args.client_id) {
        Ok(url) => {
            println!("{url}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "error: --client-id: {e} (it is the Application ID on your application's General Information page)"
            );
            ExitCode::from(2)
        }
    }
}

/// The invitation URL: scopes `bot` and `applications.commands`, and the permissions of [`permissions_used`].
///
/// [`permissions_used`]: crate::discord::permissions_used
pub fn invite_url(client_id: &str) -> Result<String, String> {
    let id = parse_snowflake(client_id.trim())?;
    let permissions = crate::discord::permissions_used().bits();
    Ok(format!(
        "https://discord.com/oauth2/authorize?client_id={id}&scope=bot%20applications.commands&permissions={permissions}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_both_scopes_and_the_permissions_bits() {
        let url = invite_url("1312000000000000009").unwrap();
        assert!(url.starts_with("https://discord.com/oauth2/authorize?client_id=1312000000000000009&"));
        assert!(url.contains("scope=bot%20applications.commands"));
        // View Channel, Send Messages, Send in Threads, Read History, Add Reactions, Manage Messages, Manage Webhooks.
        let expected = (1u64 << 10) | (1 << 11) | (1 << 38) | (1 << 16) | (1 << 6) | (1 << 13) | (1 << 29);
        assert!(url.ends_with(&format!("permissions={expected}")), "{url}");
    }

    #[test]
    fn a_client_id_that_is_not_a_snowflake_is_refused() {
        assert!(invite_url("my-bot").is_err());
        assert!(invite_url("").is_err());
    }
}
