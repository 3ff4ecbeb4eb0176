UPDATE lease_executions SET status = ?3, token = ?4, lease_expires_at = ?5,
    due_at = ?6, wake_after_claim = ?7, unacknowledged = ?8,
    last_delivery_ended_at = ?9, ever_suspended = ?10, outcome = ?11,
    claim_due_at = ?12, claimable_at = ?13, attempt_limit = ?14, last_error = ?15,
    redelivery_policy = ?16, deliveries = COALESCE(?17, deliveries),
    delivery_claimed_at = ?18, corrupt = NULL
WHERE namespace = ?1 AND id = ?2
