//! Byte order of the input, picked once at the top (perf.data's magic) and
//! passed down as a type parameter, and a bounds-checked cursor over a record.
//!
//! Everything this crate writes is little-endian; big-endian input (a file
//! recorded on a big-endian host) is read through [`Be`].

use std::marker::PhantomData;

/// A byte order for reading.
pub trait Endian: Copy + Default + 'static {
    /// This order as a value.
    const ORDER: ByteOrder;
    fn u16(b: [u8; 2]) -> u16;
    fn u32(b: [u8; 4]) -> u32;
    fn u64(b: [u8; 8]) -> u64;
}

/// Little-endian input (every x86 recording).
#[derive(Debug, Clone, Copy, Default)]
pub struct Le;

/// Big-endian input.
#[derive(Debug, Clone, Copy, Default)]
pub struct Be;

impl Endian for Le {
    const ORDER: ByteOrder = ByteOrder::Little;
    fn u16(b: [u8; 2]) -> u16 {
        u16::from_le_bytes(b)
    }
    fn u32(b: [u8; 4]) -> u32 {
        u32::from_le_bytes(b)
    }
    fn u64(b: [u8; 8]) -> u64 {
        u64::from_le_bytes(b)
    }
}

impl Endian for Be {
    const ORDER: ByteOrder = ByteOrder::Big;
    fn u16(b: [u8; 2]) -> u16 {
        u16::from_be_bytes(b)
    }
    fn u32(b: [u8; 4]) -> u32 {
        u32::from_be_bytes(b)
    }
    fn u64(b: [u8; 8]) -> u64 {
        u64::from_be_bytes(b)
    }
}

/// The byte order of a file, as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    Little,
    Big,
}

/// Why a structure could not be read: a short description, placed in an
/// [`crate::Error`] together with the offset and the structure's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl Malformed {
    pub(crate) fn new(what: impl Into<String>) -> Self {
        Malformed(what.into())
    }
}

/// A bounds-checked reader over one structure's bytes. Every read checks the
/// bytes present first; nothing is allocated from a size field before that.
#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a, E> {
    bytes: &'a [u8],
    pos: usize,
    _e: PhantomData<E>,
}

impl<'a, E: Endian> Cursor<'a, E> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor {
            bytes,
            pos: 0,
            _e: PhantomData,
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The next `n` bytes; `what` names the field for the error.
    pub(crate) fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], Malformed> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| {
                Malformed(format!(
                    "{what}: needs {n} bytes at +{:#x}, {} left",
                    self.pos,
                    self.remaining()
                ))
            })?;
        let s = self.bytes.get(self.pos..end).unwrap_or_default();
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Malformed> {
        let s = self.bytes(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, Malformed> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, Malformed> {
        Ok(E::u16(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, Malformed> {
        Ok(E::u32(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, Malformed> {
        Ok(E::u64(self.array(what)?))
    }

    /// Everything not read yet.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = self.bytes.get(self.pos..).unwrap_or_default();
        self.pos = self.bytes.len();
        s
    }

    /// A count of `elem_size`-byte elements that must fit in the bytes left:
    /// checked before anything is allocated from it.
    pub(crate) fn count(
        &mut self,
        n: u64,
        elem_size: usize,
        what: &str,
    ) -> Result<usize, Malformed> {
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(elem_size).map(|b| (n, b)))
            .filter(|&(_, b)| b <= self.remaining());
        match fits {
            Some((n, _)) => Ok(n),
            None => Err(Malformed(format!(
                "{what}: {n} entries of {elem_size} bytes do not fit in the {} bytes left",
                self.remaining()
            ))),
        }
    }
}

/// A NUL-terminated string in a fixed or padded field: the bytes up to the
/// first NUL (or all of them), converted lossily.
pub(crate) fn c_string(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(field.get(..end).unwrap_or_default()).into_owned()
}
