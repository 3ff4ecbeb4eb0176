//! A fresh, isolated store per measurement (temp file / schema / key namespace), the
//! library handle on it, the raw client on it, and its removal afterwards.

use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use lease_core::{Admission, ExecutionId, MemoryBackend, RedeliveryPolicy, SharedBackend};
use lease_postgres::{DEFAULT_MAX_CONNECTIONS, PostgresBackend, PostgresConfig};
use lease_redis::{RedisBackend, RedisConfig};
use lease_sqlite::{SqliteBackend, SqliteConfig};
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
    /// Opens a new library handle on the store (default redelivery policy, as the fixture).
    pub async fn open(&self) -> Result<SharedBackend> {
        let policy = RedeliveryPolicy::default();
        Ok(match self {
            StoreSpec::Sqlite { file, namespace } => Arc::new(
                SqliteBackend::open(
                    SqliteConfig::file(file)
                        .namespace(namespace.clone())
                        .policy(policy),
                )
                .await
                .context(|| format!("open {}", file.display()))?,
            ),
            StoreSpec::Postgres { url, schema } => Arc::new(
                PostgresBackend::connect(
                    PostgresConfig::new(url.clone())
                        .schema(schema.clone())
                        .policy(policy),
                )
                .await
                .context(|| "connect to postgres".into())?,
            ),
            StoreSpec::Redis { url, namespace } => Arc::new(
                RedisBackend::connect(
                    RedisConfig::new(url.clone())
                        .namespace(namespace.clone())
                        .policy(policy),
                )
                .await
                .context(|| "connect to redis".into())?,
            ),
        })
    }
}

/// The concrete backend of a fixture (for the issue 13 rows, whose fenced paths are
/// methods of each backend, not of the trait).
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

/// How a fixture's store is removed.
enum Store {
    Memory,
    Sqlite {
        backend: SqliteBackend,
        dir: PathBuf,
        file: PathBuf,
        namespace: String,
    },
    Postgres {
        backend: PostgresBackend,
        url: String,
        schema: String,
    },
    Redis {
        backend: RedisBackend,
        url: String,
        namespace: String,
    },
}

/// One isolated store with a library handle on it.
pub struct Fixture {
    /// The backend.
    pub kind: Kind,
    /// The library handle (also used for setup: admissions).
    pub lib: SharedBackend,
    store: Store,
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

impl Fixture {
    /// Creates a fresh store for `kind`.
    pub async fn new(kind: Kind, options: &Options) -> Result<Self> {
        let policy = RedeliveryPolicy::default();
        let (lib, store): (SharedBackend, Store) = match kind {
            Kind::Memory => (Arc::new(MemoryBackend::new()), Store::Memory),
            Kind::Sqlite => {
                let dir = std::env::temp_dir().join(unique("lease-bench-"));
                std::fs::create_dir_all(&dir)
                    .map_err(|e| BenchError::Setup(format!("{}: {e}", dir.display())))?;
                let file = dir.join("bench.db");
                let namespace = "bench".to_owned();
                let backend = SqliteBackend::open(
                    SqliteConfig::file(&file)
                        .namespace(namespace.clone())
                        .policy(policy),
                )
                .await
                .context(|| format!("open {}", file.display()))?;
                (
                    Arc::new(backend.clone()),
                    Store::Sqlite {
                        backend,
                        dir,
                        file,
                        namespace,
                    },
                )
            }
            Kind::Postgres => {
                let schema = unique("bench_");
                let backend = PostgresBackend::connect(
                    PostgresConfig::new(options.postgres_url.clone())
                        .schema(schema.clone())
                        .policy(policy),
                )
                .await
                .context(|| format!("connect to {}", options.postgres_url))?;
                (
                    Arc::new(backend.clone()),
                    Store::Postgres {
                        backend,
                        url: options.postgres_url.clone(),
                        schema,
                    },
                )
            }
            Kind::Redis => {
                let namespace = unique("bench-");
                let backend = RedisBackend::connect(
                    RedisConfig::new(options.redis_url.clone())
                        .namespace(namespace.clone())
                        .policy(policy),
                )
                .await
                .context(|| format!("connect to {}", options.redis_url))?;
                (
                    Arc::new(backend.clone()),
                    Store::Redis {
                        backend,
                        url: options.redis_url.clone(),
                        namespace,
                    },
                )
            }
        };
        Ok(Fixture {
            kind,
            lib,
            store,
            admitted: 0,
        })
    }

