//! A fresh, isolated store per measurement (temp file / schema / key namespace), the
//! library handle on it, the raw client on it, and its removal afterwards.

use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use lease::{Backend, OpenOptions};
use lease_core::{Admission, ExecutionId, RedeliveryPolicy, SharedBackend, redact_url};
use lease_postgres::{DEFAULT_MAX_CONNECTIONS, PostgresBackend};
use lease_redis::RedisBackend;
use lease_sqlite::SqliteBackend;
use serde::{Deserialize, Serialize};

use crate::args::{Kind, Options};
use crate::error::{BenchError, Context, Result};
use crate::raw::Raw;
use crate::raw::postgres::RawPostgres;
use crate::raw::redis::RawRedis;
use crate::raw::sqlite::RawSqlite;

/// Where a store lives, as a child process opens it (`lease-bench --child`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum StoreSpec {
    /// A SQLite file and namespace.
    Sqlite {
        /// The database file.
        file: PathBuf,
        /// The namespace.
        namespace: String,
    },
    /// A PostgreSQL server and schema.
    Postgres {
        /// Server URL.
        url: String,
        /// Schema.
        schema: String,
    },
    /// A Redis server and namespace.
    Redis {
        /// Server URL.
        url: String,
        /// Namespace.
        namespace: String,
    },
}

impl StoreSpec {
    /// The store's URL and namespace, as [`lease::open_with`] takes them.
    pub fn url(&self) -> (String, &str) {
        match self {
            StoreSpec::Sqlite { file, namespace } => {
                (format!("sqlite:{}", file.display()), namespace)
            }
            StoreSpec::Postgres { url, schema } => (url.clone(), schema),
            StoreSpec::Redis { url, namespace } => (url.clone(), namespace),
        }
    }

    /// Opens the store through the facade (default redelivery policy, as the fixture).
    async fn open_with(&self) -> Result<lease::Opened> {
        let (url, namespace) = self.url();
        let options = OpenOptions::new()
            .namespace(namespace)
            .policy(RedeliveryPolicy::default());
        lease::open_with(&url, &options)
            .await
            .map_err(|e| BenchError::Setup(format!("open {}: {e}", redact_url(&url))))
    }

    /// Opens a new library handle on the store.
    pub async fn open(&self) -> Result<SharedBackend> {
        Ok(self.open_with().await?.shared)
    }

    /// Removes the store (PostgreSQL schema, forced: the fenced rows keep an application
    /// table in it; Redis keys; SQLite rows) through [`lease::destroy_with`].
    async fn destroy(&self) -> Result<()> {
        let (url, namespace) = self.url();
        lease::destroy_with(&url, &OpenOptions::new().namespace(namespace))
            .await
            .map_err(|e| BenchError::Setup(format!("remove {}: {e}", redact_url(&url))))
    }
}

/// The concrete backend of a fixture (for the fenced rows, whose fenced paths are methods
/// of each backend, not of the trait).
pub enum Handle<'a> {
    /// The memory backend.
    Memory,
    /// SQLite and its file.
    Sqlite(&'a SqliteBackend, &'a std::path::Path),
    /// PostgreSQL.
    Postgres(&'a PostgresBackend),
    /// Redis.
    Redis(&'a RedisBackend),
}

/// One isolated store with a library handle on it.
pub struct Fixture {
    /// The backend.
    pub kind: Kind,
    /// The library handle (also used for setup: admissions).
    pub lib: SharedBackend,
    /// The same backend, concrete.
    backend: Backend,
    /// Where it lives (`None` for the memory backend).
    spec: Option<StoreSpec>,
    /// The SQLite fixture's temporary directory.
    dir: Option<PathBuf>,
    admitted: u64,
}

fn unique(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}{}", &id[..16])
}

/// How many admissions run at once during setup.
fn admit_concurrency(kind: Kind) -> usize {
    match kind {
        Kind::Postgres => 32,
        Kind::Sqlite | Kind::Redis => 256,
        Kind::Memory => 16,
    }
}

/// A new, unique store for `kind` (and the temporary directory of a SQLite one).
fn fresh_spec(kind: Kind, options: &Options) -> Result<(Option<StoreSpec>, Option<PathBuf>)> {
    Ok(match kind {
        Kind::Memory => (None, None),
        Kind::Sqlite => {
            let dir = std::env::temp_dir().join(unique("lease-bench-"));
            std::fs::create_dir_all(&dir)
                .map_err(|e| BenchError::Setup(format!("{}: {e}", dir.display())))?;
            let spec = StoreSpec::Sqlite {
                file: dir.join("bench.db"),
                namespace: "bench".to_owned(),
            };
            (Some(spec), Some(dir))
        }
        Kind::Postgres => {
            let spec = StoreSpec::Postgres {
                url: options.postgres_url.clone(),
                schema: unique("bench_"),
            };
            (Some(spec), None)
        }
        Kind::Redis => {
            let spec = StoreSpec::Redis {
                url: options.redis_url.clone(),
                namespace: unique("bench-"),
            };
            (Some(spec), None)
        }
    })
}

impl Fixture {
    /// Creates a fresh store for `kind`.
    pub async fn new(kind: Kind, options: &Options) -> Result<Self> {
        let (spec, dir) = fresh_spec(kind, options)?;
        Self::open(kind, spec, dir).await
    }

