//! Packets to events, as libipt's event decoder (under its block decoder)
//! turns them: a TNT packet is one event holding its bits, a TIP one
//! holding its target; PSB+ becomes status updates handed out at PSBEND;
//! FUP+TIP an asynchronous branch, FUP+TIP.PGD an asynchronous disable;
//! MODE.Exec an exec-mode event bound to the next TIP or FUP; each event
//! carries the time of the timing packets read before it ([`super::time`]).
//!
//! MODE.TSX, OVF, PIP and VMCS (a status update in PSB+, an asynchronous
//! event bound to the TIP of an asynchronous branch, VMCS before PIP,
//! else a standalone event) and PTW (bound to the next FUP with its IP
//! bit, else standalone without an IP) are followed too, and so is event
//! trace: a CFE is an event bound to the next FUP (with its IP bit, or
//! while tracing is on for the kinds that allow it) or standalone without
//! an IP, and an EVD before it queues its data (a page fault's address, a
//! VM exit's qualification and reason) for it ([`EventDecoder`]'s
//! `decode_cfe`, `decode_evd`), as `pt_evt_decode_cfe` and
//! `pt_evt_decode_evd` do. The overflow errata SKD010, APL11 and APL12 are
//! handled as libipt handles them, by scanning the packets ahead. MNT, TraceStop and the power events (MWAIT, EXSTOP, PWRE,
//! PWRX) are followed as libipt follows them: standalone, but for an
//! EXSTOP with its IP bit and the MWAIT before it, bound to the next FUP.
//! libipt 2.2's TRIG (trigger tracing) is followed as 2.2 follows it
//! (`decode_trig`), which 2.1.2 cannot.

use std::collections::VecDeque;

use pttypes::{mode, Errata, Error as PtError, Frequency};

use super::packet::{self, IpPayload, Packet};
use super::time::{ignore_config, Calibration, Time};
use super::Fail;

const BAD_CONTEXT: PtError = PtError::BAD_CONTEXT;
const BAD_STATUS_UPDATE: PtError = PtError::BAD_STATUS_UPDATE;
const NOIP: PtError = PtError::NOIP;

/// Event bindings (`evb_*`): which packet completes a queued event.
const EVB_PSBEND: u8 = 1;
const EVB_TIP: u8 = 2;
const EVB_FUP: u8 = 4;
const EVB_FUP_BOUND: u8 = 8;
const EVB_EXSTOP: u8 = 16;
/// An EVD waiting for the CFE it goes with (`evb_cfe`).
const EVB_CFE: u8 = 32;

/// CFE types (`enum pt_cfe_type`).
mod cfe {
    pub const INTR: u8 = 0x01;
    pub const IRET: u8 = 0x02;
    pub const SMI: u8 = 0x03;
    pub const RSM: u8 = 0x04;
    pub const SIPI: u8 = 0x05;
    pub const INIT: u8 = 0x06;
    pub const VMENTRY: u8 = 0x07;
    pub const VMEXIT: u8 = 0x08;
    pub const VMEXIT_INTR: u8 = 0x09;
    pub const SHUTDOWN: u8 = 0x0a;
    pub const UINTR: u8 = 0x0c;
    pub const UIRET: u8 = 0x0d;
}

/// EVD types (`enum pt_evd_type`).
mod evd {
    pub const CR2: u8 = 0x00;
    pub const VMXQ: u8 = 0x01;
    pub const VMXR: u8 = 0x02;
}

/// libipt's queue holds 16 slots, one kept free.
const EVQ_MAX: usize = 14;

/// What an event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A status update waiting for PSBEND to say enabled or disabled.
    Pending,
    Enabled {
        ip: u64,
        resumed: bool,
    },
    Disabled {
        ip: u64,
    },
    AsyncDisabled {
        at: u64,
        ip: u64,
    },
    AsyncBranch {
        from: u64,
        to: u64,
    },
    ExecMode {
        ip: u64,
        mode: u32,
    },
    /// A tick (`ptev_tick`, with tick events on): the block decoder's
    /// own, at the branch whose TIP or TNT came with a new time.
    Tick {
        ip: u64,
    },
    /// The interrupt flag MODE.Exec gives, when iflags events are on
    /// (`ptev_iflags`): bound as an exec mode event is.
    Iflags {
        ip: u64,
        iflag: bool,
    },
    Cbr {
        ratio: u8,
    },
    /// A TSX state change (MODE.TSX) at `ip`.
    Tsx {
        ip: u64,
        speculative: bool,
        aborted: bool,
    },
    /// An internal buffer overflow; tracing resumes at `ip` (unless
    /// suppressed: resolved while disabled).
    Overflow {
        ip: u64,
    },
    Tnt {
        bits: u64,
        size: u8,
    },
    Tip {
        ip: u64,
    },
    /// A MODE.Exec that changed nothing (`ptev_ignore`).
    Ignore,
    /// A PIP outside PSB+ and not inside an asynchronous branch
    /// (`ptev_paging`): it binds to the next instruction that can change
    /// CR3 (`pt_insn_binds_to_pip`), or applies at once while disabled.
    Paging {
        cr3: u64,
        non_root: bool,
    },
    /// A PIP in PSB+ (a status update at PSBEND's IP) or between the FUP
    /// and the TIP of an asynchronous branch (at the TIP's IP)
    /// (`ptev_async_paging`).
    AsyncPaging {
        cr3: u64,
        non_root: bool,
        ip: u64,
    },
    /// A VMCS outside PSB+ and not inside an asynchronous branch
    /// (`ptev_vmcs`): it binds to the next VMPTRLD, VM entry or far
    /// branch (`pt_insn_binds_to_vmcs`), or applies at once while disabled.
    Vmcs {
        base: u64,
    },
    /// A VMCS in PSB+ or between the FUP and the TIP of an asynchronous
    /// branch (`ptev_async_vmcs`), ordered before an async paging event
    /// of the same branch.
    AsyncVmcs {
        base: u64,
        ip: u64,
    },
    /// A PTWRITE payload of `size` bytes (`ptev_ptwrite`): with PTW.IP the
    /// next FUP gives the instruction's `ip`; without it the IP is
    /// suppressed and the block decoder binds it to the next PTWRITE
    /// instruction.
    Ptwrite {
        ip: u64,
        size: u8,
        payload: u64,
    },
    /// Execution stopped (EXSTOP): with EXSTOP.IP the next FUP gives the
    /// `ip` (`ptev_exstop`), else standalone with the IP suppressed.
    Exstop {
        ip: u64,
    },
    /// An MWAIT (`ptev_mwait`), waiting for the EXSTOP that follows it:
    /// it binds to that EXSTOP's FUP when it has one.
    Mwait {
        ip: u64,
        hints: u32,
        ext: u32,
    },
    /// A C-state entered (PWRE, `ptev_pwre`); standalone.
    Pwre {
        state: u8,
        sub_state: u8,
        hw: bool,
    },
    /// A C-state left (PWRX, `ptev_pwrx`); standalone.
    Pwrx {
        last: u8,
        deepest: u8,
        interrupt: bool,
        store: bool,
        autonomous: bool,
    },
    /// A maintenance packet (MNT, `ptev_mnt`): in PSB+ at PSBEND, else
    /// standalone. It binds to no instruction.
    Mnt,
    /// TraceStop (`ptev_stop`); standalone, after tracing was disabled.
    Stop,
    /// Event trace (CFE/EVD): an interrupt or exception (`ptev_interrupt`)
    /// with its vector and, from an EVD before it, a page fault's address
    /// (`has_cr2`, `cr2`); at `ip`, the IP of the FUP it binds to.
    Interrupt {
        ip: u64,
        vector: u8,
        has_cr2: bool,
        cr2: u64,
    },
    /// A return from an interrupt (`ptev_iret`): without an IP it binds
    /// to the next IRET, SYSRET or SYSEXIT.
    Iret {
        ip: u64,
    },
    /// A system management interrupt (`ptev_smi`).
    Smi {
        ip: u64,
    },
    /// A return from system management mode (`ptev_rsm`), never with an
    /// IP.
    Rsm,
    /// A SIPI (`ptev_sipi`), never with an IP.
    Sipi {
        vector: u8,
    },
    /// An INIT (`ptev_init`).
    Init {
        ip: u64,
    },
    /// A VM entry (`ptev_vmentry`): without an IP it binds to the next
    /// VMLAUNCH or VMRESUME.
    VmEntry {
        ip: u64,
    },
    /// A VM exit (`ptev_vmexit`) with, where the trace gave them, its
    /// interrupt vector (`has` bit 0), exit qualification (bit 1, from
    /// an EVD) and exit reason (bit 2, from an EVD).
    VmExit {
        ip: u64,
        vector: u8,
        has: u8,
        qualification: u64,
        reason: u64,
    },
    /// A shutdown (`ptev_shutdown`).
    Shutdown {
        ip: u64,
    },
    /// A user interrupt (`ptev_uintr`) with its vector.
    Uintr {
        ip: u64,
        vector: u8,
    },
    /// A return from a user interrupt (`ptev_uiret`): without an IP it
    /// binds to the next UIRET.
    Uiret {
        ip: u64,
    },
    /// A trigger (TRIG, libipt 2.2's `ptev_trig`): trigger `trbv` fired
    /// (`mult`: more than one did) before the instruction at `ip`, once
    /// `anchored`. With TRIG.IP the FUP after it gives the IP; else with
    /// an instruction count (`icnt`; the IP not suppressed) the block
    /// decoder counts from the last IP the trace gave (its anchor) and
    /// walks on to it; without one the IP is suppressed.
    Trig {
        ip: u64,
        icnt: u16,
        trbv: u8,
        mult: bool,
        anchored: bool,
    },
}