    /// The raw client on the same store (`None` for the memory backend).
    pub async fn raw(&self) -> Result<Option<Arc<dyn Raw>>> {
        let policy = RedeliveryPolicy::default();
        Ok(match &self.store {
            Store::Memory => None,
            Store::Sqlite {
                file, namespace, ..
            } => Some(Arc::new(RawSqlite::open(file, namespace, policy)?)),
            Store::Postgres { url, schema, .. } => Some(Arc::new(
                RawPostgres::connect(url, schema, &policy, DEFAULT_MAX_CONNECTIONS).await?,
            )),
            Store::Redis { url, namespace, .. } => {
                Some(Arc::new(RawRedis::connect(url, namespace, &policy).await?))
            }
        })
    }

    /// The raw SQLite client (for the synchronous end-to-end baseline).
    pub fn raw_sqlite(&self) -> Result<Option<RawSqlite>> {
        match &self.store {
            Store::Sqlite {
                file, namespace, ..
            } => Ok(Some(RawSqlite::open(
                file,
                namespace,
                RedeliveryPolicy::default(),
            )?)),
            _ => Ok(None),
        }
    }

    /// The concrete backend.
    pub fn handle(&self) -> Handle<'_> {
        match &self.store {
            Store::Memory => Handle::Memory,
            Store::Sqlite { backend, file, .. } => Handle::Sqlite(backend, file),
            Store::Postgres { backend, .. } => Handle::Postgres(backend),
            Store::Redis { backend, .. } => Handle::Redis(backend),
        }
    }

    /// Where another process finds this store (`None` for the memory backend, which lives
    /// in this process only).
    pub fn spec(&self) -> Option<StoreSpec> {
        match &self.store {
            Store::Memory => None,
            Store::Sqlite {
                file, namespace, ..
            } => Some(StoreSpec::Sqlite {
                file: file.clone(),
                namespace: namespace.clone(),
            }),
            Store::Postgres { url, schema, .. } => Some(StoreSpec::Postgres {
                url: url.clone(),
                schema: schema.clone(),
            }),
            Store::Redis { url, namespace, .. } => Some(StoreSpec::Redis {
                url: url.clone(),
                namespace: namespace.clone(),
            }),
        }
    }

    /// Another handle on the same store in this process, with its own connection(s) as a
    /// second runtime would open (the same handle for the memory backend).
    pub async fn peer(&self) -> Result<SharedBackend> {
        Ok(match &self.store {
            Store::Memory => self.lib.clone(),
            Store::Sqlite { backend, .. } => {
                Arc::new(backend.peer().await.context(|| "sqlite peer".into())?)
            }
            Store::Postgres { backend, .. } => {
                Arc::new(backend.peer().await.context(|| "postgres peer".into())?)
            }
            Store::Redis { backend, .. } => {
                Arc::new(backend.peer().await.context(|| "redis peer".into())?)
            }
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

    /// Removes the store.
    pub async fn remove(self) -> Result<()> {
        let Fixture { lib, store, .. } = self;
        drop(lib);
        match store {
            Store::Memory => Ok(()),
            Store::Sqlite { backend, dir, .. } => {
                drop(backend);
                std::fs::remove_dir_all(&dir)
                    .map_err(|e| BenchError::Setup(format!("remove {}: {e}", dir.display())))
            }
            Store::Postgres { backend, .. } => {
                // Forced: the fenced rows keep an application table in the bench's schema.
                let dropped = backend
                    .drop_schema_forced()
                    .await
                    .context(|| "drop schema".into());
                backend.close().await;
                dropped
            }
            Store::Redis { backend, .. } => backend
                .delete_namespace()
                .await
                .context(|| "delete namespace".into()),
        }
    }
}
