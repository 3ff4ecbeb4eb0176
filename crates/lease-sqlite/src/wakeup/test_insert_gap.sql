INSERT INTO lease_wake_log VALUES ('default', 5, 1, 300)
