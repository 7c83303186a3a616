//! The FTF writer: one provider, its string and thread tables, and the event,
//! kernel object and metadata records `ptdec` emits, appended to a sink.
//!
//! Every record is assembled in a reused scratch buffer and handed to an
//! internal `BufWriter`, so after the tables warm up an event costs two hash
//! lookups and no heap allocation. Strings and threads always go through the
//! tables; a full table recycles a slot (CLOCK eviction, see `table.rs`) and
//! re-emits the string or thread record for it before the record that uses it.

use std::io::{BufWriter, Write};
use std::sync::Arc;

use crate::format::*;
use crate::table::{Interned, Table};
use crate::{Error, Result, MAGIC, MAX_ARGS, MAX_STRING_LEN, STRING_TABLE_SLOTS};
use crate::{OBJ_TYPE_PROCESS, OBJ_TYPE_THREAD, THREAD_TABLE_SLOTS};

/// A thread as events name it: process and thread ids (koids in FTF terms).
///
/// Cheap to copy; the writer maps it to a thread-table slot on each use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadRef {
    /// Process id.
    pub pid: u64,
    /// Thread id.
    pub tid: u64,
}

/// The value of one event or kernel-object argument, one variant per FTF
/// argument type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue<'a> {
    /// A name without a value.
    Null,
    /// 32-bit signed integer.
    I32(i32),
    /// 32-bit unsigned integer.
    U32(u32),
    /// 64-bit signed integer (written as a 32-bit one when it fits).
    I64(i64),
    /// 64-bit unsigned integer (written as a 32-bit one when it fits).
    U64(u64),
    /// Double-precision float.
    F64(f64),
    /// A string (interned in the string table, truncated to [`MAX_STRING_LEN`]).
    Str(&'a str),
    /// A string many events share (a function's module): interned as
    /// [`ArgValue::Str`], found again by its address (see [`Text::Shared`]).
    Shared(&'a Arc<str>),
    /// A pointer value (Perfetto shows it in hex).
    Pointer(u64),
    /// A kernel object id (a pid or tid here).
    Koid(u64),
    /// A boolean.
    Bool(bool),
}

macro_rules! arg_value_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for ArgValue<'_> {
            fn from(x: $t) -> Self {
                ArgValue::$v(x)
            }
        }
    )*};
}
arg_value_from!(i32 => I32, u32 => U32, i64 => I64, u64 => U64, f64 => F64, bool => Bool);

/// `From<&T>` for a text type's variant.
macro_rules! from_refs {
    ($target:ident: $($t:ty => $v:ident),*) => {$(
        impl<'a> From<&'a $t> for $target<'a> {
            fn from(x: &'a $t) -> Self {
                $target::$v(x)
            }
        }
    )*};
}
from_refs!(ArgValue: str => Str, Arc<str> => Shared);

/// An event's name: any text, or text many events share.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Text<'a> {
    /// Found in the string table by its bytes.
    Str(&'a str),
    /// Shared text (a function's name, held by the symbol cache): the
    /// writer keeps a reference to the last few it saw, so while it does,
    /// their address names the same bytes, and a repeat is found without
    /// hashing or comparing them (that comparison was 17% of the FTF
    /// thread's instructions under callgrind, `ptdec -j2` on a 1 MB trace).
    Shared(&'a Arc<str>),
}

impl<'a> Text<'a> {
    /// The text.
    pub fn as_str(&self) -> &'a str {
        match *self {
            Text::Str(s) => s,
            Text::Shared(s) => s,
        }
    }
}

from_refs!(Text: str => Str, String => Str, Arc<str> => Shared);

/// A named argument attached to an event or kernel object record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arg<'a> {
    /// Argument name (interned, truncated to [`MAX_STRING_LEN`]): the
    /// program's own text, as categories are: the writer finds both by
    /// their address, without hashing or comparing their bytes.
    pub name: &'static str,
    /// Argument value.
    pub value: ArgValue<'a>,
}

impl<'a> Arg<'a> {
    /// An argument from a name and anything convertible to a value:
    /// `Arg::new("insns", 42u64)`, `Arg::new("module", "libc.so.6")`,
    /// `Arg::new("ip", ArgValue::Pointer(0x401000))`.
    pub fn new(name: &'static str, value: impl Into<ArgValue<'a>>) -> Self {
        Arg {
            name,
            value: value.into(),
        }
    }
}

/// Cuts `s` to at most [`MAX_STRING_LEN`] bytes, at a char boundary.
pub fn truncate(s: &str) -> &str {
    truncate_to(s, MAX_STRING_LEN)
}

