//! The serenity calls the bot still makes (permissions, channels, members, finding or making its webhook), each with
//! a time limit (serenity's client has none) and its failure as a [`RestError`].

use super::budget::RestBudget;
use super::http::REST_TIMEOUT;
use super::{NETWORK_REFUSAL, RestError, WebhookLimit};
use serenity::all as discord;
use std::future::Future;

/// Runs a serenity REST call within the bot's global budget and with [`REST_TIMEOUT`], turning its failures into a
/// [`RestError`]. The request is made only once a token is taken: a future does nothing until awaited. `route` names
/// it for the metrics, as a template (`GET /channels/{id}`): serenity does not say which route it called.
pub async fn call<T>(
    budget: &RestBudget,
    route: &'static str,
    request: impl Future<Output = serenity::Result<T>>,
) -> Result<T, RestError> {
    budget.take().await;
    let started = tokio::time::Instant::now();
    let result = match tokio::time::timeout(REST_TIMEOUT, request).await {
        Ok(result) => result.map_err(|e| rest_error(&e)),
        Err(_) => Err(RestError::Timeout(REST_TIMEOUT)),
    };
    crate::metrics::rest_call_to(route, crate::metrics::Answer::of(&result), started.elapsed());
    result
}

/// Discord's JSON error codes for a member that is not there: Unknown Member (the user is in no such server) and
/// Unknown User (no such account at all).
const UNKNOWN_MEMBER: isize = 10007;
const UNKNOWN_USER: isize = 10013;

/// Whether `user` is a member of `guild`, asked of Discord as [`call`] asks: `Ok(false)` only when Discord answers
/// 404 with Unknown Member or Unknown User; any other failure is an error, which says nothing either way. (The
/// metrics count that 404 as a success: it answered the question.)
pub async fn is_member(
    budget: &RestBudget,
    http: &discord::Http,
    guild: discord::GuildId,
    user: discord::UserId,
) -> Result<bool, RestError> {
    let asked = async {
        match http.get_member(guild, user).await {
            Ok(_) => Ok(true),
            Err(serenity::Error::Http(discord::HttpError::UnsuccessfulRequest(response)))
                if response.status_code.as_u16() == 404
                    && matches!(response.error.code, UNKNOWN_MEMBER | UNKNOWN_USER) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    };
    call(budget, "GET /guilds/{id}/members/{id}", asked).await
}

fn rest_error(error: &serenity::Error) -> RestError {
    match error {
        // Only making a webhook answers these codes ("Maximum number of webhooks reached", in the channel or the server).
        serenity::Error::Http(discord::HttpError::UnsuccessfulRequest(response)) => {
            // serenity says -1 for a body that is not Discord's JSON (Cloudflare's page; it shows no headers to tell
            // it by, so a proxy's plain-text 403 is taken for one too): Discord's own 403s say why in JSON.
            let code = response.error.code;
            if response.status_code.as_u16() == 403 && (code == NETWORK_REFUSAL as isize || code == -1) {
                return RestError::NetworkRefused(response.error.message.clone());
            }
            match WebhookLimit::from_code(code) {
                Some(limit) => RestError::WebhooksFull(limit),
                None => RestError::Status {
                    status: response.status_code.as_u16(),
                    message: response.error.message.clone(),
                    // serenity does not pass on `retry_after`; these calls are rare, and the retry policy waits its own.
                    retry_after: None,
                },
            }
        }
        serenity::Error::Http(discord::HttpError::Request(e)) => RestError::Transport(e.to_string()),
        other => RestError::Transport(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::http::tests::answering;
    use super::*;

    /// Found by a review: the 403 of Discord's network was told from a permission's only on the bot's own client;
    /// serenity's calls (finding or making the webhook, permissions) still took it for a missing permission.
    #[tokio::test]
    async fn a_403_from_discords_network_is_no_missing_permission_on_serenitys_calls_either() {
        let json = "Content-Type: application/json\r\n";
        let cases = [
            (json, r#"{"message": "internal network error", "code": 40333}"#, true),
            ("Content-Type: text/html\r\nServer: cloudflare\r\n", "<html>blocked</html>", true),
            (json, r#"{"message": "Missing Permissions", "code": 50013}"#, false),
        ];
        for (headers, body, from_the_network) in cases {
            let (base, _) = answering("403 Forbidden", headers, body).await;
            let http = discord::HttpBuilder::new("t").proxy(base).ratelimiter_disabled(true).build();
            let budget = RestBudget::new(0);
            let found =
                call(&budget, "GET /channels/{id}/webhooks", http.get_channel_webhooks(discord::ChannelId::new(1)));
            let refused = found.await.unwrap_err();
            assert_eq!(matches!(refused, RestError::NetworkRefused(_)), from_the_network, "{body}: {refused:?}");
            assert_eq!(refused.status(), (!from_the_network).then_some(403), "{body}");
        }
    }

    /// Only Discord's word that the member is not there counts as no member: another 404 (the server unknown) or a
    /// failure says nothing either way.
    #[tokio::test]
    async fn only_unknown_member_or_unknown_user_is_no_member() {
        const MEMBER: &str = r#"{"user": {"id": "2", "username": "dev", "discriminator": "0", "avatar": null},
            "roles": [], "joined_at": "2026-01-01T00:00:00Z", "deaf": false, "mute": false, "flags": 0}"#;
        let json = "Content-Type: application/json\r\n";
        let cases = [
            ("404 Not Found", r#"{"message": "Unknown Member", "code": 10007}"#, Some(false)),
            ("404 Not Found", r#"{"message": "Unknown User", "code": 10013}"#, Some(false)),
            ("404 Not Found", r#"{"message": "Unknown Guild", "code": 10004}"#, None),
            ("500 Internal Server Error", r#"{"message": "oops", "code": 0}"#, None),
            ("200 OK", MEMBER, Some(true)),
        ];
        for (status, body, member) in cases {
            let (base, _) = answering(status, json, body).await;
            let http = discord::HttpBuilder::new("t").proxy(base).ratelimiter_disabled(true).build();
            let asked = is_member(&RestBudget::new(0), &http, discord::GuildId::new(1), discord::UserId::new(2)).await;
            assert_eq!(asked.ok(), member, "{status} {body}");
        }
    }
}
