//! Writing a file so that no reader ever sees half of it: a hidden temporary file beside
//! the target, then a rename (atomic within a directory on POSIX file systems). Every
//! report, calibration and result file is written this way; and checking, before any
//! work, that an output can be written, so that minutes of measurement are never lost to
//! an output that fails at the end.

use std::io;
use std::path::Path;

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
