//! Record serialization: an [`Event`] to its bytes (little-endian), the
//! inverse of [`crate::parse`]. The sample_id trailer is laid out from the
//! attr the event's sample id names (the first attr when it names none);
//! trailer fields the attr has but the event lacks are written as 0.
//!
//! AUXTRACE and HEADER_TRACING_DATA are followed by their data, as in a
//! perf.data stream.

use crate::attr::AttrSet;
use crate::auxtrace_info::AuxtraceInfo;
use crate::error::Error;
use crate::parse::HEADER_LEN;
use crate::record::{kind, misc, Auxtrace, Event, FileId, IdIndexEntry, Mmap, Record, TimeConv};
use crate::sample::SampleFormat;
use crate::sink::{padded_str, Buf};

/// Serializes `ev` (header, body, trailer, then any following data) onto `out`.
/// Returns the length of the record itself (without following data).
pub fn serialize_event(attrs: &AttrSet, ev: &Event<'_>, out: &mut Vec<u8>) -> Result<usize, Error> {
    let k = ev.record.kind();
    let name = kind::name(k);
    let mut b = Buf::buf();
    let (misc_bits, follow) = write_body(attrs, ev, name, &mut b)?;

    if kind::is_kernel(k) && k != kind::SAMPLE {
        if let Some(f) = sample_format(attrs, name, ev.sample_id.identifier, ev.sample_id.id)? {
            f.write_sample_id(&ev.sample_id, &mut b)?;
        }
    }

    let size = HEADER_LEN + b.len();
    let size16 = u16::try_from(size).map_err(|_| {
        Error::unwritable(
            name,
            format!("a {size}-byte record exceeds perf_event_header.size's 65535"),
        )
    })?;
    let mut h = Buf::buf();
    h.u32(k)?;
    h.u16(misc_bits)?;
    h.u16(size16)?;
    out.extend_from_slice(h.as_slice());
    out.extend_from_slice(b.as_slice());
    out.extend_from_slice(follow);
    Ok(size)
}

/// The sample format of the attr that `identifier` (or else `id`) names;
/// `None` when there are no attrs at all, an error when none matches.
fn sample_format(
    attrs: &AttrSet,
    name: &'static str,
    identifier: Option<u64>,
    id: Option<u64>,
) -> Result<Option<SampleFormat>, Error> {
    if attrs.is_empty() {
        return Ok(None);
    }
    attrs
        .for_sample_id(identifier, id)
        .map(|e| Some(e.format))
        .ok_or_else(|| {
            Error::unwritable(
                name,
                format!(
                    "sample id {:?} matches none of the attrs",
                    identifier.or(id)
                ),
            )
        })
}

