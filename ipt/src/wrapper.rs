//! The safe wrapper over libipt's C API ([`crate::ffi`]): owned decoders,
//! images, the section cache and the encoder, each freed with its owner;
//! libipt's return codes as [`Error`] and [`Status`]; events, blocks and
//! packets as plain values. Re-exported whole at the crate root. One of the
//! crate's two unsafe rooms (with `ffi`): every unsafe block here says why
//! it is sound.

use crate::ffi;
pub use pttypes::{
    event_type, iclass, mode, AddrRange, Block, Errata, Error, Event, EventFields, EventKind,
    EventParts, Frequency, Result, Settings, Status,
};
use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr, CString};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::rc::Rc;

/// Whether the libipt built with has `pt_blk_resync` (2.2 and later):
/// [`BlockDecoder::resync`] answers `NOT_SUPPORTED` without it. A
/// constant, so code that only resyncs with it folds away without it.
pub const HAS_RESYNC: bool = cfg!(libipt_2_2);

/// libipt's version numbers, as built.
pub fn version() -> (u8, u8, u16) {
    // SAFETY: a plain function returning a struct by value.
    let v = unsafe { ffi::pt_library_version() };
    (v.major, v.minor, v.patch)
}

// ---------------------------------------------------------------------------
// Errors and status

/// libipt's message for `e` (`pt_errstr`), as ptdec's gaps and errors
/// show it (`pttypes::Error`'s own `Display` is a shorter description).
pub fn message(e: Error) -> &'static str {
    // ptflow's own error, which libipt does not know.
    if e == Error::NO_MODE {
        return e.description();
    }
    // SAFETY: pt_errstr returns a pointer to a static string for any
    // value (unknown codes give a generic message).
    let p = unsafe { ffi::pt_errstr(e.0) };
    if p.is_null() {
        return "unknown error";
    }
    // SAFETY: non-null, NUL-terminated, static.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .unwrap_or("unknown error")
}

/// From a negative libipt return value.
fn error_from_ret(r: c_int) -> Error {
    Error(r.unsigned_abs())
}

/// Turns a libipt return value into its non-negative value or an error.
fn check(r: c_int) -> Result<u32> {
    if r < 0 {
        Err(error_from_ret(r))
    } else {
        Ok(r as u32)
    }
}

// ---------------------------------------------------------------------------
// Configuration

/// A CPU for libipt's errata workarounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    pub family: u16,
    pub model: u8,
    pub stepping: u8,
}

/// An address filter range (IA32_RTIT_ADDRn_A/B and its ADDRn_CFG).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AddrFilter {
    pub cfg: u32,
    pub a: u64,
    pub b: u64,
}

/// CPUs libipt 2.1.2 knows no errata for, and the workarounds libipt's
/// newer releases apply to them: (family, model, errata). Taken from
/// libipt's test vectors (`../shared/libipt-tests`), whose CPU lists name
/// 18/1, 18/3 and 6/213 with exactly the tests of 6/198 (BDM70's, SKD022's
/// and APL11's, not SKD010's, SKL014's, APL12's or SKZ84's), and whose
/// ptxed expectations for those runs are the decodes with these
/// workarounds; 6/198 is among the CPUs libipt 2.1.2 gives BDM70, SKD022
/// and APL11.
pub const NEWER_CPUS: &[(u16, u8, Errata)] = &[
    (18, 1, BDM70_SKD022_APL11),
    (18, 3, BDM70_SKD022_APL11),
    (6, 213, BDM70_SKD022_APL11),
];

const BDM70_SKD022_APL11: Errata = Errata {
    bdm70: true,
    bdm64: false,
    skd007: false,
    skd022: true,
    skd010: false,
    skl014: false,
    apl12: false,
    apl11: true,
    skl168: false,
    skz84: false,
};

/// A decoder (or encoder) configuration, without the trace buffer, which
/// each constructor takes as a borrowed slice.
#[derive(Clone, Copy)]
pub struct Config {
    raw: ffi::pt_config,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("cpu", &self.raw.cpu)
            .field("mtc_freq", &self.raw.mtc_freq)
            .field("nom_freq", &self.raw.nom_freq)
            .finish_non_exhaustive()
    }
}

impl Default for Config {
    fn default() -> Self {
        // SAFETY: pt_config is plain data (integers, pointers, bitfields,
        // unions of them); all-zero is libipt's own initial value
        // (pt_config_init memsets it and sets `size`).
        let mut raw: ffi::pt_config = unsafe { std::mem::zeroed() };
        raw.size = std::mem::size_of::<ffi::pt_config>();
        Config { raw }
    }
}

impl Config {
    /// Applies `cpu`'s errata workarounds: libipt's, or for a CPU newer
    /// than libipt 2.1.2 knows, [`NEWER_CPUS`]'s (libipt 2.1.2 has every
    /// workaround they need). Any other CPU (family 0, or one neither
    /// knows) is an error, as in ptxed.
    pub fn set_cpu(&mut self, cpu: Cpu) -> Result<()> {
        self.raw.cpu = ffi::pt_cpu {
            vendor: ffi::pcv_intel,
            family: cpu.family,
            model: cpu.model,
            stepping: cpu.stepping,
        };
        // SAFETY: both pointers are to fields of `self.raw`, valid for the call.
        let r = unsafe { ffi::pt_cpu_errata(&mut self.raw.errata, &self.raw.cpu) };
        match check(r) {
            Err(e) if e == Error::BAD_CPU => {
                let Some(&(.., errata)) = NEWER_CPUS
                    .iter()
                    .find(|(f, m, _)| (*f, *m) == (cpu.family, cpu.model))
                else {
                    return Err(e);
                };
                self.set_errata(errata);
                Ok(())
            }
            r => r.map(|_| ()),
        }
    }

    /// Sets libipt's errata bits to `e`.
    fn set_errata(&mut self, e: Errata) {
        let r = &mut self.raw.errata;
        r.set_bdm70(e.bdm70.into());
        r.set_bdm64(e.bdm64.into());
        r.set_skd007(e.skd007.into());
        r.set_skd022(e.skd022.into());
        r.set_skd010(e.skd010.into());
        r.set_skl014(e.skl014.into());
        r.set_apl12(e.apl12.into());
        r.set_apl11(e.apl11.into());
        r.set_skl168(e.skl168.into());
        r.set_skz84(e.skz84.into());
    }

    pub fn set_freq(&mut self, f: Frequency) {
        self.raw.mtc_freq = f.mtc_freq;
        self.raw.nom_freq = f.nom_freq;
        self.raw.cpuid_0x15_eax = f.cpuid_15_eax;
        self.raw.cpuid_0x15_ebx = f.cpuid_15_ebx;
    }

    /// Block decoder flags: end a block at every call / jump.
    pub fn set_block_flags(&mut self, end_on_call: bool, end_on_jump: bool) {
        // SAFETY: `block` is the variant a block decoder reads; the union
        // holds only integer bitfields, any bit pattern is valid.
        let b = unsafe { &mut self.raw.flags.variant.block };
        b.set_end_on_call(u32::from(end_on_call));
        b.set_end_on_jump(u32::from(end_on_jump));
    }

    /// Block decoder events ptxed asks for with `--event:tick` and
    /// `--event:iflags`: a tick at every timing packet that binds to an
    /// instruction, and interrupt-flag changes. Beyond what they report,
    /// they are the moments perf sideband is applied at (libipt-sb's
    /// `pt_sb_event` runs on every event).
    pub fn set_block_events(&mut self, tick: bool, iflags: bool) {
        // SAFETY: as in set_block_flags.
        let b = unsafe { &mut self.raw.flags.variant.block };
        b.set_enable_tick_events(u32::from(tick));
        b.set_enable_iflags_events(u32::from(iflags));
    }

    /// Keep timing calibration across an overflow (ptxed's
    /// `--block:keep-tcal-on-ovf`).
    pub fn set_keep_tcal_on_ovf(&mut self, keep: bool) {
        // SAFETY: as in set_block_flags.
        let b = unsafe { &mut self.raw.flags.variant.block };
        b.set_keep_tcal_on_ovf(u32::from(keep));
    }

    /// Address filter ranges 0 to 3 (IA32_RTIT_ADDRn_A/B and ADDRn_CFG):
    /// libipt uses them for the errata whose workaround needs to know
    /// where tracing is filtered (SKL014: a TIP.PGD without its target).
    pub fn set_addr_filters(&mut self, f: [AddrFilter; 4]) {
        let af = &mut self.raw.addr_filter;
        // SAFETY: the union holds an integer and its bitfield view.
        let c = unsafe { &mut af.config.ctl };
        c.set_addr0_cfg(f[0].cfg);
        c.set_addr1_cfg(f[1].cfg);
        c.set_addr2_cfg(f[2].cfg);
        c.set_addr3_cfg(f[3].cfg);
        (af.addr0_a, af.addr0_b) = (f[0].a, f[0].b);
        (af.addr1_a, af.addr1_b) = (f[1].a, f[1].b);
        (af.addr2_a, af.addr2_b) = (f[2].a, f[2].b);
        (af.addr3_a, af.addr3_b) = (f[3].a, f[3].b);
    }

