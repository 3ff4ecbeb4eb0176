//! The PostgreSQL and Redis test images, built here through testcontainers
//! ([`GenericBuildableImage`]) because no registry is reachable: `FROM scratch` with this
//! machine's server binaries, the shared libraries `ldd` lists for them, `/bin/sh` (dash)
//! and an entrypoint script that honours what testcontainers-modules relies on (see the
//! scripts beside this file).
//!
//! The images carry the modules' names (`postgres`, `redis`) and a local tag
//! `<major>-lease-<hash>`, the hash covering the Dockerfile, the entrypoint and the
//! server's `--version` line: a machine whose binaries or scripts change builds a new tag,
//! an unchanged one reuses the image it built before.

use std::path::{Path, PathBuf};
use std::process::Command;

use testcontainers::GenericBuildableImage;
use testcontainers::core::build::build_options::BuildImageOptions;
use testcontainers::runners::SyncBuilder;

use super::engine::{ContainerError, block_on, engine_answers};
use super::rootfs::Context;

/// The image name testcontainers-modules' `Postgres` uses.
pub const POSTGRES_NAME: &str = "postgres";
/// The image name testcontainers-modules' `Redis` uses.
pub const REDIS_NAME: &str = "redis";
/// The uid (and gid) PostgreSQL runs as inside its image (initdb refuses root).
const POSTGRES_UID: u32 = 999;
/// The uid (and gid) Redis runs as inside its image (`nobody`).
const REDIS_UID: u32 = 65534;
/// Where Debian installs the PostgreSQL server binaries, one directory per major version.
const DEBIAN_PG_LIB: &str = "/usr/lib/postgresql";
/// The Redis server binary.
const REDIS_SERVER: &str = "/usr/bin/redis-server";
/// The shell of the entrypoints.
const SHELL: &str = "/bin/sh";
/// Where the entrypoint goes in the images.
const ENTRYPOINT: &str = "/usr/local/bin/docker-entrypoint.sh";

const POSTGRES_ENTRYPOINT: &str = include_str!("postgres-entrypoint.sh");
const REDIS_ENTRYPOINT: &str = include_str!("redis-entrypoint.sh");

/// The Dockerfile of the PostgreSQL image for the server binaries in `bin`.
fn postgres_dockerfile(bin: &Path) -> String {
    format!(
        "FROM scratch\n\
         COPY rootfs/ /\n\
         COPY --chown={POSTGRES_UID}:{POSTGRES_UID} home/ /var/lib/postgresql/\n\
         ENV PATH={bin}:/bin PGDATA=/var/lib/postgresql/data TZ=UTC LANG=C\n\
         USER {POSTGRES_UID}:{POSTGRES_UID}\n\
         STOPSIGNAL SIGINT\n\
         ENTRYPOINT [\"{SHELL}\", \"{ENTRYPOINT}\"]\n\
         CMD [\"postgres\"]\n",
        bin = bin.display()
    )
}

/// The Dockerfile of the Redis image.
fn redis_dockerfile() -> String {
    format!(
        "FROM scratch\n\
         COPY rootfs/ /\n\
         COPY --chown={REDIS_UID}:{REDIS_UID} data/ /data/\n\
         USER {REDIS_UID}:{REDIS_UID}\n\
         ENTRYPOINT [\"{SHELL}\", \"{ENTRYPOINT}\"]\n\
         CMD [\"redis-server\"]\n"
    )
}

/// The local tag: `<major>-lease-<16 hex digits of FNV-1a over the inputs>`.
pub fn tag(major: &str, inputs: &[&str]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for input in inputs {
        for byte in input.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{major}-lease-{hash:016x}")
}

/// `--version` of a server binary, one line.
fn version(binary: &Path) -> Result<String, String> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {} --version: {e}", binary.display()))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.success() && !text.is_empty() {
        Ok(text)
    } else {
        Err(format!("{} --version failed", binary.display()))
    }
}

