DELETE FROM lease_wake_log
