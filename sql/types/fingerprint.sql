-------------------------------------------------------------------------
-- The fingerprint type: 16 bytes, written as 32 hexadecimal digits
-------------------------------------------------------------------------
CREATE TYPE @extschema@.dedup_fingerprint;

CREATE FUNCTION @extschema@.dedup_fingerprint_in(cstring)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint_out(@extschema@.dedup_fingerprint)
RETURNS cstring
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint_recv(internal)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint_send(@extschema@.dedup_fingerprint)
RETURNS bytea
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE @extschema@.dedup_fingerprint (
    INPUT = @extschema@.dedup_fingerprint_in,
    OUTPUT = @extschema@.dedup_fingerprint_out,
    RECEIVE = @extschema@.dedup_fingerprint_recv,
    SEND = @extschema@.dedup_fingerprint_send,
    INTERNALLENGTH = 16,
    ALIGNMENT = char,
    STORAGE = plain
);
COMMENT ON TYPE @extschema@.dedup_fingerprint IS
    'first 128 bits of a SHA-256 digest of a key or payload';

-- constructors: the fingerprint of a value (not of a key within a scope)
CREATE FUNCTION @extschema@.dedup_fingerprint(value text)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_fingerprint_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint(value bytea)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_fingerprint_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint(value uuid)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_fingerprint_uuid' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint(payload jsonb)
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_fingerprint_jsonb' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dedup_fingerprint(payload jsonb, ignore text[])
RETURNS @extschema@.dedup_fingerprint
AS 'MODULE_PATHNAME', 'dedup_fingerprint_jsonb' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.dedup_fingerprint(jsonb, text[]) IS
    'canonical fingerprint of a JSON value: key order, white space and number spelling do not matter; top-level fields named in ignore are left out';

CREATE CAST (bytea AS @extschema@.dedup_fingerprint)
    WITH FUNCTION @extschema@.dedup_fingerprint(bytea);
CREATE CAST (uuid AS @extschema@.dedup_fingerprint)
    WITH FUNCTION @extschema@.dedup_fingerprint(uuid);
CREATE CAST (jsonb AS @extschema@.dedup_fingerprint)
    WITH FUNCTION @extschema@.dedup_fingerprint(jsonb);

-- comparison, for the btree and hash operator classes
CREATE FUNCTION @extschema@.dedup_fingerprint_cmp(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS integer AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_eq(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_ne(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_lt(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_le(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_gt(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_ge(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_hash(@extschema@.dedup_fingerprint)
RETURNS integer AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_hash_extended(@extschema@.dedup_fingerprint, bigint)
RETURNS bigint AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE OPERATOR @extschema@.= (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_eq,
    COMMUTATOR = OPERATOR(@extschema@.=), NEGATOR = OPERATOR(@extschema@.<>),
    RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES
);
CREATE OPERATOR @extschema@.<> (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_ne,
    COMMUTATOR = OPERATOR(@extschema@.<>), NEGATOR = OPERATOR(@extschema@.=),
    RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR @extschema@.< (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_lt,
    COMMUTATOR = OPERATOR(@extschema@.>), NEGATOR = OPERATOR(@extschema@.>=),
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR @extschema@.<= (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_le,
    COMMUTATOR = OPERATOR(@extschema@.>=), NEGATOR = OPERATOR(@extschema@.>),
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR @extschema@.> (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_gt,
    COMMUTATOR = OPERATOR(@extschema@.<), NEGATOR = OPERATOR(@extschema@.<=),
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR @extschema@.>= (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_ge,
    COMMUTATOR = OPERATOR(@extschema@.<=), NEGATOR = OPERATOR(@extschema@.<),
    RESTRICT = scalargesel, JOIN = scalargejoinsel
);

CREATE OPERATOR CLASS @extschema@.dedup_fingerprint_ops
    DEFAULT FOR TYPE @extschema@.dedup_fingerprint USING btree AS
        OPERATOR 1 @extschema@.<,
        OPERATOR 2 @extschema@.<=,
        OPERATOR 3 @extschema@.=,
        OPERATOR 4 @extschema@.>=,
        OPERATOR 5 @extschema@.>,
        FUNCTION 1 @extschema@.dedup_fingerprint_cmp(@extschema@.dedup_fingerprint, @extschema@.dedup_fingerprint);

CREATE OPERATOR CLASS @extschema@.dedup_fingerprint_hash_ops
    DEFAULT FOR TYPE @extschema@.dedup_fingerprint USING hash AS
        OPERATOR 1 @extschema@.=,
        FUNCTION 1 @extschema@.dedup_fingerprint_hash(@extschema@.dedup_fingerprint),
        FUNCTION 2 @extschema@.dedup_fingerprint_hash_extended(@extschema@.dedup_fingerprint, bigint);
