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