    /// A fixture on the Redis or PostgreSQL store `spec` names (a namespace the caller chose,
    /// e.g. one whose partitions land on chosen cluster nodes); removed as any other.
    pub async fn on(kind: Kind, spec: StoreSpec) -> Result<Self> {
        Self::open(kind, Some(spec), None).await
    }

    async fn open(kind: Kind, spec: Option<StoreSpec>, dir: Option<PathBuf>) -> Result<Self> {
        let opened = match &spec {
            Some(spec) => spec.open_with().await?,
            None => lease::open_with("memory:", &OpenOptions::new())
                .await
                .map_err(|e| BenchError::Setup(format!("memory: {e}")))?,
        };
        Ok(Fixture {
            kind,
            lib: opened.shared,
            backend: opened.backend,
            spec,
            dir,
            admitted: 0,
        })
    }

    /// The raw client on the same store (`None` for the memory backend).
    pub async fn raw(&self) -> Result<Option<Arc<dyn Raw>>> {
        let policy = RedeliveryPolicy::default();
        Ok(match &self.spec {
            None => None,
            Some(StoreSpec::Sqlite { file, namespace }) => {
                Some(Arc::new(RawSqlite::open(file, namespace, policy)?))
            }
            Some(StoreSpec::Postgres { url, schema }) => Some(Arc::new(
                RawPostgres::connect(url, schema, &policy, DEFAULT_MAX_CONNECTIONS).await?,
            )),
            Some(StoreSpec::Redis { url, namespace }) => {
                Some(Arc::new(RawRedis::connect(url, namespace, &policy).await?))
            }
        })
    }

    /// The raw SQLite client (for the synchronous end-to-end baseline).
    pub fn raw_sqlite(&self) -> Result<Option<RawSqlite>> {
        match &self.spec {
            Some(StoreSpec::Sqlite { file, namespace }) => Ok(Some(RawSqlite::open(
                file,
                namespace,
                RedeliveryPolicy::default(),
            )?)),
            _ => Ok(None),
        }
    }

    /// The raw client, required: an error on the memory backend, which has none.
    pub async fn raw_client(&self) -> Result<Arc<dyn Raw>> {
        self.raw()
            .await?
            .ok_or_else(|| BenchError::Setup("no raw client".into()))
    }

    /// The concrete backend.
    pub fn handle(&self) -> Handle<'_> {
        match (&self.backend, &self.spec) {
            (Backend::Sqlite { backend, .. }, Some(StoreSpec::Sqlite { file, .. })) => {
                Handle::Sqlite(backend, file.as_path())
            }
            (Backend::Postgres(backend), _) => Handle::Postgres(backend),
            (Backend::Redis(backend), _) => Handle::Redis(backend),
            _ => Handle::Memory,
        }
    }

    /// Where another process finds this store (`None` for the memory backend, which lives
    /// in this process only).
    pub fn spec(&self) -> Option<StoreSpec> {
        self.spec.clone()
    }

    /// Another handle on the same store in this process, with its own connection(s) as a
    /// second runtime would open (the same handle for the memory backend).
    pub async fn peer(&self) -> Result<SharedBackend> {
        Ok(match &self.backend {
            Backend::Sqlite { backend, .. } => {
                Arc::new(backend.peer().await.context(|| "sqlite peer".into())?)
            }
            Backend::Postgres(backend) => {
                Arc::new(backend.peer().await.context(|| "postgres peer".into())?)
            }
            Backend::Redis(backend) => {
                Arc::new(backend.peer().await.context(|| "redis peer".into())?)
            }
            _ => self.lib.clone(),
        })
    }

    /// Admits `n` more executions (through the library, many at once), due now.
    pub async fn admit(&mut self, n: u64) -> Result<()> {
        let first = self.admitted;
        let lib = self.lib.clone();
        let mut results = futures::stream::iter(first..first + n)
            .map(|i| {
                let lib = lib.clone();
                async move {
                    let id = ExecutionId::new(format!("e{i:010}")).context(|| "id".into())?;
                    lib.admit(&Admission::new(id))
                        .await
                        .context(|| "admit".into())
                        .map(|_| ())
                }
            })
            .buffer_unordered(admit_concurrency(self.kind));
        while let Some(r) = results.next().await {
            r?;
        }
        self.admitted += n;
        Ok(())
    }

    /// Executions admitted so far.
    pub fn admitted(&self) -> u64 {
        self.admitted
    }

    /// Removes the store whatever `result` is, then returns `result`, or the removal's
    /// error when `result` is `Ok` (a measurement's error comes first).
    pub async fn remove_after<T>(self, result: Result<T>) -> Result<T> {
        let removed = self.remove().await;
        let out = result?;
        removed?;
        Ok(out)
    }

    /// Removes the store: the handles are closed first, then [`StoreSpec::destroy`]; a
    /// SQLite fixture's directory goes too.
    pub async fn remove(self) -> Result<()> {
        let Fixture {
            lib,
            backend,
            spec,
            dir,
            ..
        } = self;
        drop(lib);
        if let Backend::Postgres(backend) = &backend {
            backend.close().await;
        }
        drop(backend);
        match (spec, dir) {
            (_, Some(dir)) => std::fs::remove_dir_all(&dir)
                .map_err(|e| BenchError::Setup(format!("remove {}: {e}", dir.display()))),
            (Some(spec), None) => spec.destroy().await,
            (None, None) => Ok(()),
        }
    }
}
