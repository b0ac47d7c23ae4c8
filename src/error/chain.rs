//! An error and its sources as one line of text: for log fields, for an error that must
//! quote another, and for the `redismutex` command's messages (which compiles this file
//! too, so the crate and its command write an error the same way).

/// `err` and its sources, joined with `: `, each once: a source whose text the line
/// already holds (an error that pastes its source into its own message) is left out.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::chain;

    /// An error with a message and maybe a source.
    #[derive(Debug)]
    struct Link(&'static str, Option<Box<Link>>);

    impl fmt::Display for Link {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Link {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|link| link as _)
        }
    }

    #[test]
    fn sources_follow_once_each() {
        let io = Link("connection refused", None);
        assert_eq!(chain(&io), "connection refused");
        let wrapped = Link("request failed", Some(Box::new(io)));
        let outer = Link("lock lost", Some(Box::new(wrapped)));
        assert_eq!(
            chain(&outer),
            "lock lost: request failed: connection refused"
        );
        let pasted = Link(
            "request failed: connection refused",
            Some(Box::new(Link("connection refused", None))),
        );
        assert_eq!(
            chain(&pasted),
            "request failed: connection refused",
            "a source already in the message is not repeated"
        );
    }
}
