//! REST routes as metric labels: a low-cardinality template of a request's path (`POST /channels/{id}/messages`),
//! never a raw id, a webhook's token or a query string.

/// The longest path segment kept as it is; anything longer is a parameter, whatever it looks like.
const LITERAL_LEN_MAX: usize = 24;

/// The route of a request to Discord's API: `method` and the path after `/api/v10`, each parameter replaced by a
/// placeholder. The segment after a webhook's id is its `{token}`; numbers become `{id}`; the segment after
/// `reactions` is an `{emoji}`; the query is dropped. A segment kept as it is must look like one of Discord's own
/// words (`messages`, `@me`, `thread-members`): lowercase letters, `@`, `-` and `_`, at most [`LITERAL_LEN_MAX`]
/// long. Anything else becomes `{param}`, so a label never carries a value of a request, whatever new route is
/// added.
pub fn template(method: &str, path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let mut route = String::with_capacity(method.len() + path.len());
    route.push_str(method);
    route.push(' ');
    let mut before: [&str; 2] = ["", ""]; // the two segments before this one, as they were
    for segment in path.trim_start_matches('/').split('/') {
        route.push('/');
        route.push_str(placeholder(segment, before).unwrap_or(segment));
        before = [before[1], segment];
    }
    route
}

/// What a segment becomes, or `None` when it is kept.
fn placeholder(segment: &str, [two_before, one_before]: [&str; 2]) -> Option<&'static str> {
    if two_before == "webhooks" {
        Some("{token}")
    } else if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
        Some("{id}")
    } else if one_before == "reactions" {
        Some("{emoji}")
    } else if segment.len() > LITERAL_LEN_MAX || !segment.bytes().all(|b| b.is_ascii_lowercase() || b"@-_".contains(&b))
    {
        Some("{param}")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_routes_the_bot_calls_become_templates() {
        assert_eq!(template("POST", "/channels/1234567890123456789/messages"), "POST /channels/{id}/messages");
        assert_eq!(template("DELETE", "/channels/12/messages/34"), "DELETE /channels/{id}/messages/{id}");
        assert_eq!(template("GET", "/channels/12/messages/34"), "GET /channels/{id}/messages/{id}");
        assert_eq!(
            template("GET", "/channels/12/messages?after=345&limit=100"),
            "GET /channels/{id}/messages",
            "the query is dropped"
        );
        assert_eq!(
            template("PUT", "/channels/12/messages/34/reactions/%E2%9C%85/@me"),
            "PUT /channels/{id}/messages/{id}/reactions/{emoji}/@me"
        );
        assert_eq!(
            template("PUT", "/channels/12/messages/34/reactions/ok/@me"),
            "PUT /channels/{id}/messages/{id}/reactions/{emoji}/@me",
            "an emoji that looks like a word is still an emoji"
        );
    }

    #[test]
    fn a_webhooks_token_never_reaches_a_label() {
        let token = "aBcD-efGh_1234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS";
        let route = template("POST", &format!("/webhooks/987654321/{token}?wait=true&thread_id=55"));
        assert_eq!(route, "POST /webhooks/{id}/{token}");
        assert_eq!(template("POST", "/webhooks/987654321/lowercasetoken"), "POST /webhooks/{id}/{token}");
    }

    #[test]
    fn an_unknown_segment_that_does_not_look_like_a_word_is_a_parameter() {
        assert_eq!(template("GET", "/guilds/12/members/Some-Name"), "GET /guilds/{id}/members/{param}");
        assert_eq!(template("GET", "/channels/12/thread-members/@me"), "GET /channels/{id}/thread-members/@me");
        assert_eq!(template("GET", &format!("/x/{}", "a".repeat(40))), "GET /x/{param}", "too long for a word");
    }

    proptest! {
        /// Whatever the ids, webhook tokens, emoji and queries, a route holds no digit: never a snowflake.
        #[test]
        fn no_route_ever_holds_a_raw_id(
            channel in any::<u64>(),
            message in any::<u64>(),
            webhook in any::<u64>(),
            token in "[A-Za-z0-9_-]{1,80}",
            emoji in "[^/?#]{1,20}",
            query in "[a-z0-9=&]{0,30}",
        ) {
            let paths = [
                format!("/channels/{channel}/messages?{query}"),
                format!("/channels/{channel}/messages/{message}"),
                format!("/channels/{channel}/messages/{message}/reactions/{emoji}/@me"),
            ];
            for path in paths {
                let route = template("POST", &path);
                prop_assert!(!route.bytes().any(|b| b.is_ascii_digit()), "{path} -> {route}");
            }
            let webhook = template("POST", &format!("/webhooks/{webhook}/{token}?wait=true&thread_id={channel}"));
            prop_assert_eq!(webhook, "POST /webhooks/{id}/{token}");
        }
    }
}
