//! Numbers and durations as ptdec's messages, summary and reports write
//! them. A leaf: every stage may use it.

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration in ns as `1.234 s`, `12.5 ms`, `3.2 µs` or `45 ns`.
pub fn duration(ns: u64) -> String {
    let f = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{:.3} s", f / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.3} ms", f / 1e6)
    } else if ns >= 1_000 {
        format!("{:.3} µs", f / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// `s` with its control characters escaped (`\u{1b}`), as messages show
/// names that come from a trace or a bundle: a hostile file name must not
/// drive the terminal the message is printed on.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_control_characters_only() {
        assert!(matches!(
            printable("/usr/lib/é.so"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            printable("a\u{1b}[31mb\nc\u{7f}"),
            "a\\u{1b}[31mb\\nc\\u{7f}"
        );
    }
}
