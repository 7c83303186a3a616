//! The one append-only sink every writer goes through: explicit little-endian
//! integers, and the count of bytes written so far (file offsets for the
//! AUXTRACE index and the feature section table).

use std::io::{self, Write};

/// An append-only little-endian writer.
#[derive(Debug)]
pub struct Sink<W> {
    inner: W,
    pos: u64,
}

impl<W: Write> Sink<W> {
    /// A sink whose first byte lands at offset `pos` of the output.
    pub fn new(inner: W, pos: u64) -> Self {
        Sink { inner, pos }
    }

    /// Offset of the next byte.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    pub fn bytes(&mut self, b: &[u8]) -> io::Result<()> {
        self.inner.write_all(b)?;
        self.pos += b.len() as u64;
        Ok(())
    }

    pub fn zeros(&mut self, n: usize) -> io::Result<()> {
        const Z: [u8; 64] = [0; 64];
        let mut left = n;
        while left > 0 {
            let k = left.min(Z.len());
            self.bytes(&Z[..k])?;
            left -= k;
        }
        Ok(())
    }

    pub fn u8(&mut self, v: u8) -> io::Result<()> {
        self.bytes(&[v])
    }

    pub fn u16(&mut self, v: u16) -> io::Result<()> {
        self.bytes(&v.to_le_bytes())
    }

    pub fn u32(&mut self, v: u32) -> io::Result<()> {
        self.bytes(&v.to_le_bytes())
    }

    pub fn u64(&mut self, v: u64) -> io::Result<()> {
        self.bytes(&v.to_le_bytes())
    }

    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    pub fn into_inner(self) -> W {
        self.inner
    }
}

/// A growable in-memory sink (record bodies, feature sections).
pub(crate) type Buf = Sink<Vec<u8>>;

impl Buf {
    pub(crate) fn buf() -> Self {
        Sink::new(Vec::new(), 0)
    }

    pub(crate) fn len(&self) -> usize {
        self.inner.len()
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.inner
    }

    /// Pads with zeros to a multiple of `align`.
    pub(crate) fn pad_to(&mut self, align: usize) -> io::Result<()> {
        let n = self.inner.len().next_multiple_of(align) - self.inner.len();
        self.zeros(n)
    }
}

/// A string padded with NULs to a multiple of `align` bytes, at least one NUL.
pub(crate) fn padded_str(s: &str, align: usize) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v.resize(v.len().next_multiple_of(align), 0);
    v
}
