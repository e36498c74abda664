//! The serenity calls the bot still makes (permissions, channels, members, finding or making its webhook), each with
//! a time limit (serenity's client has none) and its failure as a [`RestError`].

use super::budget::RestBudget;
use super::http::REST_TIMEOUT;
use super::{RestError, WebhookLimit};
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

fn rest_error(error: &serenity::Error) -> RestError {
    match error {
        // Only making a webhook answers these codes ("Maximum number of webhooks reached", in the channel or the server).
        serenity::Error::Http(discord::HttpError::UnsuccessfulRequest(response)) => {
            match WebhookLimit::from_code(response.error.code) {
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
