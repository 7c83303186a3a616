//! FTF reader: parses a whole file into records with strings and thread refs
//! resolved, and renders them as a deterministic one-line-per-record text dump
//! (golden tests, `ptdec` inspecting its own output).
//!
//! It reads every record the writer emits plus async/flow events and provider
//! events; other record types, event types and argument types are skipped by
//! their size words, as the spec intends. Malformed input is an
//! [`Error::Malformed`] naming the record's byte offset, never a panic.

use std::collections::HashMap;
use std::fmt;

use crate::format::*;
use crate::{Error, Result, ThreadRef, MAGIC, OBJ_TYPE_PROCESS, OBJ_TYPE_THREAD};

/// One record of an FTF file and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Byte offset of the record header in the file.
    pub offset: usize,
    /// What the record says.
    pub kind: RecordKind,
}

/// The content of a record, strings and threads resolved through the tables
/// in force at that point of the file.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RecordKind {
    /// Trace info metadata: the magic number record.
    Magic,
    /// Provider info metadata: starts a provider's section.
    ProviderInfo {
        /// Provider id.
        id: u32,
        /// Provider name.
        name: String,
    },
    /// Provider section metadata: switches to a provider's tables.
    ProviderSection {
        /// Provider id.
        id: u32,
    },
    /// Provider event metadata (`0`: a buffer filled up).
    ProviderEvent {
        /// Provider id.
        id: u32,
        /// Event number.
        event: u8,
    },
    /// Initialization record.
    Initialization {
        /// Timestamp ticks per second.
        ticks_per_second: u64,
    },
    /// String record: defines (or redefines) a string table slot.
    String {
        /// Table index, 1..=0x7fff (0 is ignored, as the spec says).
        index: u16,
        /// The string.
        value: String,
    },
    /// Thread record: defines (or redefines) a thread table slot.
    Thread {
        /// Table index, 1..=0xff (0 is ignored, as the spec says).
        index: u8,
        /// Process and thread ids.
        thread: ThreadRef,
    },
    /// Event record.
    Event(Event),
    /// Kernel object record.
    KernelObject(KernelObject),
    /// A record type this reader skips (blob, userspace object, scheduling,
    /// log, large, reserved, unknown metadata).
    Unknown {
        /// Record type, bits 0..3 of the header.
        record_type: u8,
        /// Size in 64-bit words, header included.
        words: u64,
    },
}

/// An event record.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Event type and its type-specific word.
    pub kind: EventKind,
    /// Timestamp in ticks.
    pub ts: u64,
    /// The thread it happened on.
    pub thread: ThreadRef,
    /// Category.
    pub category: String,
    /// Name.
    pub name: String,
    /// Arguments, in record order.
    pub args: Vec<Arg>,
}

/// Event types, with their type-specific data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// Instant event (0).
    Instant,
    /// Counter event (1).
    Counter {
        /// Counter id.
        id: u64,
    },
    /// Duration begin event (2).
    DurationBegin,
    /// Duration end event (3).
    DurationEnd,
    /// Duration complete event (4).
    DurationComplete {
        /// End time in ticks.
        end: u64,
    },
    /// Async begin event (5).
    AsyncBegin {
        /// Correlation id.
        id: u64,
    },
    /// Async instant event (6).
    AsyncInstant {
        /// Correlation id.
        id: u64,
    },
    /// Async end event (7).
    AsyncEnd {
        /// Correlation id.
        id: u64,
    },
    /// Flow begin event (8).
    FlowBegin {
        /// Correlation id.
        id: u64,
    },
    /// Flow step event (9).
    FlowStep {
        /// Correlation id.
        id: u64,
    },
    /// Flow end event (10).
    FlowEnd {
        /// Correlation id.
        id: u64,
    },
    /// Reserved event type (11..15); its type-specific data is skipped.
    Unknown(u8),
}

/// A kernel object record.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelObject {
    /// `ZX_OBJ_TYPE_*` number (1 process, 2 thread).
    pub obj_type: u8,
    /// Kernel object id.
    pub koid: u64,
    /// Name.
    pub name: String,
    /// Arguments (`process` koid for threads).
    pub args: Vec<Arg>,
}

/// A parsed argument.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    /// Name.
    pub name: String,
    /// Value.
    pub value: Value,
}

