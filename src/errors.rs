//! An error told with what caused it, each cause once; and the errors that only the person running the bot can fix.

/// The exit status of a start that cannot succeed until the person running the bot changes something (a flag, the
/// token, a persona or configuration file, a setting in the developer portal): the systemd unit does not restart it
/// (`RestartPreventExitStatus=2`), where a restart every few seconds would only repeat the same error. Every other
/// failure exits 1 and may be worth a restart (a database or a network that is down).
pub const EXIT_SETUP: u8 = 2;

/// An error that restarting as is cannot get past: see [`EXIT_SETUP`]. Its text says what to change.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SetupError(pub String);

/// The exit status for `error`: [`EXIT_SETUP`] when it is (or wraps) a [`SetupError`], 1 otherwise.
pub fn exit_status_of(error: &anyhow::Error) -> u8 {
    if error.chain().any(|e| e.is::<SetupError>()) { EXIT_SETUP } else { 1 }
}

/// `error` and its causes, as far down as they go ("error sending request: … Connection refused"), each left out when
/// the text so far already holds it: many errors repeat their cause in their own message, which `{:#}` then printed
/// twice (found by a review: "No such file or directory (os error 2): No such file or directory (os error 2)").
pub fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let said = e.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{EXIT_SETUP, SetupError, exit_status_of, with_causes};

    #[derive(Debug, thiserror::Error)]
    #[error("failed to open {path}: {source}")]
    struct Opening {
        path: &'static str,
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_told_once_and_a_context_above_them_all() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        let error = anyhow::Error::from(Opening { path: "state/channels", source: io }).context("cannot start");
        assert_eq!(
            with_causes(error.as_ref()),
            "cannot start: failed to open state/channels: No such file or directory (os error 2)"
        );
    }

    #[test]
    fn a_setup_error_exits_with_its_own_status_even_under_a_context() {
        let refused = anyhow::Error::from(SetupError("Discord refused the token".into()));
        assert_eq!(exit_status_of(&refused), EXIT_SETUP);
        assert_eq!(exit_status_of(&refused.context("cannot start")), EXIT_SETUP);
        let down = anyhow::anyhow!("cannot reach the database");
        assert_eq!(exit_status_of(&down), 1);
        assert_ne!(EXIT_SETUP, 1);
    }
}
