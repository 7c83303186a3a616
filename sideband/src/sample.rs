//! PERF_RECORD_SAMPLE decoded as far as the attr's sample_type describes it.

use std::borrow::Cow;

/// A sample. Fields the attr did not ask for are `None`; the body is kept so
/// that the record round-trips even where a field is not interpreted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sample<'a> {
    pub identifier: Option<u64>,
    pub ip: Option<u64>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub addr: Option<u64>,
    pub id: Option<u64>,
    pub stream_id: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    /// The whole record body, verbatim.
    pub raw_body: Cow<'a, [u8]>,
}
