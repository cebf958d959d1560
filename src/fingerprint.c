/*-------------------------------------------------------------------------
 *
 * fingerprint.c
 *	  The dedup_fingerprint type and the one routine that fingerprints
 *	  anything: keys within a scope, standalone text/bytea/uuid values, and
 *	  jsonb payloads in canonical form.
 *
 * A fingerprint is the first 128 bits of a SHA-256 digest over a
 * domain-separated, length-prefixed encoding of its input.  Keys are never
 * truncated before hashing.  128 bits leave a second-preimage cost of 2^128
 * for anyone who wants to collide with somebody else's key; a collision of
 * two keys one party chose both of (2^64 work) only ever hides that party's
 * own second message.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <openssl/evp.h>

#include "catalog/pg_type_d.h"
#include "common/hashfn.h"
#include "common/sha2.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/uuid.h"

#include "checks.h"
#include "fingerprint.h"

/* Domain tags keep the encodings of different inputs apart. */
#define FP_TAG_CLAIM	"dedup/v1/claim"
#define FP_TAG_STREAM	"dedup/v1/stream"
#define FP_TAG_BYTES	"dedup/v1/bytes"
#define FP_TAG_JSONB	"dedup/v1/jsonb"

/*
 * One SHA-256 computation in progress, through OpenSSL's EVP interface,
 * which PostgreSQL's own hashing uses too.  Every call fingerprints a key,
 * so the digest is fetched from OpenSSL once per backend, and one context
 * kept and initialized again for each computation: pg_cryptohash would
 * create a context, fetch the digest and register the context with the
 * resource owner each time (about a tenth of a duplicate claim's own
 * CPU).  Computations never nest (each runs from start to finish over
 * plain data), and one that an error interrupted is started over by the
 * next; the context, kept in the backend for its life, needs no freeing.
 */
typedef struct FpHasher
{
	EVP_MD_CTX *ctx;
} FpHasher;

static void
fp_hasher_start(FpHasher *h, const char *tag)
{
	static EVP_MD * sha256 = NULL;
	static EVP_MD_CTX * ctx = NULL;

	if (sha256 == NULL)
	{
		sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
		if (sha256 == NULL)
			elog(ERROR, "could not fetch the SHA-256 digest from OpenSSL");
	}
	if (ctx == NULL)
	{
		ctx = EVP_MD_CTX_new();
		if (ctx == NULL)
			elog(ERROR, "could not create a SHA-256 context");
	}
	h->ctx = ctx;
	if (EVP_DigestInit_ex2(h->ctx, sha256, NULL) != 1)
		elog(ERROR, "could not initialize SHA-256 context");
	/* the tag includes its terminating zero byte */
	if (EVP_DigestUpdate(h->ctx, tag, strlen(tag) + 1) != 1)
		elog(ERROR, "could not update SHA-256 context");
}

static void
fp_hasher_add(FpHasher *h, const void *data, Size len)
{
	if (len > 0 && EVP_DigestUpdate(h->ctx, data, len) != 1)
		elog(ERROR, "could not update SHA-256 context");
}

/* A length-prefixed byte string: 4-byte big-endian length, then the bytes. */
static void
fp_hasher_add_sized(FpHasher *h, const void *data, Size len)
{
	uint32		be = pg_hton32((uint32) len);

	fp_hasher_add(h, &be, sizeof(be));
	fp_hasher_add(h, data, len);
}

static void
fp_hasher_finish(FpHasher *h, DedupFingerprint *result)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];

	if (EVP_DigestFinal_ex(h->ctx, digest, NULL) != 1)
		elog(ERROR, "could not finalize SHA-256 context");
	h->ctx = NULL;
	memcpy(result->bytes, digest, DEDUP_FINGERPRINT_LEN);
}

/*
 * The stored fingerprint of a key within a scope.  The scope is
 * length-prefixed, so no (scope, key) pair can be spelled as another.
 */
static void
fp_of_key(const text *scope, const void *key, Size keylen, DedupFingerprint *result)
{
	FpHasher	h;

	fp_hasher_start(&h, FP_TAG_CLAIM);
	fp_hasher_add_sized(&h, VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope));
	fp_hasher_add(&h, key, keylen);
	fp_hasher_finish(&h, result);
}

/*
 * The stored fingerprint of a stream within a scope (dedup.streams): its own
 * domain tag, so that no stream shares a fingerprint with a key.
 */
