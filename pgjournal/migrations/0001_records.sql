-- {{schema}} is the configured schema, already quoted.
CREATE TABLE {{schema}}.records (
	scope         text    COLLATE "C" NOT NULL, -- byte order, as the bbolt journal lists
	key           text    COLLATE "C" NOT NULL,
	state         text    NOT NULL,
	open          boolean NOT NULL,
	review        boolean NOT NULL,
	created_ns    bigint  NOT NULL,
	next_due_ns   bigint  NOT NULL,
	settled_ns    bigint  NOT NULL,
	version       bigint  NOT NULL DEFAULT 1,
	lease_owner   text    NOT NULL DEFAULT '',
	lease_expires bigint  NOT NULL DEFAULT 0,
	lease_token   bigint  NOT NULL DEFAULT 0,
	data          bytea   NOT NULL,
	PRIMARY KEY (scope, key)
);
-- Due, ClaimDue, ForEachOpen and Resume read open records only: their
-- cost grows with the open operations, not with the journal's size.
CREATE INDEX records_due ON {{schema}}.records (next_due_ns, scope, key) WHERE open;
-- Prune reads settled records only.
CREATE INDEX records_settled ON {{schema}}.records (settled_ns) WHERE NOT open;