    /// The errata workarounds [`Config::set_cpu`] switched on, for a
    /// decoder of ptdec's own that must apply the same ones.
    pub fn errata(&self) -> Errata {
        let e = &self.raw.errata;
        Errata {
            bdm70: e.bdm70() != 0,
            bdm64: e.bdm64() != 0,
            skd007: e.skd007() != 0,
            skd022: e.skd022() != 0,
            skd010: e.skd010() != 0,
            skl014: e.skl014() != 0,
            apl12: e.apl12() != 0,
            apl11: e.apl11() != 0,
            skl168: e.skl168() != 0,
            skz84: e.skz84() != 0,
        }
    }

    /// What a flow decoder of ptdec's own reads of this configuration.
    pub fn settings(&self) -> Settings {
        let (end_on_call, end_on_jump, tick_events, iflags_events, keep_tcal_on_ovf) =
            self.block_flags();
        Settings {
            errata: self.errata(),
            freq: self.freq(),
            end_on_call,
            end_on_jump,
            tick_events,
            iflags_events,
            keep_tcal_on_ovf,
            addr_filter: self.has_addr_filter(),
            addr_ranges: self.addr_ranges(),
        }
    }

    /// The address filter ranges set by [`Config::set_addr_filters`].
    pub fn addr_ranges(&self) -> [AddrRange; 4] {
        let af = &self.raw.addr_filter;
        // SAFETY: the union holds an integer and its bitfield view.
        let cfg = unsafe { af.config.addr_cfg };
        let bounds = [
            (af.addr0_a, af.addr0_b),
            (af.addr1_a, af.addr1_b),
            (af.addr2_a, af.addr2_b),
            (af.addr3_a, af.addr3_b),
        ];
        std::array::from_fn(|n| AddrRange {
            cfg: ((cfg >> (4 * n)) & 0xf) as u32,
            a: bounds[n].0,
            b: bounds[n].1,
        })
    }

    /// The timing parameters set by [`Config::set_freq`].
    pub fn freq(&self) -> Frequency {
        Frequency {
            mtc_freq: self.raw.mtc_freq,
            nom_freq: self.raw.nom_freq,
            cpuid_15_eax: self.raw.cpuid_0x15_eax,
            cpuid_15_ebx: self.raw.cpuid_0x15_ebx,
        }
    }

    /// The block decoder flags: (end on call, end on jump, tick events,
    /// iflags events, keep timing calibration on overflow).
    pub fn block_flags(&self) -> (bool, bool, bool, bool, bool) {
        // SAFETY: as in set_block_flags.
        let b = unsafe { &self.raw.flags.variant.block };
        (
            b.end_on_call() != 0,
            b.end_on_jump() != 0,
            b.enable_tick_events() != 0,
            b.enable_iflags_events() != 0,
            b.keep_tcal_on_ovf() != 0,
        )
    }

    /// Whether any address filter range is configured (ADDRn_CFG not 0).
    pub fn has_addr_filter(&self) -> bool {
        // SAFETY: the union holds an integer and its bitfield view.
        unsafe { self.raw.addr_filter.config.addr_cfg != 0 }
    }

    /// The raw configuration over `buf`.
    fn with_buffer(&self, buf: *const u8, len: usize) -> ffi::pt_config {
        let mut c = self.raw;
        c.begin = buf.cast_mut();
        // SAFETY: one past the end of the caller's buffer.
        c.end = unsafe { buf.add(len) }.cast_mut();
        c
    }
}

// ---------------------------------------------------------------------------
// Image section cache and images

/// An image section cache: file sections mapped once, shared by images.
pub struct SectionCache {
    ptr: NonNull<ffi::pt_image_section_cache>,
    /// Sections it holds (libipt numbers them 1, 2, ...: the largest id
    /// given).
    held: std::cell::Cell<u32>,
    /// [`SectionCache::lookups`].
    lookups: std::cell::Cell<u64>,
}

impl std::fmt::Debug for SectionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SectionCache")
    }
}

impl SectionCache {
    pub fn new() -> Result<SectionCache> {
        // SAFETY: a NULL name is allowed.
        let p = unsafe { ffi::pt_iscache_alloc(std::ptr::null()) };
        NonNull::new(p)
            .map(|ptr| SectionCache {
                ptr,
                held: std::cell::Cell::new(0),
                lookups: std::cell::Cell::new(0),
            })
            .ok_or(Error::NOMEM)
    }

    /// Adds `size` bytes at `offset` of `path` loaded at `vaddr`; the
    /// section's id.
    pub fn add_file(&self, path: &str, offset: u64, size: u64, vaddr: u64) -> Result<u32> {
        let c = CString::new(path).map_err(|_| Error::INVALID)?;
        self.lookups
            .set(self.lookups.get() + u64::from(self.held.get()));
        // SAFETY: `self.ptr` is live; libipt copies the file name.
        let r =
            unsafe { ffi::pt_iscache_add_file(self.ptr.as_ptr(), c.as_ptr(), offset, size, vaddr) };
        let isid = check(r)?;
        self.held.set(self.held.get().max(isid));
        Ok(isid)
    }

    /// The sections libipt looked through in [`SectionCache::add_file`]
    /// so far: it compares a section with every one the cache holds
    /// before it adds it (`pt_iscache_find_section_locked`), so adding n
    /// sections to one cache costs n^2/2. Callers' tests bound it.
    pub fn lookups(&self) -> u64 {
        self.lookups.get()
    }

    /// Reads memory of section `isid` at `vaddr` into `buf`; bytes read.
    pub fn read(&self, buf: &mut [u8], isid: u32, vaddr: u64) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let n = buf.len().min(4096) as u64;
        let isid = c_int::try_from(isid).map_err(|_| Error::INVALID)?;
        // SAFETY: `buf` is valid for `n` bytes; `self.ptr` is live.
        let r =
            unsafe { ffi::pt_iscache_read(self.ptr.as_ptr(), buf.as_mut_ptr(), n, isid, vaddr) };
        check(r).map(|n| n as usize)
    }
}

impl Drop for SectionCache {
    fn drop(&mut self) {
        // SAFETY: allocated by pt_iscache_alloc, freed once. Images that
        // use it hold an `Rc` to it, so none is left.
        unsafe { ffi::pt_iscache_free(self.ptr.as_ptr()) };
    }
}

/// Memory an image reads through its callback when no file section holds
/// an address: owned regions, and the last address nothing held.
#[derive(Default)]
struct Memory {
    regions: Vec<(u64, Vec<u8>)>,
    miss: Cell<Option<u64>>,
}

/// libipt's read-memory callback over a [`Memory`].
///
/// # Safety
///
/// Called by libipt only: `context` is the `Memory` installed with it by
/// [`ImageRef::set_memory`] and `buffer` holds `size` writable bytes.
unsafe extern "C" fn read_memory(
    buffer: *mut u8,
    size: usize,
    _asid: *const ffi::pt_asid,
    ip: u64,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `context` is the `Box<Memory>` installed with this callback,
    // which lives as long as the image (it is removed or the image freed
    // before the box is dropped); libipt calls it on the decoding thread.
    let mem = unsafe { &*context.cast::<Memory>() };
    for (base, bytes) in &mem.regions {
        if ip >= *base && ip - *base < bytes.len() as u64 {
            let off = (ip - base) as usize;
            let n = size.min(bytes.len() - off).min(c_int::MAX as usize);
            // SAFETY: libipt passes a buffer of `size` bytes; n <= size.
            unsafe { std::ptr::copy_nonoverlapping(bytes[off..].as_ptr(), buffer, n) };
            return n as c_int;
        }
    }
    mem.miss.set(Some(ip));
    -(ffi::pte_nomap as c_int)
}

/// A borrowed libipt image: an owned [`Image`] or a decoder's own.
pub struct ImageRef<'a> {
    ptr: NonNull<ffi::pt_image>,
    /// The iscaches whose sections were added (kept alive by the owner).
    caches: &'a mut Vec<Rc<SectionCache>>,
    memory: &'a mut Option<Box<Memory>>,
}