/// A parsed argument value.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// Null (name only).
    Null,
    /// 32-bit signed integer.
    I32(i32),
    /// 32-bit unsigned integer.
    U32(u32),
    /// 64-bit signed integer.
    I64(i64),
    /// 64-bit unsigned integer.
    U64(u64),
    /// Double.
    F64(f64),
    /// String.
    Str(String),
    /// Pointer.
    Pointer(u64),
    /// Kernel object id.
    Koid(u64),
    /// Boolean.
    Bool(bool),
    /// An argument type this reader does not know, skipped by its size.
    Unknown {
        /// Argument type, bits 0..3 of its header.
        arg_type: u8,
    },
}

/// Parses a whole FTF file.
pub fn parse(bytes: &[u8]) -> Result<Vec<Record>> {
    let mut parser = Parser::default();
    let mut records = Vec::new();
    let mut offset = 0;
    while offset < bytes.len() {
        let rest = &bytes[offset..];
        let Some(header) = rest.get(..8) else {
            return Err(malformed(
                offset,
                "header",
                format!("{} bytes left, a record header needs 8", rest.len()),
            ));
        };
        let header = u64::from_le_bytes(header.try_into().unwrap_or_default());
        let (name, words) = kind_and_words(header, offset)?;
        let size = usize::try_from(words)
            .ok()
            .and_then(|w| w.checked_mul(8))
            .filter(|&size| size <= rest.len())
            .ok_or_else(|| {
                malformed(
                    offset,
                    name,
                    format!(
                        "size {words} words runs past the end of the input ({} bytes left)",
                        rest.len()
                    ),
                )
            })?;
        let mut cur = Cursor {
            buf: &rest[..size],
            pos: 8,
            offset,
            record: name,
        };
        let kind = parser.record(header, &mut cur)?;
        records.push(Record { offset, kind });
        offset += size;
    }
    Ok(records)
}

/// Most bytes one record may take in [`for_each`]. FTF's own records are
/// at most 4095 words (32 KiB); a large record's size word allows 32 GiB,
/// which a hostile file must not make the reader allocate.
pub const MAX_STREAMED_RECORD: usize = 16 << 20;

/// Reads records one at a time from `r` (a file, a gzip decoder, a pipe)
/// and hands each to `f`, in order; returns how many. Memory: one record
/// (at most [`MAX_STREAMED_RECORD`] bytes) and the string and thread
/// tables, whatever the input's size. Stops at the first malformed record,
/// after handing on those before it; an error of `f` (its output closed)
/// stops it too.
pub fn for_each<R: std::io::Read>(
    mut r: R,
    mut f: impl FnMut(Record) -> std::io::Result<()>,
) -> Result<u64> {
    /// Reads until `buf` is full or the input ends; how many bytes.
    fn fill(r: &mut impl std::io::Read, buf: &mut [u8]) -> Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match r.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Read(e)),
            }
        }
        Ok(n)
    }
    let mut parser = Parser::default();
    let mut buf: Vec<u8> = Vec::new();
    let mut offset = 0usize;
    let mut count = 0u64;
    loop {
        let mut h = [0u8; 8];
        let n = fill(&mut r, &mut h)?;
        if n == 0 {
            return Ok(count);
        }
        if n < 8 {
            return Err(malformed(
                offset,
                "header",
                format!("{n} bytes left, a record header needs 8"),
            ));
        }
        let header = u64::from_le_bytes(h);
        let (name, words) = kind_and_words(header, offset)?;
        let size = usize::try_from(words)
            .ok()
            .and_then(|w| w.checked_mul(8))
            .filter(|&size| size <= MAX_STREAMED_RECORD)
            .ok_or_else(|| {
                malformed(
                    offset,
                    name,
                    format!(
                        "size {words} words is over the reader's {} MiB limit for one record",
                        MAX_STREAMED_RECORD >> 20
                    ),
                )
            })?;
        buf.clear();
        buf.extend_from_slice(&h);
        buf.resize(size, 0);
        let got = fill(&mut r, &mut buf[8..])?;
        if got < size - 8 {
            return Err(malformed(
                offset,
                name,
                format!(
                    "size {words} words runs past the end of the input ({} bytes left)",
                    got + 8
                ),
            ));
        }
        let mut cur = Cursor {
            buf: &buf,
            pos: 8,
            offset,
            record: name,
        };
        let kind = parser.record(header, &mut cur)?;
        f(Record { offset, kind })?;
        count += 1;
        offset += size;
    }
}

