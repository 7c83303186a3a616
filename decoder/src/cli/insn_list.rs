//! `ptdec raw --insn-list`: the instruction flow written as ptxed lists it.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use crate::outfile;

/// `ptdec raw --insn-list`: the listing's writer, shared with the decode
/// worker; the first write error is kept and reported at the end.
pub(super) struct InsnList {
    out: std::sync::Arc<std::sync::Mutex<ListOut>>,
}

/// The listing's writer and its first write error.
type ListOut = (ListWriter, Option<std::io::Error>);

/// Where the listing goes: stdout, or a file put in place only when
/// complete (`crate::outfile`, as the FTF).
enum ListWriter {
    Stdout(std::io::BufWriter<outfile::Stdout>),
    File(std::io::BufWriter<outfile::OutFile>),
}

impl Write for ListWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            ListWriter::Stdout(w) => w.write(buf),
            ListWriter::File(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            ListWriter::Stdout(w) => w.flush(),
            ListWriter::File(w) => w.flush(),
        }
    }
}

impl InsnList {
    /// `mode`: the permission bits of a new file (`outfile::mode_of` the
    /// trace).
    pub(super) fn create(path: &Path, mode: u32) -> Result<InsnList> {
        let w = if path == Path::new("-") {
            // A closed stdout is an error, as for -o - (the list went to
            // the /dev/null Rust's runtime put on fd 1).
            let out = outfile::stdout()
                .with_context(|| "cannot write the instruction list to standard output")?;
            ListWriter::Stdout(std::io::BufWriter::new(out))
        } else {
            let f = outfile::OutFile::create(path, mode).with_context(|| {
                format!("cannot create the instruction list {}", path.display())
            })?;
            ListWriter::File(std::io::BufWriter::new(f))
        };
        Ok(InsnList {
            out: std::sync::Arc::new(std::sync::Mutex::new((w, None))),
        })
    }

    pub(super) fn callback(&self) -> crate::decode::ListCallback {
        let out = self.out.clone();
        crate::decode::ListCallback::new(move |item| {
            let mut g = out.lock().unwrap_or_else(|p| p.into_inner());
            if g.1.is_none() {
                if let Err(e) = writeln!(g.0, "{item}") {
                    g.1 = Some(e);
                }
            }
        })
    }

    pub(super) fn finish(self) -> std::io::Result<()> {
        let Ok(out) = std::sync::Arc::try_unwrap(self.out) else {
            return Err(std::io::Error::other("the listing is still being written"));
        };
        let (w, err) = out.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = err {
            return Err(e);
        }
        match w {
            ListWriter::Stdout(mut w) => w.flush(),
            ListWriter::File(w) => w
                .into_inner()
                .map_err(|e| e.into_error())?
                .commit()
                .map_err(std::io::Error::from),
        }
    }
}
