-- target_session_attrs=read-write: whether the server accepts writes.
SELECT current_setting('transaction_read_only') = 'off'
