//! The vocabulary of Intel PT flow decoding shared by `ptflow` (ptdec's own
//! decoder, pure Rust) and `ipt` (the libipt wrapper): [`Block`],
//! [`Event`] and [`EventKind`], [`Status`], [`Error`], [`Errata`],
//! [`Frequency`], and what a decoder reads of its configuration
//! ([`Settings`]). Both decoders hand out these values, so that ptdec runs
//! over either and the differential tests compare them value for value.
//!
//! The numbers are libipt's (its `enum pt_error_code`, `pt_status_flag`,
//! `pt_exec_mode`, `pt_insn_class`, `pt_event_type`): an interface, not an
//! implementation; `ipt`'s tests check each against the libipt it is built
//! with. A leaf: no dependencies, no unsafe code.
#![deny(unsafe_code)]

/// A decoder error, numbered as libipt numbers them (`pt_error_code`,
/// without the minus sign). [`Error::name`] is a short name for
/// statistics; `Display` says what it means in a few words (ptdec shows
/// libipt's own message where it has one: `ipt::message`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error(pub u32);

impl Error {
    pub const OK: Error = Error(0);
    pub const INTERNAL: Error = Error(1);
    pub const INVALID: Error = Error(2);
    pub const NOSYNC: Error = Error(3);
    pub const BAD_OPC: Error = Error(4);
    pub const BAD_PACKET: Error = Error(5);
    pub const BAD_CONTEXT: Error = Error(6);
    pub const EOS: Error = Error(7);
    pub const BAD_QUERY: Error = Error(8);
    pub const NOMEM: Error = Error(9);
    pub const BAD_CONFIG: Error = Error(10);
    pub const NOIP: Error = Error(11);
    pub const IP_SUPPRESSED: Error = Error(12);
    pub const NOMAP: Error = Error(13);
    pub const BAD_INSN: Error = Error(14);
    pub const NO_TIME: Error = Error(15);
    pub const NO_CBR: Error = Error(16);
    pub const BAD_IMAGE: Error = Error(17);
    pub const BAD_LOCK: Error = Error(18);
    pub const NOT_SUPPORTED: Error = Error(19);
    pub const RETSTACK_EMPTY: Error = Error(20);
    pub const BAD_RETCOMP: Error = Error(21);
    pub const BAD_STATUS_UPDATE: Error = Error(22);
    pub const NO_ENABLE: Error = Error(23);
    pub const EVENT_IGNORED: Error = Error(24);
    pub const OVERFLOW: Error = Error(25);
    pub const BAD_FILE: Error = Error(26);
    pub const BAD_CPU: Error = Error(27);
    /// ptflow's own, not libipt's: code to decode while the trace has
    /// given no execution mode (no MODE.Exec since the decoder
    /// synchronized, or one with the reserved CS.L and CS.D both set).
    /// libipt has no such error: it decodes such code with its
    /// instruction length decoder in no mode (16-bit operand sizes, no
    /// displacements), or in the mode its block cache holds.
    pub const NO_MODE: Error = Error(0x100);

    /// A short name for statistics (`Nomap`, `BadPacket`, ...).
    pub fn name(self) -> String {
        match self.known_name() {
            Some(n) => n.to_string(),
            None => format!("Error{}", self.0),
        }
    }

