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

/// `s` with its control characters and invisible format characters (bidi
/// overrides and isolates, zero-width ones) escaped (`\u{1b}`), as
/// messages show names that come from a trace or a bundle: a hostile file
/// name must not drive the terminal the message is printed on, start a
/// line of its own, or show itself reordered.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A character [`printable`] escapes.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// A path as [`printable`] shows it.
pub fn printable_path(p: &std::path::Path) -> String {
    printable(&p.to_string_lossy()).into_owned()
}

/// At most `max` bytes of `s` (cut at a character boundary, its length
/// said), for messages that show a value from an input.
pub fn cut(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    let end = (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    std::borrow::Cow::Owned(format!("{}... ({} bytes)", &s[..end], s.len()))
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
        assert_eq!(
            printable("x\u{202e}y\u{200b}z\u{9b}"),
            r"x\u{202e}y\u{200b}z\u{9b}"
        );
        assert_eq!(cut("abcdé", 5), "abcd... (6 bytes)");
        assert_eq!(cut("abc", 5), "abc");
    }
}