void
dedup_fingerprint_stream_key(const text *scope, const text *stream, DedupFingerprint *result)
{
	FpHasher	h;

	fp_hasher_start(&h, FP_TAG_STREAM);
	fp_hasher_add_sized(&h, VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope));
	fp_hasher_add(&h, VARDATA_ANY(stream), VARSIZE_ANY_EXHDR(stream));
	fp_hasher_finish(&h, result);
}

/*
 * The stored fingerprint of a key datum of type text, bytea (typlen -1,
 * detoasted), uuid or dedup_fingerprint (typlen 16), or bigint (typlen 8):
 * keys are byte strings, a bigint its decimal text, so that an id given as
 * bigint and as text is one key.  A uuid stays its 16 bytes, as in 1.0:
 * a fingerprint cannot be computed again from what is stored, so a change
 * would leave every uuid key stored before the update unfound.
 */
void
dedup_fingerprint_key_datum(Datum key, int16 typlen, const text *scope, DedupFingerprint *result)
{
	if (typlen == -1)
	{
		struct varlena *v = (struct varlena *) DatumGetPointer(key);

		if (VARSIZE_ANY_EXHDR(v) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key must not be empty")));
		fp_of_key(scope, VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v), result);
	}
	else if (typlen == sizeof(int64))
	{
		char		digits[MAXINT8LEN + 1];
		int			len = pg_lltoa(DatumGetInt64(key), digits);

		fp_of_key(scope, digits, len, result);
	}
	else
	{
		Assert(typlen == UUID_LEN && typlen == DEDUP_FINGERPRINT_LEN);
		fp_of_key(scope, DatumGetPointer(key), typlen, result);
	}
}

/* The stored fingerprint of a function's key argument, which must not be NULL. */
void
dedup_fingerprint_key_arg(FunctionCallInfo fcinfo, int argno, const text *scope, int16 typlen,
						  DedupFingerprint *result)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("key must not be null")));
	dedup_fingerprint_key_datum(typlen == -1 ?
								PointerGetDatum(PG_DETOAST_DATUM_PACKED(PG_GETARG_DATUM(argno))) :
								PG_GETARG_DATUM(argno),
								typlen, scope, result);
}

/* The text form: 32 lowercase hexadecimal digits. */
char *
dedup_fingerprint_hex(const DedupFingerprint *fp)
{
	char	   *result = palloc(DEDUP_FINGERPRINT_LEN * 2 + 1);

	hex_encode((const char *) fp->bytes, DEDUP_FINGERPRINT_LEN, result);
	result[DEDUP_FINGERPRINT_LEN * 2] = '\0';
	return result;
}


/* ---------------------------------------------------------------------
 * Canonical jsonb: objects come out of jsonb with their keys deduplicated
 * and sorted, so the same JSON value always walks the same way; numbers
 * are hashed in normalized form (1.0 and 1 are one value, as jsonb's own
 * equality says).  Every token is tagged and every string length-prefixed.
 * ---------------------------------------------------------------------
 */
/*
 * The top-level field names to leave out, sorted once per call so that each
 * field of the payload is looked up by binary search: time and memory stay
 * linear in the sizes of the payload and the list, however large both are.
 */
typedef struct FpName
{
	const char *data;
	int			len;
} FpName;

typedef struct FpIgnoreSet
{
	FpName	   *names;
	int			n;
} FpIgnoreSet;

static void fp_jsonb_container(FpHasher *h, JsonbContainer *container,
							   const FpIgnoreSet *ignore);

static int
fp_name_cmp(const void *a, const void *b)
{
	const FpName *na = (const FpName *) a;
	const FpName *nb = (const FpName *) b;
	int			c = memcmp(na->data, nb->data, Min(na->len, nb->len));

	if (c != 0)
		return c;
	return (na->len > nb->len) - (na->len < nb->len);
}

static void
fp_ignore_set_build(ArrayType *ignore, FpIgnoreSet *set)
{
	Datum	   *names;
	bool	   *nulls;
	int			n;

	set->n = 0;
	set->names = NULL;
	if (ignore == NULL)
		return;
	deconstruct_array(ignore, TEXTOID, -1, false, TYPALIGN_INT, &names, &nulls, &n);
	set->names = palloc(sizeof(FpName) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		text	   *name;

		CHECK_FOR_INTERRUPTS();
		if (nulls[i])
			continue;
		name = DatumGetTextPP(names[i]);
		set->names[set->n].data = VARDATA_ANY(name);
		set->names[set->n].len = VARSIZE_ANY_EXHDR(name);
		set->n++;
	}
	pfree(names);
	pfree(nulls);
	qsort(set->names, set->n, sizeof(FpName), fp_name_cmp);
}