impl ImageRef<'_> {
    /// Adds section `isid` of `cache` (any address space).
    pub fn add_cached(&mut self, cache: &Rc<SectionCache>, isid: u32) -> Result<()> {
        if !self.caches.iter().any(|c| Rc::ptr_eq(c, cache)) {
            self.caches.push(cache.clone());
        }
        let isid = c_int::try_from(isid).map_err(|_| Error::INVALID)?;
        // SAFETY: both pointers are live; the cache outlives the image (an
        // Rc to it is held next to the image).
        let r = unsafe {
            ffi::pt_image_add_cached(
                self.ptr.as_ptr(),
                cache.ptr.as_ptr(),
                isid,
                std::ptr::null(),
            )
        };
        check(r).map(|_| ())
    }

    /// Adds `size` bytes at `offset` of `path` at `vaddr`.
    pub fn add_file(&mut self, path: &str, offset: u64, size: u64, vaddr: u64) -> Result<()> {
        let c = CString::new(path).map_err(|_| Error::INVALID)?;
        // SAFETY: live image; libipt copies the name.
        let r = unsafe {
            ffi::pt_image_add_file(
                self.ptr.as_ptr(),
                c.as_ptr(),
                offset,
                size,
                std::ptr::null(),
                vaddr,
            )
        };
        check(r).map(|_| ())
    }

    /// Removes every section (of the default address space).
    pub fn clear(&mut self) {
        // SAFETY: live image; a NULL asid matches the sections added
        // without one.
        unsafe { ffi::pt_image_remove_by_asid(self.ptr.as_ptr(), std::ptr::null()) };
    }

    /// Reads addresses no section holds from `regions` (base, bytes), and
    /// records each address nothing holds for [`ImageRef::take_miss`].
    pub fn set_memory(&mut self, regions: Vec<(u64, Vec<u8>)>) {
        let mem = self.memory.get_or_insert_with(Box::default);
        mem.regions = regions;
        let ctx: *mut Memory = &mut **mem;
        // SAFETY: the box lives as long as the image's owner (dropped
        // after the image is freed), so the context stays valid.
        unsafe { ffi::pt_image_set_callback(self.ptr.as_ptr(), Some(read_memory), ctx.cast()) };
    }

    /// The last address the image was asked for and had no memory at
    /// (needs [`ImageRef::set_memory`]).
    pub fn take_miss(&self) -> Option<u64> {
        self.memory.as_ref().and_then(|m| m.miss.take())
    }
}

/// An image of its own (for the instruction decoder).
pub struct Image {
    ptr: NonNull<ffi::pt_image>,
    caches: Vec<Rc<SectionCache>>,
    memory: Option<Box<Memory>>,
}

impl Image {
    pub fn new() -> Result<Image> {
        // SAFETY: a NULL name is allowed.
        let p = unsafe { ffi::pt_image_alloc(std::ptr::null()) };
        NonNull::new(p)
            .map(|ptr| Image {
                ptr,
                caches: Vec::new(),
                memory: None,
            })
            .ok_or(Error::NOMEM)
    }

    pub fn as_ref(&mut self) -> ImageRef<'_> {
        ImageRef {
            ptr: self.ptr,
            caches: &mut self.caches,
            memory: &mut self.memory,
        }
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        // SAFETY: allocated by pt_image_alloc, freed once; decoders using
        // it borrow it, so none is left. The callback box and the caches
        // are dropped after this.
        unsafe { ffi::pt_image_free(self.ptr.as_ptr()) };
    }
}

// ---------------------------------------------------------------------------
// Blocks and events

/// A block as libipt filled it in.
fn block_from_raw(b: &ffi::pt_block) -> Block {
    Block {
        ip: b.ip,
        end_ip: b.end_ip,
        isid: b.isid,
        mode: b.mode,
        iclass: b.iclass,
        ninsn: b.ninsn,
        raw: b.raw,
        size: if b.truncated() != 0 { b.size } else { 0 },
        speculative: b.speculative() != 0,
        truncated: b.truncated() != 0,
    }
}

/// An event as libipt filled it in, read into its parts.
fn event_from_raw(raw: &ffi::pt_event) -> Event {
    let r = RawEvent(raw);
    Event {
        fields: EventFields {
            kind: r.kind(),
            raw_type: raw.type_,
            status_update: raw.status_update() != 0,
            ip_suppressed: r.ip_suppressed(),
            tsc: (raw.has_tsc() != 0).then_some(raw.tsc),
            time_tsc: raw.tsc,
            lost_mtc: raw.lost_mtc,
            lost_cyc: raw.lost_cyc,
            other_ip: r.other_ip(),
            non_root: r.non_root(),
            vmcs: r.vmcs(),
            exec_mode: r.exec_mode(),
        },
    }
}

/// Reads libipt's event union by its type.
struct RawEvent<'a>(&'a ffi::pt_event);

