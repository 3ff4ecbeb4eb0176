-- lease-postgres schema version 4: a claim never issues a token that is not above the
-- execution's stored token. After an operational fault (the sequence reset with setval or
-- ALTER SEQUENCE ... RESTART, a partial restore) nextval can return tokens already issued;
-- the claim calls this instead of writing such a token, which aborts the whole claim
-- statement (nothing is claimed) with SQLSTATE LT001, reported as LeaseError::TokenCounter.

CREATE FUNCTION {s}.token_counter_behind(next bigint, stored bigint, execution text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'LT001',
        MESSAGE = format('next token %s is not above token %s of execution %s',
                         next, stored, execution),
        HINT = 'set the fencing_tokens sequence above the highest stored token';
END
$$;
