//! The value parsers of the command line's options: times, sizes,
//! frequencies, addresses.

use anyhow::{bail, Result};

use crate::raw;

/// A count of rows: at least 1.
pub fn parse_top(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        Ok(_) => Err("give at least 1 row".into()),
        Err(_) => Err(format!("{s:?} is not a number of rows")),
    }
}

/// `--slowest`: 1 to [`crate::report::MAX_SLOWEST`] calls.
pub fn parse_slowest(s: &str) -> Result<usize, String> {
    let n = parse_top(s)?;
    let max = crate::report::MAX_SLOWEST;
    if n > max {
        return Err(format!(
            "ptdec lists at most {max} calls (each is held in memory until the report is \
             printed); give --slowest {max} or less. Every call is in the FTF of \
             `ptdec TRACE -o OUT`, and its time in --folded"
        ));
    }
    Ok(n)
}

/// An address: decimal or 0x hex.
pub fn parse_address(s: &str) -> Result<u64, String> {
    raw::parse_num(s).ok_or_else(|| format!("{s:?} is not an address (decimal or 0x hex)"))
}

/// A number: decimal or 0x hex, up to 2^64-1.
pub fn parse_u64(s: &str) -> Result<u64, String> {
    raw::parse_num(s)
        .ok_or_else(|| format!("{s:?} is not a number (decimal or 0x hex, below 2^64)"))
}

/// `--pevent:time-shift`: below 64 (a shift by more is undefined).
pub fn parse_time_shift(s: &str) -> Result<u16, String> {
    match raw::parse_num(s) {
        Some(v @ 0..=63) => Ok(v as u16),
        _ => Err(format!("{s:?}: time_shift is a number from 0 to 63")),
    }
}

/// `--pevent:time-mult`: 1 to 2^32-1 (record times are divided by it).
pub fn parse_time_mult(s: &str) -> Result<u32, String> {
    match raw::parse_num(s).map(u32::try_from) {
        Some(Ok(v)) if v > 0 => Ok(v),
        _ => Err(format!("{s:?}: time_mult is a number from 1 to 0xffffffff")),
    }
}

/// `--pevent:sample-config ID:TYPE`.
pub fn parse_sample_config(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("{s:?}: give IDENTIFIER:SAMPLE_TYPE, e.g. 42:0x10086");
    let (id, ty) = s.split_once(':').ok_or_else(bad)?;
    Ok((
        raw::parse_num(id).ok_or_else(bad)?,
        raw::parse_num(ty).ok_or_else(bad)?,
    ))
}

/// ADDRn_CFG: 0, 1 or 2 (the values IA32_RTIT_CTL defines).
pub fn parse_filter_cfg(s: &str) -> Result<u32, String> {
    match raw::parse_num(s) {
        Some(v @ 0..=2) => Ok(v as u32),
        _ => Err(format!(
            "{s:?}: ADDRn_CFG is 0 (off), 1 (filter) or 2 (stop)"
        )),
    }
}

/// A `--cpu` value: `None` for `none`.
#[derive(Clone)]
pub struct CpuArg(pub Option<(u16, u8, u8)>);

pub fn parse_cpu(s: &str) -> Result<CpuArg, String> {
    raw::parse_cpu(s).map(CpuArg)
}

/// `2400000000`, `2.4GHz`, `100MHz`, `25kHz`.
pub fn parse_hz(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, scale) = [("ghz", 1e9), ("mhz", 1e6), ("khz", 1e3), ("hz", 1.0)]
        .iter()
        .find_map(|&(unit, scale)| lower.strip_suffix(unit).map(|n| (n.to_string(), scale)))
        .unwrap_or((lower.clone(), 1.0));
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v * scale >= 1.0 && v * scale < 1.8e19 => {
            Ok((v * scale).round() as u64)
        }
        _ => Err(format!(
            "`{t}` is not a frequency: give Hz (\"2400000000\") or a number with kHz, MHz or GHz (\"2.4GHz\")"
        )),
    }
}

/// A byte count with an optional K, M or G suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{s:?} is not a size in bytes (e.g. 262144, 256K, 1M)"))
}

/// `--chunk-size`: a size up to `MAX_BYTES_IN_FLIGHT`.
pub fn parse_chunk_size(s: &str) -> Result<u64, String> {
    let n = parse_size(s)?;
    let max = crate::decode::MAX_BYTES_IN_FLIGHT;
    if n > max {
        return Err(format!(
            "{s:?} is more than the largest chunk, {}M: the chunks decoded ahead of the \
             output hold at most that much trace (memory); give at most {}M",
            max >> 20,
            max >> 20
        ));
    }
    Ok(n)
}

