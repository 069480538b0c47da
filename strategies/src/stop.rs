//! [`Stops`]: a request's stop strings and the one place they are matched, whoever generates —
//! the local engine's stop condition, the fake generator, a remote backend's reply — and
//! whoever cuts the text for a client (the HTTP API).
//!
//! The contract (OpenAI's `stop`, kept by every [`Generator`](crate::Generator)): generation
//! stops right after the text first contains one of the strings. The generator port keeps the
//! stop in the continuation's text (strategies cut steps after a delimiter and read it); the
//! API cuts the text at the earliest stop, which OpenAI does not return. Empty strings never
//! match (an empty stop would end every continuation at once); they are dropped here.

/// A request's stop strings (never empty ones), in the order the request gave them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stops(Vec<String>);

impl Stops {
    /// The non-empty strings of `stops`, in order.
    pub fn new<S: AsRef<str>>(stops: impl IntoIterator<Item = S>) -> Self {
        Self(
            stops
                .into_iter()
                .filter(|s| !s.as_ref().is_empty())
                .map(|s| s.as_ref().to_string())
                .collect(),
        )
    }

    /// Whether there is no stop string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The strings, in order.
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// Whether `text` contains one of the strings (a continuation that ended on a stop).
    pub fn any_in(&self, text: &str) -> bool {
        self.0.iter().any(|s| text.contains(s.as_str()))
    }

    /// Whether growing the text from `before` to `now` completed a new occurrence of one of
    /// the strings (the step at which generation stops).
    pub fn completed(&self, before: &str, now: &str) -> bool {
        self.0
            .iter()
            .any(|s| now.matches(s.as_str()).count() > before.matches(s.as_str()).count())
    }

    /// The earliest stop in `text` and the byte offset where it starts (the first listed when
    /// two start at the same place): where the API cuts the text.
    pub fn first_in(&self, text: &str) -> Option<(usize, &str)> {
        self.0
            .iter()
            .filter_map(|s| text.find(s.as_str()).map(|at| (at, s.as_str())))
            .min_by_key(|(at, _)| *at)
    }

    /// The first listed stop `text` ends with (the stop a finished continuation kept).
    pub fn ending(&self, text: &str) -> Option<&str> {
        self.0
            .iter()
            .map(String::as_str)
            .find(|s| text.ends_with(s))
    }

    /// The first listed stop `text` starts with (what a backend generated right after the text
    /// it returned).
    pub fn starting(&self, text: &str) -> Option<&str> {
        self.0
            .iter()
            .map(String::as_str)
            .find(|s| text.starts_with(s))
    }

    /// Bytes a stream must hold back from a running text: its tail could still become a stop.
    pub fn hold_back(&self) -> usize {
        self.0
            .iter()
            .map(|s| s.len().saturating_sub(1))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn empty_strings_never_match() {
        let stops = Stops::new(["", "\n\n"]);
        assert_eq!(stops.as_slice(), ["\n\n"]);
        assert!(!stops.any_in("no delimiter"));
        assert!(!stops.completed("", "a"));
        assert_eq!(stops.first_in("abc"), None);
        assert!(Stops::new([""]).is_empty());
    }

    #[test]
    fn the_earliest_stop_wins_and_ties_go_to_the_first_listed() {
        let stops = Stops::new(["END", "\n", "\nX"]);
        assert_eq!(stops.first_in("a\nXEND"), Some((1, "\n")));
        assert_eq!(stops.first_in("aEND\n"), Some((1, "END")));
        assert_eq!(stops.ending("a\nX"), Some("\nX"));
        assert_eq!(stops.starting("\nXb"), Some("\n"));
        assert_eq!(stops.hold_back(), 2);
    }

    #[test]
    fn a_new_occurrence_completes_an_old_one_does_not() {
        let stops = Stops::new(["\n\n"]);
        assert!(stops.completed("step one\n", "step one\n\n"));
        assert!(!stops.completed("a\n\nb", "a\n\nbc"));
        assert!(stops.completed("a\n\nb\n", "a\n\nb\n\n"));
    }

    proptest! {
        /// Growing a text one piece at a time, the first piece after which it contains a stop
        /// is the one that completed it, and the cut lands before that stop.
        #[test]
        fn completion_and_cut_agree(
            pieces in proptest::collection::vec("[ab\n]{0,3}", 0..12),
            stops in proptest::collection::vec("[ab\n]{0,3}", 0..3),
        ) {
            let stops = Stops::new(&stops);
            let mut text = String::new();
            for piece in &pieces {
                let before = text.clone();
                text.push_str(piece);
                if !stops.any_in(&before) {
                    prop_assert_eq!(stops.completed(&before, &text), stops.any_in(&text));
                }
            }
            match stops.first_in(&text) {
                Some((at, s)) => {
                    prop_assert!(text[at..].starts_with(s));
                    // No stop starts earlier.
                    prop_assert!(stops
                        .as_slice()
                        .iter()
                        .all(|t| text.find(t.as_str()).is_none_or(|j| j >= at)));
                }
                None => prop_assert!(!stops.any_in(&text)),
            }
        }
    }
}