    fn known_name(self) -> Option<&'static str> {
        Some(match self {
            Error::OK => "Ok",
            Error::INTERNAL => "Internal",
            Error::INVALID => "Invalid",
            Error::NOSYNC => "Nosync",
            Error::BAD_OPC => "BadOpc",
            Error::BAD_PACKET => "BadPacket",
            Error::BAD_CONTEXT => "BadContext",
            Error::EOS => "Eos",
            Error::BAD_QUERY => "BadQuery",
            Error::NOMEM => "Nomem",
            Error::BAD_CONFIG => "BadConfig",
            Error::NOIP => "Noip",
            Error::IP_SUPPRESSED => "IpSuppressed",
            Error::NOMAP => "Nomap",
            Error::BAD_INSN => "BadInsn",
            Error::NO_TIME => "NoTime",
            Error::NO_CBR => "NoCbr",
            Error::BAD_IMAGE => "BadImage",
            Error::BAD_LOCK => "BadLock",
            Error::NOT_SUPPORTED => "NotSupported",
            Error::RETSTACK_EMPTY => "RetstackEmpty",
            Error::BAD_RETCOMP => "BadRetcomp",
            Error::BAD_STATUS_UPDATE => "BadStatusUpdate",
            Error::NO_ENABLE => "NoEnable",
            Error::EVENT_IGNORED => "EventIgnored",
            Error::OVERFLOW => "Overflow",
            Error::BAD_FILE => "BadFile",
            Error::BAD_CPU => "BadCpu",
            Error::NO_MODE => "NoMode",
            _ => return None,
        })
    }

    /// What it means, in a few words.
    pub fn description(self) -> &'static str {
        match self {
            Error::OK => "no error",
            Error::INTERNAL => "internal decoder error",
            Error::INVALID => "invalid argument",
            Error::NOSYNC => "no synchronization point (PSB) found",
            Error::BAD_OPC => "unknown packet opcode",
            Error::BAD_PACKET => "malformed packet",
            Error::BAD_CONTEXT => "packet out of place for the decoder's state",
            Error::EOS => "end of the trace",
            Error::BAD_QUERY => "trace and code disagree (no packet for this branch)",
            Error::NOMEM => "out of memory",
            Error::BAD_CONFIG => "bad configuration",
            Error::NOIP => "no IP known",
            Error::IP_SUPPRESSED => "the IP is suppressed",
            Error::NOMAP => "no code mapped at this address",
            Error::BAD_INSN => "undecodable instruction",
            Error::NO_TIME => "no timing information",
            Error::NO_CBR => "no core:bus ratio known",
            Error::BAD_IMAGE => "bad image",
            Error::BAD_LOCK => "locking error",
            Error::NOT_SUPPORTED => "not supported",
            Error::RETSTACK_EMPTY => "return with an empty return stack",
            Error::BAD_RETCOMP => "compressed return does not match the call stack",
            Error::BAD_STATUS_UPDATE => "bad status update in a PSB+",
            Error::NO_ENABLE => "trace does not start with tracing enabled",
            Error::EVENT_IGNORED => "event ignored",
            Error::OVERFLOW => "internal buffer overflow",
            Error::BAD_FILE => "bad file",
            Error::BAD_CPU => "unknown CPU",
            Error::NO_MODE => "no execution mode (MODE.Exec) given for this code",
            _ => "unknown error",
        }
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.known_name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Error{}", self.0),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.description())
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// The status bits a decoder returns (`enum pt_status_flag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status(pub u32);

impl Status {
    pub const EVENT_PENDING: u32 = 1;
    pub const IP_SUPPRESSED: u32 = 2;
    pub const EOS: u32 = 4;

    /// An event is pending: call `event()` before decoding on.
    pub fn event_pending(self) -> bool {
        self.0 & Status::EVENT_PENDING != 0
    }
    /// The IP is suppressed (tracing is disabled).
    pub fn ip_suppressed(self) -> bool {
        self.0 & Status::IP_SUPPRESSED != 0
    }
    /// The decoder reached the end of the trace.
    pub fn eos(self) -> bool {
        self.0 & Status::EOS != 0
    }
}

/// Execution modes (`Block::mode`, libipt's `pt_exec_mode`).
pub mod mode {
    pub const UNKNOWN: u32 = 0;
    pub const BITS16: u32 = 1;
    pub const BITS32: u32 = 2;
    pub const BITS64: u32 = 3;
}

/// Instruction classes (`Block::iclass`, libipt's `pt_insn_class`).
pub mod iclass {
    pub const UNKNOWN: u32 = 0;
    pub const OTHER: u32 = 1;
    pub const CALL: u32 = 2;
    pub const RETURN: u32 = 3;
    pub const JUMP: u32 = 4;
    pub const COND_JUMP: u32 = 5;
    pub const FAR_CALL: u32 = 6;
    pub const FAR_RETURN: u32 = 7;
    pub const FAR_JUMP: u32 = 8;
    pub const PTWRITE: u32 = 9;
    pub const INDIRECT: u32 = 10;
}

