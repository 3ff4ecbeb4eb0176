UPDATE lease_executions
SET corrupt = ?2, claim_due_at = NULL, claimable_at = NULL WHERE rowid = ?1