/// [`Kind::VmExit`]'s `has` bits.
pub mod vmexit_has {
    pub const VECTOR: u8 = 1;
    pub const QUALIFICATION: u8 = 2;
    pub const REASON: u8 = 4;
}

impl Kind {
    /// Sets the IP of a kind that binds to one (the IP its binding packet
    /// gives).
    pub fn set_ip(&mut self, to: u64) {
        match self {
            Kind::Enabled { ip, .. }
            | Kind::ExecMode { ip, .. }
            | Kind::Iflags { ip, .. }
            | Kind::Tsx { ip, .. }
            | Kind::AsyncPaging { ip, .. }
            | Kind::AsyncVmcs { ip, .. }
            | Kind::Ptwrite { ip, .. }
            | Kind::Exstop { ip }
            | Kind::Mwait { ip, .. }
            | Kind::Interrupt { ip, .. }
            | Kind::Iret { ip }
            | Kind::Smi { ip }
            | Kind::Init { ip }
            | Kind::VmEntry { ip }
            | Kind::VmExit { ip, .. }
            | Kind::Shutdown { ip }
            | Kind::Uintr { ip, .. }
            | Kind::Uiret { ip } => *ip = to,
            _ => {}
        }
    }
}

/// One event (`struct pt_event`, the part ptdec reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ev {
    pub kind: Kind,
    pub ip_suppressed: bool,
    pub status_update: bool,
    pub has_tsc: bool,
    pub tsc: u64,
    pub lost_mtc: u32,
    pub lost_cyc: u32,
}

impl Ev {
    fn new(kind: Kind) -> Ev {
        Ev {
            kind,
            ip_suppressed: false,
            status_update: false,
            has_tsc: false,
            tsc: 0,
            lost_mtc: 0,
            lost_cyc: 0,
        }
    }
}

/// The last IP (`struct pt_last_ip`).
#[derive(Debug, Clone, Copy, Default)]
struct LastIp {
    ip: u64,
    have: bool,
    suppressed: bool,
}

impl LastIp {
    #[inline(always)]
    fn update(&mut self, p: IpPayload) -> Result<(), PtError> {
        let keep = |mask: u64| (self.ip & !mask) | (p.ip & mask);
        self.ip = match p.ipc {
            0 => {
                self.suppressed = true;
                return Ok(());
            }
            1 => keep(0xffff),
            2 => keep(0xffff_ffff),
            3 => {
                if p.ip & (1 << 47) != 0 {
                    p.ip | (!0u64 << 48)
                } else {
                    p.ip & !(!0u64 << 48)
                }
            }
            4 => keep(0xffff_ffff_ffff),
            6 => p.ip,
            _ => return Err(packet::BAD_PACKET),
        };
        self.have = true;
        self.suppressed = false;
        Ok(())
    }

    fn query(&self) -> Result<u64, PtError> {
        if !self.have {
            Err(NOIP)
        } else if self.suppressed {
            Err(PtError::IP_SUPPRESSED)
        } else {
            Ok(self.ip)
        }
    }
}

/// The event decoder over one trace buffer.
#[derive(Clone)]
pub struct EventDecoder<'a> {
    buf: &'a [u8],
    /// The buffer's address modulo 8: libipt searches PSBs at aligned
    /// addresses.
    misalign: usize,
    errata: Errata,
    freq: Frequency,
    keep_tcal: bool,
    /// Position after the current packet (`None`: not synchronized).
    pos: Option<usize>,
    sync: Option<usize>,
    /// Where the last PSB read was: a resync that meets its PSB+ goes on
    /// as a sync there ([`crate::block::BlockDecoder::resync`]).
    last_psb: Option<usize>,
    /// The current packet and its size (`None`: the packet decoder
    /// failed, `status` says how).
    packet: Option<(Packet, usize)>,
    status: Result<(), PtError>,
    ip: LastIp,
    pub time: Time,
    tcal: Calibration,
    evq: VecDeque<(u8, Ev)>,
    event: Option<Ev>,
    mode_exec_valid: bool,
    /// Whether MODE.Exec's interrupt flag makes iflags events
    /// (`enable_iflags_events`), and the last flag it gave.
    iflags_events: bool,
    iflag: bool,
    csd: bool,
    csl: bool,
    enabled: bool,
    bound: bool,
    /// The first place this decoder went where libipt 2.1.2 is known to
    /// decode wrong, and why ([`EventDecoder::libipt_differs`]).
    libipt_differs: Option<&'static str>,
}

/// Why [`EventDecoder::libipt_differs`]: an asynchronous branch with
/// events queued before it.
pub const ASYNC_BRANCH_BEHIND_EVENTS: &str = "an asynchronous branch behind queued events";

/// Why [`EventDecoder::libipt_differs`]: a compressed return with an
/// empty return stack after a PSB+ emptied it of calls made before it
/// (the block decoder's `RetStack::clear_at_psb`): libipt 2.1.2 keeps its
/// stack through a PSB and returns to such a call; the hardware never
/// compresses that return, so only corrupt trace goes there.
pub const RETURN_PAST_PSB: &str = "a compressed return to a call made before a PSB";

/// Why [`EventDecoder::libipt_differs`]: code to decode in no execution
/// mode (`PtError::NO_MODE`), which libipt decodes in no mode or in the
/// mode its block cache holds for it.
pub const CODE_IN_NO_MODE: &str = "code in no execution mode (no MODE.Exec)";

/// A step's outcome: `Ok(true)` the packet is done, go on; `Ok(false)`
/// an event is ready.
type Step = Result<bool, Fail>;

fn exec_mode(csl: bool, csd: bool) -> u32 {
    match (csl, csd) {
        (true, false) => mode::BITS64,
        (true, true) => mode::UNKNOWN,
        (false, true) => mode::BITS32,
        (false, false) => mode::BITS16,
    }
}

impl<'a> EventDecoder<'a> {
    pub fn new(buf: &'a [u8], errata: Errata, freq: Frequency, keep_tcal: bool) -> Self {
        EventDecoder {
            buf,
            misalign: buf.as_ptr() as usize % 8,
            errata,
            freq,
            keep_tcal,
            pos: None,
            sync: None,
            last_psb: None,
            packet: None,
            status: Err(PtError::NOSYNC),
            ip: LastIp::default(),
            time: Time::default(),
            tcal: Calibration::default(),
            evq: VecDeque::new(),
            event: None,
            mode_exec_valid: false,
            iflags_events: false,
            iflag: false,
            csd: false,
            csl: false,
            enabled: false,
            bound: false,
            libipt_differs: None,
        }
    }