/// Event types ([`Event::raw_type`], libipt's `pt_event_type`).
pub mod event_type {
    pub const ENABLED: u32 = 0;
    pub const DISABLED: u32 = 1;
    pub const ASYNC_DISABLED: u32 = 2;
    pub const ASYNC_BRANCH: u32 = 3;
    pub const PAGING: u32 = 4;
    pub const ASYNC_PAGING: u32 = 5;
    pub const OVERFLOW: u32 = 6;
    pub const EXEC_MODE: u32 = 7;
    pub const TSX: u32 = 8;
    pub const STOP: u32 = 9;
    pub const VMCS: u32 = 10;
    pub const ASYNC_VMCS: u32 = 11;
    pub const EXSTOP: u32 = 12;
    pub const MWAIT: u32 = 13;
    pub const PWRE: u32 = 14;
    pub const PWRX: u32 = 15;
    pub const PTWRITE: u32 = 16;
    pub const TICK: u32 = 17;
    pub const CBR: u32 = 18;
    pub const MNT: u32 = 19;
    pub const TIP: u32 = 20;
    pub const TNT: u32 = 21;
    pub const IFLAGS: u32 = 22;
    pub const INTERRUPT: u32 = 23;
    pub const IRET: u32 = 24;
    pub const SMI: u32 = 25;
    pub const RSM: u32 = 26;
    pub const SIPI: u32 = 27;
    pub const INIT: u32 = 28;
    pub const VMENTRY: u32 = 29;
    pub const VMEXIT: u32 = 30;
    pub const SHUTDOWN: u32 = 31;
    pub const UINTR: u32 = 32;
    pub const UIRET: u32 = 33;
    /// libipt 2.2's trigger event (`ptev_trig`), from a TRIG packet.
    pub const TRIG: u32 = 34;
}

/// The timing parameters of the trace (ptxed's `--mtc-freq`, `--nom-freq`,
/// `--cpuid-0x15.eax/ebx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Frequency {
    pub mtc_freq: u8,
    pub nom_freq: u8,
    pub cpuid_15_eax: u32,
    pub cpuid_15_ebx: u32,
}

/// An address filter range (IA32_RTIT_ADDRn_A/B, both inclusive, and its
/// ADDRn_CFG: [`AddrRange::FILTER`] or [`AddrRange::STOP`]; 0 unused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AddrRange {
    pub cfg: u32,
    pub a: u64,
    pub b: u64,
}

impl AddrRange {
    /// FilterEn: tracing only inside the configured such ranges.
    pub const FILTER: u32 = 1;
    /// TraceStop: tracing stops inside it.
    pub const STOP: u32 = 2;

    fn holds(&self, cfg: u32, addr: u64) -> bool {
        self.cfg == cfg && self.a <= addr && addr <= self.b
    }
}

/// Whether tracing is enabled at `addr` under `ranges`
/// (`pt_filter_addr_check`): in no TraceStop range, and in a FilterEn
/// range when there is one.
pub fn filter_allows(ranges: &[AddrRange], addr: u64) -> bool {
    if ranges.iter().any(|r| r.holds(AddrRange::STOP, addr)) {
        return false;
    }
    ranges.iter().any(|r| r.holds(AddrRange::FILTER, addr))
        || !ranges.iter().any(|r| r.cfg == AddrRange::FILTER)
}

/// The errata workarounds of a configuration (`struct pt_errata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Errata {
    pub bdm70: bool,
    pub bdm64: bool,
    pub skd007: bool,
    pub skd022: bool,
    pub skd010: bool,
    pub skl014: bool,
    pub apl12: bool,
    pub apl11: bool,
    pub skl168: bool,
    pub skz84: bool,
}

/// What a flow decoder reads of its configuration: the errata to work
/// around, the timing parameters, and the block decoder's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settings {
    pub errata: Errata,
    pub freq: Frequency,
    /// End a block at every call.
    pub end_on_call: bool,
    /// End a block at every jump.
    pub end_on_jump: bool,
    /// A tick event at every timing packet that binds to an instruction.
    pub tick_events: bool,
    /// Interrupt-flag change events.
    pub iflags_events: bool,
    /// Keep the timing calibration across an overflow.
    pub keep_tcal_on_ovf: bool,
    /// Some address filter range is configured.
    pub addr_filter: bool,
    /// The address filter ranges 0 to 3 (erratum SKL014 needs them).
    pub addr_ranges: [AddrRange; 4],
}

