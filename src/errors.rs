//! An error told with what caused it, each cause once.

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
    use super::with_causes;

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
}
