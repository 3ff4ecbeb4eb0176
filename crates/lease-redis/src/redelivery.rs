//! Workflows' own redelivery policies on Redis (lease-core's `RedeliveryPolicies`, RFC 002
//! "Redelivery delay"): the hash `redelivery` of every partition, field a workflow name,
//! value `base_ms,factor,cap_ms`. Each claim copies the policy of the execution's workflow
//! onto the record it claims (field `rp`, `redelivery_for` in `scripts/record.lua`, read
//! where the attempt limit is), and every gate and ready/waiting score of that record uses
//! it, so a change applies from each execution's next claim. Like attempt limits, a split
//! namespace is written partition by partition (each write atomic; a repeated call repairs
//! one interrupted between them) and read from the first partition.

use lease_core::{RedeliveryPolicies, RedeliveryPolicy, Result, WorkflowName};

use crate::backend::RedisBackend;
use crate::error::Access;
use crate::reply::{Reply, parse_policy, policy_text};
use crate::scripts::operation_script;

// The operation script this module runs, compiled once per process.
operation_script!(POLICIES = record_script(include_str!("redelivery/policies.lua")));

impl RedisBackend {
    /// `ExecutionClient::set_redelivery_policy`: sets or removes one field of every
    /// partition's `redelivery`; a change that shortens some delay publishes a wake-up.
    pub(crate) async fn set_redelivery(
        &self,
        workflow: &WorkflowName,
        policy: Option<RedeliveryPolicy>,
    ) -> Result<()> {
        const OP: &str = "set_redelivery_policy";
        let (verb, value) = match policy {
            Some(p) => ("set", policy_text(&p)),
            None => ("remove", String::new()),
        };
        for prefix in self.keys().partitions() {
            let args = [
                verb.as_bytes(),
                workflow.as_str().as_bytes(),
                value.as_bytes(),
                self.publish_word(),
            ];
            let v = self
                .eval(OP, Access::Write, prefix, &POLICIES, &args)
                .await?;
            Reply::new(OP).array(v)?;
        }
        Ok(())
    }

    /// `ExecutionClient::redelivery_policies`, as the first partition holds them.
    pub(crate) async fn read_redelivery(&self) -> Result<RedeliveryPolicies> {
        const OP: &str = "redelivery_policies";
        let reply = Reply::new(OP);
        let prefix = &self.keys().partitions()[0];
        let args: [&[u8]; 4] = [b"list", b"", b"", b""];
        let v = self
            .eval(OP, Access::Read, prefix, &POLICIES, &args)
            .await?;
        let mut out = RedeliveryPolicies::default();
        for (field, value) in reply.pairs(v)? {
            let policy = parse_policy(&value)
                .ok_or_else(|| reply.unexpected(&format!("redelivery policy {value:?}")))?;
            let name = WorkflowName::new(field).map_err(|e| reply.unexpected(&e.to_string()))?;
            out.set(&name, Some(policy));
        }
        Ok(out)
    }
}