    /// Whether, and why, this decoder went where libipt 2.1.2's decodes
    /// wrong (docs/decoding.md lists its defects): from there the two
    /// decoders' events may differ, and libipt's are the wrong ones. The
    /// first such place is kept for the decoder's life.
    pub fn libipt_differs(&self) -> Option<&'static str> {
        self.libipt_differs
    }

    /// Says that the decoder went where libipt decodes differently, and
    /// why (the first reason stays).
    pub fn note_libipt_differs(&mut self, why: &'static str) {
        self.libipt_differs.get_or_insert(why);
    }

    /// MODE.Exec's interrupt flag makes iflags events from now on
    /// (libipt's `enable_iflags_events`; off by default).
    pub fn enable_iflags_events(&mut self) {
        self.iflags_events = true;
    }

    fn reset(&mut self) {
        self.packet = None;
        self.status = Err(PtError::NOSYNC);
        self.event = None;
        self.enabled = false;
        self.bound = false;
        self.mode_exec_valid = false;
        self.ip = LastIp::default();
        self.time = Time::default();
        self.tcal = Calibration::default();
        self.evq.clear();
    }

    /// The offset of the current packet (`pt_evt_get_offset`).
    #[inline]
    pub fn offset(&self) -> Result<u64, PtError> {
        let pos = self.pos.ok_or(PtError::NOSYNC)?;
        let size = self.packet.map_or(0, |(_, n)| n);
        Ok((pos - size) as u64)
    }

    /// Where the packet decoder is (`pt_evt_pos`).
    pub fn pos(&self) -> Option<usize> {
        self.pos
    }

    pub fn sync_offset(&self) -> Result<u64, PtError> {
        self.sync.map(|s| s as u64).ok_or(PtError::NOSYNC)
    }

    /// The offset of the last PSB read (see `last_psb`).
    pub fn last_psb(&self) -> Option<u64> {
        self.last_psb.map(|p| p as u64)
    }

    /// The first PSB at or after `from` whose 8-byte-aligned pattern
    /// libipt's search finds (`pt_sync_forward`).
    fn find_psb(&self, from: usize) -> Result<usize, PtError> {
        let end = self.buf.len();
        // Align as the buffer's address is aligned.
        let mut pos = from + (8 - (from + self.misalign) % 8) % 8;
        loop {
            let cur = pos;
            pos += 8;
            if end < pos {
                return Err(PtError::EOS);
            }
            let w = &self.buf[cur..cur + 8];
            if !(w == [0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82]
                || w == [0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02])
            {
                continue;
            }
            // pt_find_psb: go to the end of the pattern, back one PSB.
            let mut p = if self.buf[cur] != 0x02 { cur + 1 } else { cur };
            while p + 1 < end && self.buf[p] == 0x02 && self.buf[p + 1] == 0x82 {
                p += 2;
            }
            let Some(start) = p.checked_sub(16) else {
                continue;
            };
            if !packet::is_psb(self.buf, start) {
                continue;
            }
            if start < from {
                continue;
            }
            return Ok(start);
        }
    }

    pub fn sync_forward(&mut self) -> Result<(), Fail> {
        self.reset();
        let mut pos = self.pos.unwrap_or(0);
        if Some(pos) == self.sync {
            pos += 16;
        }
        pos -= pos.min(15);
        let sync = self.find_psb(pos).map_err(Fail::Pt)?;
        self.sync = Some(sync);
        self.pos = Some(sync);
        self.start()
    }

    pub fn sync_set(&mut self, offset: u64) -> Result<(), Fail> {
        self.reset();
        let pos = usize::try_from(offset).unwrap_or(usize::MAX);
        if pos > self.buf.len() {
            return Err(Fail::Pt(PtError::EOS));
        }
        self.sync = Some(pos);
        self.pos = Some(pos);
        self.start()
    }

    fn start(&mut self) -> Result<(), Fail> {
        self.status = Ok(());
        self.fetch_packet();
        match self.packet {
            Some((Packet::Psb, _)) => self.decode_psb().map(|_| ()),
            None => Err(Fail::Pt(match self.status {
                Err(e) => e,
                Ok(()) => PtError::INTERNAL,
            })),
            Some(_) => Err(Fail::Pt(PtError::NOSYNC)),
        }
    }

    /// Reads the next packet, past PADs; an error is kept for later.
    #[inline(always)]
    fn fetch_packet(&mut self) {
        let Some(pos) = self.pos else {
            self.packet = None;
            self.status = Err(PtError::NOSYNC);
            return;
        };
        // The most common packet, a short TNT (an even opcode but PAD and
        // the 0x02 prefix), written in place: a packet built on the stack
        // and copied in stalls on its partial stores (the profile put half
        // of this function's time on that copy).
        if let Some(&opc) = self.buf.get(pos) {
            if opc & 1 == 0 && opc > 2 {
                let payload = opc >> 1;
                let size = 7 - payload.leading_zeros() as u8;
                self.pos = Some(pos + 1);
                self.packet = Some((
                    Packet::Tnt {
                        bits: u64::from(payload & !(1u8 << size)),
                        size,
                    },
                    1,
                ));
                return;
            }
        }
        // The next most common, a TIP, likewise.
        if let Some((p, n)) = packet::tip_at(self.buf, pos) {
            self.pos = Some(pos + n);
            self.packet = Some((Packet::Tip(p), n));
            return;
        }
        self.fetch_packet_slow(pos);
    }

    /// [`Self::fetch_packet`] for the other packets, from `pos`.
    #[inline(never)]
    fn fetch_packet_slow(&mut self, mut pos: usize) {
        loop {
            match packet::decode_known(self.buf, pos, self.errata.skd007, self.errata.skz84) {
                Ok((p, n)) => {
                    pos += n;
                    self.pos = Some(pos);
                    self.packet = Some((p, packet::packet_size(&p, n)));
                    if !matches!(p, Packet::Pad) {
                        return;
                    }
                }
                Err(e) => {
                    self.packet = None;
                    self.status = Err(e);
                    return;
                }
            }
        }
    }

    #[inline]
    fn event_time(&self, ev: &mut Ev) {
        let (tsc, have) = self.time.query();
        ev.tsc = tsc;
        ev.lost_mtc = self.time.lost_mtc;
        ev.lost_cyc = self.time.lost_cyc;
        ev.has_tsc = have;
    }

    /// The event's IP from the last IP, or suppressed.
    fn event_ip(&self, ev: &mut Ev) -> u64 {
        match self.ip.query() {
            Ok(ip) => ip,
            Err(_) => {
                ev.ip_suppressed = true;
                0
            }
        }
    }

    fn enqueue(&mut self, evb: u8, ev: Ev) -> Result<(), Fail> {
        if self.evq.len() >= EVQ_MAX {
            return Err(Fail::Pt(PtError::NOMEM));
        }
        self.evq.push_back((evb, ev));
        Ok(())
    }

    fn pending(&self, evb: u8) -> bool {
        self.evq.iter().any(|(b, _)| b & evb != 0)
    }

    fn dequeue(&mut self, evb: u8) -> Option<Ev> {
        let i = self.evq.iter().position(|(b, _)| b & evb != 0)?;
        self.evq.remove(i).map(|(_, e)| e)
    }

    fn apply_tsc(&mut self, tsc: u64, header: bool) -> Result<(), Fail> {
        if header {
            ignore_config(self.tcal.header_tsc(tsc)).map_err(Fail::Pt)?;
        } else {
            self.tcal.update_tsc(tsc);
        }
        self.time.update_tsc(tsc);
        Ok(())
    }

    fn apply_cbr(&mut self, ratio: u8, header: bool) -> Result<(), Fail> {
        let r = if header {
            self.tcal.header_cbr(ratio, &self.freq)
        } else {
            self.tcal.update_cbr(ratio, &self.freq)
        };
        ignore_config(r).map_err(Fail::Pt)?;
        ignore_config(self.time.update_cbr(ratio)).map_err(Fail::Pt)
    }

    fn apply_tma(&mut self, ctc: u16, fc: u16) -> Result<(), Fail> {
        ignore_config(self.time.update_tma(ctc, fc, &self.freq)).map_err(Fail::Pt)
    }

    #[inline]
    fn apply_mtc(&mut self, ctc: u8) -> Result<(), Fail> {
        ignore_config(self.tcal.update_mtc(ctc, &self.freq)).map_err(Fail::Pt)?;
        ignore_config(self.time.update_mtc(ctc, &self.freq)).map_err(Fail::Pt)
    }

    #[inline]
    fn apply_cyc(&mut self, value: u64) -> Result<(), Fail> {
        self.tcal.update_cyc(value);
        let fcr = self.tcal.fcr();
        ignore_config(self.time.update_cyc(value, &self.freq, fcr)).map_err(Fail::Pt)
    }

    /// Whether a TIP.PGE follows in this PSB+ (erratum BDM70).
    fn check_bdm70(&self) -> Result<bool, Fail> {
        let mut pos = self.pos.unwrap_or(0);
        loop {
            match packet::decode_known(self.buf, pos, self.errata.skd007, self.errata.skz84) {
                Err(e) if e == PtError::EOS => return Ok(false),
                Err(e) => return Err(Fail::Pt(e)),
                Ok((p, n)) => {
                    pos += n;
                    match p {
                        Packet::TipPge(_) => return Ok(true),
                        Packet::Pad
                        | Packet::Tsc(_)
                        | Packet::Cbr(_)
                        | Packet::Psbend
                        | Packet::Pip { .. }
                        | Packet::ModeExec { .. }
                        | Packet::ModeTsx { .. }
                        | Packet::Vmcs(_)
                        | Packet::Tma { .. }
                        | Packet::Mtc(_)
                        | Packet::Cyc(_)
                        | Packet::Mnt(_) => {}
                        _ => return Ok(false),
                    }
                }
            }
        }
    }

    /// PSB+: status updates queued for PSBEND.
    fn decode_psb(&mut self) -> Step {
        self.last_psb = self.offset().ok().map(|o| o as usize);
        if !self.evq.is_empty() {
            return Err(Fail::Pt(BAD_CONTEXT));
        }
        self.ip = LastIp::default();
        self.enabled = false;
        let mut head = Ev::new(Kind::Pending);
        head.status_update = true;
        self.enqueue(EVB_PSBEND, head)?;
        loop {
            self.fetch_packet();
            let Some((p, _)) = self.packet else {
                return Err(Fail::Pt(self.status.err().unwrap_or(PtError::INTERNAL)));
            };
            match p {
                Packet::Fup(ip) => {
                    let mut enabled = ip.ipc != 0;
                    if self.errata.bdm70 && self.check_bdm70()? {
                        enabled = false;
                    }
                    self.enabled = enabled;
                    if enabled {
                        self.ip.update(ip).map_err(Fail::Pt)?;
                    }
                }
                Packet::ModeExec { csl, csd, iflag } => {
                    if self.mode_exec_valid {
                        // The flag may be stale unless iflags events are
                        // on (`pt_evt_header_mode`).
                        if self.iflags_events && self.iflag != iflag {
                            return Err(Fail::Pt(BAD_STATUS_UPDATE));
                        }
                        if self.csd != csd || self.csl != csl {
                            return Err(Fail::Pt(BAD_STATUS_UPDATE));
                        }
                    } else {
                        self.mode_exec_valid = true;
                        self.iflag = iflag;
                        self.csd = csd;
                        self.csl = csl;
                    }
                    let mut ev = Ev::new(Kind::ExecMode {
                        ip: 0,
                        mode: exec_mode(csl, csd),
                    });
                    ev.status_update = true;
                    self.enqueue(EVB_PSBEND, ev)?;
                    if self.iflags_events {
                        let mut ev = Ev::new(Kind::Iflags { ip: 0, iflag });
                        ev.status_update = true;
                        self.enqueue(EVB_PSBEND, ev)?;
                    }
                }
                Packet::ModeTsx { intx, abrt } => {
                    let mut ev = Ev::new(Kind::Tsx {
                        ip: 0,
                        speculative: intx,
                        aborted: abrt,
                    });
                    ev.status_update = true;
                    self.enqueue(EVB_PSBEND, ev)?;
                }
                Packet::Pip { cr3, nr } => {
                    let mut ev = Ev::new(Kind::AsyncPaging {
                        cr3,
                        non_root: nr,
                        ip: 0,
                    });
                    ev.status_update = true;
                    self.enqueue(EVB_PSBEND, ev)?;
                }
                Packet::Vmcs(base) => {
                    let mut ev = Ev::new(Kind::AsyncVmcs { base, ip: 0 });
                    ev.status_update = true;
                    self.enqueue(EVB_PSBEND, ev)?;
                }
                Packet::Mnt(_) => self.enqueue(EVB_PSBEND, Ev::new(Kind::Mnt))?,
                Packet::Tsc(t) => self.apply_tsc(t, true)?,
                Packet::Cbr(r) => {
                    self.apply_cbr(r, true)?;
                    let mut ev = Ev::new(Kind::Cbr { ratio: r });
                    ev.status_update = true;
                    self.enqueue(EVB_PSBEND, ev)?;
                }
                Packet::Tma { ctc, fc } => self.apply_tma(ctc, fc)?,
                Packet::Mtc(c) => self.apply_mtc(c)?,
                Packet::Cyc(v) => self.apply_cyc(v)?,
                Packet::Psbend => {
                    let enabled = self.enabled;
                    let head = &mut self.evq[0].1;
                    if enabled {
                        head.kind = Kind::Enabled {
                            ip: 0,
                            resumed: false,
                        };
                    } else {
                        head.kind = Kind::Disabled { ip: 0 };
                        head.ip_suppressed = true;
                    }
                    return Ok(true);
                }
                Packet::Ovf => {
                    if self.enabled {
                        self.evq[0].1.kind = Kind::Enabled {
                            ip: 0,
                            resumed: false,
                        };
                    } else {
                        self.evq.pop_front();
                    }
                    return Ok(true);
                }
                // SKZ84's corrupt TMA (`pt_evt_decode_psb` takes the
                // decoder's status, which is fine).
                Packet::Pad | Packet::Invalid => {}
                _ => return Err(Fail::Pt(BAD_CONTEXT)),
            }
        }
    }

    fn decode_psbend(&mut self) -> Step {
        let Some(mut ev) = self.dequeue(EVB_PSBEND) else {
            return Ok(true);
        };
        match &mut ev.kind {
            Kind::Enabled { .. }
            | Kind::ExecMode { .. }
            | Kind::Iflags { .. }
            | Kind::Tsx { .. }
            | Kind::AsyncPaging { .. }
            | Kind::AsyncVmcs { .. } => {
                let ip = self.event_ip(&mut ev);
                ev.kind.set_ip(ip);
            }
            Kind::Disabled { .. } | Kind::Cbr { .. } | Kind::Mnt => {}
            _ => return Err(Fail::Pt(BAD_CONTEXT)),
        }
        self.event_time(&mut ev);
        self.event = Some(ev);
        Ok(false)
    }

    fn decode_fup(&mut self, p: IpPayload) -> Step {
        self.ip.update(p).map_err(Fail::Pt)?;
        if self.pending(EVB_FUP_BOUND) {
            self.bound = true;
        }
        let Some(mut ev) = self.dequeue(EVB_FUP | EVB_FUP_BOUND) else {
            if self.bound {
                return Ok(true);
            }
            let from = self.ip.query().map_err(Fail::Pt)?;
            self.enqueue(EVB_TIP, Ev::new(Kind::AsyncBranch { from, to: 0 }))?;
            return Ok(true);
        };
        match ev.kind {
            Kind::ExecMode { .. } | Kind::Iflags { .. } => {
                self.event_time(&mut ev);
                let ip = self.event_ip(&mut ev);
                ev.kind.set_ip(ip);
                self.event = Some(ev);
                Ok(false)
            }
            Kind::Tsx {
                speculative,
                aborted,
                ..
            } => {
                self.event_time(&mut ev);
                let ip = self.event_ip(&mut ev);
                ev.kind = Kind::Tsx {
                    ip,
                    speculative,
                    aborted,
                };
                self.event = Some(ev);
                Ok(false)
            }
            Kind::Overflow { .. } => {
                let ip = self.event_ip(&mut ev);
                ev.kind = Kind::Overflow { ip };
                self.enabled = true;
                self.event = Some(ev);
                Ok(false)
            }
            Kind::Ptwrite { .. }
            | Kind::Exstop { .. }
            | Kind::Mwait { .. }
            | Kind::Interrupt { .. }
            | Kind::Iret { .. }
            | Kind::Smi { .. }
            | Kind::Init { .. }
            | Kind::VmEntry { .. }
            | Kind::VmExit { .. }
            | Kind::Shutdown { .. }
            | Kind::Uintr { .. }
            | Kind::Uiret { .. } => {
                self.event_time(&mut ev);
                let ip = self.event_ip(&mut ev);
                ev.kind.set_ip(ip);
                self.event = Some(ev);
                Ok(false)
            }
            // Queued with their IP suppressed: nothing to take from it.
            Kind::Rsm | Kind::Sipi { .. } => {
                self.event_time(&mut ev);
                if !ev.ip_suppressed {
                    return Err(Fail::Pt(PtError::INTERNAL));
                }
                self.event = Some(ev);
                Ok(false)
            }
            Kind::Ignore => self.decode_fup(p),
            Kind::Trig {
                trbv, mult, icnt, ..
            } => {
                self.event_time(&mut ev);
                let ip = self.event_ip(&mut ev);
                ev.kind = Kind::Trig {
                    ip,
                    icnt,
                    trbv,
                    mult,
                    anchored: !ev.ip_suppressed,
                };
                self.event = Some(ev);
                Ok(false)
            }
            _ => Err(Fail::Pt(BAD_CONTEXT)),
        }
    }

    fn decode_tip(&mut self, p: IpPayload) -> Step {
        if !self.enabled {
            return Err(Fail::Pt(BAD_CONTEXT));
        }
        self.ip.update(p).map_err(Fail::Pt)?;
        if !self.bound {
            self.bound = true;
            let async_at = self
                .evq
                .iter()
                .position(|(b, e)| b & EVB_TIP != 0 && matches!(e.kind, Kind::AsyncBranch { .. }));
            if let Some(i) = async_at {
                if i != 0 {
                    // Any event queued before it (an EVD waiting for its
                    // CFE, an MWAIT for its EXSTOP, an event bound to the
                    // TIP): libipt's `pt_evt_decode_tip_event` takes the
                    // branch out of the middle of its queue, then swaps it
                    // with what was moved into the slot it found it in,
                    // and hands out the wrong event or an internal error
                    // (2.1.2). What libipt means to do, and does with the
                    // branch at the queue's head: hand the branch out
                    // first, with the TIP's IP, the other events staying
                    // queued in their order for what they wait for. So
                    // does this decoder, and says that libipt differs
                    // from here (docs/decoding.md).
                    self.libipt_differs
                        .get_or_insert(ASYNC_BRANCH_BEHIND_EVENTS);
                }
                let (_, mut ev) = self.evq.remove(i).expect("found above");
                let to = self.event_ip(&mut ev);
                if let Kind::AsyncBranch { from, .. } = ev.kind {
                    ev.kind = Kind::AsyncBranch { from, to };
                }
                self.event_time(&mut ev);
                self.event = Some(ev);
                return Ok(false);
            }
            let mut ev = Ev::new(Kind::Tip { ip: 0 });
            let ip = self.event_ip(&mut ev);
            ev.kind = Kind::Tip { ip };
            self.event_time(&mut ev);
            self.event = Some(ev);
            return Ok(false);
        }
        let Some(mut ev) = self.dequeue(EVB_TIP) else {
            return Ok(true);
        };
        match ev.kind {
            Kind::ExecMode { .. }
            | Kind::Iflags { .. }
            | Kind::AsyncPaging { .. }
            | Kind::AsyncVmcs { .. } => {
                let ip = self.event_ip(&mut ev);
                ev.kind.set_ip(ip);
            }
            Kind::Ignore => return self.decode_tip(p),
            Kind::AsyncBranch { .. } => return Err(Fail::Pt(PtError::INTERNAL)),
            _ => return Err(Fail::Pt(BAD_CONTEXT)),
        }
        self.event_time(&mut ev);
        self.event = Some(ev);
        Ok(false)
    }

    fn decode_tip_pge(&mut self, p: IpPayload) -> Step {
        self.ip.update(p).map_err(Fail::Pt)?;
        if !self.bound {
            let mut ev = Ev::new(Kind::Enabled {
                ip: 0,
                resumed: false,
            });
            let ip = self.event_ip(&mut ev);
            ev.kind = Kind::Enabled { ip, resumed: false };
            self.enabled = true;
            self.bound = true;
            self.event_time(&mut ev);
            self.event = Some(ev);
            return Ok(false);
        }
        let Some(mut ev) = self.dequeue(EVB_TIP) else {
            return Ok(true);
        };
        match ev.kind {
            Kind::ExecMode { .. } | Kind::Iflags { .. } => {
                let ip = self.event_ip(&mut ev);
                ev.kind.set_ip(ip);
            }
            Kind::Ignore => return self.decode_tip_pge(p),
            _ => return Err(Fail::Pt(BAD_CONTEXT)),
        }
        self.event_time(&mut ev);
        self.event = Some(ev);
        Ok(false)
    }

    fn decode_tip_pgd(&mut self, p: IpPayload) -> Step {
        self.ip.update(p).map_err(Fail::Pt)?;
        let Some(mut ev) = self.dequeue(EVB_TIP) else {
            if self.bound {
                return Ok(true);
            }
            let mut ev = Ev::new(Kind::Disabled { ip: 0 });
            let ip = self.event_ip(&mut ev);
            ev.kind = Kind::Disabled { ip };
            self.event_time(&mut ev);
            self.enabled = false;
            self.event = Some(ev);
            self.fetch_packet();
            return Ok(false);
        };
        match ev.kind {
            Kind::AsyncBranch { from, .. } => {
                let mut d = Ev::new(Kind::AsyncDisabled { at: from, ip: 0 });
                let ip = self.event_ip(&mut d);
                ev.kind = Kind::AsyncDisabled { at: from, ip };
                ev.ip_suppressed = d.ip_suppressed;
                self.enabled = false;
                self.bound = true;
            }
            // Ordered after the asynchronous branch turned into an
            // asynchronous disable just above.
            Kind::AsyncPaging { .. } | Kind::AsyncVmcs { .. } if !self.bound => {
                return Err(Fail::Pt(PtError::INTERNAL))
            }
            // Tracing is disabled when they apply: no IP to give them.
            Kind::ExecMode { .. } | Kind::AsyncPaging { .. } | Kind::AsyncVmcs { .. } => {
                ev.ip_suppressed = true
            }
            _ => return Err(Fail::Pt(BAD_CONTEXT)),
        }
        self.event_time(&mut ev);
        self.event = Some(ev);
        Ok(false)
    }

    /// How many bytes on the FUP after an OVF ends (`Ok(None)`: tracing
    /// resumed disabled; `Err`: libipt's error, or the context an erratum
    /// workaround would look at), as `pt_evt_find_ovf_fup`.
    fn find_ovf_fup(&self) -> Result<Option<usize>, PtError> {
        let mut pos = self.pos.unwrap_or(0);
        let start = pos;
        loop {
            let (p, n) =
                packet::decode_known(self.buf, pos, self.errata.skd007, self.errata.skz84)?;
            pos += n;
            match p {
                Packet::Fup(_) => return Ok(Some(pos - start)),
                Packet::Pad
                | Packet::Mnt(_)
                | Packet::Cbr(_)
                | Packet::Tsc(_)
                | Packet::Tma { .. }
                | Packet::Mtc(_)
                | Packet::Cyc(_)
                | Packet::Invalid => {}
                Packet::Psbend | Packet::Tip(_) | Packet::TipPgd(_) | Packet::Tnt { .. } => {
                    return Err(BAD_CONTEXT)
                }
                _ => return Ok(None),
            }
        }
    }

    /// A timing packet met while scanning past an overflow, applied to
    /// the decoder's time as outside PSB+ (`pt_evt_apply_*`); other
    /// packets change nothing.
    fn apply_timing(&mut self, p: &Packet) -> Result<(), Fail> {
        match *p {
            Packet::Tsc(t) => self.apply_tsc(t, false),
            Packet::Cbr(r) => self.apply_cbr(r, false),
            Packet::Tma { ctc, fc } => self.apply_tma(ctc, fc),
            Packet::Mtc(c) => self.apply_mtc(c),
            Packet::Cyc(v) => self.apply_cyc(v),
            _ => Ok(()),
        }
    }

    /// The FUP of the PSB+ whose PSB ends at `pos`, if it has one
    /// (`pt_evt_find_header_fup`): `Ok(None)` at its PSBEND or an OVF.
    fn find_header_fup(&self, mut pos: usize) -> Result<Option<IpPayload>, PtError> {
        loop {
            let (p, n) =
                packet::decode_known(self.buf, pos, self.errata.skd007, self.errata.skz84)?;
            pos += n;
            match p {
                Packet::Fup(ip) => return Ok(Some(ip)),
                Packet::ModeExec { .. }
                | Packet::ModeTsx { .. }
                | Packet::Pip { .. }
                | Packet::Vmcs(_)
                | Packet::Mnt(_)
                | Packet::Tsc(_)
                | Packet::Cbr(_)
                | Packet::Tma { .. }
                | Packet::Mtc(_)
                | Packet::Cyc(_)
                | Packet::Pad
                | Packet::Invalid => {}
                Packet::Psbend | Packet::Ovf => return Ok(None),
                _ => return Err(BAD_CONTEXT),
            }
        }
    }

    /// The overflow event of a recovery, with the time the decoder had at
    /// the OVF (`time`; the decoder's own is the scan's by now).
    /// Its IP is suppressed until the caller sets one.
    fn overflow_at(&mut self, time: Time) -> Ev {
        let mut ev = Ev::new(Kind::Overflow { ip: 0 });
        ev.ip_suppressed = true;
        let scanned = std::mem::replace(&mut self.time, time);
        self.event_time(&mut ev);
        self.time = scanned;
        ev
    }

    /// Recovery from an overflow at `ip` (`pt_evt_recover_ovf_at_ip`):
    /// the overflow event resumes there, tracing is enabled, and decoding
    /// goes on at packet `p` (of `size` bytes, ending at `pos`), which the
    /// next call decodes.
    fn recover_ovf_at_ip(
        &mut self,
        time: Time,
        (p, size, pos): (Packet, usize, usize),
        ip: IpPayload,
    ) -> Result<(), Fail> {
        self.ip.update(ip).map_err(Fail::Pt)?;
        let mut ev = self.overflow_at(time);
        ev.ip_suppressed = false;
        let at = self.event_ip(&mut ev);
        ev.kind = Kind::Overflow { ip: at };
        self.event = Some(ev);
        self.pos = Some(pos);
        self.packet = Some((p, size));
        self.enabled = true;
        Ok(())
    }

    /// Recovery from an overflow with tracing disabled after packet `p`
    /// (a TIP.PGD; `pt_evt_recover_ovf_disabled`, then the next packet).
    fn recover_ovf_disabled(&mut self, time: Time, (p, size, pos): (Packet, usize, usize)) {
        self.event = Some(self.overflow_at(time));
        self.pos = Some(pos);
        self.packet = Some((p, size));
        self.fetch_packet();
    }

    /// Erratum SKD010 (Skylake, Kaby Lake and their kin: "Intel PT FUP May
    /// Be Dropped After OVF"): an OVF without a FUP normally means the
    /// overflow resolved while tracing was disabled, but the FUP may have
    /// been dropped. As `pt_evt_handle_skd010`, the packets ahead say
    /// which: a TIP.PGE, TNT, OVF, TraceStop or a packet bound to a FUP
    /// leaves it a plain overflow (`Ok(false)`); a TIP.PGD resumes
    /// disabled after it; a FUP (with a MODE.TSX before it bound to it),
    /// a TIP, or a PSB+ with a FUP resumes enabled at that IP, the
    /// packets between skipped but for time. `Ok(true)`: the overflow
    /// event is ready. Cold: real Skylake traces meet it at every OVF,
    /// which is rare next to the packets around it.
    #[cold]
    #[inline(never)]
    fn handle_skd010(&mut self) -> Result<bool, Fail> {
        let (time, tcal) = (self.time, self.tcal);
        let mut pos = self.pos.unwrap_or(0);
        let mut tsx = None;
        let handled = loop {
            let (p, n) =
                match packet::decode_known(self.buf, pos, self.errata.skd007, self.errata.skz84) {
                    Ok(x) => x,
                    Err(e) if e == PtError::EOS => break Ok(false),
                    Err(e) => break Err(Fail::Pt(e)),
                };
            pos += n;
            let here = (p, packet::packet_size(&p, n), pos);
            match p {
                Packet::TipPge(_)
                | Packet::Tnt { .. }
                | Packet::Ovf
                | Packet::Stop
                | Packet::Mwait { .. }
                | Packet::Exstop { ip: true }
                | Packet::Ptw { ip: true, .. }
                | Packet::Cfe { ip: true, .. }
                | Packet::Invalid => break Ok(false),
                Packet::TipPgd(_) => {
                    self.recover_ovf_disabled(time, here);
                    break Ok(true);
                }
                // A second MODE.TSX: tracing is disabled.
                Packet::ModeTsx { .. } if tsx.is_some() => break Ok(false),
                Packet::ModeTsx { intx, abrt } => tsx = Some((intx, abrt)),
                Packet::Fup(ip) => {
                    if let Some((speculative, aborted)) = tsx {
                        let kind = Kind::Tsx {
                            ip: 0,
                            speculative,
                            aborted,
                        };
                        self.enqueue(EVB_FUP_BOUND, Ev::new(kind))?;
                    }
                    // The FUP is decoded next, for the MODE.TSX or as the
                    // start of an asynchronous branch.
                    break self.recover_ovf_at_ip(time, here, ip).map(|()| true);
                }
                Packet::Tip(ip) => {
                    let r = self.recover_ovf_at_ip(time, here, ip);
                    if r.is_ok() {
                        self.fetch_packet();
                    }
                    break r.map(|()| true);
                }
                Packet::Psb => match self.find_header_fup(pos) {
                    Err(e) if e == PtError::EOS => break Ok(false),
                    Err(e) => break Err(Fail::Pt(e)),
                    Ok(None) => break Ok(false),
                    // The PSB+ is decoded next, as after any PSB.
                    Ok(Some(ip)) => break self.recover_ovf_at_ip(time, here, ip).map(|()| true),
                },
                Packet::Psbend => break Err(Fail::Pt(BAD_CONTEXT)),
                // MODE.Exec, PIP and VMCS are dropped: more such changes
                // were lost in the overflow anyway (libipt's reasoning).
                _ => {
                    if let Err(e) = self.apply_timing(&p) {
                        break Err(e);
                    }
                }
            }
        };
        if handled != Ok(true) {
            self.time = time;
            self.tcal = tcal;
        }
        handled
    }

    /// Erratum APL11 (Apollo Lake and its kin: "Intel PT OVF May Be
    /// Followed By An Unexpected TIP.PGD"): after an OVF whose search for
    /// a FUP met a TIP.PGD (or TIP, TNT, PSBEND), as
    /// `pt_evt_handle_apl11`: a TIP.PGD met before any packet that says
    /// tracing is disabled (or one it leaves to the decode to diagnose)
    /// is the extra one; tracing resumes disabled after it, time kept
    /// across the timing packets before it. `Ok(true)`: the overflow event
    /// is ready; an error (the end of the trace too) ends the decode
    /// there, as in libipt.
    #[cold]
    #[inline(never)]
    fn handle_apl11(&mut self) -> Result<bool, Fail> {
        let (time, tcal) = (self.time, self.tcal);
        let mut pos = self.pos.unwrap_or(0);
        let handled = loop {
            let (p, n) =
                match packet::decode_known(self.buf, pos, self.errata.skd007, self.errata.skz84) {
                    Ok(x) => x,
                    Err(e) => break Err(Fail::Pt(e)),
                };
            pos += n;
            match p {
                Packet::TipPgd(_) => {
                    self.recover_ovf_disabled(time, (p, packet::packet_size(&p, n), pos));
                    break Ok(true);
                }
                Packet::Pad | Packet::Mnt(_) | Packet::Cfe { .. } | Packet::Evd { .. } => {}
                Packet::Tsc(_)
                | Packet::Cbr(_)
                | Packet::Tma { .. }
                | Packet::Mtc(_)
                | Packet::Cyc(_) => {
                    if let Err(e) = self.apply_timing(&p) {
                        break Err(e);
                    }
                }
                // The erratum does not apply, or the decode diagnoses it.
                _ => break Ok(false),
            }
        };
        if handled != Ok(true) {
            self.time = time;
            self.tcal = tcal;
        }
        handled
    }

    /// Erratum APL12 (Apollo Lake and its kin: "Intel PT OVF Packet May Be
    /// Followed by An Unexpected FUP"): the FUP after an OVF (ending `n`
    /// bytes ahead) may come though the overflow resolved with tracing
    /// disabled. As `pt_evt_handle_apl12`, the packets after the FUP say
    /// which: TNT, TIP or TIP.PGD (or a PSB+ with a FUP) are traced code,
    /// the FUP is real; a TIP.PGE, TraceStop or a PSB+ without FUP mean
    /// tracing was disabled: the overflow resumes disabled after the FUP,
    /// the timing packets before it applied (a CBR's event dropped).
    /// `Ok(true)`: the overflow event is ready.
    #[cold]
    #[inline(never)]
    fn handle_apl12(&mut self, n: usize) -> Result<bool, Fail> {
        let fup_end = self.pos.unwrap_or(0) + n;
        let mut pos = fup_end;
        loop {
            let (p, n) =
                match packet::decode_known(self.buf, pos, self.errata.skd007, self.errata.skz84) {
                    Ok(x) => x,
                    Err(e) if e == PtError::EOS => return Ok(false),
                    Err(e) => return Err(Fail::Pt(e)),
                };
            pos += n;
            match p {
                Packet::Tnt { .. } | Packet::Tip(_) | Packet::TipPgd(_) => return Ok(false),
                Packet::Psb => match self.find_header_fup(pos) {
                    Ok(None) => break,
                    Ok(Some(_)) => return Ok(false),
                    Err(e) if e == PtError::EOS => return Ok(false),
                    Err(e) => return Err(Fail::Pt(e)),
                },
                Packet::Stop | Packet::TipPge(_) => break,
                Packet::Psbend | Packet::Ovf | Packet::Invalid => return Ok(false),
                _ => {}
            }
        }
        // `pt_evt_recover_ovf_at_offset`: on to the FUP, keeping time.
        // The decoder itself moves on, packet by packet (libipt reads them
        // with the decoder's own packet decoder, not a copy): a timing
        // packet that fails (a CBR of 0, say) is where the error is, and
        // its offset is the error's.
        let mut pos = self.pos.unwrap_or(0);
        loop {
            let (p, n) = packet::decode_known(self.buf, pos, self.errata.skd007, self.errata.skz84)
                .map_err(Fail::Pt)?;
            pos += n;
            self.pos = Some(pos);
            self.packet = Some((p, packet::packet_size(&p, n)));
            if pos >= fup_end {
                if pos > fup_end {
                    return Err(Fail::Pt(PtError::INTERNAL));
                }
                break;
            }
            if p == Packet::Invalid {
                return Err(Fail::Pt(PtError::INTERNAL));
            }
            self.apply_timing(&p)?;
        }
        self.standalone_suppressed(Kind::Overflow { ip: 0 });
        Ok(true)
    }

    /// OVF: the state is reset but for time; tracing resumes at the next
    /// FUP's IP, or disabled.
    fn decode_ovf(&mut self) -> Step {
        if !self.decode_psbend()? {
            return Ok(false);
        }
        let time = self.time;
        let tcal = self.tcal;
        // libipt's reset marks the packet invalid but keeps its size: the
        // offset stays the OVF's.
        let packet = self.packet;
        self.reset();
        self.packet = packet;
        self.time = time;
        if self.keep_tcal {
            self.tcal = tcal;
            self.tcal.update_ovf();
        }
        match self.find_ovf_fup() {
            Ok(Some(n)) => {
                if self.errata.apl12 && self.handle_apl12(n)? {
                    return Ok(false);
                }
                let mut ev = Ev::new(Kind::Overflow { ip: 0 });
                self.event_time(&mut ev);
                self.enqueue(EVB_FUP_BOUND, ev)?;
                Ok(true)
            }
            r => {
                if self.errata.skd010 && self.handle_skd010()? {
                    return Ok(false);
                }
                if self.errata.apl11 && r == Err(BAD_CONTEXT) && self.handle_apl11()? {
                    return Ok(false);
                }
                if let Err(e) = r {
                    if e != PtError::EOS {
                        return Err(Fail::Pt(e));
                    }
                }
                self.standalone_suppressed(Kind::Overflow { ip: 0 });
                Ok(false)
            }
        }
    }

    /// PIP outside PSB+: it binds to the TIP of an asynchronous branch
    /// whose FUP came (the branch is handed out first), else it stands
    /// alone.
    fn decode_pip(&mut self, cr3: u64, non_root: bool) -> Step {
        let in_async = self
            .evq
            .iter()
            .any(|(b, e)| b & EVB_TIP != 0 && matches!(e.kind, Kind::AsyncBranch { .. }));
        if in_async {
            let kind = Kind::AsyncPaging {
                cr3,
                non_root,
                ip: 0,
            };
            self.enqueue(EVB_TIP, Ev::new(kind))?;
            return Ok(true);
        }
        self.standalone(Kind::Paging { cr3, non_root });
        Ok(false)
    }

    /// VMCS outside PSB+: with a PIP of the same asynchronous branch it
    /// goes before that PIP's event; else like PIP.
    fn decode_vmcs(&mut self, base: u64) -> Step {
        let tip_bound = |e: &(u8, Ev), paging: bool| {
            e.0 & EVB_TIP != 0
                && if paging {
                    matches!(e.1.kind, Kind::AsyncPaging { .. })
                } else {
                    matches!(e.1.kind, Kind::AsyncBranch { .. })
                }
        };
        if let Some(i) = self.evq.iter().position(|e| tip_bound(e, true)) {
            // libipt turns the paging event's slot into the VMCS event
            // and queues the paging event again behind.
            let paging = self.evq[i].1;
            self.enqueue(EVB_TIP, paging)?;
            self.evq[i].1.kind = Kind::AsyncVmcs { base, ip: 0 };
            return Ok(true);
        }
        if self.evq.iter().any(|e| tip_bound(e, false)) {
            self.enqueue(EVB_TIP, Ev::new(Kind::AsyncVmcs { base, ip: 0 }))?;
            return Ok(true);
        }
        self.standalone(Kind::Vmcs { base });
        Ok(false)
    }

    /// PTW: with its IP bit it waits for the FUP that gives the PTWRITE
    /// instruction's IP; without, it stands alone with the IP suppressed.
    fn decode_ptw(&mut self, plc: u8, with_ip: bool, payload: u64) -> Step {
        let size = match plc {
            0 => 4,
            1 => 8,
            _ => return Err(Fail::Pt(packet::BAD_PACKET)),
        };
        let kind = Kind::Ptwrite {
            ip: 0,
            size,
            payload,
        };
        if with_ip {
            self.enqueue(EVB_FUP_BOUND, Ev::new(kind))?;
            return Ok(true);
        }
        self.standalone_suppressed(kind);
        Ok(false)
    }

    #[inline]
    fn standalone(&mut self, kind: Kind) {
        let mut ev = Ev::new(kind);
        self.event_time(&mut ev);
        self.event = Some(ev);
        self.fetch_packet();
    }

    /// [`Self::standalone`] with the IP suppressed.
    fn standalone_suppressed(&mut self, kind: Kind) {
        let mut ev = Ev::new(kind);
        ev.ip_suppressed = true;
        self.event_time(&mut ev);
        self.event = Some(ev);
        self.fetch_packet();
    }

    /// EXSTOP (`pt_evt_decode_exstop`): an MWAIT before it binds to the
    /// same FUP when EXSTOP.IP is set, else both are standalone, the MWAIT
    /// handed out first (this packet is decoded again for the EXSTOP).
    fn decode_exstop(&mut self, has_ip: bool) -> Step {
        if let Some(mut ev) = self.dequeue(EVB_EXSTOP) {
            if !matches!(ev.kind, Kind::Mwait { .. }) {
                return Err(Fail::Pt(PtError::INTERNAL));
            }
            if !has_ip {
                ev.kind.set_ip(0);
                ev.ip_suppressed = true;
                self.event_time(&mut ev);
                self.event = Some(ev);
                return Ok(false);
            }
            self.enqueue(EVB_FUP_BOUND, ev)?;
        }
        if has_ip {
            self.enqueue(EVB_FUP_BOUND, Ev::new(Kind::Exstop { ip: 0 }))?;
            return Ok(true);
        }
        self.standalone_suppressed(Kind::Exstop { ip: 0 });
        Ok(false)
    }

    /// CFE (`pt_evt_decode_cfe`): an event trace event. An interrupt or
    /// VM exit completes what an EVD before it queued (a page fault's
    /// address; the exit's qualification and reason); any other kind
    /// after an EVD is a context error. With its IP bit the event waits
    /// for the FUP that gives its IP; without, an interrupt, SMI, INIT,
    /// VM exit, user interrupt, RSM or SIPI waits for the next FUP while
    /// tracing is on (its IP suppressed for RSM and SIPI, which never
    /// have one), and every kind stands alone with its IP suppressed
    /// while tracing is off (always, for an IRET, VM entry, shutdown or
    /// user-interrupt return: they then bind to their instruction). An
    /// unknown type is ignored, and with its IP bit the FUP it takes too.
    fn decode_cfe(&mut self, ty: u8, vector: u8, with_ip: bool) -> Step {
        let queued = self.dequeue(EVB_CFE).map(|e| e.kind);
        let kind = match ty {
            cfe::INTR => match queued {
                None => Kind::Interrupt {
                    ip: 0,
                    vector,
                    has_cr2: false,
                    cr2: 0,
                },
                Some(Kind::Interrupt { has_cr2, cr2, .. }) => Kind::Interrupt {
                    ip: 0,
                    vector,
                    has_cr2,
                    cr2,
                },
                Some(_) => return Err(Fail::Pt(BAD_CONTEXT)),
            },
            cfe::VMEXIT | cfe::VMEXIT_INTR => {
                let mut k = match queued {
                    None => Kind::VmExit {
                        ip: 0,
                        vector: 0,
                        has: 0,
                        qualification: 0,
                        reason: 0,
                    },
                    Some(k @ Kind::VmExit { .. }) => k,
                    Some(_) => return Err(Fail::Pt(BAD_CONTEXT)),
                };
                if let (cfe::VMEXIT_INTR, Kind::VmExit { vector: v, has, .. }) = (ty, &mut k) {
                    *v = vector;
                    *has |= vmexit_has::VECTOR;
                }
                k
            }
            _ if queued.is_some() => {
                // An EVD queues only an interrupt or a VM exit.
                let known = matches!(ty, cfe::IRET..=cfe::SHUTDOWN | cfe::UINTR | cfe::UIRET);
                return Err(Fail::Pt(if known {
                    BAD_CONTEXT
                } else {
                    PtError::INTERNAL
                }));
            }
            cfe::IRET => Kind::Iret { ip: 0 },
            cfe::SMI => Kind::Smi { ip: 0 },
            cfe::RSM => Kind::Rsm,
            cfe::SIPI => Kind::Sipi { vector },
            cfe::INIT => Kind::Init { ip: 0 },
            cfe::VMENTRY => Kind::VmEntry { ip: 0 },
            cfe::SHUTDOWN => Kind::Shutdown { ip: 0 },
            cfe::UINTR => Kind::Uintr { ip: 0, vector },
            cfe::UIRET => Kind::Uiret { ip: 0 },
            _ => {
                if with_ip {
                    self.enqueue(EVB_FUP_BOUND, Ev::new(Kind::Ignore))?;
                }
                return Ok(true);
            }
        };
        let never_ip = matches!(kind, Kind::Rsm | Kind::Sipi { .. });
        if with_ip {
            if never_ip {
                return Err(Fail::Pt(packet::BAD_PACKET));
            }
            self.enqueue(EVB_FUP_BOUND, Ev::new(kind))?;
            return Ok(true);
        }
        let waits = !matches!(
            kind,
            Kind::Iret { .. } | Kind::VmEntry { .. } | Kind::Shutdown { .. } | Kind::Uiret { .. }
        );
        if waits && self.enabled {
            let mut ev = Ev::new(kind);
            ev.ip_suppressed = never_ip;
            self.enqueue(EVB_FUP, ev)?;
            return Ok(true);
        }
        self.standalone_suppressed(kind);
        Ok(false)
    }

    /// EVD (`pt_evt_decode_evd`): data for the CFE that follows it, queued
    /// for it: a page fault's address for an interrupt, a VM exit's
    /// qualification or reason (each once). Unknown types are ignored.
    fn decode_evd(&mut self, ty: u8, payload: u64) -> Step {
        let queued = self.evq.iter().position(|(b, _)| b & EVB_CFE != 0);
        let bit = match ty {
            evd::CR2 => {
                if queued.is_some() {
                    return Err(Fail::Pt(BAD_CONTEXT));
                }
                let kind = Kind::Interrupt {
                    ip: 0,
                    vector: 0,
                    has_cr2: true,
                    cr2: payload,
                };
                self.enqueue(EVB_CFE, Ev::new(kind))?;
                return Ok(true);
            }
            evd::VMXQ => vmexit_has::QUALIFICATION,
            evd::VMXR => vmexit_has::REASON,
            _ => return Ok(true),
        };
        let i = match queued {
            Some(i) => i,
            None => {
                let kind = Kind::VmExit {
                    ip: 0,
                    vector: 0,
                    has: 0,
                    qualification: 0,
                    reason: 0,
                };
                self.enqueue(EVB_CFE, Ev::new(kind))?;
                self.evq.len() - 1
            }
        };
        let Kind::VmExit {
            has,
            qualification,
            reason,
            ..
        } = &mut self.evq[i].1.kind
        else {
            return Err(Fail::Pt(BAD_CONTEXT));
        };
        if *has & bit != 0 {
            return Err(Fail::Pt(BAD_CONTEXT));
        }
        *has |= bit;
        *if bit == vmexit_has::REASON {
            reason
        } else {
            qualification
        } = payload;
        Ok(true)
    }

    /// TRIG (libipt 2.2's `pt_evt_decode_trig`): with its IP bit it
    /// waits for the FUP that gives the IP (an instruction count of 0
    /// required); with an instruction count it stands alone, to be placed
    /// by the block decoder (a count other than 0 while tracing is off is
    /// a bad packet: the IP is precise then); without either it stands
    /// alone with its IP suppressed.
    fn decode_trig(&mut self, with_ip: bool, icntv: bool, mult: bool, trbv: u8, icnt: u16) -> Step {
        let kind = |icnt| Kind::Trig {
            ip: 0,
            icnt,
            trbv,
            mult,
            anchored: false,
        };
        if with_ip {
            if !icntv || icnt != 0 {
                return Err(Fail::Pt(packet::BAD_PACKET));
            }
            self.enqueue(EVB_FUP_BOUND, Ev::new(kind(0)))?;
            return Ok(true);
        }
        if !icntv {
            self.standalone_suppressed(kind(0));
            return Ok(false);
        }
        if icnt != 0 && !self.enabled {
            return Err(Fail::Pt(packet::BAD_PACKET));
        }
        self.standalone(kind(icnt));
        Ok(false)
    }

    #[inline]
    fn decode_packet(&mut self) -> Step {
        let Some((p, _)) = self.packet else {
            return match self.status {
                Err(e) => Err(Fail::Pt(e)),
                Ok(()) => Ok(true),
            };
        };
        match p {
            Packet::Tnt { bits, size } => {
                if !self.enabled {
                    return Err(Fail::Pt(BAD_CONTEXT));
                }
                self.standalone(Kind::Tnt { bits, size });
                Ok(false)
            }
            Packet::Cyc(v) => self.apply_cyc(v).map(|_| true),
            // SKZ84's corrupt TMA, skipped (`pt_evt_decode_packet`).
            Packet::Pad | Packet::Invalid => Ok(true),
            Packet::Fup(ip) => self.decode_fup(ip),
            Packet::Tip(ip) => self.decode_tip(ip),
            Packet::Mtc(c) => self.apply_mtc(c).map(|_| true),
            Packet::Tsc(t) => self.apply_tsc(t, false).map(|_| true),
            Packet::Cbr(r) => {
                self.apply_cbr(r, false)?;
                self.standalone(Kind::Cbr { ratio: r });
                Ok(false)
            }
            Packet::Tma { ctc, fc } => self.apply_tma(ctc, fc).map(|_| true),
            Packet::ModeExec { csl, csd, iflag } => {
                let mut events = 0;
                if !self.mode_exec_valid || self.csl != csl || self.csd != csd {
                    self.csl = csl;
                    self.csd = csd;
                    let kind = Kind::ExecMode {
                        ip: 0,
                        mode: exec_mode(csl, csd),
                    };
                    self.enqueue(EVB_TIP | EVB_FUP_BOUND, Ev::new(kind))?;
                    events += 1;
                }
                if self.iflags_events && (!self.mode_exec_valid || self.iflag != iflag) {
                    self.iflag = iflag;
                    let kind = Kind::Iflags { ip: 0, iflag };
                    self.enqueue(EVB_TIP | EVB_FUP_BOUND, Ev::new(kind))?;
                    events += 1;
                }
                if events == 0 {
                    self.enqueue(EVB_TIP | EVB_FUP_BOUND, Ev::new(Kind::Ignore))?;
                }
                self.mode_exec_valid = true;
                Ok(true)
            }
            Packet::Psb => {
                if self.decode_psb()? {
                    self.decode_packet()
                } else {
                    Ok(false)
                }
            }
            Packet::Psbend => self.decode_psbend(),
            Packet::TipPge(ip) => self.decode_tip_pge(ip),
            Packet::TipPgd(ip) => self.decode_tip_pgd(ip),
            Packet::ModeTsx { intx, abrt } => {
                let kind = Kind::Tsx {
                    ip: 0,
                    speculative: intx,
                    aborted: abrt,
                };
                if self.enabled {
                    let evb = if abrt { EVB_FUP } else { EVB_FUP_BOUND };
                    self.enqueue(evb, Ev::new(kind))?;
                    return Ok(true);
                }
                self.standalone_suppressed(kind);
                Ok(false)
            }
            Packet::Pip { cr3, nr } => self.decode_pip(cr3, nr),
            Packet::Vmcs(base) => self.decode_vmcs(base),
            Packet::Mnt(_) => {
                self.standalone(Kind::Mnt);
                Ok(false)
            }
            Packet::Ovf => self.decode_ovf(),
            Packet::Stop => {
                self.standalone(Kind::Stop);
                Ok(false)
            }
            Packet::Ptw { plc, ip, payload } => self.decode_ptw(plc, ip, payload),
            Packet::Exstop { ip } => self.decode_exstop(ip),
            Packet::Mwait { hints, ext } => {
                let kind = Kind::Mwait { ip: 0, hints, ext };
                self.enqueue(EVB_EXSTOP, Ev::new(kind))?;
                Ok(true)
            }
            Packet::Pwre {
                state,
                sub_state,
                hw,
            } => {
                self.standalone(Kind::Pwre {
                    state,
                    sub_state,
                    hw,
                });
                Ok(false)
            }
            Packet::Pwrx {
                last,
                deepest,
                interrupt,
                store,
                autonomous,
            } => {
                self.standalone(Kind::Pwrx {
                    last,
                    deepest,
                    interrupt,
                    store,
                    autonomous,
                });
                Ok(false)
            }
            Packet::Cfe { ty, vector, ip } => self.decode_cfe(ty, vector, ip),
            Packet::Evd { ty, payload } => self.decode_evd(ty, payload),
            Packet::Trig {
                ip,
                icntv,
                mult,
                trbv,
                icnt,
            } => self.decode_trig(ip, icntv, mult, trbv, icnt),
            Packet::Bbp { .. } | Packet::Bep { .. } => Err(Fail::Pt(packet::BAD_OPC)),
        }
    }

    /// [`Self::next_event`]'s common cases in place, without building
    /// and copying an event through the queue: a TIP whose event was
    /// handed out and no queued event binds to (done with it), then a TNT
    /// or a TIP no queued event binds to. `true` when `ev` is now the next
    /// event; `false` when [`Self::next_event`] has to say (it goes on
    /// from here exactly as it would have).
    #[inline(always)]
    pub fn next_event_fast(&mut self, ev: &mut Ev) -> bool {
        if !self.enabled || self.event.is_some() || !self.evq.is_empty() {
            return false;
        }
        if self.bound {
            // decode_tip's second pass: nothing to dequeue.
            // The first pass applied this TIP's IP already (an update
            // with the same payload changes nothing).
            let Some((Packet::Tip(_), _)) = self.packet else {
                return false;
            };
            self.bound = false;
            self.fetch_packet();
        }
        match self.packet {
            Some((Packet::Tnt { bits, size }, _)) => {
                ev.kind = Kind::Tnt { bits, size };
                ev.ip_suppressed = false;
                ev.status_update = false;
                self.event_time(ev);
                self.fetch_packet();
                true
            }
            Some((Packet::Tip(p), _)) => {
                let mut last = self.ip;
                if last.update(p).is_err() {
                    return false;
                }
                self.ip = last;
                self.bound = true;
                ev.ip_suppressed = false;
                ev.status_update = false;
                let ip = self.event_ip(ev);
                ev.kind = Kind::Tip { ip };
                self.event_time(ev);
                true
            }
            _ => false,
        }
    }

    /// The next event (`pt_evt_next`).
    #[inline]
    pub fn next_event(&mut self) -> Result<Ev, Fail> {
        loop {
            if !self.decode_packet()? {
                break;
            }
            if self.event.is_some() {
                return Err(Fail::Pt(PtError::INTERNAL));
            }
            self.bound = false;
            self.fetch_packet();
        }
        self.event.take().ok_or(Fail::Pt(PtError::INTERNAL))
    }
}