fn truncate_to(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Writes one provider's FTF trace to a sink.
///
/// The sink is wrapped in a [`BufWriter`] internally, so pass it unbuffered
/// (a `File`, a `Vec<u8>`); [`Writer::finish`] flushes and returns it. The
/// header records (magic, provider info, provider section, initialization)
/// are written by the constructor.
///
/// ```
/// use ftf::{Arg, Writer};
/// let mut w = Writer::new(Vec::new(), 1_000_000_000)?;
/// w.process(100, "prog")?;
/// let main = w.thread(100, 100, "prog")?;
/// w.duration_complete(main, "call", "main", 10, 90, &[Arg::new("insns", 1234u64)])?;
/// let bytes = w.finish()?;
/// assert!(ftf::read::dump(&bytes)?.contains("name=\"main\""));
/// # Ok::<(), ftf::Error>(())
/// ```
pub struct Writer<W: Write> {
    out: BufWriter<W>,
    strings: Table<String>,
    recent: RecentStrings,
    statics: StaticStrings,
    shared: SharedStrings,
    threads: Table<(u64, u64)>,
    /// The last event's thread, its index and the slot's generation then:
    /// a thread's events come in runs, found here without hashing.
    last_thread: Option<((u64, u64), u16, u64)>,
    /// The event or kernel object record being assembled.
    rec: Words,
    /// Incremented per record; table slots used by the current record are pinned.
    epoch: u64,
}

/// The table indexes of recently written strings, by the address and
/// length of the caller's `&str`: the writer's callers pass the same
/// strings again and again (argument names, categories, a function's name
/// and module held by the symbol cache), and this finds their index without
/// hashing the bytes (the table's hashing and probing were about 11% of
/// `ptdec`'s profile). A hit is only a guess, checked by comparing the
/// bytes with the slot's (`Table::touch`), so an address reused for other
/// text, or a slot recycled since, costs a normal lookup and nothing more.
struct RecentStrings([(usize, usize, u16); RECENT_WAYS]);

const RECENT_WAYS: usize = 256;

impl Default for RecentStrings {
    fn default() -> Self {
        RecentStrings([(0, 0, 0); RECENT_WAYS])
    }
}

impl RecentStrings {
    fn way(&self, s: &str) -> usize {
        let p = s.as_ptr() as usize;
        ((p >> 3) ^ (p >> 11) ^ s.len().wrapping_mul(0x9e37)) % RECENT_WAYS
    }

    fn get(&self, way: usize, s: &str) -> Option<u16> {
        let (p, n, index) = self.0[way];
        (p == s.as_ptr() as usize && n == s.len() && index != 0).then_some(index)
    }

    fn set(&mut self, way: usize, s: &str, index: u16) {
        self.0[way] = (s.as_ptr() as usize, s.len(), index);
    }
}

/// The table indexes of categories and argument names, by the address
/// and length of their `&'static str`: text of the program itself, never
/// freed, so an address names the same bytes for the whole run and a hit
/// needs neither hashing nor comparing them, only the check that the
/// slot still holds what it held (its generation). Every event names a
/// category and its arguments: through [`RecentStrings`] each cost a
/// comparison of the bytes, a sixth of the FTF thread's instructions
/// under callgrind (`ptdec -j1`, a 1 MB trace, 357,666 slices).
struct StaticStrings([(usize, usize, u16, u64); STATIC_WAYS]);

const STATIC_WAYS: usize = 64;
/// Slots [`Writer::static_ref`] looks at from a string's way.
const STATIC_PROBES: usize = 4;

impl Default for StaticStrings {
    fn default() -> Self {
        StaticStrings([(0, 0, 0, 0); STATIC_WAYS])
    }
}

/// The table indexes of the last [`Text::Shared`] strings seen, one per
/// way, each with a reference to its text: held here, the text stays
/// where it is, so the same address is the same bytes, and a hit needs
/// only the check that the slot still holds it (its generation), as for
/// [`StaticStrings`].
struct SharedStrings(Vec<Option<(Arc<str>, u16, u64)>>);

const SHARED_WAYS: usize = 512;

impl Default for SharedStrings {
    fn default() -> Self {
        SharedStrings(vec![None; SHARED_WAYS])
    }
}

impl SharedStrings {
    fn way(s: &Arc<str>) -> usize {
        let p = s.as_ptr() as usize;
        ((p >> 3) ^ (p >> 12)) % SHARED_WAYS
    }
}

impl StaticStrings {
    fn way(s: &'static str) -> usize {
        let p = s.as_ptr() as usize;
        ((p >> 2) ^ (p >> 9) ^ s.len()) % STATIC_WAYS
    }
}

impl<W: Write> Writer<W> {
    /// Starts a trace from provider 1 named `"ftf"`, whose timestamps count
    /// `ticks_per_second` ticks per second.
    pub fn new(sink: W, ticks_per_second: u64) -> Result<Self> {
        Self::with_provider(sink, ticks_per_second, 1, "ftf")
    }

    /// Starts a trace with the given provider id and name (the name is cut to
    /// the 255 bytes its length field holds).
    pub fn with_provider(
        sink: W,
        ticks_per_second: u64,
        provider_id: u32,
        provider_name: &str,
    ) -> Result<Self> {
        let mut w = Self::segment_with_capacity(sink, 256 * 1024);
        write_header(&mut w.out, ticks_per_second, provider_id, provider_name)?;
        Ok(w)
    }

    /// Continues a trace whose header [`write_header`] (or another writer)
    /// wrote before: no header, and tables that start empty, so every
    /// string and thread the segment uses gets its record again in it. The
    /// bytes of segments written apart, on any threads, concatenated after
    /// one header, are a whole trace; each segment's bytes depend on its
    /// own events only.
    pub fn segment(sink: W) -> Self {
        Self::segment_with_capacity(sink, 32 * 1024)
    }

    fn segment_with_capacity(sink: W, buffer: usize) -> Self {
        Writer {
            out: BufWriter::with_capacity(buffer, sink),
            strings: Table::new(STRING_TABLE_SLOTS),
            recent: RecentStrings::default(),
            statics: StaticStrings::default(),
            shared: SharedStrings::default(),
            threads: Table::new(THREAD_TABLE_SLOTS),
            last_thread: None,
            rec: Words::default(),
            epoch: 0,
        }
    }

    /// Names a process: a kernel object record of type process, koid `pid`.
    pub fn process(&mut self, pid: u64, name: &str) -> Result<()> {
        self.kernel_object(OBJ_TYPE_PROCESS, pid, name, &[])
    }

    /// Names a thread: a kernel object record of type thread, koid `tid`, with
    /// the spec's `process` koid argument linking it to `pid`. Returns the
    /// handle events use for it.
    ///
    /// Linux tids and pids share one number space (a main thread's tid is its
    /// pid), so a thread and its process may carry the same koid; readers tell
    /// them apart by object type, as Perfetto does.
    pub fn thread(&mut self, pid: u64, tid: u64, name: &str) -> Result<ThreadRef> {
        self.kernel_object(
            OBJ_TYPE_THREAD,
            tid,
            name,
            &[Arg::new("process", ArgValue::Koid(pid))],
        )?;
        Ok(ThreadRef { pid, tid })
    }

    /// Writes a kernel object record of any `obj_type` (a `ZX_OBJ_TYPE_*`
    /// number, see [`OBJ_TYPE_PROCESS`] and [`OBJ_TYPE_THREAD`]). The spec
    /// allows every type, but the `fxt` Python reader (0.3.0) rejects types
    /// other than process and thread.
    pub fn kernel_object(
        &mut self,
        obj_type: u8,
        koid: u64,
        name: &str,
        args: &[Arg],
    ) -> Result<()> {
        check_args(args)?;
        self.epoch += 1;
        let name = self.string_ref(name)?;
        self.rec.len = 0;
        self.rec.push(0);
        self.rec.push(koid);
        self.push_args(args)?;
        let header = RT_KERNEL_OBJECT
            | u64::from(obj_type) << 16
            | u64::from(name) << 24
            | (args.len() as u64) << 40;
        self.commit(header)
    }

    /// An instant event: a moment on a thread.
    pub fn instant<'n>(
        &mut self,
        thread: ThreadRef,
        category: &'static str,
        name: impl Into<Text<'n>>,
        ts: u64,
        args: &[Arg],
    ) -> Result<()> {
        self.event(ET_INSTANT, thread, category, name.into(), ts, args, None)
    }

    /// A counter event: each numeric argument is one series of counter `id`.
    pub fn counter<'n>(
        &mut self,
        thread: ThreadRef,
        category: &'static str,
        name: impl Into<Text<'n>>,
        ts: u64,
        id: u64,
        args: &[Arg],
    ) -> Result<()> {
        self.event(
            ET_COUNTER,
            thread,
            category,
            name.into(),
            ts,
            args,
            Some(id),
        )
    }

    /// A duration begin event; match it with [`Writer::duration_end`].
    pub fn duration_begin<'n>(
        &mut self,
        thread: ThreadRef,
        category: &'static str,
        name: impl Into<Text<'n>>,
        ts: u64,
        args: &[Arg],
    ) -> Result<()> {
        let name = name.into();
        self.event(ET_DURATION_BEGIN, thread, category, name, ts, args, None)
    }

    /// A duration end event closing the innermost open duration on `thread`.
    pub fn duration_end<'n>(
        &mut self,
        thread: ThreadRef,
        category: &'static str,
        name: impl Into<Text<'n>>,
        ts: u64,
        args: &[Arg],
    ) -> Result<()> {
        let name = name.into();
        self.event(ET_DURATION_END, thread, category, name, ts, args, None)
    }

    /// A duration complete event: a slice from `start` to `end` (both in
    /// ticks; the record stores the end time, not the length). Perfetto drops
    /// a slice whose `end` is before its `start`.
    pub fn duration_complete<'n>(
        &mut self,
        thread: ThreadRef,
        category: &'static str,
        name: impl Into<Text<'n>>,
        start: u64,
        end: u64,
        args: &[Arg],
    ) -> Result<()> {
        self.event(
            ET_DURATION_COMPLETE,
            thread,
            category,
            name.into(),
            start,
            args,
            Some(end),
        )
    }

    /// Flushes everything and returns the sink.
    pub fn finish(self) -> Result<W> {
        self.out.into_inner().map_err(|e| Error::Io(e.into_error()))
    }

    #[allow(clippy::too_many_arguments)]
    fn event(
        &mut self,
        event_type: u64,
        thread: ThreadRef,
        category: &'static str,
        name: Text<'_>,
        ts: u64,
        args: &[Arg],
        trailer: Option<u64>,
    ) -> Result<()> {
        check_args(args)?;
        self.epoch += 1;
        let thread = self.thread_ref(thread)?;
        let category = self.static_ref(category)?;
        let name = self.text_ref(name)?;
        self.rec.len = 0;
        self.rec.push(0);
        self.rec.push(ts);
        self.push_args(args)?;
        if let Some(word) = trailer {
            self.rec.push(word);
        }
        let header = RT_EVENT
            | event_type << 16
            | (args.len() as u64) << 20
            | u64::from(thread) << 24
            | u64::from(category) << 32
            | u64::from(name) << 48;
        self.commit(header)
    }

    /// Appends `args` to the record being built, interning their strings.
    fn push_args(&mut self, args: &[Arg]) -> Result<()> {
        for arg in args {
            let name = u64::from(self.static_ref(arg.name)?);
            let head = |ty: u64, words: u64, data: u64| ty | words << 4 | name << 16 | data << 32;
            let (header, value) = match arg.value {
                ArgValue::Null => (head(AT_NULL, 1, 0), None),
                ArgValue::I32(v) => (head(AT_I32, 1, u64::from(v as u32)), None),
                ArgValue::U32(v) => (head(AT_U32, 1, u64::from(v)), None),
                // A 64-bit value that fits in 32 bits is written as one:
                // its word is the header's, half the bytes.
                ArgValue::I64(v) => match i32::try_from(v) {
                    Ok(v) => (head(AT_I32, 1, u64::from(v as u32)), None),
                    Err(_) => (head(AT_I64, 2, 0), Some(v as u64)),
                },
                ArgValue::U64(v) => match u32::try_from(v) {
                    Ok(v) => (head(AT_U32, 1, u64::from(v)), None),
                    Err(_) => (head(AT_U64, 2, 0), Some(v)),
                },
                ArgValue::F64(v) => (head(AT_F64, 2, 0), Some(v.to_bits())),
                ArgValue::Str(s) => {
                    let value = u64::from(self.string_ref(s)?);
                    (head(AT_STRING, 1, value), None)
                }
                ArgValue::Shared(s) => {
                    let value = u64::from(self.shared_ref(s)?);
                    (head(AT_STRING, 1, value), None)
                }
                ArgValue::Pointer(v) => (head(AT_POINTER, 2, 0), Some(v)),
                ArgValue::Koid(v) => (head(AT_KOID, 2, 0), Some(v)),
                ArgValue::Bool(v) => (head(AT_BOOL, 1, u64::from(v)), None),
            };
            self.rec.push(header);
            if let Some(v) = value {
                self.rec.push(v);
            }
        }
        Ok(())
    }

    /// Puts the size into `header`, stores it at the front of the record
    /// being built (at most [`MAX_RECORD_WORDS`]: an event's or kernel
    /// object's words are far fewer, [`Words`]) and appends the record to
    /// the output.
    fn commit(&mut self, header: u64) -> Result<()> {
        let rec = &mut self.rec;
        let header = header | (rec.len as u64 / 8) << 4;
        rec.buf[..8].copy_from_slice(&header.to_le_bytes());
        self.out.write_all(&rec.buf[..rec.len])?;
        Ok(())
    }

    /// The string ref for `s`: 0 for the empty string, else its table index,
    /// emitting a string record first when the index is new or recycled.
    fn string_ref(&mut self, s: &str) -> Result<u16> {
        let s = truncate(s);
        if s.is_empty() {
            return Ok(0);
        }
        let way = self.recent.way(s);
        if let Some(index) = self.recent.get(way, s) {
            if self.strings.touch(index, s, self.epoch) {
                return Ok(index);
            }
        }
        match self.strings.intern(s, self.epoch) {
            Some(Interned::Present(index)) => {
                self.recent.set(way, s, index);
                Ok(index)
            }
            Some(Interned::Assigned(index)) => {
                self.recent.set(way, s, index);
                let words = 1 + padded(s.len()) / 8;
                self.put(
                    RT_STRING
                        | (words as u64) << 4
                        | u64::from(index) << 16
                        | (s.len() as u64) << 32,
                )?;
                self.put_stream(s.as_bytes())?;
                Ok(index)
            }
            None => Err(Error::TableExhausted { table: "string" }),
        }
    }

    fn text_ref(&mut self, t: Text<'_>) -> Result<u16> {
        match t {
            Text::Str(s) => self.string_ref(s),
            Text::Shared(s) => self.shared_ref(s),
        }
    }

    /// The index of shared text `s` (see [`SharedStrings`]), emitting its
    /// string record first when needed. Inline, its miss not: a call per
    /// function name and module cost 17 instructions of entry and exit
    /// (cachegrind, FTF of the bench's interp trace).
    #[inline]
    fn shared_ref(&mut self, s: &Arc<str>) -> Result<u16> {
        let way = SharedStrings::way(s);
        if let Some((held, index, generation)) = &self.shared.0[way] {
            if Arc::ptr_eq(held, s)
                && self
                    .strings
                    .touch_generation(*index, *generation, self.epoch)
            {
                return Ok(*index);
            }
        }
        self.shared_ref_miss(s, way)
    }

    /// [`Writer::shared_ref`] when `s` is not in its way.
    #[inline(never)]
    fn shared_ref_miss(&mut self, s: &Arc<str>, way: usize) -> Result<u16> {
        let index = self.string_ref(s)?;
        if index != 0 {
            let generation = self.strings.generation(index);
            self.shared.0[way] = Some((s.clone(), index, generation));
        }
        Ok(index)
    }

    /// The index of `s`, one of the program's own strings (see
    /// [`StaticStrings`]), emitting its string record first when needed.
    ///
    /// Its slot is the first of [`STATIC_PROBES`] from its way that holds
    /// it, else the first empty one, else its way. (Direct-mapped, two
    /// names every event uses could share a way, depending on where the
    /// linker put them, and evict each other: one build spent 4% of
    /// `ptdec`'s instructions so.) All the probes are looked at here,
    /// inline: with two looked at before the out-of-line rest, one name of
    /// every slice still went that way on the bench's interp trace, 194 M
    /// instructions of FTF's 11.8 G. Always inline: with the slot found
    /// here, LLVM left it out of line, 1.9% more instructions.
    #[inline(always)]
    fn static_ref(&mut self, s: &'static str) -> Result<u16> {
        let way = StaticStrings::way(s);
        let mut slot = way;
        for k in 0..STATIC_PROBES {
            let w = (way + k) % STATIC_WAYS;
            let (p, n, index, generation) = self.statics.0[w];
            if p == s.as_ptr() as usize && n == s.len() {
                if index != 0 && self.strings.touch_generation(index, generation, self.epoch) {
                    return Ok(index);
                }
                slot = w;
                break;
            }
            if p == 0 {
                slot = w;
                break;
            }
        }
        self.static_ref_miss(s, slot)
    }

    /// [`Writer::static_ref`] when `s` is not in its slots: its string
    /// record, and `slot` names it from now on.
    #[inline(never)]
    fn static_ref_miss(&mut self, s: &'static str, slot: usize) -> Result<u16> {
        let (ptr, len) = (s.as_ptr() as usize, s.len());
        let index = self.string_ref(s)?;
        let generation = self.strings.generation(index);
        self.statics.0[slot] = (ptr, len, index, generation);
        Ok(index)
    }

    /// The thread ref for `t`, emitting a thread record first when needed.
    fn thread_ref(&mut self, t: ThreadRef) -> Result<u8> {
        let key = (t.pid, t.tid);
        if let Some((last, index, generation)) = self.last_thread {
            if last == key && self.threads.touch_generation(index, generation, self.epoch) {
                // Below 256: checked when it was assigned.
                return Ok(index as u8);
            }
        }
        let (index, assigned) = match self.threads.intern(&key, self.epoch) {
            Some(Interned::Present(index)) => (index, false),
            Some(Interned::Assigned(index)) => (index, true),
            None => return Err(Error::TableExhausted { table: "thread" }),
        };
        let generation = self.threads.generation(index);
        let index = u8::try_from(index).map_err(|_| Error::TableExhausted { table: "thread" })?;
        self.last_thread = Some((key, u16::from(index), generation));
        if assigned {
            self.put(RT_THREAD | 3 << 4 | u64::from(index) << 16)?;
            self.put(t.pid)?;
            self.put(t.tid)?;
        }
        Ok(index)
    }

    fn put(&mut self, word: u64) -> Result<()> {
        self.out.write_all(&word.to_le_bytes())?;
        Ok(())
    }

    /// Writes `bytes` padded with zeros to a multiple of 8.
    fn put_stream(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes)?;
        let pad = padded(bytes.len()) - bytes.len();
        self.out.write_all(&[0u8; 8][..pad])?;
        Ok(())
    }
}