impl RawEvent<'_> {
    fn ip_suppressed(&self) -> bool {
        self.0.ip_suppressed() != 0
    }
    /// For an exec mode event: the mode.
    fn exec_mode(&self) -> Option<u32> {
        if self.0.type_ != ffi::ptev_exec_mode {
            return None;
        }
        // SAFETY: the union variant that `type_` names.
        Some(unsafe { self.0.variant.exec_mode.mode })
    }
    /// For a VMCS or async VMCS event (`EventKind::Other`): the VMCS base
    /// and the async event's IP unless suppressed.
    fn vmcs(&self) -> Option<(u64, Option<u64>)> {
        let v = &self.0.variant;
        // SAFETY: each arm reads the union variant that `type_` names.
        unsafe {
            match self.0.type_ {
                ffi::ptev_vmcs => Some((v.vmcs.base, None)),
                ffi::ptev_async_vmcs => Some((
                    v.async_vmcs.base,
                    (!self.ip_suppressed()).then_some(v.async_vmcs.ip),
                )),
                _ => None,
            }
        }
    }
    /// For a paging or async paging event: the PIP's NR bit.
    fn non_root(&self) -> Option<bool> {
        let v = &self.0.variant;
        // SAFETY: each arm reads the union variant that `type_` names.
        unsafe {
            match self.0.type_ {
                ffi::ptev_paging => Some(v.paging.non_root() != 0),
                ffi::ptev_async_paging => Some(v.async_paging.non_root() != 0),
                _ => None,
            }
        }
    }

    /// The IP of the kinds [`EventKind::Other`] covers that name one: a
    /// tick, a TIP (always), a TSX state change and an iflags change;
    /// `None` when suppressed or for any other kind.
    fn other_ip(&self) -> Option<u64> {
        let v = &self.0.variant;
        let unless_suppressed = |ip| (!self.ip_suppressed()).then_some(ip);
        // SAFETY: each arm reads the union variant that `type_` names.
        unsafe {
            match self.0.type_ {
                ffi::ptev_tick => unless_suppressed(v.tick.ip),
                ffi::ptev_tip => Some(v.tip.ip),
                ffi::ptev_tsx => unless_suppressed(v.tsx.ip),
                ffi::ptev_iflags => unless_suppressed(v.iflags.ip),
                _ => None,
            }
        }
    }

    fn kind(&self) -> EventKind {
        let ip = |v: u64| (!self.ip_suppressed()).then_some(v);
        let v = &self.0.variant;
        // SAFETY: each arm reads the union variant that `type_` says
        // libipt filled in; all variants are plain integers and bitfields.
        unsafe {
            match self.0.type_ {
                ffi::ptev_enabled => EventKind::Enabled {
                    ip: v.enabled.ip,
                    resumed: v.enabled.resumed() != 0,
                },
                ffi::ptev_disabled => EventKind::Disabled {
                    ip: ip(v.disabled.ip),
                },
                ffi::ptev_async_disabled => EventKind::AsyncDisabled {
                    at: v.async_disabled.at,
                    ip: ip(v.async_disabled.ip),
                },
                ffi::ptev_async_branch => EventKind::AsyncBranch {
                    from: v.async_branch.from,
                    to: ip(v.async_branch.to),
                },
                ffi::ptev_paging => EventKind::Paging { cr3: v.paging.cr3 },
                ffi::ptev_async_paging => EventKind::AsyncPaging {
                    cr3: v.async_paging.cr3,
                    ip: ip(v.async_paging.ip),
                },
                ffi::ptev_overflow => EventKind::Overflow {
                    ip: ip(v.overflow.ip),
                },
                ffi::ptev_exec_mode => EventKind::ExecMode {
                    ip: ip(v.exec_mode.ip),
                },
                ffi::ptev_stop => EventKind::Stop,
                ffi::ptev_cbr => EventKind::Cbr { ratio: v.cbr.ratio },
                ffi::ptev_ptwrite => EventKind::Ptwrite {
                    ip: ip(v.ptwrite.ip),
                    size: v.ptwrite.size,
                    payload: v.ptwrite.payload,
                },
                ffi::ptev_exstop => EventKind::Exstop {
                    ip: ip(v.exstop.ip),
                },
                ffi::ptev_mwait => EventKind::Mwait {
                    ip: ip(v.mwait.ip),
                    hints: v.mwait.hints,
                    ext: v.mwait.ext,
                },
                ffi::ptev_pwre => EventKind::Pwre {
                    state: v.pwre.state,
                    sub_state: v.pwre.sub_state,
                    hw: v.pwre.hw() != 0,
                },
                ffi::ptev_pwrx => EventKind::Pwrx {
                    last: v.pwrx.last,
                    deepest: v.pwrx.deepest,
                    interrupt: v.pwrx.interrupt() != 0,
                    store: v.pwrx.store() != 0,
                    autonomous: v.pwrx.autonomous() != 0,
                },
                ffi::ptev_interrupt => EventKind::Interrupt {
                    vector: v.interrupt.vector,
                    cr2: (v.interrupt.has_cr2() != 0).then_some(v.interrupt.cr2),
                    ip: ip(v.interrupt.ip),
                },
                ffi::ptev_iret => EventKind::Iret { ip: ip(v.iret.ip) },
                ffi::ptev_smi => EventKind::Smi { ip: ip(v.smi.ip) },
                ffi::ptev_rsm => EventKind::Rsm { ip: ip(v.rsm.ip) },
                ffi::ptev_sipi => EventKind::Sipi {
                    vector: v.sipi.vector,
                },
                ffi::ptev_init => EventKind::Init { ip: ip(v.init.ip) },
                ffi::ptev_vmentry => EventKind::VmEntry {
                    ip: ip(v.vmentry.ip),
                },
                ffi::ptev_vmexit => EventKind::VmExit {
                    vector: (v.vmexit.has_vector() != 0).then_some(v.vmexit.vector),
                    reason: (v.vmexit.has_vmxr() != 0).then_some(v.vmexit.vmxr),
                    qualification: (v.vmexit.has_vmxq() != 0).then_some(v.vmexit.vmxq),
                    ip: ip(v.vmexit.ip),
                },
                ffi::ptev_shutdown => EventKind::Shutdown {
                    ip: ip(v.shutdown.ip),
                },
                ffi::ptev_uintr => EventKind::Uintr {
                    vector: v.uintr.vector,
                    ip: ip(v.uintr.ip),
                },
                ffi::ptev_uiret => EventKind::Uiret { ip: ip(v.uiret.ip) },
                t => EventKind::Other(t),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The block decoder

/// libipt's block decoder over a borrowed trace buffer.
pub struct BlockDecoder<'a> {
    ptr: NonNull<ffi::pt_block_decoder>,
    caches: Vec<Rc<SectionCache>>,
    memory: Option<Box<Memory>>,
    _buf: PhantomData<&'a [u8]>,
}

impl<'a> BlockDecoder<'a> {
    pub fn new(cfg: &Config, trace: &'a [u8]) -> Result<BlockDecoder<'a>> {
        let c = cfg.with_buffer(trace.as_ptr(), trace.len());
        // SAFETY: libipt copies the config; it reads (never writes) the
        // buffer, which the returned decoder borrows for 'a.
        let p = unsafe { ffi::pt_blk_alloc_decoder(&c) };
        NonNull::new(p)
            .map(|ptr| BlockDecoder {
                ptr,
                caches: Vec::new(),
                memory: None,
                _buf: PhantomData,
            })
            .ok_or(Error::INVALID)
    }

    fn p(&mut self) -> *mut ffi::pt_block_decoder {
        self.ptr.as_ptr()
    }

    /// Synchronizes at the next PSB.
    pub fn sync_forward(&mut self) -> Result<Status> {
        // SAFETY: live decoder.
        check(unsafe { ffi::pt_blk_sync_forward(self.p()) }).map(Status)
    }

    /// Synchronizes at the PSB at `offset` (`Err(NOSYNC)`: there is none;
    /// `Err(EOS)`: `offset` lies outside the trace).
    pub fn sync_set(&mut self, offset: u64) -> Result<Status> {
        // SAFETY: live decoder; libipt checks `offset` against its buffer.
        check(unsafe { ffi::pt_blk_sync_set(self.p(), offset) }).map(Status)
    }

    /// Resynchronizes after an error at the next synchronization point
    /// (libipt 2.2: the next PSB or the next FUP/TIP.PGE that gives an IP).
    /// `Err(EVENT_IGNORED)`: an event must be read first, then call again.
    /// `Err(NOT_SUPPORTED)` with a libipt older than 2.2, which has no
    /// `pt_blk_resync`: the caller syncs at the next PSB instead.
    pub fn resync(&mut self) -> Result<Status> {
        #[cfg(libipt_2_2)]
        {
            // SAFETY: live decoder.
            check(unsafe { ffi::pt_blk_resync(self.p()) }).map(Status)
        }
        #[cfg(not(libipt_2_2))]
        {
            Err(Error::NOT_SUPPORTED)
        }
    }

    /// The next block and the status: libipt may decode instructions
    /// before an error, so the block comes with the error too.
    pub fn next_block(&mut self) -> (Block, Result<Status>) {
        // SAFETY: zero is a valid pt_block (plain data).
        let mut b: ffi::pt_block = unsafe { std::mem::zeroed() };
        // SAFETY: live decoder; `b` is a pt_block of the size given.
        let r = unsafe { ffi::pt_blk_next(self.p(), &mut b, std::mem::size_of::<ffi::pt_block>()) };
        (block_from_raw(&b), check(r).map(Status))
    }

    /// The pending event.
    pub fn event(&mut self) -> Result<(Event, Status)> {
        // SAFETY: zero is a valid pt_event (plain data).
        let mut e: ffi::pt_event = unsafe { std::mem::zeroed() };
        // SAFETY: live decoder; `e` is a pt_event of the size given.
        let r =
            unsafe { ffi::pt_blk_event(self.p(), &mut e, std::mem::size_of::<ffi::pt_event>()) };
        check(r).map(|s| (event_from_raw(&e), Status(s)))
    }

    /// The current offset in the trace.
    pub fn offset(&self) -> Result<u64> {
        let mut o = 0;
        // SAFETY: live decoder, valid out pointer.
        check(unsafe { ffi::pt_blk_get_offset(self.ptr.as_ptr(), &mut o) })?;
        Ok(o)
    }

    /// The offset of the last synchronization point.
    pub fn sync_offset(&self) -> Result<u64> {
        let mut o = 0;
        // SAFETY: live decoder, valid out pointer.
        check(unsafe { ffi::pt_blk_get_sync_offset(self.ptr.as_ptr(), &mut o) })?;
        Ok(o)
    }

    /// (TSC, lost MTC, lost CYC) at the last timing packet.
    pub fn time(&mut self) -> Result<(u64, u32, u32)> {
        let (mut t, mut m, mut c) = (0u64, 0u32, 0u32);
        // SAFETY: live decoder, valid out pointers.
        let r = unsafe { ffi::pt_blk_time(self.p(), &mut t, &mut m, &mut c) };
        check(r).map(|_| (t, m, c))
    }

    /// The current core:bus ratio.
    pub fn core_bus_ratio(&mut self) -> Result<u32> {
        let mut c = 0u32;
        // SAFETY: live decoder, valid out pointer.
        check(unsafe { ffi::pt_blk_core_bus_ratio(self.p(), &mut c) })?;
        Ok(c)
    }

    /// The decoder's own image.
    pub fn image(&mut self) -> ImageRef<'_> {
        // SAFETY: live decoder; its default image lives as long as it.
        let p = unsafe { ffi::pt_blk_get_image(self.p()) };
        ImageRef {
            ptr: NonNull::new(p).expect("a block decoder always has an image"),
            caches: &mut self.caches,
            memory: &mut self.memory,
        }
    }
}

impl Drop for BlockDecoder<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by pt_blk_alloc_decoder, freed once; the
        // image callback box and the caches are dropped after it.
        unsafe { ffi::pt_blk_free_decoder(self.ptr.as_ptr()) };
    }
}

// ---------------------------------------------------------------------------
// The instruction decoder

/// One instruction (`struct pt_insn`), the fields ptsim's tests read.
#[derive(Debug, Clone, Copy)]
pub struct Insn {
    pub ip: u64,
    pub iclass: u32,
    pub size: u8,
}

/// libipt's instruction decoder over a borrowed trace and image.
pub struct InsnDecoder<'a> {
    ptr: NonNull<ffi::pt_insn_decoder>,
    _buf: PhantomData<&'a [u8]>,
    _image: PhantomData<&'a mut Image>,
}