/// Writes the record's fields (between header and sample_id trailer) onto
/// `b`, one arm per kind. Returns the header's misc bits (MMAP2 sets or clears
/// the build-id bit) and the data that follows the record in the stream.
fn write_body<'e>(
    attrs: &AttrSet,
    ev: &'e Event<'_>,
    name: &'static str,
    b: &mut Buf,
) -> Result<(u16, &'e [u8]), Error> {
    let mut misc_bits = ev.misc;
    let mut follow: &[u8] = &[];
    match &ev.record {
        Record::Sample(s) => {
            let f = sample_format(attrs, name, s.identifier, s.id)?
                .ok_or_else(|| Error::unwritable(name, "a SAMPLE needs an attr to be written"))?;
            f.write_sample(s, b)?;
        }
        Record::Mmap(m) => misc_bits = write_mmap(m, misc_bits, name, b)?,
        Record::Comm { pid, tid, comm } => {
            b.u32(*pid)?;
            b.u32(*tid)?;
            b.bytes(&padded_str(comm, 8))?;
        }
        Record::Fork(t) | Record::Exit(t) => {
            b.u32(t.pid)?;
            b.u32(t.ppid)?;
            b.u32(t.tid)?;
            b.u32(t.ptid)?;
            b.u64(t.time)?;
        }
        Record::Switch => {}
        Record::SwitchCpuWide {
            next_prev_pid,
            next_prev_tid,
        } => {
            b.u32(*next_prev_pid)?;
            b.u32(*next_prev_tid)?;
        }
        Record::Lost { id, lost } => {
            b.u64(*id)?;
            b.u64(*lost)?;
        }
        Record::LostSamples { lost } => b.u64(*lost)?,
        Record::Aux {
            aux_offset,
            aux_size,
            flags,
        } => {
            b.u64(*aux_offset)?;
            b.u64(*aux_size)?;
            b.u64(*flags)?;
        }
        Record::ItraceStart { pid, tid } => {
            b.u32(*pid)?;
            b.u32(*tid)?;
        }
        Record::Throttle {
            time,
            id,
            stream_id,
            ..
        } => {
            b.u64(*time)?;
            b.u64(*id)?;
            b.u64(*stream_id)?;
        }
        Record::Ksymbol {
            addr,
            len,
            ksym_type,
            flags,
            name,
        } => {
            b.u64(*addr)?;
            b.u32(*len)?;
            b.u16(*ksym_type)?;
            b.u16(*flags)?;
            b.bytes(&padded_str(name, 8))?;
        }
        Record::TextPoke {
            addr,
            old_bytes,
            new_bytes,
        } => write_text_poke(*addr, old_bytes, new_bytes, name, b)?,
        Record::HeaderAttr { attr, ids } => {
            attr.write(b)?;
            for id in ids {
                b.u64(*id)?;
            }
        }
        Record::HeaderFeature { feature, data } => {
            b.u64(*feature)?;
            b.bytes(data)?;
        }
        Record::HeaderBuildId { data } | Record::AuxtraceError { data } => b.bytes(data)?,
        Record::HeaderTracingData { data } => {
            let size = u32::try_from(data.len())
                .map_err(|_| Error::unwritable(name, "tracing data exceeds 4 GiB"))?;
            b.u32(size)?;
            follow = data;
        }
        Record::FinishedRound | Record::FinishedInit => {}
        Record::IdIndex(v) => write_id_index(v, b)?,
        Record::AuxtraceInfo(i) => write_auxtrace_info(i, b)?,
        Record::Auxtrace(a) => {
            write_auxtrace(a, b)?;
            follow = &a.data;
        }
        Record::ThreadMap(v) => write_thread_map(v, b)?,
        Record::CpuMap(cpus) => write_cpu_map(cpus, name, b)?,
        Record::TimeConv(t) => write_time_conv(t, b)?,
        Record::Unknown { body, .. } => b.bytes(body)?,
    }
    Ok((misc_bits, follow))
}

/// MMAP's fields, and MMAP2's when the mapping has a file id (and so prot and
/// flags). Returns `misc` with the build-id bit matching the file id written.
fn write_mmap(m: &Mmap, misc: u16, name: &'static str, b: &mut Buf) -> Result<u16, Error> {
    b.u32(m.pid)?;
    b.u32(m.tid)?;
    b.u64(m.addr)?;
    b.u64(m.len)?;
    b.u64(m.pgoff)?;
    let mut misc = misc;
    if let Some(id) = &m.file_id {
        misc = write_mmap2_file_id(id, misc, name, b)?;
        b.u32(m.prot.unwrap_or(0))?;
        b.u32(m.flags.unwrap_or(0))?;
    }
    b.bytes(&padded_str(&m.filename, 8))?;
    Ok(misc)
}

/// MMAP2's union, the inode or the build id zero-padded to 20 bytes. Returns
/// `misc` with PERF_RECORD_MISC_MMAP_BUILD_ID set for a build id, else clear.
fn write_mmap2_file_id(
    id: &FileId,
    misc: u16,
    name: &'static str,
    b: &mut Buf,
) -> Result<u16, Error> {
    match id {
        FileId::Inode {
            maj,
            min,
            ino,
            ino_generation,
        } => {
            b.u32(*maj)?;
            b.u32(*min)?;
            b.u64(*ino)?;
            b.u64(*ino_generation)?;
            Ok(misc & !misc::MMAP_BUILD_ID)
        }
        FileId::BuildId(id) => {
            if id.len() > 20 {
                return Err(Error::unwritable(
                    name,
                    format!("a {}-byte build-id (MMAP2 holds 20)", id.len()),
                ));
            }
            b.u8(id.len() as u8)?;
            b.u8(0)?;
            b.u16(0)?;
            b.bytes(id)?;
            b.zeros(20 - id.len())?;
            Ok(misc | misc::MMAP_BUILD_ID)
        }
    }
}