/// Writes a trace's header records to `sink`: the magic number, the
/// provider's info and section (provider `provider_id` named
/// `provider_name`, cut to the 255 bytes its length field holds) and the
/// initialization record (`ticks_per_second`). [`Writer::segment`]s
/// follow it.
pub fn write_header(
    sink: &mut impl Write,
    ticks_per_second: u64,
    provider_id: u32,
    provider_name: &str,
) -> Result<()> {
    let name = truncate_to(provider_name, 0xff);
    let words = 1 + padded(name.len()) / 8;
    let id = u64::from(provider_id);
    let info = RT_METADATA
        | (words as u64) << 4
        | MT_PROVIDER_INFO << 16
        | id << 20
        | (name.len() as u64) << 52;
    let mut bytes = Vec::with_capacity(48 + name.len());
    bytes.extend_from_slice(&MAGIC.to_le_bytes());
    bytes.extend_from_slice(&info.to_le_bytes());
    bytes.extend_from_slice(name.as_bytes());
    bytes.resize(bytes.len() + padded(name.len()) - name.len(), 0);
    let section = RT_METADATA | 1 << 4 | MT_PROVIDER_SECTION << 16 | id << 20;
    bytes.extend_from_slice(&section.to_le_bytes());
    bytes.extend_from_slice(&(RT_INIT | 2 << 4).to_le_bytes());
    bytes.extend_from_slice(&ticks_per_second.to_le_bytes());
    sink.write_all(&bytes)?;
    Ok(())
}

