-- {{schema}} is the configured schema, already quoted.
-- The endpoints (method, space, URL without its query) a Client learnt
-- ignore the idempotency key (idem.KeyIgnoringStore), kept after every
-- operation flagged for one has settled. Up to
-- journal.MaxKeyIgnoringEndpoints rows. IF NOT EXISTS: a rollback to a
-- release of schema version 1 may take version 2's row out of
-- schema_version (README) and leave the table, made again on the way
-- back.
CREATE TABLE IF NOT EXISTS {{schema}}.key_ignoring (
	endpoint text COLLATE "C" PRIMARY KEY -- byte order, as the bbolt journal lists
);