/// A block of sequential instructions (`struct pt_block`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Block {
    pub ip: u64,
    pub end_ip: u64,
    /// The image section id, or <= 0 when the bytes came from elsewhere.
    pub isid: i32,
    /// The execution mode ([`mode`]).
    pub mode: u32,
    /// The last instruction's class ([`iclass`]; any value, unknown ones too).
    pub iclass: u32,
    pub ninsn: u16,
    /// The last instruction's bytes, when `truncated`.
    pub raw: [u8; 15],
    /// The last instruction's size in bytes, or 0 when the decoder did not
    /// say: libipt says only for a `truncated` block, ptdec's own flow
    /// decoder for every block (its cached run knows it), which spares the
    /// caller decoding a call again for its return address.
    pub size: u8,
    pub speculative: bool,
    pub truncated: bool,
}

impl Block {
    /// Bitness of the block's code (16, 32 or 64).
    pub fn bitness(&self) -> u32 {
        match self.mode {
            mode::BITS16 => 16,
            mode::BITS32 => 32,
            _ => 64,
        }
    }
}

/// What an event says, for the kinds ptdec and ptsim act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Tracing enabled at `ip`; `resumed`: at the IP it was disabled at.
    Enabled {
        ip: u64,
        resumed: bool,
    },
    /// Tracing disabled; `ip` is the next IP unless suppressed.
    Disabled {
        ip: Option<u64>,
    },
    /// Asynchronously disabled at `at` (`ip`: where it would have gone).
    AsyncDisabled {
        at: u64,
        ip: Option<u64>,
    },
    /// An asynchronous branch from `from` to `to`.
    AsyncBranch {
        from: u64,
        to: Option<u64>,
    },
    Paging {
        cr3: u64,
    },
    AsyncPaging {
        cr3: u64,
        ip: Option<u64>,
    },
    /// A buffer overflow; tracing resumes at `ip` (`None`: when enabled).
    Overflow {
        ip: Option<u64>,
    },
    ExecMode {
        ip: Option<u64>,
    },
    /// Tracing stopped (TraceStop).
    Stop,
    /// A core:bus ratio change.
    Cbr {
        ratio: u16,
    },
    /// A PTWRITE payload of `size` bytes; `ip` of the ptwrite instruction
    /// when a FUP gave it (`fup_on_ptw`) or the decoder bound it to one.
    Ptwrite {
        ip: Option<u64>,
        size: u8,
        payload: u64,
    },
    /// Execution stopped (EXSTOP) at `ip`, the last instruction that did
    /// not complete, when known.
    Exstop {
        ip: Option<u64>,
    },
    /// An MWAIT completed (MWAIT packet): its `hints` (eax) and
    /// extensions (ecx); `ip` of the mwait instruction when known.
    Mwait {
        ip: Option<u64>,
        hints: u32,
        ext: u32,
    },
    /// A C-state was entered (PWRE): the resolved thread C-state and
    /// sub-state, `hw` when hardware initiated it.
    Pwre {
        state: u8,
        sub_state: u8,
        hw: bool,
    },
    /// A C-state was left (PWRX): the core C-state at wake, the deepest one
    /// reached, and the wake reason bits.
    Pwrx {
        last: u8,
        deepest: u8,
        interrupt: bool,
        store: bool,
        autonomous: bool,
    },
    /// Event trace (CFE/EVD): an interrupt or exception with its `vector`
    /// and, for a page fault, `cr2`; `ip` where it occurred.
    Interrupt {
        vector: u8,
        cr2: Option<u64>,
        ip: Option<u64>,
    },
    /// Event trace: a return from interrupt (IRET).
    Iret {
        ip: Option<u64>,
    },
    /// Event trace: a system management interrupt.
    Smi {
        ip: Option<u64>,
    },
    /// Event trace: a return from system management mode.
    Rsm {
        ip: Option<u64>,
    },
    /// Event trace: a SIPI message with its vector.
    Sipi {
        vector: u8,
    },
    /// Event trace: an INIT reset.
    Init {
        ip: Option<u64>,
    },
    /// Event trace: a VM entry.
    VmEntry {
        ip: Option<u64>,
    },
    /// Event trace: a VM exit, with the interrupt vector, exit reason and
    /// qualification when the trace gave them.
    VmExit {
        vector: Option<u8>,
        reason: Option<u64>,
        qualification: Option<u64>,
        ip: Option<u64>,
    },
    /// Event trace: a shutdown.
    Shutdown {
        ip: Option<u64>,
    },
    /// Event trace: a user interrupt with its vector.
    Uintr {
        vector: u8,
        ip: Option<u64>,
    },
    /// Event trace: a return from a user interrupt.
    Uiret {
        ip: Option<u64>,
    },
    /// Trigger tracing (a TRIG packet, libipt 2.2): trigger `number`
    /// (the packet's TRBV) fired, `mult` when more than one trigger fired
    /// there; at `ip` when the trace placed it (a FUP, or an instruction
    /// count from the last packet that gave an IP), before that
    /// instruction.
    Trig {
        number: u8,
        mult: bool,
        ip: Option<u64>,
    },
    /// Any other event type ([`event_type`]), newer ones included.
    Other(u32),
}

