//! The verifying connect (`RedisConfig::migrate(false)`): reads each prefix's stored key
//! layout and partition count and refuses anything but this library's, writing nothing, so
//! a read-only tool neither migrates a namespace under live traffic nor claims a mistyped
//! one (which would leave `meta` and empty counters behind).

use lease_core::{LeaseError, Result};

use crate::backend::RedisBackend;
use crate::keys::LAYOUT_VERSION;
use crate::reply::Reply;

const OP: &str = "connect";

impl RedisBackend {
    /// Checks the home prefix, then every partition's, without writing.
    pub(crate) async fn verify_layout(&self) -> Result<()> {
        let keys = self.keys();
        self.verify_prefix(keys.prefix()).await?;
        if keys.split() {
            for prefix in keys.partitions() {
                self.verify_prefix(prefix).await?;
            }
        }
        Ok(())
    }

    /// `prefix`'s `meta`: its layout must be [`LAYOUT_VERSION`] and its partition count
    /// this handle's.
    async fn verify_prefix(&self, prefix: &str) -> Result<()> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(format!("{prefix}meta"))
            .arg("layout")
            .arg("partitions");
        let reply = Reply::new(OP);
        let v = self.query(OP, &cmd).await?;
        let mut items = reply.array(v)?.into_iter();
        let layout = reply.opt_string(reply.next(&mut items, "layout")?)?;
        let stored = reply.opt_string(reply.next(&mut items, "partitions")?)?;
        if layout.as_deref() != Some(LAYOUT_VERSION) {
            return Err(LeaseError::SchemaMismatch {
                location: prefix.to_owned(),
                // A layout that is not a number is not this library's: reported as 0.
                found: layout.map(|l| l.parse().unwrap_or(0)),
                expected: LAYOUT_VERSION.parse().unwrap_or(0),
            });
        }
        let count = self.keys().partitions().len().to_string();
        let stored = stored.unwrap_or_else(|| "1".to_owned());
        if stored != count {
            return Err(LeaseError::Schema {
                location: prefix.to_owned(),
                reason: format!(
                    "the namespace has {stored} partition(s); this handle was configured with \
                     {count} (every handle on a namespace must use the same count)"
                ),
            });
        }
        Ok(())
    }
}