/// Parses `bytes` and renders the records one per line (see [`Record`]'s
/// `Display`), each line ending in a newline.
pub fn dump(bytes: &[u8]) -> Result<String> {
    use fmt::Write as _;
    let mut out = String::new();
    for record in parse(bytes)? {
        let _ = writeln!(out, "{record}");
    }
    Ok(out)
}

/// A record header's kind name and size in words (never 0).
fn kind_and_words(header: u64, offset: usize) -> Result<(&'static str, u64)> {
    let record_type = field(header, 0, 3);
    let name = record_name(record_type);
    let words = if record_type == RT_LARGE {
        field(header, 4, 35)
    } else {
        field(header, 4, 15)
    };
    if words == 0 {
        return Err(malformed(offset, name, "size word is 0".into()));
    }
    Ok((name, words))
}

fn malformed(offset: usize, record: &'static str, reason: String) -> Error {
    Error::Malformed {
        offset,
        record,
        reason,
    }
}

fn record_name(record_type: u64) -> &'static str {
    match record_type {
        RT_METADATA => "metadata",
        RT_INIT => "initialization",
        RT_STRING => "string",
        RT_THREAD => "thread",
        RT_EVENT => "event",
        5 => "blob",
        6 => "userspace object",
        RT_KERNEL_OBJECT => "kernel object",
        8 => "scheduling",
        9 => "log",
        RT_LARGE => "large",
        _ => "reserved",
    }
}

/// Reads atoms from one record's bytes, failing with the record's offset.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    offset: usize,
    record: &'static str,
}

impl<'a> Cursor<'a> {
    fn err(&self, reason: String) -> Error {
        malformed(self.offset, self.record, reason)
    }

    fn bytes(&mut self, len: usize, what: &str) -> Result<&'a [u8]> {
        let avail = self.buf.len() - self.pos;
        if len > avail {
            return Err(self.err(format!(
                "{what} needs {len} bytes at record byte {} but the record has {avail} left",
                self.pos
            )));
        }
        let b = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(b)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.bytes(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// A stream of `len` bytes padded to 8.
    fn stream(&mut self, len: usize, what: &str) -> Result<&'a [u8]> {
        let b = self.bytes(padded(len), what)?;
        Ok(&b[..len])
    }

    fn utf8(&mut self, len: usize, what: &str) -> Result<String> {
        let b = self.stream(len, what)?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(self.err(format!("{what} is not UTF-8: {e}"))),
        }
    }
}

/// Tables of one provider.
#[derive(Default)]
struct State {
    strings: HashMap<u16, String>,
    threads: HashMap<u8, ThreadRef>,
}

impl State {
    fn string(&self, r: u64, cur: &mut Cursor, what: &str) -> Result<String> {
        let r = r as u16;
        if r == 0 {
            Ok(String::new())
        } else if r & STRING_REF_INLINE != 0 {
            cur.utf8(usize::from(r & !STRING_REF_INLINE), what)
        } else {
            match self.strings.get(&r) {
                Some(s) => Ok(s.clone()),
                None => Err(cur.err(format!(
                    "{what} is string index {r}, which no earlier string record defined"
                ))),
            }
        }
    }

    fn thread(&self, r: u64, cur: &mut Cursor) -> Result<ThreadRef> {
        if r == 0 {
            let pid = cur.u64("inline process id")?;
            let tid = cur.u64("inline thread id")?;
            return Ok(ThreadRef { pid, tid });
        }
        match self.threads.get(&(r as u8)) {
            Some(t) => Ok(*t),
            None => Err(cur.err(format!(
                "thread index {r}, which no earlier thread record defined"
            ))),
        }
    }