/// A decoder's event: what it says ([`Event::kind`]) and its flags and
/// time, as libipt's `struct pt_event` gives them.
#[derive(Clone, Copy)]
pub struct Event {
    /// Every field as the decoder filled it in; the accessors read them.
    pub fields: EventFields,
}

/// The parts of an [`Event`] as a decoder fills them in (`ipt` reads them
/// off libipt's event; [`Event::from_parts`] derives them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventFields {
    pub kind: EventKind,
    /// The event type ([`event_type`]).
    pub raw_type: u32,
    pub status_update: bool,
    pub ip_suppressed: bool,
    pub tsc: Option<u64>,
    pub time_tsc: u64,
    pub lost_mtc: u32,
    pub lost_cyc: u32,
    /// See [`Event::other_ip`].
    pub other_ip: Option<u64>,
    /// See [`Event::non_root`].
    pub non_root: Option<bool>,
    /// See [`Event::vmcs`].
    pub vmcs: Option<(u64, Option<u64>)>,
    /// See [`Event::exec_mode`].
    pub exec_mode: Option<u32>,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("kind", &self.kind())
            .field("status_update", &self.status_update())
            .field("tsc", &self.tsc())
            .field("non_root", &self.non_root())
            .field("vmcs", &self.vmcs())
            .finish()
    }
}

/// What a decoder of ptdec's own fills in to hand out an [`Event`]
/// equal to the one libipt would hand out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventParts {
    pub kind: EventKind,
    pub status_update: bool,
    /// The event's IP is suppressed (the `Option` IPs of `kind` are
    /// `None`).
    pub ip_suppressed: bool,
    /// The event's time, when it has one (`has_tsc`).
    pub tsc: Option<u64>,
    /// The time field as libipt fills it in also without `has_tsc`.
    pub time_tsc: u64,
    pub lost_mtc: u32,
    pub lost_cyc: u32,
    /// For [`EventKind::ExecMode`]: the mode ([`mode`]).
    pub exec_mode: u32,
    /// For `EventKind::Other(event_type::TSX)`: the IP and (speculative,
    /// aborted).
    pub tsx: Option<(u64, bool, bool)>,
    /// For `EventKind::Other(ptev_vmcs)` and `Other(ptev_async_vmcs)`:
    /// the VMCS base address and (async only) the IP.
    pub vmcs: Option<(u64, u64)>,
    /// For [`EventKind::Paging`] and [`EventKind::AsyncPaging`]: the PIP's
    /// NR bit (the CR3 is a VMX non-root guest's).
    pub non_root: bool,
    /// For `EventKind::Other(event_type::IFLAGS)` and `Other(TICK)`: the
    /// IP.
    pub other_ip: Option<u64>,
}