static bool
fp_jsonb_ignored(const FpIgnoreSet *ignore, const JsonbValue *key)
{
	FpName		probe;

	if (ignore == NULL || ignore->n == 0)
		return false;
	probe.data = key->val.string.val;
	probe.len = key->val.string.len;
	return bsearch(&probe, ignore->names, ignore->n, sizeof(FpName), fp_name_cmp) != NULL;
}

static void
fp_jsonb_value(FpHasher *h, JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			fp_hasher_add(h, "z", 1);
			break;
		case jbvBool:
			fp_hasher_add(h, v->val.boolean ? "t" : "f", 1);
			break;
		case jbvString:
			fp_hasher_add(h, "s", 1);
			fp_hasher_add_sized(h, v->val.string.val, v->val.string.len);
			break;
		case jbvNumeric:
			{
				char	   *num = numeric_normalize(v->val.numeric);

				fp_hasher_add(h, "n", 1);
				fp_hasher_add_sized(h, num, strlen(num));
				pfree(num);
				break;
			}
		case jbvBinary:
			fp_jsonb_container(h, v->val.binary.data, NULL);
			break;
		default:
			elog(ERROR, "unexpected jsonb value type %d", (int) v->type);
	}
}

static void
fp_jsonb_container(FpHasher *h, JsonbContainer *container, const FpIgnoreSet *ignore)
{
	JsonbIterator *it = JsonbIteratorInit(container);
	JsonbIteratorToken tok;
	JsonbValue	v;
	bool		raw_scalar = false;
	bool		skip_value = false;

	check_stack_depth();
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		switch (tok)
		{
			case WJB_BEGIN_ARRAY:
				raw_scalar = v.val.array.rawScalar;
				if (!raw_scalar)
					fp_hasher_add(h, "[", 1);
				break;
			case WJB_END_ARRAY:
				if (!raw_scalar)
					fp_hasher_add(h, "]", 1);
				break;
			case WJB_BEGIN_OBJECT:
				fp_hasher_add(h, "{", 1);
				break;
			case WJB_END_OBJECT:
				fp_hasher_add(h, "}", 1);
				break;
			case WJB_KEY:
				skip_value = fp_jsonb_ignored(ignore, &v);
				if (!skip_value)
				{
					fp_hasher_add(h, "k", 1);
					fp_hasher_add_sized(h, v.val.string.val, v.val.string.len);
				}
				break;
			case WJB_VALUE:
				if (!skip_value)
					fp_jsonb_value(h, &v);
				skip_value = false;
				break;
			case WJB_ELEM:
				fp_jsonb_value(h, &v);
				break;
			default:
				elog(ERROR, "unexpected jsonb iterator token %d", (int) tok);
		}
	}
}

/* ---------------------------------------------------------------------
 * SQL-callable constructors
 * ---------------------------------------------------------------------
 */
static DedupFingerprint *
fp_of_bytes(const void *data, Size len)
{
	DedupFingerprint *result = palloc(sizeof(DedupFingerprint));
	FpHasher	h;

	fp_hasher_start(&h, FP_TAG_BYTES);
	fp_hasher_add(&h, data, len);
	fp_hasher_finish(&h, result);
	return result;
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_text);
Datum
dedup_fingerprint_text(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);

	PG_RETURN_DEDUP_FINGERPRINT_P(fp_of_bytes(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)));
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_uuid);
Datum
dedup_fingerprint_uuid(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *u = PG_GETARG_UUID_P(0);

	PG_RETURN_DEDUP_FINGERPRINT_P(fp_of_bytes(u->data, UUID_LEN));
}

