-- Version 3: the nodes' admin state (a cordon), kept here because the
-- Redis view is rebuildable and loses it with the rest: a rebuilt view
-- takes its cordons from this table. A node absent from it is ready.
CREATE TABLE node_states (
    node_id       TEXT   NOT NULL PRIMARY KEY,
    state         TEXT   NOT NULL,
    updated_at_ns BIGINT NOT NULL
);
