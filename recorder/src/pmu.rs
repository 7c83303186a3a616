//! PMU discovery in sysfs: the first thing ptrec does. A PMU is a folder
//! `SYSFS/bus/event_source/devices/NAME/` holding its dynamic `type` number,
//! `format/*` (which bits of `perf_event_attr.config*` each config term
//! occupies, e.g. `config:14-17`), `caps/*` (hex CPUID-derived capabilities
//! the kernel's `arch/x86/events/intel/pt.c` exports) and, for intel_pt,
//! `max_nonturbo_ratio` and `tsc_art_ratio`. The sysfs root is a parameter so
//! that tests (and `ptrec --sysfs-root`) can read fake trees of real CPUs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::errors::Error;

/// Which attr word a format field lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigWord {
    Config,
    Config1,
    Config2,
    Config3,
}

/// One `format/NAME` file: the bits a term occupies, low ranges first
/// (`config:0-7,9` is two ranges). Values are scattered over the bits from
/// low to high, as perf's `pmu_format_value` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatField {
    pub word: ConfigWord,
    /// Inclusive bit ranges `(lo, hi)`.
    pub ranges: Vec<(u32, u32)>,
}

impl FormatField {
    /// Parses `config:0`, `config:14-17`, `config1:0-7,32-35`.
    pub fn parse(text: &str) -> Option<FormatField> {
        let (word, bits) = text.trim().split_once(':')?;
        let word = match word {
            "config" => ConfigWord::Config,
            "config1" => ConfigWord::Config1,
            "config2" => ConfigWord::Config2,
            "config3" => ConfigWord::Config3,
            _ => return None,
        };
        let mut ranges = Vec::new();
        for part in bits.split(',') {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
                None => {
                    let b: u32 = part.parse().ok()?;
                    (b, b)
                }
            };
            if lo > hi || hi > 63 {
                return None;
            }
            ranges.push((lo, hi));
        }
        if ranges.is_empty() {
            return None;
        }
        Some(FormatField { word, ranges })
    }

    /// The bits of the field within its word.
    pub fn mask(&self) -> u64 {
        self.ranges.iter().fold(0, |m, &(lo, hi)| {
            m | (u64::MAX >> (63 - hi) & u64::MAX << lo)
        })
    }

    /// The number of bits.
    pub fn width(&self) -> u32 {
        self.mask().count_ones()
    }

    /// The largest value the field holds.
    pub fn max_value(&self) -> u64 {
        match self.width() {
            64 => u64::MAX,
            w => (1u64 << w) - 1,
        }
    }

    /// `value` placed in the field's bits; `None` when it does not fit.
    pub fn encode(&self, value: u64) -> Option<u64> {
        if value > self.max_value() {
            return None;
        }
        let (mut out, mut v) = (0u64, value);
        for bit in 0..64 {
            if self.mask() & (1 << bit) != 0 {
                out |= (v & 1) << bit;
                v >>= 1;
            }
        }
        Some(out)
    }

    /// The field's value in `word` (the inverse of [`encode`](Self::encode)).
    pub fn decode(&self, word: u64) -> u64 {
        let (mut out, mut n) = (0u64, 0);
        for bit in 0..64 {
            if self.mask() & (1 << bit) != 0 {
                out |= ((word >> bit) & 1) << n;
                n += 1;
            }
        }
        out
    }
}

/// A PMU as sysfs describes it.
#[derive(Debug, Clone)]
pub struct Pmu {
    /// The PMU's name (`intel_pt`).
    pub name: String,
    /// Its sysfs folder.
    pub dir: PathBuf,
    /// `perf_event_attr.type` for its events.
    pub type_: u32,
    formats: BTreeMap<String, FormatField>,
    caps: BTreeMap<String, String>,
    /// `max_nonturbo_ratio` (MSR_PLATFORM_INFO[15:8]) when present.
    pub max_nonturbo_ratio: Option<u64>,
    /// `tsc_art_ratio` as numerator:denominator (CPUID 0x15 EBX:EAX), when present.
    pub tsc_art_ratio: Option<(u64, u64)>,
}

/// The sysfs folder of PMU `name` under `sysfs_root`.
pub fn pmu_dir(sysfs_root: &Path, name: &str) -> PathBuf {
    sysfs_root.join("bus/event_source/devices").join(name)
}

