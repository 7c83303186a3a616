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
            RT_METADATA => {
                let id = field(header, 20, 51);
                match field(header, 16, 19) {
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
                }
            }
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
            RT_EVENT => {
                let state = self.state();
                let event_type = field(header, 16, 19);
                let ts = cur.u64("timestamp")?;
                let thread = state.thread(field(header, 24, 31), cur)?;
                let category = state.string(field(header, 32, 47), cur, "category")?;
                let name = state.string(field(header, 48, 63), cur, "name")?;
                let args = state.args(field(header, 20, 23), cur)?;
                let kind = match event_type {
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
                };
                RecordKind::Event(Event {
                    kind,
                    ts,
                    thread,
                    category,
                    name,
                    args,
                })
            }
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
