//! A root file system assembled in a temp dir from this machine's files: binaries with the
//! shared libraries `ldd` lists for them, data trees, generated files. It becomes the build
//! context of a `FROM scratch` image ([`super::image`]) and is removed when dropped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A build context under construction: `<dir>/rootfs/` is copied to `/` of the image.
#[derive(Debug)]
pub struct Context {
    dir: PathBuf,
    copied: BTreeSet<PathBuf>,
}

impl Context {
    /// A fresh, empty context in the system temp dir.
    pub fn new(kind: &str) -> Result<Context, String> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "lease-testserver-image-{kind}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(dir.join("rootfs"))
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(Context {
            dir,
            copied: BTreeSet::new(),
        })
    }

    /// The context directory (holding `rootfs/` and whatever else was added).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `inside` (an absolute path in the image) under the context's `rootfs/`.
    fn target(&self, inside: &Path) -> PathBuf {
        self.dir
            .join("rootfs")
            .join(inside.strip_prefix("/").unwrap_or(inside))
    }

    /// Copies the host file `host` to `inside` in the image, following symlinks (the image
    /// gets the file's content under the name asked for), keeping its permissions.
    pub fn file_as(&mut self, host: &Path, inside: &Path) -> Result<(), String> {
        let target = self.target(inside);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::copy(host, &target).map_err(|e| format!("cannot copy {}: {e}", host.display()))?;
        self.copied.insert(inside.to_path_buf());
        Ok(())
    }

    /// Copies the host file `path` to the same path in the image.
    pub fn file(&mut self, path: &Path) -> Result<(), String> {
        self.file_as(path, path)
    }

    /// Copies an executable or shared object to `inside` and every library `ldd` lists
    /// for it (the dynamic loader included) to the library's own path. A library `ldd`
    /// cannot find is an error.
    pub fn elf_as(&mut self, host: &Path, inside: &Path) -> Result<(), String> {
        self.file_as(host, inside)?;
        for library in shared_libraries(host)? {
            if !self.copied.contains(&library) {
                self.file(&library)?;
            }
        }
        Ok(())
    }

    /// [`Context::elf_as`] to the same path.
    pub fn elf(&mut self, path: &Path) -> Result<(), String> {
        self.elf_as(path, path)
    }

    /// Copies the directory tree `path` to the same path, symlinks to files followed;
    /// symlinks to directories are left out (they could loop).
    pub fn tree(&mut self, path: &Path) -> Result<(), String> {
        let entries =
            std::fs::read_dir(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let child = entry.path();
            let meta = std::fs::metadata(&child)
                .map_err(|e| format!("cannot stat {}: {e}", child.display()))?;
            let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
            if meta.is_dir() {
                if !is_link {
                    self.tree(&child)?;
                }
            } else {
                self.file(&child)?;
            }
        }
        Ok(())
    }

    /// Writes `data` to `inside` with mode `mode`.
    pub fn data(&mut self, inside: &Path, data: &[u8], mode: u32) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        let target = self.target(inside);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&target, data)
            .and_then(|()| std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)))
            .map_err(|e| format!("cannot write {}: {e}", target.display()))
    }

    /// Creates the empty directory `name` in the context (beside `rootfs/`), for a
    /// Dockerfile `COPY --chown` of a directory the server writes to.
    pub fn empty_dir(&self, name: &str) -> Result<PathBuf, String> {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(dir)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The libraries `ldd` lists for `binary`: the `=> /path` entries and the loader.
pub fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| format!("cannot run ldd: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "ldd {} failed: {}{}",
            binary.display(),
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    parse_ldd(&text).map_err(|missing| {
        format!(
            "ldd {}: library {missing} not found on this machine",
            binary.display()
        )
    })
}

/// The library paths in `ldd` output; `Err(name)` for a library ldd could not find.
pub fn parse_ldd(text: &str) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some((name, rest)) = line.split_once("=>") {
            let rest = rest.trim();
            if rest.starts_with("not found") {
                return Err(name.trim().to_owned());
            }
            if let Some(path) = rest
                .split_whitespace()
                .next()
                .filter(|p| p.starts_with('/'))
            {
                found.push(PathBuf::from(path));
            }
        } else if let Some(path) = line
            .split_whitespace()
            .next()
            .filter(|p| p.starts_with('/'))
        {
            found.push(PathBuf::from(path));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_lists_libraries_and_the_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse_ldd(text),
            Ok(vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ])
        );
        assert_eq!(
            parse_ldd("\tlibgone.so.1 => not found\n"),
            Err("libgone.so.1".to_owned())
        );
    }

    #[test]
    fn a_context_copies_a_binary_with_its_libraries_and_is_removed() {
        let mut context = Context::new("test").expect("context");
        context.elf(Path::new("/bin/sh")).expect("sh");
        let rootfs = context.dir().join("rootfs");
        assert!(rootfs.join("bin/sh").is_file());
        assert!(
            std::fs::read_dir(rootfs.join("lib64"))
                .expect("the loader's dir")
                .next()
                .is_some()
        );
        let dir = context.dir().to_path_buf();
        drop(context);
        assert!(!dir.exists());
    }
}
