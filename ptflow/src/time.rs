//! Time as libipt's block decoder reports it (`pt_blk_time`): the TSC of
//! the last TSC packet, advanced by MTC packets (CTC ticks, converted with
//! CPUID.15H's ratio, after TMA told where between two MTCs the TSC was)
//! and by CYC packets (core cycles, converted with a core:bus ratio
//! calibrated from the cycles counted between MTC or TSC packets, or from
//! CBR and the nominal frequency). The same integer arithmetic as libipt
//! in the same order, so every event and block gets the very same TSC.

use pttypes::{Error as PtError, Frequency};

const BAD_CONFIG: PtError = PtError::BAD_CONFIG;
const BAD_CONTEXT: PtError = PtError::BAD_CONTEXT;
const BAD_PACKET: PtError = PtError::BAD_PACKET;

/// Fixed-point shift of the fast-counter:cycle ratio.
const FCR_SHR: u32 = 8;
/// Bits of an MTC payload and of TMA's CTC.
const MTC_BITS: u32 = 8;
const TMA_CTC_BITS: u32 = 16;
const TMA_CTC_MASK: u32 = (1 << TMA_CTC_BITS) - 1;

/// The timing state (`struct pt_time`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Time {
    pub tsc: u64,
    base: u64,
    fc: u64,
    ctc: u32,
    ctc_cyc: u32,
    pub lost_mtc: u32,
    pub lost_cyc: u32,
    pub have_tsc: bool,
    have_tma: bool,
    have_mtc: bool,
}

/// The calibration state (`struct pt_time_cal`).
#[derive(Debug, Clone, Copy)]
pub struct Calibration {
    fcr: u64,
    min_fcr: u64,
    max_fcr: u64,
    tsc: u64,
    cyc_tsc: u64,
    cyc_mtc: u64,
    ctc: u32,
    lost_mtc: u32,
    have_mtc: bool,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            fcr: 0,
            min_fcr: u64::MAX,
            max_fcr: 0,
            tsc: 0,
            cyc_tsc: 0,
            cyc_mtc: 0,
            ctc: 0,
            lost_mtc: 0,
            have_mtc: false,
        }
    }
}

fn ctc_delta(ctc: u32, last: u32, f: &Frequency) -> Result<u32, PtError> {
    let mut ctc = ctc;
    if ctc < last {
        ctc = ctc.wrapping_add(1u32.wrapping_shl(u32::from(f.mtc_freq) + MTC_BITS));
        if ctc < last {
            return Err(BAD_PACKET);
        }
    }
    Ok(ctc - last)
}

fn ctc_fc(ctc: u64, f: &Frequency) -> Result<u64, PtError> {
    let (eax, ebx) = (f.cpuid_15_eax, f.cpuid_15_ebx);
    if eax == 0 || ebx == 0 {
        return Err(BAD_CONFIG);
    }
    Ok(ctc.wrapping_mul(u64::from(ebx)) / u64::from(eax))
}

impl Time {
    /// The event time: (tsc, has it).
    pub fn query(&self) -> (u64, bool) {
        (self.tsc, self.have_tsc)
    }

    pub fn update_tsc(&mut self, tsc: u64) {
        self.have_tsc = true;
        self.have_tma = false;
        self.have_mtc = false;
        self.tsc = tsc;
        self.base = tsc;
        self.ctc = 0;
        self.fc = 0;
        self.lost_mtc = 0;
        self.lost_cyc = 0;
    }

    pub fn update_cbr(&mut self, ratio: u8) -> Result<(), PtError> {
        if ratio == 0 {
            return Err(BAD_PACKET);
        }
        Ok(())
    }

    pub fn update_tma(&mut self, ctc: u16, fc: u16, f: &Frequency) -> Result<(), PtError> {
        if !self.have_tsc || self.have_tma {
            return Err(BAD_CONTEXT);
        }
        if self.have_mtc {
            return Err(PtError::INTERNAL);
        }
        let mtc_hi = u32::from(f.mtc_freq) + MTC_BITS;
        let mask = 1u32.wrapping_shl(mtc_hi).wrapping_sub(1);
        self.have_tma = true;
        self.base = self.base.wrapping_sub(u64::from(fc));
        self.fc = self.fc.wrapping_add(u64::from(fc));
        if mtc_hi <= TMA_CTC_BITS {
            self.have_mtc = true;
        }
        self.ctc = u32::from(ctc) & mask;
        self.ctc_cyc = self.ctc;
        Ok(())
    }

    pub fn update_mtc(&mut self, payload: u8, f: &Frequency) -> Result<(), PtError> {
        let (have_tsc, have_tma, have_mtc) = (self.have_tsc, self.have_tma, self.have_mtc);
        if have_tsc && !have_tma {
            return Ok(());
        }
        let mut base = self.base;
        let mut last_ctc = self.ctc;
        let ctc = u32::from(payload).wrapping_shl(u32::from(f.mtc_freq));
        if self.fc != 0 || self.lost_cyc != 0 || !have_mtc {
            self.ctc_cyc = ctc;
        }
        self.have_mtc = true;
        self.fc = 0;
        self.ctc = ctc;
        self.lost_cyc = 0;
        if !have_mtc {
            if !have_tma {
                return Ok(());
            }
            if last_ctc & !TMA_CTC_MASK != 0 {
                return Err(PtError::INTERNAL);
            }
            let ctc_lo = ctc & TMA_CTC_MASK;
            let mut ctc_hi = ctc & !TMA_CTC_MASK;
            if ctc_lo < last_ctc {
                ctc_hi = ctc_hi.wrapping_sub(1 << TMA_CTC_BITS);
                ctc_hi &= 0xffu32.wrapping_shl(u32::from(f.mtc_freq));
            }
            last_ctc |= ctc_hi;
        }
        let delta = match ctc_delta(ctc, last_ctc, f) {
            Ok(d) => d,
            Err(e) => {
                self.lost_mtc += 1;
                return Err(e);
            }
        };
        let tsc = ctc_fc(u64::from(delta), f)?;
        base = base.wrapping_add(tsc);
        self.tsc = base;
        self.base = base;
        Ok(())
    }

