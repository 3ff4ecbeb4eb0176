-- The schema and its version table (one row: owner and version), for a schema without one.
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE {s}.lease_schema (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    owner text NOT NULL,
    version integer NOT NULL)