impl PartialEq for Event {
    /// Equal as ptdec reads events: kind, flags, time.
    fn eq(&self, o: &Event) -> bool {
        let (a, b) = (&self.fields, &o.fields);
        a.kind == b.kind
            && a.raw_type == b.raw_type
            && a.status_update == b.status_update
            && a.ip_suppressed == b.ip_suppressed
            && a.tsc == b.tsc
            && a.other_ip == b.other_ip
            && a.non_root == b.non_root
            && a.vmcs == b.vmcs
            && a.exec_mode == b.exec_mode
            && a.lost_mtc == b.lost_mtc
            && a.lost_cyc == b.lost_cyc
    }
}

impl Event {
    /// An event of the kinds a decoder of ptdec's own produces (enabled,
    /// disabled, async disabled, async branch, overflow, exec mode, stop,
    /// cbr, tsx, paging, async paging, vmcs, async vmcs, ptwrite, exstop,
    /// mwait, pwre, pwrx, mnt, event trace, trig); `None`
    /// for any other kind. It reads back as libipt's event with these
    /// parts would: an IP the parts leave out but do not suppress reads
    /// as 0.
    pub fn from_parts(p: &EventParts) -> Option<Event> {
        let sup = p.ip_suppressed;
        let ip = |v: Option<u64>| (!sup).then_some(v.unwrap_or(0));
        let (kind, raw_type) = match p.kind {
            k @ EventKind::Enabled { .. } => (k, event_type::ENABLED),
            EventKind::Disabled { ip: i } => {
                (EventKind::Disabled { ip: ip(i) }, event_type::DISABLED)
            }
            EventKind::AsyncDisabled { at, ip: i } => (
                EventKind::AsyncDisabled { at, ip: ip(i) },
                event_type::ASYNC_DISABLED,
            ),
            EventKind::AsyncBranch { from, to } => (
                EventKind::AsyncBranch { from, to: ip(to) },
                event_type::ASYNC_BRANCH,
            ),
            EventKind::Overflow { ip: i } => {
                (EventKind::Overflow { ip: ip(i) }, event_type::OVERFLOW)
            }
            EventKind::ExecMode { ip: i } => {
                (EventKind::ExecMode { ip: ip(i) }, event_type::EXEC_MODE)
            }
            EventKind::Stop => (EventKind::Stop, event_type::STOP),
            EventKind::Other(t @ (event_type::VMCS | event_type::ASYNC_VMCS)) => {
                p.vmcs?;
                (EventKind::Other(t), t)
            }
            EventKind::Other(event_type::TSX) => {
                p.tsx?;
                (EventKind::Other(event_type::TSX), event_type::TSX)
            }
            k @ EventKind::Cbr { .. } => (k, event_type::CBR),
            k @ EventKind::Paging { .. } => (k, event_type::PAGING),
            EventKind::AsyncPaging { cr3, ip: i } => (
                EventKind::AsyncPaging { cr3, ip: ip(i) },
                event_type::ASYNC_PAGING,
            ),
            EventKind::Ptwrite {
                ip: i,
                size,
                payload,
            } => (
                EventKind::Ptwrite {
                    ip: ip(i),
                    size,
                    payload,
                },
                event_type::PTWRITE,
            ),
            EventKind::Exstop { ip: i } => (EventKind::Exstop { ip: ip(i) }, event_type::EXSTOP),
            EventKind::Mwait { ip: i, hints, ext } => (
                EventKind::Mwait {
                    ip: ip(i),
                    hints,
                    ext,
                },
                event_type::MWAIT,
            ),
            k @ EventKind::Pwre { .. } => (k, event_type::PWRE),
            k @ EventKind::Pwrx { .. } => (k, event_type::PWRX),
            k @ EventKind::Other(event_type::MNT) => (k, event_type::MNT),
            EventKind::Other(t @ (event_type::IFLAGS | event_type::TICK)) => {
                p.other_ip?;
                (EventKind::Other(t), t)
            }
            // Event trace (CFE/EVD).
            EventKind::Interrupt { vector, cr2, ip: i } => (
                EventKind::Interrupt {
                    vector,
                    cr2,
                    ip: ip(i),
                },
                event_type::INTERRUPT,
            ),
            EventKind::Iret { ip: i } => (EventKind::Iret { ip: ip(i) }, event_type::IRET),
            EventKind::Smi { ip: i } => (EventKind::Smi { ip: ip(i) }, event_type::SMI),
            EventKind::Rsm { ip: i } => (EventKind::Rsm { ip: ip(i) }, event_type::RSM),
            k @ EventKind::Sipi { .. } => (k, event_type::SIPI),
            EventKind::Init { ip: i } => (EventKind::Init { ip: ip(i) }, event_type::INIT),
            EventKind::VmEntry { ip: i } => (EventKind::VmEntry { ip: ip(i) }, event_type::VMENTRY),
            EventKind::VmExit {
                vector,
                reason,
                qualification,
                ip: i,
            } => (
                EventKind::VmExit {
                    vector,
                    reason,
                    qualification,
                    ip: ip(i),
                },
                event_type::VMEXIT,
            ),
            EventKind::Shutdown { ip: i } => {
                (EventKind::Shutdown { ip: ip(i) }, event_type::SHUTDOWN)
            }
            EventKind::Uintr { vector, ip: i } => {
                (EventKind::Uintr { vector, ip: ip(i) }, event_type::UINTR)
            }
            EventKind::Uiret { ip: i } => (EventKind::Uiret { ip: ip(i) }, event_type::UIRET),
            // A TRIG's IP may be unknown without being suppressed (an
            // instruction count with no IP to count from): as given.
            EventKind::Trig { number, mult, ip } => (
                EventKind::Trig {
                    number,
                    mult,
                    ip: ip.filter(|_| !sup),
                },
                event_type::TRIG,
            ),
            _ => return None,
        };
        let other_ip = match (raw_type, p.tsx) {
            (event_type::TSX, Some((ip, _, _))) => (!sup).then_some(ip),
            (event_type::IFLAGS | event_type::TICK, _) => p.other_ip.filter(|_| !sup),
            _ => None,
        };
        let non_root =
            matches!(raw_type, event_type::PAGING | event_type::ASYNC_PAGING).then_some(p.non_root);
        let vmcs = match (raw_type, p.vmcs) {
            (event_type::VMCS, Some((base, _))) => Some((base, None)),
            (event_type::ASYNC_VMCS, Some((base, ip))) => Some((base, (!sup).then_some(ip))),
            _ => None,
        };
        Some(Event {
            fields: EventFields {
                kind,
                raw_type,
                status_update: p.status_update,
                ip_suppressed: sup,
                tsc: p.tsc,
                time_tsc: p.tsc.unwrap_or(p.time_tsc),
                lost_mtc: p.lost_mtc,
                lost_cyc: p.lost_cyc,
                other_ip,
                non_root,
                vmcs,
                exec_mode: (raw_type == event_type::EXEC_MODE).then_some(p.exec_mode),
            },
        })
    }