/// `-j`: 0 (all cores) up to `MAX_JOBS`.
pub fn parse_jobs(s: &str) -> Result<usize, String> {
    let max = crate::decode::MAX_JOBS;
    match s.trim().parse::<usize>() {
        Ok(n) if n <= max => Ok(n),
        Ok(_) => Err(format!(
            "ptdec starts at most {max} decode threads; give -j {max} or less (0: all cores)"
        )),
        Err(_) => Err(format!("{s:?} is not a number of threads (e.g. 4)")),
    }
}

/// A `--start` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeArg {
    /// ns after the origin.
    Relative(u64),
    /// Absolute perf time, ns.
    Absolute(u64),
}

/// Parses "1.5" (seconds), "250ms", "10us", "5ns", "2s"; "@NS" is absolute.
pub fn parse_time(s: &str) -> Result<TimeArg, String> {
    let s = s.trim();
    if let Some(abs) = s.strip_prefix('@') {
        return abs.parse::<u64>().map(TimeArg::Absolute).map_err(|e| {
            if *e.kind() == std::num::IntErrorKind::PosOverflow {
                format!("`{s}` is out of range: perf times go up to @{}", u64::MAX)
            } else {
                format!("`{s}`: after @ give an absolute perf time in ns, e.g. @123456789000")
            }
        });
    }
    let (num, scale) = [
        ("ns", 1.0),
        ("us", 1e3),
        ("µs", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
    ]
    .iter()
    .find_map(|&(unit, scale)| s.strip_suffix(unit).map(|n| (n, scale)))
    .unwrap_or((s, 1e9));
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * scale < 1.8e19 => Ok(TimeArg::Relative((v * scale).round() as u64)),
        // u64 ns reach 584 years; 1.8e19 keeps clear of rounding at 2^64.
        Ok(v) if v >= 0.0 => Err(format!(
            "`{s}` is out of range: times go up to 18000000000s (about 570 years)"
        )),
        _ => Err(format!(
            "`{s}` is not a time: give seconds (\"1.5\") or a number with s, ms, us or ns (\"250ms\")"
        )),
    }
}

/// `--duration`: a relative time above 0 (a window of 0 ns holds
/// nothing: refused before the trace is opened).
pub fn parse_window_duration(s: &str) -> Result<u64, String> {
    match parse_time(s)? {
        TimeArg::Absolute(_) => Err(format!("`{s}`: a duration cannot be absolute; drop the @")),
        TimeArg::Relative(0) => Err(format!(
            "`{s}`: a window of 0 ns holds nothing; give a duration above 0, e.g. 250ms"
        )),
        TimeArg::Relative(ns) => Ok(ns),
    }
}

pub fn parse_duration(what: &str, s: &str) -> Result<u64> {
    match parse_time(s) {
        Ok(TimeArg::Relative(ns)) => Ok(ns),
        Ok(TimeArg::Absolute(_)) => bail!("{what} {s}: a duration cannot be absolute; drop the @"),
        Err(e) => bail!("{what} {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_time("1.5"), Ok(TimeArg::Relative(1_500_000_000)));
        assert_eq!(parse_time("250ms"), Ok(TimeArg::Relative(250_000_000)));
        assert_eq!(parse_time("10us"), Ok(TimeArg::Relative(10_000)));
        assert_eq!(parse_time("7ns"), Ok(TimeArg::Relative(7)));
        assert_eq!(parse_time("2s"), Ok(TimeArg::Relative(2_000_000_000)));
        assert_eq!(parse_time("@123456789"), Ok(TimeArg::Absolute(123456789)));
        assert!(parse_time("-1").is_err());
        assert!(parse_time("1.5h").is_err());
        assert!(parse_time("@1.5").is_err());
        for huge in ["18446744073s", "1e30", "inf", "@18446744073709551616"] {
            let e = parse_time(huge).unwrap_err();
            assert!(e.contains("out of range"), "{huge}: {e}");
        }
        assert!(parse_time("17999999999s").is_ok());
        assert!(parse_duration("--split", "@5").is_err());
        assert_eq!(parse_window_duration("10us"), Ok(10_000));
        for zero in ["0", "0ms", "0.0s", "0.1ns"] {
            let e = parse_window_duration(zero).unwrap_err();
            assert!(e.contains("above 0"), "{zero}: {e}");
        }
        assert!(parse_window_duration("@5").is_err());
    }

    #[test]
    fn slowest_has_a_limit() {
        let max = crate::report::MAX_SLOWEST;
        assert_eq!(parse_slowest(&max.to_string()), Ok(max));
        let e = parse_slowest(&(max + 1).to_string()).unwrap_err();
        assert!(e.contains(&format!("at most {max} calls")), "{e}");
        assert!(parse_slowest("0").is_err());
    }
}