    fn args(&self, count: u64, cur: &mut Cursor) -> Result<Vec<Arg>> {
        let mut args = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let start = cur.pos;
            let header = cur.u64("argument header")?;
            let words = field(header, 4, 15) as usize;
            if words == 0 {
                return Err(cur.err(format!("argument at record byte {start} has size word 0")));
            }
            // Parse the argument inside its own declared extent.
            cur.bytes(words * 8 - 8, "argument body")?;
            let mut sub = Cursor {
                buf: &cur.buf[..start + words * 8],
                pos: start + 8,
                offset: cur.offset,
                record: cur.record,
            };
            let name = self.string(field(header, 16, 31), &mut sub, "argument name")?;
            let arg_type = field(header, 0, 3);
            let data = field(header, 32, 63);
            let value = match arg_type {
                AT_NULL => Value::Null,
                AT_I32 => Value::I32(data as u32 as i32),
                AT_U32 => Value::U32(data as u32),
                AT_I64 => Value::I64(sub.u64("i64 argument")? as i64),
                AT_U64 => Value::U64(sub.u64("u64 argument")?),
                AT_F64 => Value::F64(f64::from_bits(sub.u64("f64 argument")?)),
                AT_STRING => Value::Str(self.string(
                    field(header, 32, 47),
                    &mut sub,
                    "string argument value",
                )?),
                AT_POINTER => Value::Pointer(sub.u64("pointer argument")?),
                AT_KOID => Value::Koid(sub.u64("koid argument")?),
                AT_BOOL => Value::Bool(data & 1 != 0),
                other => Value::Unknown {
                    arg_type: other as u8,
                },
            };
            args.push(Arg { name, value });
        }
        Ok(args)
    }
}

/// Per-provider tables and which provider's section we are in.
#[derive(Default)]
struct Parser {
    /// Keyed by provider id; `u64::MAX` holds records before any provider.
    states: HashMap<u64, State>,
    current: u64,
}

impl Parser {
    fn state(&mut self) -> &mut State {
        self.states.entry(self.current).or_default()
    }

    fn record(&mut self, header: u64, cur: &mut Cursor) -> Result<RecordKind> {
        if self.states.is_empty() {
            self.current = u64::MAX;
        }
        let record_type = field(header, 0, 3);
        let words = if record_type == RT_LARGE {
            field(header, 4, 35)
        } else {
            field(header, 4, 15)
        };
        let unknown = RecordKind::Unknown {
            record_type: record_type as u8,
            words,
        };
        Ok(match record_type {
            RT_METADATA => self.metadata(header, cur, unknown)?,
            RT_INIT => RecordKind::Initialization {
                ticks_per_second: cur.u64("ticks per second")?,
            },
            RT_STRING => {
                let index = field(header, 16, 30) as u16;
                let len = field(header, 32, 46) as usize;
                let value = cur.utf8(len, "string value")?;
                if index != 0 {
                    self.state().strings.insert(index, value.clone());
                }
                RecordKind::String { index, value }
            }
            RT_THREAD => {
                let index = field(header, 16, 23) as u8;
                let pid = cur.u64("process id")?;
                let tid = cur.u64("thread id")?;
                let thread = ThreadRef { pid, tid };
                if index != 0 {
                    self.state().threads.insert(index, thread);
                }
                RecordKind::Thread { index, thread }
            }
            RT_EVENT => RecordKind::Event(self.event(header, cur)?),
            RT_KERNEL_OBJECT => {
                let state = self.state();
                let koid = cur.u64("koid")?;
                let name = state.string(field(header, 24, 39), cur, "name")?;
                let args = state.args(field(header, 40, 43), cur)?;
                RecordKind::KernelObject(KernelObject {
                    obj_type: field(header, 16, 23) as u8,
                    koid,
                    name,
                    args,
                })
            }
            _ => unknown,
        })
    }

    /// Parses a metadata record, switching provider tables as it says;
    /// `unknown` is what a metadata type this reader skips becomes.
    fn metadata(
        &mut self,
        header: u64,
        cur: &mut Cursor,
        unknown: RecordKind,
    ) -> Result<RecordKind> {
        let id = field(header, 20, 51);
        Ok(match field(header, 16, 19) {
            MT_PROVIDER_INFO => {
                let len = field(header, 52, 59) as usize;
                let name = cur.utf8(len, "provider name")?;
                // A provider announced again starts with fresh tables.
                self.states.insert(id, State::default());
                self.current = id;
                RecordKind::ProviderInfo {
                    id: id as u32,
                    name,
                }
            }
            MT_PROVIDER_SECTION => {
                self.current = id;
                self.state();
                RecordKind::ProviderSection { id: id as u32 }
            }
            MT_PROVIDER_EVENT => RecordKind::ProviderEvent {
                id: id as u32,
                event: field(header, 52, 55) as u8,
            },
            MT_TRACE_INFO if field(header, 20, 23) == 0 => {
                if header != MAGIC {
                    return Err(cur.err(format!(
                        "magic number record is {header:#018x}, expected {MAGIC:#018x}"
                    )));
                }
                RecordKind::Magic
            }
            _ => unknown,
        })
    }