/// The words of an event or kernel object record being assembled: its
/// header, one word (the time or the koid), [`MAX_ARGS`]
/// arguments of up to two words each, and an event's trailer word. (A
/// growing `Vec` checked its room for every word: with this buffer, kept
/// in the writer, `ptdec` writing the bench's interp FTF took 1.0% fewer
/// instructions, cachegrind; one on the stack, zeroed per record, 0.2%
/// more.)
struct Words {
    buf: [u8; 8 * (3 + 2 * MAX_ARGS)],
    /// Bytes of `buf` written (8 a word).
    len: usize,
}

impl Default for Words {
    fn default() -> Self {
        Words {
            buf: [0; 8 * (3 + 2 * MAX_ARGS)],
            len: 0,
        }
    }
}

impl Words {
    #[inline]
    fn push(&mut self, word: u64) {
        self.buf[self.len..self.len + 8].copy_from_slice(&word.to_le_bytes());
        self.len += 8;
    }
}

// A record's size fits its header's 12 bits (so `commit` needs no check,
// and `check_args` keeps `push` within `buf`).
const _: () = assert!(3 + 2 * MAX_ARGS <= MAX_RECORD_WORDS);

fn check_args(args: &[Arg]) -> Result<()> {
    if args.len() > MAX_ARGS {
        return Err(Error::TooManyArgs { count: args.len() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{self, EventKind, RecordKind, Value};

    fn events(bytes: &[u8]) -> Vec<read::Event> {
        read::parse(bytes)
            .expect("parse")
            .into_iter()
            .filter_map(|r| match r.kind {
                RecordKind::Event(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    fn all_args<'a>() -> Vec<Arg<'a>> {
        vec![
            Arg::new("null", ArgValue::Null),
            Arg::new("i32", -7i32),
            Arg::new("u32", 4_000_000_000u32),
            Arg::new("i64", -(1i64 << 40)),
            Arg::new("u64", u64::MAX),
            Arg::new("f64", 2.5f64),
            Arg::new("str", "libc.so.6"),
            Arg::new("ptr", ArgValue::Pointer(0x7fff_1234)),
            Arg::new("koid", ArgValue::Koid(42)),
            Arg::new("bool", true),
        ]
    }

    fn all_values() -> Vec<(String, Value)> {
        vec![
            ("null".into(), Value::Null),
            ("i32".into(), Value::I32(-7)),
            ("u32".into(), Value::U32(4_000_000_000)),
            ("i64".into(), Value::I64(-(1i64 << 40))),
            ("u64".into(), Value::U64(u64::MAX)),
            ("f64".into(), Value::F64(2.5)),
            ("str".into(), Value::Str("libc.so.6".into())),
            ("ptr".into(), Value::Pointer(0x7fff_1234)),
            ("koid".into(), Value::Koid(42)),
            ("bool".into(), Value::Bool(true)),
        ]
    }

    #[test]
    fn a_64_bit_value_that_fits_in_32_bits_takes_one_word() {
        let event = |args: &[Arg]| {
            let mut w = Writer::new(Vec::new(), 1).unwrap();
            let t = w.thread(1, 2, "t").unwrap();
            w.duration_complete(t, "c", "n", 1, 2, args).unwrap();
            let bytes = w.finish().unwrap();
            let records = read::parse(&bytes).unwrap();
            match records.last().map(|r| &r.kind) {
                Some(RecordKind::Event(e)) => (bytes.len(), e.args[0].value.clone()),
                other => panic!("last record: {other:?}"),
            }
        };
        let (small, v) = event(&[Arg::new("x", u64::from(u32::MAX))]);
        assert_eq!(v, Value::U32(u32::MAX));
        let (big, v) = event(&[Arg::new("x", 1u64 << 32)]);
        assert_eq!(v, Value::U64(1 << 32));
        assert_eq!(big - small, 8);
        let (_, v) = event(&[Arg::new("x", i64::from(i32::MIN))]);
        assert_eq!(v, Value::I32(i32::MIN));
        let (_, v) = event(&[Arg::new("x", i64::from(i32::MIN) - 1)]);
        assert_eq!(v, Value::I64(i64::from(i32::MIN) - 1));
    }

    #[test]
    fn every_record_kind_round_trips() {
        let mut w = Writer::with_provider(Vec::new(), 3_000_000_000, 7, "ptdec").unwrap();
        w.process(100, "prog").unwrap();
        let t = w.thread(100, 101, "worker").unwrap();
        let args = all_args();
        w.instant(t, "gap", "overflow", 5, &args).unwrap();
        w.counter(t, "cnt", "insns", 6, 99, &[Arg::new("v", 12u64)])
            .unwrap();
        w.duration_begin(t, "call", "f", 7, &[]).unwrap();
        w.duration_end(t, "call", "f", 8, &args[..3]).unwrap();
        w.duration_complete(t, "call", "g", 9, 19, &args).unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(bytes.len() % 8, 0);
        assert_eq!(bytes[..8], crate::MAGIC.to_le_bytes());

        let records = read::parse(&bytes).unwrap();
        let kinds: Vec<_> = records.iter().map(|r| &r.kind).collect();
        assert_eq!(kinds[0], &RecordKind::Magic);
        assert_eq!(
            kinds[1],
            &RecordKind::ProviderInfo {
                id: 7,
                name: "ptdec".into()
            }
        );
        assert_eq!(kinds[2], &RecordKind::ProviderSection { id: 7 });
        assert_eq!(
            kinds[3],
            &RecordKind::Initialization {
                ticks_per_second: 3_000_000_000
            }
        );
        let kobjs: Vec<_> = records
            .iter()
            .filter_map(|r| match &r.kind {
                RecordKind::KernelObject(k) => Some(k.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(kobjs.len(), 2);
        assert_eq!(
            (kobjs[0].obj_type, kobjs[0].koid, kobjs[0].name.as_str()),
            (1, 100, "prog")
        );
        assert!(kobjs[0].args.is_empty());
        assert_eq!(
            (kobjs[1].obj_type, kobjs[1].koid, kobjs[1].name.as_str()),
            (2, 101, "worker")
        );
        assert_eq!(kobjs[1].args.len(), 1);
        assert_eq!(kobjs[1].args[0].name, "process");
        assert_eq!(kobjs[1].args[0].value, Value::Koid(100));

        let ev = events(&bytes);
        let th = ThreadRef { pid: 100, tid: 101 };
        let got: Vec<_> = ev
            .iter()
            .map(|e| {
                assert_eq!(e.thread, th);
                (e.kind, e.ts, e.category.as_str(), e.name.as_str())
            })
            .collect();
        assert_eq!(
            got,
            [
                (EventKind::Instant, 5, "gap", "overflow"),
                (EventKind::Counter { id: 99 }, 6, "cnt", "insns"),
                (EventKind::DurationBegin, 7, "call", "f"),
                (EventKind::DurationEnd, 8, "call", "f"),
                (EventKind::DurationComplete { end: 19 }, 9, "call", "g"),
            ]
        );
        let values = |e: &read::Event| -> Vec<(String, Value)> {
            e.args
                .iter()
                .map(|a| (a.name.clone(), a.value.clone()))
                .collect()
        };
        assert_eq!(values(&ev[0]), all_values());
        assert_eq!(values(&ev[1]), [("v".to_string(), Value::U32(12))]);
        assert!(ev[2].args.is_empty());
        assert_eq!(values(&ev[3]), all_values()[..3]);
        assert_eq!(values(&ev[4]), all_values());
        // One thread record, and each distinct string once.
        let threads = records
            .iter()
            .filter(|r| matches!(r.kind, RecordKind::Thread { .. }))
            .count();
        assert_eq!(threads, 1);
        let mut strings: Vec<_> = records
            .iter()
            .filter_map(|r| match &r.kind {
                RecordKind::String { value, .. } => Some(value.clone()),
                _ => None,
            })
            .collect();
        let n = strings.len();
        strings.sort();
        strings.dedup();
        assert_eq!(strings.len(), n);
    }

    #[test]
    fn segments_after_one_header_read_as_one_trace() {
        let m = Arc::<str>::from("libm.so");
        let write = |w: &mut Writer<Vec<u8>>, name: &str, t: u64| {
            let th = ThreadRef { pid: 7, tid: 8 };
            let args = [Arg::new("module", ArgValue::Shared(&m))];
            w.duration_complete(th, "call", name, t, t + 1, &args)
                .unwrap();
        };
        let mut whole = Writer::new(Vec::new(), 1000).unwrap();
        let mut joined = Vec::new();
        write_header(&mut joined, 1000, 1, "ftf").unwrap();
        for (i, name) in ["f", "g", "f"].iter().enumerate() {
            write(&mut whole, name, i as u64);
            let mut seg = Writer::segment(Vec::new());
            write(&mut seg, name, i as u64);
            let bytes = seg.finish().unwrap();
            joined.extend_from_slice(&bytes);
        }
        let whole = whole.finish().unwrap();
        assert_eq!(events(&joined), events(&whole));
        assert_eq!(events(&joined).len(), 3);
        // The header is the one a writer writes.
        let head = Writer::new(Vec::new(), 1000).unwrap().finish().unwrap();
        assert_eq!(&joined[..head.len()], &head[..]);
        // Strings restated per segment: the joined trace is longer.
        assert!(joined.len() > whole.len());
    }

    #[test]
    fn tables_reuse_slots_when_full() {
        const N: usize = 40_000;
        const THREADS: u64 = 300;
        let mut w = Writer::new(Vec::new(), 1_000_000_000).unwrap();
        for i in 0..N {
            let t = ThreadRef {
                pid: 1000 + (i as u64 % THREADS) / 10,
                tid: 5000 + i as u64 % THREADS,
            };
            let name = format!("fn_{i}");
            let module = format!("mod_{}", i % 50_000);
            w.duration_complete(
                t,
                "call",
                &name,
                i as u64,
                i as u64 + 1,
                &[Arg::new("module", module.as_str()), Arg::new("n", i as u64)],
            )
            .unwrap();
        }
        let bytes = w.finish().unwrap();
        let records = read::parse(&bytes).unwrap();

        let mut string_records = 0;
        let mut cat_records = 0;
        let mut thread_records = 0;
        let mut events = 0;
        for r in &records {
            match &r.kind {
                RecordKind::String { index, value } => {
                    assert!((1..=0x7fff).contains(index));
                    string_records += 1;
                    cat_records += usize::from(value == "call");
                }
                RecordKind::Thread { index, .. } => {
                    assert_ne!(*index, 0);
                    thread_records += 1;
                }
                RecordKind::Event(e) => {
                    let i = events;
                    assert_eq!(e.name, format!("fn_{i}"));
                    assert_eq!(e.category, "call");
                    assert_eq!(e.ts, i as u64);
                    assert_eq!(e.thread.tid, 5000 + i as u64 % THREADS);
                    assert_eq!(e.thread.pid, 1000 + (i as u64 % THREADS) / 10);
                    assert_eq!(e.args[0].value, Value::Str(format!("mod_{i}")));
                    assert_eq!(e.args[1].value, Value::U32(i as u32));
                    events += 1;
                }
                _ => {}
            }
        }
        assert_eq!(events, N);
        // Every event name and module is new: the table filled and recycled.
        assert!(string_records > 2 * N, "{string_records}");
        assert!(thread_records > THREADS as usize, "{thread_records}");
        // The category is used by every event, so CLOCK never evicts it.
        assert_eq!(cat_records, 1);
    }

    #[test]
    fn long_strings_are_cut_at_a_char_boundary() {
        // 31999 ASCII bytes then a 2-byte char straddling the 32000 limit.
        // Categories and argument names are 'static.
        let long: &'static str = format!("{}é tail", "a".repeat(MAX_STRING_LEN - 1)).leak();
        assert_eq!(truncate(long).len(), MAX_STRING_LEN - 1);
        let exact: &'static str = "b".repeat(MAX_STRING_LEN + 10).leak();
        assert_eq!(truncate(exact).len(), MAX_STRING_LEN);
        assert_eq!(truncate("short"), "short");

        let mut w = Writer::new(Vec::new(), 1_000_000_000).unwrap();
        let t = w.thread(1, 1, long).unwrap();
        w.instant(t, exact, long, 1, &[Arg::new(long, exact)])
            .unwrap();
        let bytes = w.finish().unwrap();
        let ev = &events(&bytes)[0];
        assert_eq!(ev.name, "a".repeat(MAX_STRING_LEN - 1));
        assert_eq!(ev.category, "b".repeat(MAX_STRING_LEN));
        assert_eq!(ev.args[0].name, ev.name);
        assert_eq!(ev.args[0].value, Value::Str(ev.category.clone()));
    }

    /// The recent-strings guess is keyed by address: a buffer rewritten in
    /// place with other text of the same length, and a string whose slot
    /// was recycled, must still come out as their own text.
    #[test]
    fn strings_at_a_reused_address_are_their_own_text() {
        let mut w = Writer::new(Vec::new(), 1).unwrap();
        let t = w.thread(1, 2, "t").unwrap();
        let mut buf = String::from("alpha");
        w.instant(t, "c", &buf, 0, &[]).unwrap();
        buf.replace_range(.., "gamma");
        w.instant(t, "c", &buf, 1, &[]).unwrap();
        // Fill the table so that "gamma"'s slot is recycled, then reuse the
        // buffer's address for it again.
        for i in 0..STRING_TABLE_SLOTS + 10 {
            w.instant(t, "c", &format!("s{i}"), 2, &[]).unwrap();
        }
        w.instant(t, "c", &buf, 3, &[]).unwrap();
        buf.replace_range(.., "delta");
        w.instant(t, "c", &buf, 4, &[]).unwrap();
        let bytes = w.finish().unwrap();
        let names: Vec<String> = events(&bytes)
            .into_iter()
            .filter(|e| e.ts != 2)
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["alpha", "gamma", "gamma", "delta"]);
    }

    /// A category or argument name found by address (`StaticStrings`)
    /// whose slot was recycled for other text since must be written
    /// again, not named by the recycled index; so must a thread whose
    /// slot was.
    #[test]
    fn static_strings_and_threads_in_recycled_slots_are_written_again() {
        let mut w = Writer::new(Vec::new(), 1).unwrap();
        let t = ThreadRef { pid: 1, tid: 2 };
        w.instant(t, "c", "first", 0, &[Arg::new("k1", 1u32)])
            .unwrap();
        // Enough other strings and threads to recycle every slot twice.
        let names: Vec<String> = (0..2 * STRING_TABLE_SLOTS + 10)
            .map(|i| format!("n{i}"))
            .collect();
        for (i, n) in names.iter().enumerate() {
            let other = ThreadRef {
                pid: 3,
                tid: 10 + (i % (2 * THREAD_TABLE_SLOTS + 7)) as u64,
            };
            w.instant(other, "d", n, 1, &[]).unwrap();
        }
        w.instant(t, "c", "last", 2, &[Arg::new("k1", 2u32)])
            .unwrap();
        let bytes = w.finish().unwrap();
        let evs = events(&bytes);
        let last = evs.last().unwrap();
        assert_eq!((last.category.as_str(), last.name.as_str()), ("c", "last"));
        assert_eq!(last.args[0].name, "k1");
        assert_eq!((last.thread.pid, last.thread.tid), (1, 2));
        // Each event's thread is its own, slots recycled or not.
        for (e, i) in evs[1..evs.len() - 1].iter().zip(0..) {
            assert_eq!(e.thread.tid, 10 + (i % (2 * THREAD_TABLE_SLOTS + 7)) as u64);
        }
    }

    /// Argument names found by address (`StaticStrings`), more than its
    /// ways and in any order, so that names share ways, are found where
    /// the probing put them and are evicted: each event names its own.
    #[test]
    fn static_names_sharing_ways_name_their_own_args() {
        let names: Vec<&'static str> = (0..3 * STATIC_WAYS)
            .map(|i| &*Box::leak(format!("arg{i}").into_boxed_str()))
            .collect();
        let mut w = Writer::new(Vec::new(), 1).unwrap();
        let t = ThreadRef { pid: 1, tid: 2 };
        // A few names again and again (as a writer's own are), between
        // them all the others in turn.
        let order: Vec<usize> = (0..4000)
            .map(|k| {
                if k % 3 == 0 {
                    k % 5
                } else {
                    (k * 7) % names.len()
                }
            })
            .collect();
        for &i in &order {
            w.instant(t, "c", "e", 0, &[Arg::new(names[i], i as u32)])
                .unwrap();
        }
        let evs = events(&w.finish().unwrap());
        assert_eq!(evs.len(), order.len());
        for (e, &i) in evs.iter().zip(&order) {
            assert_eq!(e.args[0].name, names[i]);
        }
    }

    /// Events naming shared text (`Text::Shared`, `ArgValue::Shared`) are
    /// written byte for byte as the same events naming plain text, while
    /// other strings recycle every table slot twice between the repeats
    /// (a hit on a recycled slot would name the wrong string).
    #[test]
    fn shared_text_is_written_as_plain_text_is() {
        let names: Vec<Arc<str>> = (0..300).map(|i| format!("func{i}").into()).collect();
        let modules: Vec<Arc<str>> = (0..5).map(|i| format!("/lib/m{i}.so").into()).collect();
        let fillers: Vec<String> = (0..2 * STRING_TABLE_SLOTS + 10)
            .map(|i| format!("x{i}"))
            .collect();
        let write = |shared: bool| {
            let mut w = Writer::new(Vec::new(), 1).unwrap();
            let t = ThreadRef { pid: 1, tid: 2 };
            let mut f = fillers.iter();
            for k in 0..6000usize {
                let (n, m) = (&names[k * 7 % names.len()], &modules[k % modules.len()]);
                let (name, module) = if shared {
                    (Text::Shared(n), ArgValue::Shared(m))
                } else {
                    (Text::Str(n), ArgValue::Str(m))
                };
                w.duration_complete(t, "call", name, 0, 1, &[Arg::new("module", module)])
                    .unwrap();
                for x in f.by_ref().take(11) {
                    w.instant(t, "c", x, 0, &[]).unwrap();
                }
            }
            w.finish().unwrap()
        };
        let (plain, shared) = (write(false), write(true));
        assert!(plain == shared, "the shared-text trace differs");
        let evs = events(&shared);
        let last = evs.iter().rfind(|e| e.category == "call").unwrap();
        assert_eq!(last.name, "func293");
        assert_eq!(last.args[0].value, Value::Str("/lib/m4.so".into()));
    }

    #[test]
    fn empty_strings_use_ref_zero() {
        let mut w = Writer::new(Vec::new(), 1).unwrap();
        let t = ThreadRef { pid: 1, tid: 2 };
        w.instant(t, "", "", 0, &[Arg::new("", "")]).unwrap();
        let bytes = w.finish().unwrap();
        let records = read::parse(&bytes).unwrap();
        assert!(!records
            .iter()
            .any(|r| matches!(r.kind, RecordKind::String { .. })));
        let ev = &events(&bytes)[0];
        assert_eq!((ev.category.as_str(), ev.name.as_str()), ("", ""));
        assert_eq!(ev.args[0].value, Value::Str(String::new()));
    }

    #[test]
    fn too_many_args_is_an_error_and_the_writer_goes_on() {
        let mut w = Writer::new(Vec::new(), 1).unwrap();
        let t = ThreadRef { pid: 1, tid: 2 };
        let args = vec![Arg::new("x", 1u64); 16];
        assert!(matches!(
            w.instant(t, "c", "n", 0, &args),
            Err(Error::TooManyArgs { count: 16 })
        ));
        assert!(matches!(
            w.kernel_object(9, 1, "obj", &args),
            Err(Error::TooManyArgs { count: 16 })
        ));
        w.instant(t, "c", "n", 0, &args[..15]).unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(events(&bytes)[0].args.len(), 15);
    }

    #[test]
    fn sink_errors_are_returned() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let w = Writer::new(Broken, 1).unwrap();
        let err = w.finish().err().expect("flush fails");
        assert!(matches!(err, Error::Io(_)), "{err}");
        assert!(err.to_string().contains("disk full"));
    }

    #[test]
    fn provider_name_is_cut_to_its_length_field() {
        let name = "é".repeat(200); // 400 bytes
        let w = Writer::with_provider(Vec::new(), 1, 3, &name).unwrap();
        let records = read::parse(&w.finish().unwrap()).unwrap();
        match &records[1].kind {
            RecordKind::ProviderInfo { id: 3, name } => assert_eq!(name.len(), 254),
            other => panic!("{other:?}"),
        }
    }
}