    /// The raw event type ([`event_type`]).
    pub fn raw_type(&self) -> u32 {
        self.fields.raw_type
    }
    pub fn ip_suppressed(&self) -> bool {
        self.fields.ip_suppressed
    }
    /// For a VMCS or async VMCS event (`EventKind::Other`): the VMCS base
    /// and the async event's IP unless suppressed.
    pub fn vmcs(&self) -> Option<(u64, Option<u64>)> {
        self.fields.vmcs
    }
    /// For a paging or async paging event: the PIP's NR bit.
    pub fn non_root(&self) -> Option<bool> {
        self.fields.non_root
    }
    /// A status update (the decoder's state at a PSB+), not a change.
    pub fn status_update(&self) -> bool {
        self.fields.status_update
    }
    /// The TSC, when the event has one.
    pub fn tsc(&self) -> Option<u64> {
        self.fields.tsc
    }
    /// The decoder's time at the event, also when it has no TSC of its
    /// own: libipt-sb orders sideband by it either way.
    pub fn time_tsc(&self) -> u64 {
        self.fields.time_tsc
    }
    /// The IP of the kinds [`EventKind::Other`] covers that name one: a
    /// tick, a TIP (always), a TSX state change and an iflags change;
    /// `None` when suppressed or for any other kind.
    pub fn other_ip(&self) -> Option<u64> {
        self.fields.other_ip
    }
    pub fn kind(&self) -> EventKind {
        self.fields.kind
    }
    /// For an exec mode event: the mode it switches to ([`mode`]).
    pub fn exec_mode(&self) -> Option<u32> {
        self.fields.exec_mode
    }
}
