//! Files in and out. Writing so that no reader ever sees half a file: a hidden temporary
//! file beside the target, then a rename (atomic within a directory on POSIX file
//! systems); every report, calibration and result file is written this way. Checking,
//! before any work, that an output can be written, so that minutes of measurement are
//! never lost to an output that fails at the end. And reading within a stated size per
//! kind of file ([`read_bounded`]), so that no input is read whole without a bound.

use std::io::{self, Read};
use std::path::Path;

use heisenbench_model::limits;

/// The kinds of file heisenbench reads, each with its size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A run or sim config, or a scenario.
    Config,
    /// A trace of send times.
    Trace,
    /// A dataset of prompts.
    Dataset,
    /// A report or result heisenbench wrote, or a client's results read by an audit.
    Report,
    /// A stored calibration.
    Calibration,
    /// A tokenizer.
    Tokenizer,
    /// A PEM bundle of certificates.
    Certificates,
}

impl FileKind {
    /// The most bytes a file of this kind may hold.
    pub const fn limit(self) -> u64 {
        match self {
            Self::Config | Self::Calibration => limits::MAX_CONFIG_FILE_BYTES,
            Self::Trace => limits::MAX_TRACE_FILE_BYTES,
            Self::Dataset => limits::MAX_DATASET_FILE_BYTES,
            Self::Report => limits::MAX_REPORT_FILE_BYTES,
            Self::Tokenizer => limits::MAX_TOKENIZER_FILE_BYTES,
            Self::Certificates => limits::MAX_CERTIFICATE_FILE_BYTES,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Config => "config",
            Self::Trace => "trace",
            Self::Dataset => "dataset",
            Self::Report => "report",
            Self::Calibration => "calibration",
            Self::Tokenizer => "tokenizer",
            Self::Certificates => "certificate file",
        }
    }
}

/// Why a file could not be read: the file, its kind, and the reason, on one line.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {} {}: {reason}", kind.name(), path.display())]
pub struct ReadError {
    /// The file.
    pub path: std::path::PathBuf,
    /// What it was read as.
    pub kind: FileKind,
    /// The operating system's kind of error (`NotFound`, ...), or `InvalidData` for a
    /// file past its limit or not text.
    pub error_kind: io::ErrorKind,
    /// Why, in words.
    pub reason: String,
}

/// The bytes of `path`, a file of `kind`: refused past the kind's limit (a device or a
/// FIFO that never ends stops there, having held no more than the limit), a directory
/// refused by name, and a leading UTF-8 byte-order mark dropped (every file read is text,
/// and editors on some systems write one).
pub fn read_bounded(path: &Path, kind: FileKind) -> Result<Vec<u8>, ReadError> {
    let fail = |error_kind, reason: String| ReadError {
        path: path.to_path_buf(),
        kind,
        error_kind,
        reason,
    };
    let io = |e: io::Error| fail(e.kind(), e.to_string());
    if path.is_dir() {
        return Err(fail(
            io::ErrorKind::IsADirectory,
            "it is a directory".into(),
        ));
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let limit = kind.limit();
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(fail(
            io::ErrorKind::InvalidData,
            format!("larger than the {} MiB such a file may be", limit >> 20),
        ));
    }
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    Ok(bytes)
}

/// The text of `path`, a file of `kind`, read as [`read_bounded`] does; an error names the
/// first byte that is not UTF-8.
pub fn read_text(path: &Path, kind: FileKind) -> Result<String, ReadError> {
    String::from_utf8(read_bounded(path, kind)?).map_err(|e| ReadError {
        path: path.to_path_buf(),
        kind,
        error_kind: io::ErrorKind::InvalidData,
        reason: format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
    })
}

/// Writes `bytes` to `path` atomically; on failure the temporary file is removed and
/// `path` is left as it was. Errors name the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let dir = file_dir(path)?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
    })
}

/// The directory a file `path` goes into; refuses a path that is a directory.
fn file_dir(path: &Path) -> io::Result<&Path> {
    if path.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!("{} is a directory; name a file", path.display()),
        ));
    }
    Ok(path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new(".")))
}

/// Writes and removes an empty file in `dir`, to learn that it takes files.
fn probe(dir: &Path) -> io::Result<()> {
    let probe = dir.join(format!(".heisenbench-probe{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot write into {}: {e}", dir.display()),
        )
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Checks that `dir` can be made and written into (and makes it).
pub fn check_dir(dir: &Path) -> io::Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} exists and is not a directory", dir.display()),
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    probe(dir)
}

/// Checks that the file `path` can be written: its directory exists and takes files, and
/// it is not a directory itself.
pub fn check_file(path: &Path) -> io::Result<()> {
    let dir = file_dir(path)?;
    if !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{}: no directory {}", path.display(), dir.display()),
        ));
    }
    probe(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded_and_drop_a_byte_order_mark() {
        let dir = std::env::temp_dir().join(format!("hb-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s.json");
        std::fs::write(&f, b"\xEF\xBB\xBF{\"a\": 1}").unwrap();
        assert_eq!(read_text(&f, FileKind::Config).unwrap(), "{\"a\": 1}");
        std::fs::write(&f, b"{\xff}").unwrap();
        let e = read_text(&f, FileKind::Config).unwrap_err().to_string();
        assert!(e.contains("not UTF-8 text (byte 1)"), "{e}");
        // An endless device stops at the limit, one byte past it read.
        let e = read_bounded(Path::new("/dev/zero"), FileKind::Config).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot read config /dev/zero: larger than the 16 MiB such a file may be"
        );
        let e = read_bounded(&dir, FileKind::Report)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("it is a directory"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn replaces_the_whole_file_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("hb-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("r.json");
        write_atomic(&f, b"first, longer").unwrap();
        write_atomic(&f, b"second").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"second");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        // Into a directory that does not exist: an error, nothing left behind.
        assert!(write_atomic(&dir.join("missing/r.json"), b"x").is_err());
        assert!(write_atomic(Path::new("/"), b"x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