impl<'a> InsnDecoder<'a> {
    pub fn new(cfg: &Config, trace: &'a [u8], image: &'a mut Image) -> Result<InsnDecoder<'a>> {
        let c = cfg.with_buffer(trace.as_ptr(), trace.len());
        // SAFETY: as in BlockDecoder::new.
        let p = unsafe { ffi::pt_insn_alloc_decoder(&c) };
        let ptr = NonNull::new(p).ok_or(Error::INVALID)?;
        let d = InsnDecoder {
            ptr,
            _buf: PhantomData,
            _image: PhantomData,
        };
        // SAFETY: both live; the image is borrowed for 'a, so it outlives
        // the decoder.
        check(unsafe { ffi::pt_insn_set_image(ptr.as_ptr(), image.ptr.as_ptr()) })?;
        Ok(d)
    }

    pub fn sync_forward(&mut self) -> Result<Status> {
        // SAFETY: live decoder.
        check(unsafe { ffi::pt_insn_sync_forward(self.ptr.as_ptr()) }).map(Status)
    }

    pub fn next_insn(&mut self) -> Result<(Insn, Status)> {
        // SAFETY: zero is a valid pt_insn (plain data).
        let mut i: ffi::pt_insn = unsafe { std::mem::zeroed() };
        // SAFETY: live decoder; `i` has the size given.
        let r = unsafe {
            ffi::pt_insn_next(
                self.ptr.as_ptr(),
                &mut i,
                std::mem::size_of::<ffi::pt_insn>(),
            )
        };
        check(r).map(|s| {
            (
                Insn {
                    ip: i.ip,
                    iclass: i.iclass,
                    size: i.size,
                },
                Status(s),
            )
        })
    }

    pub fn event(&mut self) -> Result<(Event, Status)> {
        // SAFETY: zero is a valid pt_event (plain data).
        let mut e: ffi::pt_event = unsafe { std::mem::zeroed() };
        // SAFETY: live decoder; `e` has the size given.
        let r = unsafe {
            ffi::pt_insn_event(
                self.ptr.as_ptr(),
                &mut e,
                std::mem::size_of::<ffi::pt_event>(),
            )
        };
        check(r).map(|s| (event_from_raw(&e), Status(s)))
    }

    pub fn offset(&self) -> Result<u64> {
        let mut o = 0;
        // SAFETY: live decoder, valid out pointer.
        check(unsafe { ffi::pt_insn_get_offset(self.ptr.as_ptr(), &mut o) })?;
        Ok(o)
    }

    pub fn time(&mut self) -> Result<(u64, u32, u32)> {
        let (mut t, mut m, mut c) = (0u64, 0u32, 0u32);
        // SAFETY: live decoder, valid out pointers.
        let r = unsafe { ffi::pt_insn_time(self.ptr.as_ptr(), &mut t, &mut m, &mut c) };
        check(r).map(|_| (t, m, c))
    }
}

impl Drop for InsnDecoder<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by pt_insn_alloc_decoder, freed once.
        unsafe { ffi::pt_insn_free_decoder(self.ptr.as_ptr()) };
    }
}

// ---------------------------------------------------------------------------
// The query decoder

/// libipt's query decoder over a borrowed trace buffer.
pub struct QueryDecoder<'a> {
    ptr: NonNull<ffi::pt_query_decoder>,
    _buf: PhantomData<&'a [u8]>,
}

impl<'a> QueryDecoder<'a> {
    pub fn new(cfg: &Config, trace: &'a [u8]) -> Result<QueryDecoder<'a>> {
        let c = cfg.with_buffer(trace.as_ptr(), trace.len());
        // SAFETY: as in BlockDecoder::new.
        let p = unsafe { ffi::pt_qry_alloc_decoder(&c) };
        NonNull::new(p)
            .map(|ptr| QueryDecoder {
                ptr,
                _buf: PhantomData,
            })
            .ok_or(Error::INVALID)
    }

    /// Synchronizes at the next PSB; the IP there, if any.
    pub fn sync_forward(&mut self) -> Result<(Option<u64>, Status)> {
        let mut ip = 0u64;
        // SAFETY: live decoder, valid out pointer.
        let s =
            check(unsafe { ffi::pt_qry_sync_forward(self.ptr.as_ptr(), &mut ip) }).map(Status)?;
        Ok(((!s.ip_suppressed()).then_some(ip), s))
    }

    /// The next conditional branch (or compressed return): taken?
    pub fn cond_branch(&mut self) -> Result<(bool, Status)> {
        let mut taken: c_int = 0;
        // SAFETY: live decoder, valid out pointer.
        let s = check(unsafe { ffi::pt_qry_cond_branch(self.ptr.as_ptr(), &mut taken) })?;
        Ok((taken != 0, Status(s)))
    }

    /// The next indirect branch's target.
    pub fn indirect_branch(&mut self) -> Result<(u64, Status)> {
        let mut ip = 0u64;
        // SAFETY: live decoder, valid out pointer.
        let s = check(unsafe { ffi::pt_qry_indirect_branch(self.ptr.as_ptr(), &mut ip) })?;
        Ok((ip, Status(s)))
    }

    pub fn event(&mut self) -> Result<(Event, Status)> {
        // SAFETY: zero is a valid pt_event (plain data).
        let mut e: ffi::pt_event = unsafe { std::mem::zeroed() };
        // SAFETY: live decoder; `e` has the size given.
        let r = unsafe {
            ffi::pt_qry_event(
                self.ptr.as_ptr(),
                &mut e,
                std::mem::size_of::<ffi::pt_event>(),
            )
        };
        check(r).map(|s| (event_from_raw(&e), Status(s)))
    }
}

impl Drop for QueryDecoder<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by pt_qry_alloc_decoder, freed once.
        unsafe { ffi::pt_qry_free_decoder(self.ptr.as_ptr()) };
    }
}

// ---------------------------------------------------------------------------
// Packets: the encoder and the packet decoder

/// How an IP packet's payload is compressed (`enum pt_ip_compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Suppressed,
    Update16,
    Update32,
    Sext48,
    Update48,
    Full,
}

impl Compression {
    fn to_raw(self) -> u32 {
        match self {
            Compression::Suppressed => ffi::pt_ipc_suppressed,
            Compression::Update16 => ffi::pt_ipc_update_16,
            Compression::Update32 => ffi::pt_ipc_update_32,
            Compression::Sext48 => ffi::pt_ipc_sext_48,
            Compression::Update48 => ffi::pt_ipc_update_48,
            Compression::Full => ffi::pt_ipc_full,
        }
    }

    fn from_raw(v: u32) -> Option<Compression> {
        Some(match v {
            ffi::pt_ipc_suppressed => Compression::Suppressed,
            ffi::pt_ipc_update_16 => Compression::Update16,
            ffi::pt_ipc_update_32 => Compression::Update32,
            ffi::pt_ipc_sext_48 => Compression::Sext48,
            ffi::pt_ipc_update_48 => Compression::Update48,
            ffi::pt_ipc_full => Compression::Full,
            _ => return None,
        })
    }
}

/// The packets ptsim writes and dumps; anything else decodes as `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet {
    Pad,
    Psb,
    Psbend,
    Ovf,
    Stop,
    Fup(u64, Compression),
    Tip(u64, Compression),
    TipPge(u64, Compression),
    TipPgd(u64, Compression),
    /// `bits` TNT bits, oldest in the most significant of them.
    Tnt8 {
        payload: u8,
        bits: u8,
    },
    Tnt64 {
        payload: u64,
        bits: u8,
    },
    /// MODE.Exec (CS.L, CS.D).
    ModeExec {
        csl: bool,
        csd: bool,
    },
    ModeTsx,
    Tsc(u64),
    Tma {
        ctc: u16,
        fc: u16,
    },
    Cbr(u8),
    Mtc(u8),
    Cyc(u64),
    /// PTWRITE: `payload` of 4 (`plc` 0) or 8 (`plc` 1) bytes; `fup`: a FUP
    /// with the instruction's IP follows (the packet's IP bit).
    Ptw {
        payload: u64,
        plc: u8,
        fup: bool,
    },
    /// EXSTOP; `fup`: a FUP with the IP follows.
    Exstop {
        fup: bool,
    },
    /// MWAIT: hints (eax) and extensions (ecx).
    Mwait {
        hints: u32,
        ext: u32,
    },
    /// PWRE: C-state entry.
    Pwre {
        state: u8,
        sub_state: u8,
        hw: bool,
    },
    /// PWRX: C-state exit with the wake reason bits.
    Pwrx {
        last: u8,
        deepest: u8,
        interrupt: bool,
        store: bool,
        autonomous: bool,
    },
    /// CFE (control flow event, event trace): `kind` is `ffi::pt_cfe_*`;
    /// `ip`: a FUP with the IP follows.
    Cfe {
        kind: u32,
        vector: u8,
        ip: bool,
    },
    /// EVD (event data, event trace): `kind` is `ffi::pt_evd_*` (cr2,
    /// vmxq, vmxr).
    Evd {
        kind: u32,
        payload: u64,
    },
    /// Another packet type (`ppt_*`).
    Other(u32),
}