    /// Parses an event record's body: timestamp, thread, category, name,
    /// arguments, then the word its event type adds.
    fn event(&mut self, header: u64, cur: &mut Cursor) -> Result<Event> {
        let state = self.state();
        let ts = cur.u64("timestamp")?;
        let thread = state.thread(field(header, 24, 31), cur)?;
        let category = state.string(field(header, 32, 47), cur, "category")?;
        let name = state.string(field(header, 48, 63), cur, "name")?;
        let args = state.args(field(header, 20, 23), cur)?;
        let kind = event_kind(field(header, 16, 19), cur)?;
        Ok(Event {
            kind,
            ts,
            thread,
            category,
            name,
            args,
        })
    }
}

/// Reads the word after an event's arguments that its type carries (counter,
/// end time, async or flow id); other types carry none.
fn event_kind(event_type: u64, cur: &mut Cursor) -> Result<EventKind> {
    Ok(match event_type {
        ET_INSTANT => EventKind::Instant,
        ET_COUNTER => EventKind::Counter {
            id: cur.u64("counter id")?,
        },
        ET_DURATION_BEGIN => EventKind::DurationBegin,
        ET_DURATION_END => EventKind::DurationEnd,
        ET_DURATION_COMPLETE => EventKind::DurationComplete {
            end: cur.u64("end time")?,
        },
        ET_ASYNC_BEGIN => EventKind::AsyncBegin {
            id: cur.u64("async id")?,
        },
        ET_ASYNC_INSTANT => EventKind::AsyncInstant {
            id: cur.u64("async id")?,
        },
        ET_ASYNC_END => EventKind::AsyncEnd {
            id: cur.u64("async id")?,
        },
        ET_FLOW_BEGIN => EventKind::FlowBegin {
            id: cur.u64("flow id")?,
        },
        ET_FLOW_STEP => EventKind::FlowStep {
            id: cur.u64("flow id")?,
        },
        ET_FLOW_END => EventKind::FlowEnd {
            id: cur.u64("flow id")?,
        },
        other => EventKind::Unknown(other as u8),
    })
}

impl Value {
    /// The value of an unsigned integer argument, 32- or 64-bit (the writer
    /// writes a 64-bit value that fits in 32 bits as a 32-bit one).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => write!(f, "null"),
            Value::I32(v) => write!(f, "i32({v})"),
            Value::U32(v) => write!(f, "u32({v})"),
            Value::I64(v) => write!(f, "i64({v})"),
            Value::U64(v) => write!(f, "u64({v})"),
            Value::F64(v) => write!(f, "f64({v:?})"),
            Value::Str(v) => write!(f, "str({v:?})"),
            Value::Pointer(v) => write!(f, "ptr({v:#x})"),
            Value::Koid(v) => write!(f, "koid({v})"),
            Value::Bool(v) => write!(f, "bool({v})"),
            Value::Unknown { arg_type } => write!(f, "unknown(type {arg_type})"),
        }
    }
}

fn write_args(f: &mut fmt::Formatter<'_>, args: &[Arg]) -> fmt::Result {
    if args.is_empty() {
        return Ok(());
    }
    write!(f, " args={{")?;
    for (i, a) in args.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        write!(f, "{sep}{:?}: {}", a.name, a.value)?;
    }
    write!(f, "}}")
}

impl EventKind {
    /// The event type's name as the dump prints it (`duration_complete`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Instant => "instant",
            EventKind::Counter { .. } => "counter",
            EventKind::DurationBegin => "duration_begin",
            EventKind::DurationEnd => "duration_end",
            EventKind::DurationComplete { .. } => "duration_complete",
            EventKind::AsyncBegin { .. } => "async_begin",
            EventKind::AsyncInstant { .. } => "async_instant",
            EventKind::AsyncEnd { .. } => "async_end",
            EventKind::FlowBegin { .. } => "flow_begin",
            EventKind::FlowStep { .. } => "flow_step",
            EventKind::FlowEnd { .. } => "flow_end",
            EventKind::Unknown(_) => "event",
        }
    }
}