impl Pmu {
    /// The `intel_pt` PMU, or [`Error::NoIntelPt`].
    pub fn intel_pt(sysfs_root: &Path) -> Result<Pmu, Error> {
        let dir = pmu_dir(sysfs_root, "intel_pt");
        if !dir.join("type").exists() {
            return Err(Error::NoIntelPt { path: dir });
        }
        Pmu::load(sysfs_root, "intel_pt")
    }

    /// Reads PMU `name`: `type`, every `format/*` and `caps/*` file, and the
    /// intel_pt timing attributes when present.
    pub fn load(sysfs_root: &Path, name: &str) -> Result<Pmu, Error> {
        let dir = pmu_dir(sysfs_root, name);
        let type_path = dir.join("type");
        let text = read(&type_path)?;
        let type_ = text.trim().parse().map_err(|_| Error::SysfsFormat {
            path: type_path,
            text: text.clone(),
            expected: "a decimal PMU type number",
        })?;
        let mut formats = BTreeMap::new();
        for (name, path, text) in read_folder(&dir.join("format"))? {
            let field = FormatField::parse(&text).ok_or(Error::SysfsFormat {
                path,
                text,
                expected: "configN:BIT[-BIT][,...]",
            })?;
            formats.insert(name, field);
        }
        let caps = read_folder(&dir.join("caps"))?
            .into_iter()
            .map(|(name, _, text)| (name, text.trim().to_string()))
            .collect();
        let max_nonturbo_ratio =
            read_optional(&dir.join("max_nonturbo_ratio"))?.and_then(|t| t.trim().parse().ok());
        let tsc_art_ratio = read_optional(&dir.join("tsc_art_ratio"))?.and_then(|t| {
            let (n, d) = t.trim().split_once(':')?;
            Some((n.parse().ok()?, d.parse().ok()?))
        });
        Ok(Pmu {
            name: name.to_string(),
            dir,
            type_,
            formats,
            caps,
            max_nonturbo_ratio,
            tsc_art_ratio,
        })
    }

    /// The bit field of config term `name`.
    pub fn format(&self, name: &str) -> Option<&FormatField> {
        self.formats.get(name)
    }

    /// Every config term, by name.
    pub fn formats(&self) -> &BTreeMap<String, FormatField> {
        &self.formats
    }

    /// The mask of term `name` in `config`, 0 when the PMU lacks it (perf's
    /// `perf_pmu__format_bits`).
    pub fn format_bits(&self, name: &str) -> u64 {
        self.format(name)
            .filter(|f| f.word == ConfigWord::Config)
            .map_or(0, FormatField::mask)
    }

    /// `caps/NAME` as the kernel prints it (hex), `None` when the file is
    /// absent or not a number.
    pub fn cap(&self, name: &str) -> Option<u64> {
        u64::from_str_radix(self.caps.get(name)?, 16).ok()
    }

    /// Every capability, as text.
    pub fn caps(&self) -> &BTreeMap<String, String> {
        &self.caps
    }
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|source| Error::Sysfs {
        path: path.to_path_buf(),
        source,
    })
}

fn read_optional(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Sysfs {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// `(name, path, contents)` of each file in `dir`; an absent folder is empty.
fn read_folder(dir: &Path) -> Result<Vec<(String, PathBuf, String)>, Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Sysfs {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Sysfs {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        if !path.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let text = read(&path)?;
        out.push((name, path, text));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_fields() {
        let f = FormatField::parse("config:14-17\n").unwrap();
        assert_eq!(f.mask(), 0x3c000);
        assert_eq!(f.encode(3), Some(0xc000));
        assert_eq!(f.encode(16), None);
        assert_eq!(f.decode(0x300e601), 3);
        let split = FormatField::parse("config1:0-1,8").unwrap();
        assert_eq!(split.word, ConfigWord::Config1);
        assert_eq!(split.mask(), 0x103);
        assert_eq!(split.encode(0b101), Some(0x101));
        assert_eq!(split.decode(0x101), 0b101);
        let top = FormatField::parse("config:0-63").unwrap();
        assert_eq!(top.mask(), u64::MAX);
        assert_eq!(top.encode(u64::MAX), Some(u64::MAX));
        for bad in ["config:", "config:3-1", "config:64", "cfg:1", "config:a"] {
            assert_eq!(FormatField::parse(bad), None, "{bad}");
        }
    }
}