/* The canonical fingerprint of a jsonb value, leaving out ignored top-level fields. */
void
dedup_fingerprint_of_jsonb(Jsonb *jb, ArrayType *ignore, DedupFingerprint *result)
{
	FpHasher	h;
	FpIgnoreSet set;

	fp_ignore_set_build(ignore, &set);
	fp_hasher_start(&h, FP_TAG_JSONB);
	fp_jsonb_container(&h, &jb->root, &set);
	fp_hasher_finish(&h, result);
	if (set.names)
		pfree(set.names);
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_jsonb);
Datum
dedup_fingerprint_jsonb(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb = PG_GETARG_JSONB_P(0);
	ArrayType  *ignore = NULL;
	DedupFingerprint *result = palloc(sizeof(DedupFingerprint));

	if (PG_NARGS() > 1)
	{
		ignore = PG_GETARG_ARRAYTYPE_P(1);
		if (ARR_NDIM(ignore) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("ignore must be a one-dimensional array of field names")));
		if (ARR_NDIM(ignore) == 0)
			ignore = NULL;
	}
	dedup_fingerprint_of_jsonb(jb, ignore, result);
	PG_RETURN_DEDUP_FINGERPRINT_P(result);
}

/* ---------------------------------------------------------------------
 * Type input/output: 32 hexadecimal digits, 16 bytes in binary.
 * ---------------------------------------------------------------------
 */
PG_FUNCTION_INFO_V1(dedup_fingerprint_in);
Datum
dedup_fingerprint_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);
	DedupFingerprint *result = palloc(sizeof(DedupFingerprint));

	/* check the digits first: hex_decode's own errors name no type */
	if (strlen(str) != DEDUP_FINGERPRINT_LEN * 2 ||
		strspn(str, "0123456789abcdefABCDEF") != DEDUP_FINGERPRINT_LEN * 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type %s: \"%s\"",
						"dedup_fingerprint", str),
				 errdetail("A fingerprint is written as %d hexadecimal digits.",
						   DEDUP_FINGERPRINT_LEN * 2),
				 errhint("A quoted literal alone is read as a fingerprint; to fingerprint it, give its type: dedup_fingerprint('%s'::text).",
						 str)));
	hex_decode(str, DEDUP_FINGERPRINT_LEN * 2, (char *) result->bytes);
	PG_RETURN_DEDUP_FINGERPRINT_P(result);
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_out);
Datum
dedup_fingerprint_out(PG_FUNCTION_ARGS)
{
	PG_RETURN_CSTRING(dedup_fingerprint_hex(PG_GETARG_DEDUP_FINGERPRINT_P(0)));
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_recv);
Datum
dedup_fingerprint_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	DedupFingerprint *result = palloc(sizeof(DedupFingerprint));

	memcpy(result->bytes, pq_getmsgbytes(buf, DEDUP_FINGERPRINT_LEN),
		   DEDUP_FINGERPRINT_LEN);
	PG_RETURN_DEDUP_FINGERPRINT_P(result);
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_send);
Datum
dedup_fingerprint_send(PG_FUNCTION_ARGS)
{
	DedupFingerprint *fp = PG_GETARG_DEDUP_FINGERPRINT_P(0);
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendbytes(&buf, (const char *) fp->bytes, DEDUP_FINGERPRINT_LEN);
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

/* ---------------------------------------------------------------------
 * Comparison and hashing, for the btree and hash operator classes.
 * ---------------------------------------------------------------------
 */
#define FP_CMP_ARGS \
	dedup_fingerprint_compare(PG_GETARG_DEDUP_FINGERPRINT_P(0), \
							  PG_GETARG_DEDUP_FINGERPRINT_P(1))

PG_FUNCTION_INFO_V1(dedup_fingerprint_cmp);
Datum
dedup_fingerprint_cmp(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(FP_CMP_ARGS);
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_eq);
Datum
dedup_fingerprint_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(FP_CMP_ARGS == 0);
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_ne);
Datum
dedup_fingerprint_ne(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(FP_CMP_ARGS != 0);
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_lt);
Datum
dedup_fingerprint_lt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(FP_CMP_ARGS < 0);
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_le);
Datum
dedup_fingerprint_le(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(FP_CMP_ARGS <= 0);
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_gt);
Datum
dedup_fingerprint_gt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(FP_CMP_ARGS > 0);
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_ge);
Datum
dedup_fingerprint_ge(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(FP_CMP_ARGS >= 0);
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_hash);
Datum
dedup_fingerprint_hash(PG_FUNCTION_ARGS)
{
	DedupFingerprint *fp = PG_GETARG_DEDUP_FINGERPRINT_P(0);

	return hash_any(fp->bytes, DEDUP_FINGERPRINT_LEN);
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_hash_extended);
Datum
dedup_fingerprint_hash_extended(PG_FUNCTION_ARGS)
{
	DedupFingerprint *fp = PG_GETARG_DEDUP_FINGERPRINT_P(0);

	return hash_any_extended(fp->bytes, DEDUP_FINGERPRINT_LEN, PG_GETARG_INT64(1));
}