/// The major version in a `--version` line: the first word starting with a digit, up to
/// its first dot (`postgres (PostgreSQL) 15.14 (Debian ...)` -> `15`,
/// `Redis server v=7.0.15 ...` -> `7`).
pub fn major(version_line: &str) -> Option<String> {
    version_line
        .split(|c: char| c.is_whitespace() || c == '=')
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .and_then(|w| w.split('.').next())
        .map(str::to_owned)
}

/// The newest `/usr/lib/postgresql/<major>/bin` holding the four binaries the image needs.
fn postgres_bin_dir() -> Result<PathBuf, String> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(DEBIAN_PG_LIB)
        .map_err(|e| format!("no PostgreSQL under {DEBIAN_PG_LIB}: {e}"))?
        .flatten()
        .filter_map(|entry| {
            let major = entry.file_name().to_string_lossy().parse().ok()?;
            let bin = entry.path().join("bin");
            POSTGRES_BINARIES
                .iter()
                .all(|b| bin.join(b).is_file())
                .then_some((major, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| format!("no {DEBIAN_PG_LIB}/*/bin with {POSTGRES_BINARIES:?}"))
}

/// The PostgreSQL binaries the entrypoint runs.
const POSTGRES_BINARIES: [&str; 4] = ["postgres", "initdb", "pg_ctl", "psql"];

/// Whether the engine has the image `descriptor`.
fn exists(descriptor: &str) -> Result<bool, ContainerError> {
    let docker = testcontainers::bollard::Docker::connect_with_defaults()
        .map_err(|e| ContainerError::NoEngine(e.to_string()))?;
    block_on(async { docker.inspect_image(descriptor).await })
        .map(|inspected| inspected.is_ok())
        .map_err(ContainerError::NoEngine)
}

/// Builds `name:tag` from `context` and `dockerfile` through testcontainers.
fn build(name: &str, tag: &str, dockerfile: String, context: &Context) -> Result<(), String> {
    let mut image = GenericBuildableImage::new(name, tag).with_dockerfile_string(dockerfile);
    let entries = std::fs::read_dir(context.dir())
        .map_err(|e| format!("cannot read {}: {e}", context.dir().display()))?;
    for entry in entries.flatten() {
        let target = entry.file_name().to_string_lossy().into_owned();
        image = image.with_file(entry.path(), target);
    }
    image
        .build_image_with(BuildImageOptions::new())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The tag of the local PostgreSQL image, building it first when the engine lacks it.
pub fn ensure_postgres() -> Result<String, ContainerError> {
    let assemble = |reason: String| ContainerError::Assemble {
        image: POSTGRES_NAME.to_owned(),
        reason,
    };
    engine_answers()?;
    let bin = postgres_bin_dir().map_err(assemble)?;
    let line = version(&bin.join("postgres")).map_err(assemble)?;
    let major = major(&line).ok_or_else(|| assemble(format!("no version in {line:?}")))?;
    let dockerfile = postgres_dockerfile(&bin);
    let tag = tag(&major, &[&dockerfile, POSTGRES_ENTRYPOINT, &line]);
    let descriptor = format!("{POSTGRES_NAME}:{tag}");
    if exists(&descriptor)? {
        return Ok(tag);
    }
    let context = postgres_context(&bin, &major).map_err(assemble)?;
    build(POSTGRES_NAME, &tag, dockerfile, &context).map_err(|reason| ContainerError::Build {
        image: descriptor,
        reason,
    })?;
    Ok(tag)
}

/// The PostgreSQL build context: the four binaries, the server's loadable modules (JIT
/// left out: `jit = off`), its share dir, the time zones, the shell, the entrypoint and a
/// passwd naming the `postgres` user (initdb looks its uid up).
fn postgres_context(bin: &Path, major: &str) -> Result<Context, String> {
    let mut context = Context::new("postgres")?;
    for binary in POSTGRES_BINARIES {
        context.elf(&bin.join(binary))?;
    }
    let lib = Path::new(DEBIAN_PG_LIB).join(major).join("lib");
    let modules =
        std::fs::read_dir(&lib).map_err(|e| format!("cannot read {}: {e}", lib.display()))?;
    for module in modules.flatten().map(|e| e.path()) {
        let name = module.file_name().unwrap_or_default().to_string_lossy();
        if name.ends_with(".so") && !name.starts_with("llvmjit") {
            context.elf(&module)?;
        }
    }
    context.tree(&Path::new("/usr/share/postgresql").join(major))?;
    context.tree(Path::new("/usr/share/zoneinfo"))?;
    context.elf(Path::new(SHELL))?;
    context.data(Path::new(ENTRYPOINT), POSTGRES_ENTRYPOINT.as_bytes(), 0o755)?;
    let passwd = format!(
        "root:x:0:0:root:/root:/bin/sh\n\
         postgres:x:{POSTGRES_UID}:{POSTGRES_UID}:PostgreSQL:/var/lib/postgresql:/bin/sh\n"
    );
    let group = format!("root:x:0:\npostgres:x:{POSTGRES_UID}:\n");
    context.data(Path::new("/etc/passwd"), passwd.as_bytes(), 0o644)?;
    context.data(Path::new("/etc/group"), group.as_bytes(), 0o644)?;
    context.empty_dir("home")?;
    Ok(context)
}

/// The tag of the local Redis image, building it first when the engine lacks it.
pub fn ensure_redis() -> Result<String, ContainerError> {
    let assemble = |reason: String| ContainerError::Assemble {
        image: REDIS_NAME.to_owned(),
        reason,
    };
    engine_answers()?;
    let server = Path::new(REDIS_SERVER);
    let line = version(server).map_err(assemble)?;
    let major = major(&line).ok_or_else(|| assemble(format!("no version in {line:?}")))?;
    let dockerfile = redis_dockerfile();
    let tag = tag(&major, &[&dockerfile, REDIS_ENTRYPOINT, &line]);
    let descriptor = format!("{REDIS_NAME}:{tag}");
    if exists(&descriptor)? {
        return Ok(tag);
    }
    let mut context = Context::new("redis").map_err(assemble)?;
    context
        .elf(server)
        .and_then(|()| context.elf(Path::new(SHELL)))
        .and_then(|()| context.data(Path::new(ENTRYPOINT), REDIS_ENTRYPOINT.as_bytes(), 0o755))
        .and_then(|()| context.empty_dir("data").map(|_| ()))
        .map_err(assemble)?;
    build(REDIS_NAME, &tag, dockerfile, &context).map_err(|reason| ContainerError::Build {
        image: descriptor,
        reason,
    })?;
    Ok(tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majors_of_version_lines() {
        assert_eq!(
            major("postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)").as_deref(),
            Some("15")
        );
        assert_eq!(
            major("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0").as_deref(),
            Some("7")
        );
        assert_eq!(major("no digits here"), None);
    }

    #[test]
    fn tags_change_with_every_input() {
        let a = tag("15", &["dockerfile", "entrypoint", "15.14"]);
        assert!(a.starts_with("15-lease-"), "{a}");
        assert_eq!(a.len(), "15-lease-".len() + 16);
        assert_eq!(a, tag("15", &["dockerfile", "entrypoint", "15.14"]));
        assert_ne!(a, tag("15", &["dockerfile", "entrypoint", "15.15"]));
        // Inputs are separated: moving a byte between two inputs changes the tag.
        assert_ne!(a, tag("15", &["dockerfil", "eentrypoint", "15.14"]));
    }

    #[test]
    fn the_images_run_as_their_users_from_the_entrypoint() {
        let pg = postgres_dockerfile(Path::new("/usr/lib/postgresql/15/bin"));
        assert!(pg.starts_with("FROM scratch\n"), "{pg}");
        assert!(pg.contains("USER 999:999\n"), "{pg}");
        assert!(
            pg.contains("ENV PATH=/usr/lib/postgresql/15/bin:/bin "),
            "{pg}"
        );
        let redis = redis_dockerfile();
        assert!(redis.contains("USER 65534:65534\n"), "{redis}");
        assert!(
            redis.contains("ENTRYPOINT [\"/bin/sh\", \"/usr/local/bin/docker-entrypoint.sh\"]"),
            "{redis}"
        );
    }
}