impl Packet {
    fn to_raw(self) -> Option<ffi::pt_packet> {
        // SAFETY: zero is a valid pt_packet (plain data).
        let mut p: ffi::pt_packet = unsafe { std::mem::zeroed() };
        p.type_ = match self {
            Packet::Pad => ffi::ppt_pad,
            Packet::Psb => ffi::ppt_psb,
            Packet::Psbend => ffi::ppt_psbend,
            Packet::Ovf => ffi::ppt_ovf,
            Packet::Stop => ffi::ppt_stop,
            Packet::Fup(..)
            | Packet::Tip(..)
            | Packet::TipPge(..)
            | Packet::TipPgd(..)
            | Packet::Tnt8 { .. }
            | Packet::Tnt64 { .. }
            | Packet::ModeExec { .. } => self.write_flow(&mut p),
            Packet::Tsc(_)
            | Packet::Tma { .. }
            | Packet::Cbr(_)
            | Packet::Mtc(_)
            | Packet::Cyc(_) => self.write_timing(&mut p),
            Packet::Ptw { .. }
            | Packet::Exstop { .. }
            | Packet::Mwait { .. }
            | Packet::Pwre { .. }
            | Packet::Pwrx { .. }
            | Packet::Cfe { .. }
            | Packet::Evd { .. } => self.write_power(&mut p),
            Packet::ModeTsx | Packet::Other(_) => return None,
        };
        Some(p)
    }

    /// Writes a control-flow packet's (FUP, TIP*, TNT, MODE.Exec) payload
    /// into `p` and returns its `ppt_*` type.
    fn write_flow(self, p: &mut ffi::pt_packet) -> u32 {
        let ip = |p: &mut ffi::pt_packet, ip: u64, c: Compression| {
            p.payload.ip = ffi::pt_packet_ip {
                ipc: c.to_raw(),
                ip,
            };
        };
        match self {
            Packet::Fup(a, c) => {
                ip(p, a, c);
                ffi::ppt_fup
            }
            Packet::Tip(a, c) => {
                ip(p, a, c);
                ffi::ppt_tip
            }
            Packet::TipPge(a, c) => {
                ip(p, a, c);
                ffi::ppt_tip_pge
            }
            Packet::TipPgd(a, c) => {
                ip(p, a, c);
                ffi::ppt_tip_pgd
            }
            Packet::Tnt8 { payload, bits } => {
                p.payload.tnt = ffi::pt_packet_tnt {
                    bit_size: bits,
                    payload: u64::from(payload),
                };
                ffi::ppt_tnt_8
            }
            Packet::Tnt64 { payload, bits } => {
                p.payload.tnt = ffi::pt_packet_tnt {
                    bit_size: bits,
                    payload,
                };
                ffi::ppt_tnt_64
            }
            Packet::ModeExec { csl, csd } => {
                // SAFETY: writing plain-data union fields.
                unsafe {
                    p.payload.mode.leaf = ffi::pt_mol_exec;
                    p.payload.mode.bits.exec.set_csl(u32::from(csl));
                    p.payload.mode.bits.exec.set_csd(u32::from(csd));
                }
                ffi::ppt_mode
            }
            _ => unreachable!("to_raw sends only control-flow packets here"),
        }
    }

    /// Writes a timing packet's (TSC, TMA, CBR, MTC, CYC) payload into `p`
    /// and returns its `ppt_*` type.
    fn write_timing(self, p: &mut ffi::pt_packet) -> u32 {
        match self {
            Packet::Tsc(v) => {
                p.payload.tsc = ffi::pt_packet_tsc { tsc: v };
                ffi::ppt_tsc
            }
            Packet::Tma { ctc, fc } => {
                p.payload.tma = ffi::pt_packet_tma { ctc, fc };
                ffi::ppt_tma
            }
            Packet::Cbr(r) => {
                p.payload.cbr.ratio = r;
                ffi::ppt_cbr
            }
            Packet::Mtc(c) => {
                p.payload.mtc = ffi::pt_packet_mtc { ctc: c };
                ffi::ppt_mtc
            }
            Packet::Cyc(v) => {
                p.payload.cyc = ffi::pt_packet_cyc { value: v };
                ffi::ppt_cyc
            }
            _ => unreachable!("to_raw sends only timing packets here"),
        }
    }

    /// Writes a PTWRITE, power (EXSTOP, MWAIT, PWRE, PWRX) or event-trace
    /// (CFE, EVD) packet's payload into `p` and returns its `ppt_*` type.
    fn write_power(self, p: &mut ffi::pt_packet) -> u32 {
        match self {
            Packet::Ptw { payload, plc, fup } => {
                // SAFETY: writing plain-data union fields.
                unsafe {
                    p.payload.ptw.payload = payload;
                    p.payload.ptw.plc = plc;
                    p.payload.ptw.set_ip(u32::from(fup));
                }
                ffi::ppt_ptw
            }
            Packet::Exstop { fup } => {
                // SAFETY: writing a plain-data union field.
                unsafe { p.payload.exstop.set_ip(u32::from(fup)) };
                ffi::ppt_exstop
            }
            Packet::Mwait { hints, ext } => {
                p.payload.mwait = ffi::pt_packet_mwait { hints, ext };
                ffi::ppt_mwait
            }
            Packet::Pwre {
                state,
                sub_state,
                hw,
            } => {
                // SAFETY: writing plain-data union fields.
                unsafe {
                    p.payload.pwre.state = state;
                    p.payload.pwre.sub_state = sub_state;
                    p.payload.pwre.set_hw(u32::from(hw));
                }
                ffi::ppt_pwre
            }
            Packet::Pwrx {
                last,
                deepest,
                interrupt,
                store,
                autonomous,
            } => {
                // SAFETY: writing plain-data union fields.
                unsafe {
                    p.payload.pwrx.last = last;
                    p.payload.pwrx.deepest = deepest;
                    p.payload.pwrx.set_interrupt(u32::from(interrupt));
                    p.payload.pwrx.set_store(u32::from(store));
                    p.payload.pwrx.set_autonomous(u32::from(autonomous));
                }
                ffi::ppt_pwrx
            }
            Packet::Cfe { kind, vector, ip } => {
                // SAFETY: writing plain-data union fields.
                unsafe {
                    p.payload.cfe.type_ = kind;
                    p.payload.cfe.vector = vector;
                    p.payload.cfe.set_ip(u32::from(ip));
                }
                ffi::ppt_cfe
            }
            Packet::Evd { kind, payload } => {
                p.payload.evd = ffi::pt_packet_evd {
                    type_: kind,
                    payload,
                };
                ffi::ppt_evd
            }
            _ => unreachable!("to_raw sends only PTWRITE, power and event-trace packets here"),
        }
    }

    fn from_raw(p: &ffi::pt_packet) -> Packet {
        let pl = &p.payload;
        // SAFETY: each arm reads the payload variant `type_` names; all
        // are plain data.
        unsafe {
            let ip = || (pl.ip.ip, Compression::from_raw(pl.ip.ipc));
            match p.type_ {
                ffi::ppt_pad => Packet::Pad,
                ffi::ppt_psb => Packet::Psb,
                ffi::ppt_psbend => Packet::Psbend,
                ffi::ppt_ovf => Packet::Ovf,
                ffi::ppt_stop => Packet::Stop,
                ffi::ppt_fup | ffi::ppt_tip | ffi::ppt_tip_pge | ffi::ppt_tip_pgd => {
                    let (a, c) = ip();
                    let Some(c) = c else {
                        return Packet::Other(p.type_);
                    };
                    match p.type_ {
                        ffi::ppt_fup => Packet::Fup(a, c),
                        ffi::ppt_tip => Packet::Tip(a, c),
                        ffi::ppt_tip_pge => Packet::TipPge(a, c),
                        _ => Packet::TipPgd(a, c),
                    }
                }
                ffi::ppt_tnt_8 => Packet::Tnt8 {
                    payload: pl.tnt.payload as u8,
                    bits: pl.tnt.bit_size,
                },
                ffi::ppt_tnt_64 => Packet::Tnt64 {
                    payload: pl.tnt.payload,
                    bits: pl.tnt.bit_size,
                },
                ffi::ppt_mode if pl.mode.leaf == ffi::pt_mol_exec => Packet::ModeExec {
                    csl: pl.mode.bits.exec.csl() != 0,
                    csd: pl.mode.bits.exec.csd() != 0,
                },
                ffi::ppt_mode => Packet::ModeTsx,
                ffi::ppt_tsc => Packet::Tsc(pl.tsc.tsc),
                ffi::ppt_tma => Packet::Tma {
                    ctc: pl.tma.ctc,
                    fc: pl.tma.fc,
                },
                ffi::ppt_cbr => Packet::Cbr(pl.cbr.ratio),
                ffi::ppt_mtc => Packet::Mtc(pl.mtc.ctc),
                ffi::ppt_cyc => Packet::Cyc(pl.cyc.value),
                ffi::ppt_ptw => Packet::Ptw {
                    payload: pl.ptw.payload,
                    plc: pl.ptw.plc,
                    fup: pl.ptw.ip() != 0,
                },
                ffi::ppt_exstop => Packet::Exstop {
                    fup: pl.exstop.ip() != 0,
                },
                ffi::ppt_mwait => Packet::Mwait {
                    hints: pl.mwait.hints,
                    ext: pl.mwait.ext,
                },
                ffi::ppt_pwre => Packet::Pwre {
                    state: pl.pwre.state,
                    sub_state: pl.pwre.sub_state,
                    hw: pl.pwre.hw() != 0,
                },
                ffi::ppt_pwrx => Packet::Pwrx {
                    last: pl.pwrx.last,
                    deepest: pl.pwrx.deepest,
                    interrupt: pl.pwrx.interrupt() != 0,
                    store: pl.pwrx.store() != 0,
                    autonomous: pl.pwrx.autonomous() != 0,
                },
                ffi::ppt_cfe => Packet::Cfe {
                    kind: pl.cfe.type_,
                    vector: pl.cfe.vector,
                    ip: pl.cfe.ip() != 0,
                },
                ffi::ppt_evd => Packet::Evd {
                    kind: pl.evd.type_,
                    payload: pl.evd.payload,
                },
                t => Packet::Other(t),
            }
        }
    }
}