/*
 * dedup_key(scope text, key <text|bytea|uuid|dedup_fingerprint|bigint>) and
 * dedup_stream_key(scope text, stream text): the fingerprints a key and a
 * stream are stored under, as a business table co-located with dedup's on a
 * Citus cluster is distributed by them.
 */
static Datum
fingerprint_key_sql(FunctionCallInfo fcinfo, int16 typlen)
{
	text	   *scope = dedup_check_name_arg(fcinfo, 0, "scope");
	DedupFingerprint *result = palloc(sizeof(DedupFingerprint));

	dedup_fingerprint_key_arg(fcinfo, 1, scope, typlen, result);
	PG_RETURN_DEDUP_FINGERPRINT_P(result);
}

PG_FUNCTION_INFO_V1(dedup_key_varlena);
Datum
dedup_key_varlena(PG_FUNCTION_ARGS)
{
	return fingerprint_key_sql(fcinfo, -1);
}

PG_FUNCTION_INFO_V1(dedup_key_fixed);
Datum
dedup_key_fixed(PG_FUNCTION_ARGS)
{
	return fingerprint_key_sql(fcinfo, DEDUP_FINGERPRINT_LEN);
}

PG_FUNCTION_INFO_V1(dedup_key_int8);
Datum
dedup_key_int8(PG_FUNCTION_ARGS)
{
	return fingerprint_key_sql(fcinfo, sizeof(int64));
}

PG_FUNCTION_INFO_V1(dedup_stream_key_sql);
Datum
dedup_stream_key_sql(PG_FUNCTION_ARGS)
{
	text	   *scope = dedup_check_name_arg(fcinfo, 0, "scope");
	DedupFingerprint *result = palloc(sizeof(DedupFingerprint));

	dedup_fingerprint_stream_key(scope, dedup_check_name_arg(fcinfo, 1, "stream"), result);
	PG_RETURN_DEDUP_FINGERPRINT_P(result);
}

/* ---------------------------------------------------------------------
 * A fingerprint against its text: the rows dedup returns hold a
 * fingerprint as text, 32 hex digits (a driver reads a row in binary, and
 * cannot read a dedup_fingerprint in it), which 1.0's SQL compares with a
 * dedup_fingerprint (request_fingerprint = dedup_fingerprint(request)).
 * Equal when the text is the fingerprint's, in either case; a text that is
 * no fingerprint's is unequal to every one (no error).
 * ---------------------------------------------------------------------
 */
static bool
fingerprint_text_equals(const text *t, const DedupFingerprint *fp)
{
	char		hex[DEDUP_FINGERPRINT_LEN * 2 + 1];
	DedupFingerprint parsed;

	if (VARSIZE_ANY_EXHDR(t) != DEDUP_FINGERPRINT_LEN * 2)
		return false;
	memcpy(hex, VARDATA_ANY(t), DEDUP_FINGERPRINT_LEN * 2);
	hex[DEDUP_FINGERPRINT_LEN * 2] = '\0';
	if (strspn(hex, "0123456789abcdefABCDEF") != DEDUP_FINGERPRINT_LEN * 2)
		return false;
	hex_decode(hex, DEDUP_FINGERPRINT_LEN * 2, (char *) parsed.bytes);
	return dedup_fingerprint_compare(&parsed, fp) == 0;
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_text_eq);
Datum
dedup_fingerprint_text_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(fingerprint_text_equals(PG_GETARG_TEXT_PP(0), PG_GETARG_DEDUP_FINGERPRINT_P(1)));
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_text_ne);
Datum
dedup_fingerprint_text_ne(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(!fingerprint_text_equals(PG_GETARG_TEXT_PP(0), PG_GETARG_DEDUP_FINGERPRINT_P(1)));
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_eq_text);
Datum
dedup_fingerprint_eq_text(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(fingerprint_text_equals(PG_GETARG_TEXT_PP(1), PG_GETARG_DEDUP_FINGERPRINT_P(0)));
}

PG_FUNCTION_INFO_V1(dedup_fingerprint_ne_text);
Datum
dedup_fingerprint_ne_text(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(!fingerprint_text_equals(PG_GETARG_TEXT_PP(1), PG_GETARG_DEDUP_FINGERPRINT_P(0)));
}
