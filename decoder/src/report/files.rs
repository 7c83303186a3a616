//! The files `ptdec report` writes besides its stdout: folded stacks
//! (`--folded`) and the flame graph (`--flamegraph`). Both are opened
//! through `outfile` before anything is decoded, so an input given as an
//! output is refused at once, and renamed into place only when complete.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::aggregate::Aggregate;
use super::render::{self, FlameError, Weight};
use crate::outfile::{OutFile, OutFileError};

/// Why an output of the report cannot be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilesError {
    /// The output is the trace (or another input) being read.
    #[error("{option} {}: that is the trace being read ({}); writing it would destroy it. Choose another file", path.display(), input.display())]
    IsInput {
        option: &'static str,
        path: PathBuf,
        input: PathBuf,
    },
    /// Creating, writing or renaming failed.
    #[error("{option}: {source}")]
    Write {
        option: &'static str,
        #[source]
        source: OutFileError,
    },
    /// `--folded` and `--flamegraph` name one file.
    #[error(
        "--folded {} and --flamegraph {} are the same file; give each its own",
        folded.display(),
        flamegraph.display()
    )]
    Same {
        folded: PathBuf,
        flamegraph: PathBuf,
    },
    /// A file is where standard output goes, and the table is printed there.
    #[error("{option} {}: standard output goes to that file too, so the table printed there would be lost; give another file, or `-` for the {what} alone", path.display())]
    Stdout {
        option: &'static str,
        what: &'static str,
        path: PathBuf,
    },
    /// The flame graph could not be drawn.
    #[error("--flamegraph {}: {source}", path.display())]
    Flame {
        path: PathBuf,
        #[source]
        source: FlameError,
    },
}

/// The report's files, open (as temporaries) until [`ReportFiles::write`].
pub struct ReportFiles {
    folded: Option<(PathBuf, OutFile)>,
    flame: Option<(PathBuf, OutFile)>,
}

fn create(
    option: &'static str,
    path: Option<&Path>,
    mode: u32,
) -> Result<Option<(PathBuf, OutFile)>, FilesError> {
    let Some(path) = path else { return Ok(None) };
    let made = if path == Path::new("-") {
        OutFile::text_stdout()
    } else {
        OutFile::create(path, mode)
    };
    match made {
        Ok(f) => Ok(Some((path.to_path_buf(), f))),
        Err(OutFileError::IsInput { input, .. }) => Err(FilesError::IsInput {
            option,
            path: path.to_path_buf(),
            input,
        }),
        Err(source) => Err(FilesError::Write { option, source }),
    }
}

impl ReportFiles {
    /// Opens `--folded FILE` and `--flamegraph FILE`, each when given,
    /// new ones with the permission bits `mode` (`outfile::mode_of` the
    /// trace).
    pub fn create(
        folded: Option<&Path>,
        flamegraph: Option<&Path>,
        mode: u32,
    ) -> Result<Self, FilesError> {
        if let (Some(a), Some(b)) = (folded, flamegraph) {
            if crate::outfile::same_output(a, b) {
                return Err(FilesError::Same {
                    folded: a.to_path_buf(),
                    flamegraph: b.to_path_buf(),
                });
            }
        }
        let dash = Path::new("-");
        if folded != Some(dash) && flamegraph != Some(dash) {
            let named = [
                ("--folded", "folded stacks", folded),
                ("--flamegraph", "flame graph", flamegraph),
            ];
            for (option, what, path) in named {
                if let Some(path) = path.filter(|p| crate::outfile::same_output(p, dash)) {
                    return Err(FilesError::Stdout {
                        option,
                        what,
                        path: path.to_path_buf(),
                    });
                }
            }
        }
        Ok(ReportFiles {
            folded: create("--folded", folded, mode)?,
            flame: create("--flamegraph", flamegraph, mode)?,
        })
    }

    /// Whether one of the files is standard output (`-`), which then
    /// holds it instead of the table.
    pub fn on_stdout(&self) -> bool {
        [&self.folded, &self.flame]
            .into_iter()
            .flatten()
            .any(|(p, _)| p == Path::new("-"))
    }

    /// Whether folded stacks are needed (for either file).
    pub fn wants_folded(&self) -> bool {
        self.folded.is_some() || self.flame.is_some()
    }

    /// Writes the folded stacks and draws the flame graph (titled
    /// `title`), weighted by `weight`, and puts both in place.
    pub fn write(self, agg: &Aggregate, weight: Weight, title: &str) -> Result<(), FilesError> {
        let io = |option, path: &Path, e: std::io::Error| FilesError::Write {
            option,
            source: OutFileError::Io {
                path: path.to_path_buf(),
                source: e,
            },
        };
        if let Some((path, mut f)) = self.folded {
            f.write_all(render::folded(agg, weight).as_bytes())
                .map_err(|e| io("--folded", &path, e))?;
            f.commit().map_err(|source| FilesError::Write {
                option: "--folded",
                source,
            })?;
        }
        if let Some((path, mut f)) = self.flame {
            render::flamegraph(agg, weight, title, &mut f).map_err(|source| FilesError::Flame {
                path: path.clone(),
                source,
            })?;
            f.commit().map_err(|source| FilesError::Write {
                option: "--flamegraph",
                source,
            })?;
        }
        Ok(())
    }
}