/// TEXT_POKE's fields: the two lengths, old then new bytes, zero-padded to 8.
fn write_text_poke(
    addr: u64,
    old_bytes: &[u8],
    new_bytes: &[u8],
    name: &'static str,
    b: &mut Buf,
) -> Result<(), Error> {
    let old = u16::try_from(old_bytes.len())
        .map_err(|_| Error::unwritable(name, "old bytes exceed 65535"))?;
    let new = u16::try_from(new_bytes.len())
        .map_err(|_| Error::unwritable(name, "new bytes exceed 65535"))?;
    b.u64(addr)?;
    b.u16(old)?;
    b.u16(new)?;
    b.bytes(old_bytes)?;
    b.bytes(new_bytes)?;
    b.pad_to(8)?;
    Ok(())
}

/// ID_INDEX in its perf 5 form: `nr`, then id, idx, cpu and tid per entry.
fn write_id_index(v: &[IdIndexEntry], b: &mut Buf) -> Result<(), Error> {
    b.u64(v.len() as u64)?;
    for e in v {
        b.u64(e.id)?;
        b.u64(e.idx)?;
        b.u64(e.cpu)?;
        b.u64(e.tid)?;
    }
    Ok(())
}

/// AUXTRACE_INFO: the type, a zero reserved word, then the private words.
fn write_auxtrace_info(i: &AuxtraceInfo, b: &mut Buf) -> Result<(), Error> {
    b.u32(i.kind)?;
    b.u32(0)?;
    for w in &i.priv_words {
        b.u64(*w)?;
    }
    Ok(())
}

/// AUXTRACE's fields, its `size` taken from the data that follows it.
fn write_auxtrace(a: &Auxtrace<'_>, b: &mut Buf) -> Result<(), Error> {
    b.u64(a.data.len() as u64)?;
    b.u64(a.offset)?;
    b.u64(a.reference)?;
    b.u32(a.idx)?;
    b.u32(a.tid)?;
    b.u32(a.cpu)?;
    b.u32(0)?;
    Ok(())
}

/// THREAD_MAP: `nr`, then each pid with its comm cut or zero-padded to 16 bytes.
fn write_thread_map(v: &[(u64, String)], b: &mut Buf) -> Result<(), Error> {
    b.u64(v.len() as u64)?;
    for (pid, comm) in v {
        b.u64(*pid)?;
        let c = comm.as_bytes();
        let n = c.len().min(16);
        b.bytes(&c[..n])?;
        b.zeros(16 - n)?;
    }
    Ok(())
}

/// CPU_MAP in its list form (type 0), zero-padded to 8 bytes.
fn write_cpu_map(cpus: &[u32], name: &'static str, b: &mut Buf) -> Result<(), Error> {
    let nr =
        u16::try_from(cpus.len()).map_err(|_| Error::unwritable(name, "more than 65535 cpus"))?;
    b.u16(0)?;
    b.u16(nr)?;
    for &cpu in cpus {
        let cpu = u16::try_from(cpu)
            .map_err(|_| Error::unwritable(name, format!("cpu {cpu} exceeds u16")))?;
        b.u16(cpu)?;
    }
    b.pad_to(8)?;
    Ok(())
}

/// TIME_CONV: the three-field form, or the long form when any of its later
/// fields is present (the missing ones written as 0).
fn write_time_conv(t: &TimeConv, b: &mut Buf) -> Result<(), Error> {
    b.u64(t.time_shift)?;
    b.u64(t.time_mult)?;
    b.u64(t.time_zero)?;
    let long = t.time_cycles.is_some()
        || t.time_mask.is_some()
        || t.cap_user_time_zero.is_some()
        || t.cap_user_time_short.is_some();
    if long {
        b.u64(t.time_cycles.unwrap_or(0))?;
        b.u64(t.time_mask.unwrap_or(0))?;
        b.u8(t.cap_user_time_zero.unwrap_or(false) as u8)?;
        b.u8(t.cap_user_time_short.unwrap_or(false) as u8)?;
        b.zeros(6)?;
    }
    Ok(())
}