/// One line: hex offset, record kind, fields; strings in Rust debug quoting.
impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08x} ", self.offset)?;
        match &self.kind {
            RecordKind::Magic => write!(f, "magic"),
            RecordKind::ProviderInfo { id, name } => {
                write!(f, "provider_info id={id} name={name:?}")
            }
            RecordKind::ProviderSection { id } => write!(f, "provider_section id={id}"),
            RecordKind::ProviderEvent { id, event } => {
                write!(f, "provider_event id={id} event={event}")
            }
            RecordKind::Initialization { ticks_per_second } => {
                write!(f, "initialization ticks_per_second={ticks_per_second}")
            }
            RecordKind::String { index, value } => write!(f, "string #{index} {value:?}"),
            RecordKind::Thread { index, thread } => {
                write!(f, "thread #{index} pid={} tid={}", thread.pid, thread.tid)
            }
            RecordKind::Event(e) => {
                write!(f, "{}", e.kind.name())?;
                if let EventKind::Unknown(t) = e.kind {
                    write!(f, " type={t}")?;
                }
                write!(
                    f,
                    " ts={} pid={} tid={} cat={:?} name={:?}",
                    e.ts, e.thread.pid, e.thread.tid, e.category, e.name
                )?;
                match e.kind {
                    EventKind::Counter { id } => write!(f, " counter_id={id}")?,
                    EventKind::DurationComplete { end } => write!(f, " end={end}")?,
                    EventKind::AsyncBegin { id }
                    | EventKind::AsyncInstant { id }
                    | EventKind::AsyncEnd { id }
                    | EventKind::FlowBegin { id }
                    | EventKind::FlowStep { id }
                    | EventKind::FlowEnd { id } => write!(f, " id={id}")?,
                    _ => {}
                }
                write_args(f, &e.args)
            }
            RecordKind::KernelObject(k) => {
                match k.obj_type {
                    OBJ_TYPE_PROCESS => write!(f, "kernel_object process")?,
                    OBJ_TYPE_THREAD => write!(f, "kernel_object thread")?,
                    t => write!(f, "kernel_object type={t}")?,
                }
                write!(f, " koid={} name={:?}", k.koid, k.name)?;
                write_args(f, &k.args)
            }
            RecordKind::Unknown { record_type, words } => {
                write!(f, "skipped record_type={record_type} words={words}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arg as WArg, ArgValue, Writer};

    /// Builds a file from words; `s(..)` packs a padded string stream.
    fn file(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn s(text: &str) -> Vec<u64> {
        let mut b = text.as_bytes().to_vec();
        b.resize(padded(b.len()), 0);
        b.chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    fn header() -> Vec<u64> {
        vec![MAGIC, RT_INIT | 2 << 4, 1_000_000_000]
    }

    fn err_of(bytes: &[u8]) -> (usize, &'static str, String) {
        match parse(bytes) {
            Err(Error::Malformed {
                offset,
                record,
                reason,
            }) => (offset, record, reason),
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    /// The stream reader gives the records `parse` gives, a record at a
    /// time, and stops at a malformed one after handing on those before;
    /// a large record's size word of gigabytes is refused before anything
    /// is allocated for it.
    #[test]
    fn for_each_streams_what_parse_reads() {
        let bytes = sample();
        let mut got = Vec::new();
        let n = for_each(&bytes[..], |r| {
            got.push(r);
            Ok(())
        })
        .unwrap();
        assert_eq!(got, parse(&bytes).unwrap());
        assert_eq!(n as usize, got.len());
        // Cut in its last record: the records before it, then the error.
        let mut seen = 0;
        let e = for_each(&bytes[..bytes.len() - 3], |_| {
            seen += 1;
            Ok(())
        })
        .unwrap_err();
        assert!(matches!(e, Error::Malformed { .. }), "{e}");
        assert_eq!(seen, got.len() - 1);
        // A large record claiming 2^31 words.
        let mut huge = file(&header());
        huge.extend_from_slice(&(RT_LARGE | (1u64 << 31) << 4).to_le_bytes());
        let e = for_each(&huge[..], |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("limit for one record"), "{e}");
    }

    fn sample() -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), 1_000_000_000).unwrap();
        w.process(1, "p").unwrap();
        let t = w.thread(1, 2, "t").unwrap();
        w.duration_complete(
            t,
            "c",
            "n",
            1,
            2,
            &[WArg::new("s", "v"), WArg::new("x", 3u64)],
        )
        .unwrap();
        w.counter(t, "c", "k", 3, 4, &[WArg::new("y", ArgValue::F64(1.5))])
            .unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn inline_strings_and_inline_threads() {
        // Instant event: inline thread (ref 0), inline category "cat" (3
        // bytes), inline name "hello world" (11), one string arg with inline
        // name and value, then a null arg with an empty name.
        let mut w = header();
        let body_words = 1 + 1 + 2 + 1 + 2 + (1 + 1 + 1) + 1;
        w.push(
            RT_EVENT
                | (body_words as u64) << 4
                | 2 << 20
                | (0x8000 | 3) << 32
                | (0x8000 | 11) << 48,
        );
        w.push(77); // ts
        w.extend([10, 11]); // pid, tid
        w.extend(s("cat"));
        w.extend(s("hello world"));
        w.push(AT_STRING | 3 << 4 | (0x8000 | 4) << 16 | (0x8000 | 5) << 32);
        w.extend(s("key1"));
        w.extend(s("value"));
        w.push(AT_NULL | 1 << 4);
        let records = parse(&file(&w)).unwrap();
        let RecordKind::Event(e) = &records[2].kind else {
            panic!("{records:?}")
        };
        assert_eq!(e.thread, ThreadRef { pid: 10, tid: 11 });
        assert_eq!(
            (e.category.as_str(), e.name.as_str()),
            ("cat", "hello world")
        );
        assert_eq!(e.args[0].name, "key1");
        assert_eq!(e.args[0].value, Value::Str("value".into()));
        assert_eq!(e.args[1].value, Value::Null);
        assert_eq!(e.ts, 77);
    }

    #[test]
    fn unknown_records_events_and_args_are_skipped() {
        let mut w = header();
        w.extend([5 | 3 << 4, 0, 0]); // blob, 3 words
        w.extend([RT_METADATA | 1 << 4 | 9 << 16]); // unknown metadata type
        w.extend([RT_LARGE | 2 << 4, 0]); // large record, 32-bit size field
                                          // Async begin with an argument of unknown type 13 (2 words) and an
                                          // extra trailing word the reader does not know about.
        w.extend([
            RT_EVENT | 8 << 4 | ET_ASYNC_BEGIN << 16 | 1 << 20,
            5,
            1,
            2,
            13 | 2 << 4,
            0xdead,
            88,
            0xffff,
        ]);
        w.extend([RT_EVENT | 4 << 4 | 12 << 16, 6, 1, 2]); // reserved event type 12
        let records = parse(&file(&w)).unwrap();
        let kinds: Vec<_> = records[2..].iter().map(|r| r.kind.clone()).collect();
        assert_eq!(
            kinds[..3],
            [
                RecordKind::Unknown {
                    record_type: 5,
                    words: 3
                },
                RecordKind::Unknown {
                    record_type: 0,
                    words: 1
                },
                RecordKind::Unknown {
                    record_type: 15,
                    words: 2
                },
            ]
        );
        let RecordKind::Event(e) = &kinds[3] else {
            panic!()
        };
        assert_eq!(e.kind, EventKind::AsyncBegin { id: 88 });
        assert_eq!(e.args[0].value, Value::Unknown { arg_type: 13 });
        let RecordKind::Event(e) = &kinds[4] else {
            panic!()
        };
        assert_eq!(e.kind, EventKind::Unknown(12));
    }

    #[test]
    fn providers_keep_their_own_tables() {
        let mut w = vec![MAGIC];
        w.extend([RT_METADATA | 2 << 4 | MT_PROVIDER_INFO << 16 | 1 << 20 | 1 << 52]);
        w.extend(s("a"));
        w.extend([RT_STRING | 2 << 4 | 1 << 16 | 3 << 32]);
        w.extend(s("one"));
        w.extend([RT_METADATA | 2 << 4 | MT_PROVIDER_INFO << 16 | 2 << 20 | 1 << 52]);
        w.extend(s("b"));
        w.extend([RT_STRING | 2 << 4 | 1 << 16 | 3 << 32]);
        w.extend(s("two"));
        w.extend([RT_METADATA | 1 << 4 | MT_PROVIDER_SECTION << 16 | 1 << 20]);
        w.extend([RT_EVENT | 4 << 4 | 1 << 48, 0, 1, 1]);
        w.extend([RT_METADATA | 1 << 4 | MT_PROVIDER_EVENT << 16 | 1 << 20]);
        let records = parse(&file(&w)).unwrap();
        let RecordKind::Event(e) = &records[6].kind else {
            panic!("{records:?}")
        };
        assert_eq!(e.name, "one");
        assert_eq!(
            records[7].kind,
            RecordKind::ProviderEvent { id: 1, event: 0 }
        );
    }

    #[test]
    fn malformed_inputs_name_offset_and_record() {
        // Size word 0.
        let mut w = header();
        w.push(RT_STRING | 1 << 16);
        assert_eq!(err_of(&file(&w)).0, 24);
        assert_eq!(err_of(&file(&w)).1, "string");
        assert!(err_of(&file(&w)).2.contains("size word is 0"));

        // Size past the end.
        let mut w = header();
        w.extend([RT_THREAD | 3 << 4 | 1 << 16, 1]);
        let (off, rec, why) = err_of(&file(&w));
        assert_eq!((off, rec), (24, "thread"));
        assert!(why.contains("past the end"), "{why}");

        // Truncated header.
        let mut b = file(&header());
        b.extend([1, 2, 3]);
        assert_eq!(err_of(&b).0, 24);
        assert_eq!(err_of(&b).1, "header");

        // String ref to an undefined index.
        let mut w = header();
        w.extend([RT_EVENT | 3 << 4 | 5 << 32, 0, 0]);
        w[3] = RT_EVENT | 4 << 4 | 5 << 32;
        w.push(0);
        let (off, rec, why) = err_of(&file(&w));
        assert_eq!((off, rec), (24, "event"));
        assert!(why.contains("string index 5"), "{why}");

        // Thread ref to an undefined index.
        let mut w = header();
        w.extend([RT_EVENT | 2 << 4 | 9 << 24, 0]);
        assert!(err_of(&file(&w)).2.contains("thread index 9"));

        // Inline string longer than its record.
        let mut w = header();
        w.extend([RT_EVENT | 4 << 4 | (0x8000 | 100) << 48, 0, 1, 1]);
        let (_, rec, why) = err_of(&file(&w));
        assert_eq!(rec, "event");
        assert!(why.contains("name needs 104 bytes"), "{why}");

        // Argument with size word 0.
        let mut w = header();
        w.extend([RT_EVENT | 5 << 4 | 1 << 20, 0, 1, 1, AT_U64]);
        assert!(err_of(&file(&w)).2.contains("size word 0"));

        // Argument whose declared size is shorter than its value.
        let mut w = header();
        w.extend([RT_EVENT | 6 << 4 | 1 << 20, 0, 1, 1, AT_U64 | 1 << 4, 7]);
        assert!(err_of(&file(&w)).2.contains("u64 argument"));

        // Bad magic and non-UTF-8 strings.
        let bad_magic = file(&[MAGIC ^ 1 << 40]);
        assert_eq!(err_of(&bad_magic).1, "metadata");
        let mut w = header();
        w.extend([RT_STRING | 2 << 4 | 1 << 16 | 2 << 32, 0xfffe]);
        assert!(err_of(&file(&w)).2.contains("not UTF-8"));
    }

    #[test]
    fn truncation_at_every_length_never_panics() {
        let bytes = sample();
        let boundaries: Vec<usize> = parse(&bytes)
            .unwrap()
            .iter()
            .map(|r| r.offset)
            .chain([bytes.len()])
            .collect();
        for cut in 0..bytes.len() {
            match parse(&bytes[..cut]) {
                Ok(_) => assert!(boundaries.contains(&cut), "cut {cut} parsed"),
                Err(Error::Malformed { offset, .. }) => assert!(offset <= cut),
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn corrupted_bytes_never_panic() {
        let bytes = sample();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5000 {
            let mut b = bytes.clone();
            for _ in 0..3 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let i = (seed % b.len() as u64) as usize;
                b[i] = (seed >> 32) as u8;
            }
            let _ = parse(&b);
        }
    }

    #[test]
    fn dump_resolves_strings_and_threads() {
        let text = dump(&sample()).unwrap();
        assert!(text.lines().count() > 8);
        assert!(
            text.contains(
                "duration_complete ts=1 pid=1 tid=2 cat=\"c\" name=\"n\" end=2 \
             args={\"s\": str(\"v\"), \"x\": u32(3)}"
            ),
            "{text}"
        );
        assert!(text.contains("kernel_object thread koid=2 name=\"t\" args={\"process\": koid(1)}"));
    }
}