/// libipt's packet encoder with a scratch buffer of its own: each packet
/// is encoded at the scratch's start and handed back as bytes.
pub struct Encoder {
    ptr: NonNull<ffi::pt_encoder>,
    /// Written by libipt through the pointer in its config; freed after it.
    scratch: Box<[u8; 32]>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Encoder")
    }
}

// SAFETY: the pt_encoder is a plain heap object with no thread affinity,
// and the scratch is owned by this value alone.
unsafe impl Send for Encoder {}

impl Encoder {
    pub fn new() -> Result<Encoder> {
        let mut scratch = Box::new([0u8; 32]);
        let c = Config::default().with_buffer(scratch.as_mut_ptr(), scratch.len());
        // SAFETY: libipt copies the config; the scratch is heap memory that
        // stays put (a Box) and lives as long as the encoder.
        let p = unsafe { ffi::pt_alloc_encoder(&c) };
        NonNull::new(p)
            .map(|ptr| Encoder { ptr, scratch })
            .ok_or(Error::INVALID)
    }

    /// Encodes `pkt`; its bytes.
    pub fn encode(&mut self, pkt: Packet) -> Result<&[u8]> {
        let raw = pkt.to_raw().ok_or(Error(ffi::pte_bad_opc))?;
        // SAFETY: live encoder.
        check(unsafe { ffi::pt_enc_sync_set(self.ptr.as_ptr(), 0) })?;
        // SAFETY: live encoder; it writes into the scratch, which nothing
        // else borrows during the call.
        let n = check(unsafe { ffi::pt_enc_next(self.ptr.as_ptr(), &raw) })? as usize;
        Ok(&self.scratch[..n.min(self.scratch.len())])
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        // SAFETY: allocated by pt_alloc_encoder, freed once, before the
        // scratch (a field, dropped after this).
        unsafe { ffi::pt_free_encoder(self.ptr.as_ptr()) };
    }
}

/// libipt's packet decoder over a borrowed trace buffer.
pub struct PacketDecoder<'a> {
    ptr: NonNull<ffi::pt_packet_decoder>,
    _buf: PhantomData<&'a [u8]>,
}