    fn adjust_cyc(&self, cyc: u64, f: &Frequency, fcr: u64) -> Result<u64, PtError> {
        let (last_ctc, ctc) = (self.ctc_cyc, self.ctc);
        if ctc == last_ctc {
            return Ok(cyc);
        }
        let delta = ctc_delta(ctc, last_ctc, f)?;
        let fc = ctc_fc(u64::from(delta), f)?;
        let old_cyc = (fc << FCR_SHR) / fcr;
        Ok(cyc.max(old_cyc) - old_cyc)
    }

    pub fn update_cyc(&mut self, value: u64, f: &Frequency, fcr: u64) -> Result<(), PtError> {
        if fcr == 0 {
            self.lost_cyc += 1;
            return Ok(());
        }
        let mut cyc = value;
        let mut fc = self.fc;
        if fc == 0 {
            cyc = self.adjust_cyc(cyc, f, fcr)?;
        }
        fc = fc.wrapping_add(cyc.wrapping_mul(fcr) >> FCR_SHR);
        self.fc = fc;
        self.tsc = self.base.wrapping_add(fc);
        Ok(())
    }
}

impl Calibration {
    fn have_fcr(&self) -> bool {
        self.min_fcr <= self.max_fcr
    }

    /// The calibrated ratio; 0 without one.
    pub fn fcr(&self) -> u64 {
        if self.have_fcr() {
            self.fcr
        } else {
            0
        }
    }

    fn set_fcr(&mut self, fcr: u64) {
        self.fcr = fcr;
        self.min_fcr = self.min_fcr.min(fcr);
        self.max_fcr = self.max_fcr.max(fcr);
    }

    pub fn update_tsc(&mut self, tsc: u64) {
        self.tsc = tsc;
        self.cyc_tsc = 0;
    }

    pub fn header_tsc(&mut self, tsc: u64) -> Result<(), PtError> {
        let last = self.tsc;
        let cyc = self.cyc_tsc;
        self.tsc = tsc;
        self.cyc_tsc = 0;
        if last == 0 || cyc == 0 || self.have_mtc {
            return Ok(());
        }
        let mut tsc = tsc;
        if tsc < last {
            tsc = tsc.wrapping_add(1u64 << 56);
            if tsc < last {
                return Err(BAD_PACKET);
            }
        }
        let delta = tsc - last;
        if delta & !(!0u64 >> FCR_SHR) != 0 {
            return Err(PtError::INTERNAL);
        }
        self.set_fcr((delta << FCR_SHR) / cyc);
        Ok(())
    }

    pub fn update_cbr(&mut self, ratio: u8, f: &Frequency) -> Result<(), PtError> {
        *self = Calibration::default();
        self.header_cbr(ratio, f)
    }

    pub fn header_cbr(&mut self, ratio: u8, f: &Frequency) -> Result<(), PtError> {
        let p1 = u64::from(f.nom_freq);
        if p1 == 0 {
            return Ok(());
        }
        if ratio == 0 {
            return Err(BAD_PACKET);
        }
        self.set_fcr((p1 << FCR_SHR) / u64::from(ratio));
        Ok(())
    }

    pub fn update_mtc(&mut self, payload: u8, f: &Frequency) -> Result<(), PtError> {
        let last_ctc = self.ctc;
        let cyc = self.cyc_mtc;
        let ctc = u32::from(payload).wrapping_shl(u32::from(f.mtc_freq));
        if !self.have_mtc {
            self.cyc_mtc = 0;
            self.ctc = ctc;
            self.have_mtc = true;
            return Ok(());
        }
        if cyc == 0 {
            return Ok(());
        }
        self.have_mtc = true;
        self.cyc_mtc = 0;
        self.ctc = ctc;
        self.lost_mtc += 1;
        let delta = ctc_delta(ctc, last_ctc, f)?;
        let fc = ctc_fc(u64::from(delta), f)?;
        if fc & !(!0u64 >> FCR_SHR) != 0 {
            return Err(PtError::INTERNAL);
        }
        // SKL168's check is armed only at a PSB, which libipt's event
        // decoder never does: it does not apply.
        self.set_fcr((fc << FCR_SHR) / cyc);
        self.lost_mtc = 0;
        Ok(())
    }

    /// Forgets what an overflow made stale (`keep_tcal_on_ovf`).
    pub fn update_ovf(&mut self) {
        self.tsc = 0;
        self.cyc_tsc = 0;
        self.cyc_mtc = 0;
        self.ctc = 0;
        self.have_mtc = false;
    }

    pub fn update_cyc(&mut self, value: u64) {
        self.cyc_mtc = self.cyc_mtc.wrapping_add(value);
        self.cyc_tsc = self.cyc_tsc.wrapping_add(value);
    }
}

/// `Err` unless it is a configuration error, which libipt ignores (it
/// only makes timing imprecise).
pub fn ignore_config(r: Result<(), PtError>) -> Result<(), PtError> {
    match r {
        Err(e) if e == BAD_CONFIG => Ok(()),
        r => r,
    }
}
