-- target_session_attrs=primary: whether the server is not a standby.
SELECT NOT pg_is_in_recovery()