impl<'a> PacketDecoder<'a> {
    pub fn new(cfg: &Config, trace: &'a [u8]) -> Result<PacketDecoder<'a>> {
        let c = cfg.with_buffer(trace.as_ptr(), trace.len());
        // SAFETY: as in BlockDecoder::new.
        let p = unsafe { ffi::pt_pkt_alloc_decoder(&c) };
        NonNull::new(p)
            .map(|ptr| PacketDecoder {
                ptr,
                _buf: PhantomData,
            })
            .ok_or(Error::INVALID)
    }

    pub fn sync_forward(&mut self) -> Result<()> {
        // SAFETY: live decoder.
        check(unsafe { ffi::pt_pkt_sync_forward(self.ptr.as_ptr()) }).map(|_| ())
    }

    pub fn offset(&self) -> Result<u64> {
        let mut o = 0;
        // SAFETY: live decoder, valid out pointer.
        check(unsafe { ffi::pt_pkt_get_offset(self.ptr.as_ptr(), &mut o) })?;
        Ok(o)
    }

    pub fn next_packet(&mut self) -> Result<Packet> {
        // SAFETY: zero is a valid pt_packet (plain data).
        let mut p: ffi::pt_packet = unsafe { std::mem::zeroed() };
        // SAFETY: live decoder; `p` has the size given.
        let r = unsafe {
            ffi::pt_pkt_next(
                self.ptr.as_ptr(),
                &mut p,
                std::mem::size_of::<ffi::pt_packet>(),
            )
        };
        check(r).map(|_| Packet::from_raw(&p))
    }
}

impl Drop for PacketDecoder<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by pt_pkt_alloc_decoder, freed once.
        unsafe { ffi::pt_pkt_free_decoder(self.ptr.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_the_one_built_with() {
        let (major, minor, patch) = version();
        let want = format!("libipt {major}.{minor}.{patch} (");
        assert!(
            crate::BUILT_WITH.starts_with(&want),
            "{} vs {want}",
            crate::BUILT_WITH
        );
        assert!((major, minor, patch) >= (2, 1, 2), "{:?}", version());
    }

    #[test]
    fn encode_then_decode_packets() {
        let pkts = [
            Packet::Psb,
            Packet::ModeExec {
                csl: true,
                csd: false,
            },
            Packet::Fup(0x40_1000, Compression::Sext48),
            Packet::Psbend,
            Packet::Tnt8 {
                payload: 0b101,
                bits: 3,
            },
            Packet::Tip(0x40_2000, Compression::Update16),
            Packet::Tsc(0x1234_5678),
            Packet::Tma { ctc: 7, fc: 3 },
            Packet::Mtc(9),
            Packet::Cyc(17),
            Packet::Cbr(40),
            Packet::TipPgd(0, Compression::Suppressed),
            Packet::Ptw {
                payload: 0x1234_5678_9abc_def0,
                plc: 1,
                fup: false,
            },
            Packet::Ptw {
                payload: 0xdead_beef,
                plc: 0,
                fup: true,
            },
            Packet::Exstop { fup: true },
            Packet::Mwait {
                hints: 0x20,
                ext: 1,
            },
            Packet::Pwre {
                state: 2,
                sub_state: 1,
                hw: true,
            },
            Packet::Pwrx {
                last: 2,
                deepest: 6,
                interrupt: true,
                store: false,
                autonomous: false,
            },
            Packet::Cfe {
                kind: ffi::pt_cfe_intr,
                vector: 14,
                ip: true,
            },
            Packet::Evd {
                kind: ffi::pt_evd_cr2,
                payload: 0x7fff_0000,
            },
            Packet::Ovf,
        ];
        let mut enc = Encoder::new().unwrap();
        let mut bytes = Vec::new();
        for p in pkts {
            bytes.extend_from_slice(enc.encode(p).unwrap());
        }
        let mut dec = PacketDecoder::new(&Config::default(), &bytes).unwrap();
        dec.sync_forward().unwrap();
        let mut back = Vec::new();
        loop {
            match dec.next_packet() {
                Ok(p) => back.push(p),
                Err(e) => {
                    assert_eq!(e, Error::EOS);
                    break;
                }
            }
        }
        let mut want = pkts.to_vec();
        // libipt decodes an update-16 IP as given (the low 16 bits).
        want[5] = Packet::Tip(0x2000, Compression::Update16);
        assert_eq!(back, want);
    }

    #[test]
    fn unknown_cpu_is_refused_and_known_one_accepted() {
        let mut c = Config::default();
        assert_eq!(
            c.set_cpu(Cpu {
                family: 0,
                model: 0,
                stepping: 0
            }),
            Err(Error::BAD_CPU)
        );
        c.set_cpu(Cpu {
            family: 6,
            model: 0x55,
            stepping: 4,
        })
        .unwrap();
    }

    #[test]
    fn newer_cpus_get_their_errata_from_the_table() {
        for (family, model) in [(18, 1), (18, 3), (6, 213)] {
            let mut c = Config::default();
            c.set_cpu(Cpu {
                family,
                model,
                stepping: 0,
            })
            .unwrap();
            assert_eq!(c.errata(), BDM70_SKD022_APL11, "{family}/{model}");
        }
        // The same set as libipt 2.1.2's for 6/198, which the vectors
        // name with the same tests.
        let mut c = Config::default();
        c.set_cpu(Cpu {
            family: 6,
            model: 198,
            stepping: 0,
        })
        .unwrap();
        assert_eq!(c.errata(), BDM70_SKD022_APL11);
    }

    #[test]
    fn image_memory_callback_reads_and_records_misses() {
        let mut img = Image::new().unwrap();
        let mut r = img.as_ref();
        r.set_memory(vec![(0x1000, vec![0x90; 16])]);
        // A block decoder over a trace that enables at 0x1000 and runs into
        // unmapped memory at 0x1010.
        let mut enc = Encoder::new().unwrap();
        let mut pt = Vec::new();
        for p in [
            Packet::Psb,
            Packet::ModeExec {
                csl: true,
                csd: false,
            },
            Packet::Psbend,
            Packet::TipPge(0x1000, Compression::Sext48),
            Packet::Tnt8 {
                payload: 1,
                bits: 1,
            },
        ] {
            pt.extend_from_slice(enc.encode(p).unwrap());
        }
        let mut d = BlockDecoder::new(&Config::default(), &pt).unwrap();
        d.image().set_memory(vec![(0x1000, vec![0x90; 16])]);
        let mut st = d.sync_forward().unwrap();
        let mut insns = 0;
        let err = loop {
            while st.event_pending() {
                st = d.event().unwrap().1;
            }
            let (b, r) = d.next_block();
            insns += u32::from(b.ninsn);
            match r {
                Ok(s) => st = s,
                Err(e) => break e,
            }
        };
        assert_eq!(err, Error::NOMAP);
        assert_eq!(insns, 16, "the nops before the error are in the block");
        assert_eq!(d.image().take_miss(), Some(0x1010));
    }

    /// pttypes numbers errors, statuses, modes, instruction classes and
    /// event types as the libipt built with does.
    #[test]
    fn pttypes_numbers_are_libipts() {
        assert_eq!(Error::OK.0, ffi::pte_ok);
        assert_eq!(Error::INTERNAL.0, ffi::pte_internal);
        assert_eq!(Error::INVALID.0, ffi::pte_invalid);
        assert_eq!(Error::NOSYNC.0, ffi::pte_nosync);
        assert_eq!(Error::BAD_OPC.0, ffi::pte_bad_opc);
        assert_eq!(Error::BAD_PACKET.0, ffi::pte_bad_packet);
        assert_eq!(Error::BAD_CONTEXT.0, ffi::pte_bad_context);
        assert_eq!(Error::EOS.0, ffi::pte_eos);
        assert_eq!(Error::BAD_QUERY.0, ffi::pte_bad_query);
        assert_eq!(Error::NOMEM.0, ffi::pte_nomem);
        assert_eq!(Error::BAD_CONFIG.0, ffi::pte_bad_config);
        assert_eq!(Error::NOIP.0, ffi::pte_noip);
        assert_eq!(Error::IP_SUPPRESSED.0, ffi::pte_ip_suppressed);
        assert_eq!(Error::NOMAP.0, ffi::pte_nomap);
        assert_eq!(Error::BAD_INSN.0, ffi::pte_bad_insn);
        assert_eq!(Error::NO_TIME.0, ffi::pte_no_time);
        assert_eq!(Error::NO_CBR.0, ffi::pte_no_cbr);
        assert_eq!(Error::BAD_IMAGE.0, ffi::pte_bad_image);
        assert_eq!(Error::BAD_LOCK.0, ffi::pte_bad_lock);
        assert_eq!(Error::NOT_SUPPORTED.0, ffi::pte_not_supported);
        assert_eq!(Error::RETSTACK_EMPTY.0, ffi::pte_retstack_empty);
        assert_eq!(Error::BAD_RETCOMP.0, ffi::pte_bad_retcomp);
        assert_eq!(Error::BAD_STATUS_UPDATE.0, ffi::pte_bad_status_update);
        assert_eq!(Error::NO_ENABLE.0, ffi::pte_no_enable);
        assert_eq!(Error::EVENT_IGNORED.0, ffi::pte_event_ignored);
        assert_eq!(Error::OVERFLOW.0, ffi::pte_overflow);
        assert_eq!(Error::BAD_FILE.0, ffi::pte_bad_file);
        assert_eq!(Error::BAD_CPU.0, ffi::pte_bad_cpu);
        assert_eq!(event_type::ENABLED, ffi::ptev_enabled);
        assert_eq!(event_type::DISABLED, ffi::ptev_disabled);
        assert_eq!(event_type::ASYNC_DISABLED, ffi::ptev_async_disabled);
        assert_eq!(event_type::ASYNC_BRANCH, ffi::ptev_async_branch);
        assert_eq!(event_type::PAGING, ffi::ptev_paging);
        assert_eq!(event_type::ASYNC_PAGING, ffi::ptev_async_paging);
        assert_eq!(event_type::OVERFLOW, ffi::ptev_overflow);
        assert_eq!(event_type::EXEC_MODE, ffi::ptev_exec_mode);
        assert_eq!(event_type::TSX, ffi::ptev_tsx);
        assert_eq!(event_type::STOP, ffi::ptev_stop);
        assert_eq!(event_type::VMCS, ffi::ptev_vmcs);
        assert_eq!(event_type::ASYNC_VMCS, ffi::ptev_async_vmcs);
        assert_eq!(event_type::EXSTOP, ffi::ptev_exstop);
        assert_eq!(event_type::MWAIT, ffi::ptev_mwait);
        assert_eq!(event_type::PWRE, ffi::ptev_pwre);
        assert_eq!(event_type::PWRX, ffi::ptev_pwrx);
        assert_eq!(event_type::PTWRITE, ffi::ptev_ptwrite);
        assert_eq!(event_type::TICK, ffi::ptev_tick);
        assert_eq!(event_type::CBR, ffi::ptev_cbr);
        assert_eq!(event_type::MNT, ffi::ptev_mnt);
        assert_eq!(event_type::TIP, ffi::ptev_tip);
        assert_eq!(event_type::TNT, ffi::ptev_tnt);
        assert_eq!(event_type::IFLAGS, ffi::ptev_iflags);
        assert_eq!(event_type::INTERRUPT, ffi::ptev_interrupt);
        assert_eq!(event_type::IRET, ffi::ptev_iret);
        assert_eq!(event_type::SMI, ffi::ptev_smi);
        assert_eq!(event_type::RSM, ffi::ptev_rsm);
        assert_eq!(event_type::SIPI, ffi::ptev_sipi);
        assert_eq!(event_type::INIT, ffi::ptev_init);
        assert_eq!(event_type::VMENTRY, ffi::ptev_vmentry);
        assert_eq!(event_type::VMEXIT, ffi::ptev_vmexit);
        assert_eq!(event_type::SHUTDOWN, ffi::ptev_shutdown);
        assert_eq!(event_type::UINTR, ffi::ptev_uintr);
        assert_eq!(event_type::UIRET, ffi::ptev_uiret);
        assert_eq!(iclass::UNKNOWN, ffi::ptic_unknown);
        assert_eq!(iclass::OTHER, ffi::ptic_other);
        assert_eq!(iclass::CALL, ffi::ptic_call);
        assert_eq!(iclass::RETURN, ffi::ptic_return);
        assert_eq!(iclass::JUMP, ffi::ptic_jump);
        assert_eq!(iclass::COND_JUMP, ffi::ptic_cond_jump);
        assert_eq!(iclass::FAR_CALL, ffi::ptic_far_call);
        assert_eq!(iclass::FAR_RETURN, ffi::ptic_far_return);
        assert_eq!(iclass::FAR_JUMP, ffi::ptic_far_jump);
        assert_eq!(iclass::PTWRITE, ffi::ptic_ptwrite);
        assert_eq!(iclass::INDIRECT, ffi::ptic_indirect);
        assert_eq!(mode::UNKNOWN, ffi::ptem_unknown);
        assert_eq!(mode::BITS16, ffi::ptem_16bit);
        assert_eq!(mode::BITS32, ffi::ptem_32bit);
        assert_eq!(mode::BITS64, ffi::ptem_64bit);
        assert_eq!(Status::EVENT_PENDING, ffi::pts_event_pending);
        assert_eq!(Status::IP_SUPPRESSED, ffi::pts_ip_suppressed);
        assert_eq!(Status::EOS, ffi::pts_eos);
    }
}
