-------------------------------------------------------------------------
-- A fingerprint against its text (1.1).  The rows dedup returns hold a
-- fingerprint as text, 32 hex digits, which dedup_fingerprint_out writes (a
-- driver reads a row as one value in binary, and cannot read a
-- dedup_fingerprint in it: sql/types/records.sql); 1.0's SQL compares
-- dedup_lookup's request_fingerprint with a dedup_fingerprint, and keeps
-- doing so.  Equal when the text is the fingerprint's (either case); a
-- text that is no fingerprint's equals none.  In the install script and,
-- as it is, in the update from 1.0 (the Makefile).
-------------------------------------------------------------------------
CREATE FUNCTION @extschema@.dedup_fingerprint_eq(text, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME', 'dedup_fingerprint_text_eq' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_ne(text, @extschema@.dedup_fingerprint)
RETURNS boolean AS 'MODULE_PATHNAME', 'dedup_fingerprint_text_ne' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_eq(@extschema@.dedup_fingerprint, text)
RETURNS boolean AS 'MODULE_PATHNAME', 'dedup_fingerprint_eq_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION @extschema@.dedup_fingerprint_ne(@extschema@.dedup_fingerprint, text)
RETURNS boolean AS 'MODULE_PATHNAME', 'dedup_fingerprint_ne_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE OPERATOR @extschema@.= (
    LEFTARG = text, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_eq,
    COMMUTATOR = OPERATOR(@extschema@.=), NEGATOR = OPERATOR(@extschema@.<>),
    RESTRICT = eqsel, JOIN = eqjoinsel
);
CREATE OPERATOR @extschema@.<> (
    LEFTARG = text, RIGHTARG = @extschema@.dedup_fingerprint,
    FUNCTION = @extschema@.dedup_fingerprint_ne,
    COMMUTATOR = OPERATOR(@extschema@.<>), NEGATOR = OPERATOR(@extschema@.=),
    RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR @extschema@.= (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = text,
    FUNCTION = @extschema@.dedup_fingerprint_eq,
    COMMUTATOR = OPERATOR(@extschema@.=), NEGATOR = OPERATOR(@extschema@.<>),
    RESTRICT = eqsel, JOIN = eqjoinsel
);
CREATE OPERATOR @extschema@.<> (
    LEFTARG = @extschema@.dedup_fingerprint, RIGHTARG = text,
    FUNCTION = @extschema@.dedup_fingerprint_ne,
    COMMUTATOR = OPERATOR(@extschema@.<>), NEGATOR = OPERATOR(@extschema@.=),
    RESTRICT = neqsel, JOIN = neqjoinsel
);
