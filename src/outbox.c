/*-------------------------------------------------------------------------
 *
 * outbox.c
 *	  dedup_outbox_put(): an event into the transactional outbox, inside the
 *	  caller's business transaction; and dedup_outbox_relay(), the C entry
 *	  of the relay's functions (take, ack, nack, redrive, figures), whose
 *	  work is PL/pgSQL in schema dedup (sql/functions/outbox.sql).
 *
 * The event's id is the fingerprint of (topic, key) made a UUID (version 8:
 * 122 of its 128 bits), so a put returns it either way without a look-up.
 * A put claims those same 16 bytes in dedup.outbox_keys for the topic's
 * retention, through the claim path of dedup_claim(): the same key within
 * retention yields one event, a retried producer transaction never
 * publishes twice, and an ack can tell an event already acked (its key is
 * there) from one that never was.  dedup.outbox's primary key on the id
 * also catches a retry of an event still pending after its key expired;
 * an event that went dead counts as existing too.
 *
 * The event row is inserted through SPI as the owner of dedup.outbox, so
 * producers need EXECUTE on this function and no table privilege.
 *
 * Producers of one aggregate are serialized until they commit by a lock
 * taken before the event gets its sequence number: within an aggregate,
 * sequence order is commit order, which is the order the relay hands
 * events out in.  The lock is one of OUTBOX_LOCK_STRIPES, chosen by a hash
 * of (topic, aggregate id), so that a transaction that puts events of
 * thousands of aggregates holds at most that many locks (a lock per
 * aggregate would exhaust the lock table); two producers of different
 * aggregates on one stripe wait for each other (and two transactions that
 * put events of several aggregates can deadlock, 40P01, as with row locks).
 * A put without an aggregate id is the aggregate of its key, and locks it
 * too: another put may name that key as its aggregate.
 *
 * The relay's functions run their PL/pgSQL counterparts as the owner of
 * dedup.outbox, as SECURITY DEFINER would, but pass them the role that
 * called, so that they check its relay privilege on every topic they touch
 * (a SECURITY DEFINER function cannot know its caller).
 *
 * A new event notifies channel dedup_outbox with the topic as payload;
 * PostgreSQL folds a transaction's identical notifications into one, so
 * relays are woken once per committing transaction and topic.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "funcapi.h"
#include "catalog/pg_proc_d.h"
#include "catalog/pg_type_d.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/uuid.h"

#include "dedup.h"
#include "store.h"

/* The channel relays LISTEN on. */
#define OUTBOX_CHANNEL "dedup_outbox"

/* The number of producer locks (their lock tag class is in store.h) */
#define OUTBOX_LOCK_STRIPES 1024

#define OUTBOX_INSERT_NARGS 7

static SPIPlanPtr outbox_insert_plan = NULL;

/*
 * Make a fingerprint an RFC 9562 version 8 UUID in place: it is then both
 * the event's id and its key in dedup.outbox_keys.
 */
static void
outbox_event_key(DedupFingerprint *fp)
{
	StaticAssertStmt(sizeof(pg_uuid_t) == DEDUP_FINGERPRINT_LEN,
					 "a fingerprint is as long as a uuid");
	fp->bytes[6] = (fp->bytes[6] & 0x0f) | 0x80;	/* version 8 */
	fp->bytes[8] = (fp->bytes[8] & 0x3f) | 0x80;	/* variant 10 */
}

/*
 * Serialize the producers of one aggregate until the end of the
 * transaction: the lock of the aggregate's stripe.
 */
static void
outbox_lock_aggregate(const text *topic, text *aggregate_id)
{
	DedupFingerprint afp;
	LOCKTAG		tag;
	uint32		stripe;

	dedup_key_datum(PointerGetDatum(aggregate_id), -1, topic, &afp);
	memcpy(&stripe, afp.bytes, sizeof(stripe));
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, stripe % OUTBOX_LOCK_STRIPES, 0,
						 DEDUP_LOCKTAG_AGGREGATE);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/* An optional text argument: NULL when not given, an error when empty. */
static text *
outbox_text_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *value;

	if (PG_ARGISNULL(argno))
		return NULL;
	value = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(value) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	return value;
}

/*
 * Insert the event row through a kept plan, as the owner of dedup.outbox,
 * unless an event of that id is there or dead; true if it was inserted.
 */
static bool
outbox_insert(pg_uuid_t *id, text *topic, text *aggregate_type, text *aggregate_id,
			  text *type, Jsonb *payload, Jsonb *headers)
{
	Datum		values[OUTBOX_INSERT_NARGS];
	char		nulls[OUTBOX_INSERT_NARGS] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Relation	outbox = dedup_relation_open(DEDUP_REL_OUTBOX, AccessShareLock);
	Oid			owner = outbox->rd_rel->relowner;
	Oid			save_userid;
	int			save_sec_context;
	bool		inserted;

	table_close(outbox, NoLock);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	SPI_connect();
	if (outbox_insert_plan == NULL)
	{
		Oid			argtypes[OUTBOX_INSERT_NARGS] = {
			UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID
		};
		SPIPlanPtr	plan = SPI_prepare("INSERT INTO dedup.outbox"
									   " (id, topic, aggregatetype, aggregateid, type, payload, headers)"
									   " SELECT $1, $2, $3, $4, $5, $6,"
									   "  COALESCE($7, '{}'::pg_catalog.jsonb)"
									   " WHERE NOT EXISTS (SELECT FROM dedup.outbox_dead AS d"
									   "  WHERE d.id OPERATOR(pg_catalog.=) $1)"
									   " ON CONFLICT ON CONSTRAINT outbox_pkey DO NOTHING",
									   OUTBOX_INSERT_NARGS, argtypes);

		if (plan == NULL)
			elog(ERROR, "could not prepare the outbox insert: %s",
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		outbox_insert_plan = plan;
	}
	values[0] = UUIDPGetDatum(id);
	values[1] = PointerGetDatum(topic);
	values[2] = PointerGetDatum(aggregate_type);
	values[3] = PointerGetDatum(aggregate_id);
	values[4] = PointerGetDatum(type);
	values[5] = PointerGetDatum(payload);
	values[6] = PointerGetDatum(headers);
	if (headers == NULL)
		nulls[6] = 'n';
	if (SPI_execute_plan(outbox_insert_plan, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not insert an outbox event");
	inserted = (SPI_processed > 0);
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return inserted;
}

/*
 * dedup_outbox_put(topic text, key text, payload jsonb,
 *					aggregate_id text DEFAULT NULL, type text DEFAULT NULL,
 *					headers jsonb DEFAULT NULL, aggregate_type text DEFAULT NULL)
 *	  RETURNS uuid
 *
 * aggregate_id defaults to the key (no ordering between events), type and
 * aggregate_type to the topic, headers to {}.
 */
PG_FUNCTION_INFO_V1(dedup_outbox_put);
Datum
dedup_outbox_put(PG_FUNCTION_ARGS)
{
	text	   *topic;
	DedupScopeSettings settings;
	text	   *key;
	Jsonb	   *payload;
	text	   *aggregate_id;
	text	   *type;
	Jsonb	   *headers;
	text	   *aggregate_type;
	DedupFingerprint fp;
	pg_uuid_t  *id;
	Interval   *retention = &settings.value[DEDUP_SCOPE_RETENTION];
	KeyStore	ks;
	bool		is_new;

	topic = dedup_scope_of_call(fcinfo, "topic", "dedup_outbox_put", DEDUP_PRIV_USAGE, &settings);
	aggregate_id = outbox_text_arg(fcinfo, 3, "aggregate_id");
	type = outbox_text_arg(fcinfo, 4, "type");
	headers = PG_ARGISNULL(5) ? NULL : PG_GETARG_JSONB_P(5);
	aggregate_type = outbox_text_arg(fcinfo, 6, "aggregate_type");

	dedup_key_arg(fcinfo, 1, topic, -1, &fp);
	outbox_event_key(&fp);
	key = PG_GETARG_TEXT_PP(1);
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("payload must not be null")));
	payload = PG_GETARG_JSONB_P(2);
	if (headers != NULL && !JB_ROOT_IS_OBJECT(headers))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must be a JSON object")));

	key_store_open(&ks, DEDUP_REL_OUTBOX_KEYS, topic, true);
	outbox_lock_aggregate(topic, aggregate_id ? aggregate_id : key);
	is_new = key_store_claim(&ks, &fp, dedup_timestamp_plus(ks.now, retention), false);
	key_store_close(&ks);

	if (is_new && outbox_insert((pg_uuid_t *) fp.bytes, topic,
								aggregate_type ? aggregate_type : topic,
								aggregate_id ? aggregate_id : key,
								type ? type : topic,
								payload, headers))
	{
		Async_Notify(OUTBOX_CHANNEL, text_to_cstring(topic));
		dedup_scope_count(settings.counters, DEDUP_COUNT_EVENTS_PUT, 1);
	}
	id = palloc(sizeof(pg_uuid_t));
	memcpy(id->data, fp.bytes, UUID_LEN);
	PG_RETURN_UUID_P(id);
}

/* ---------------------------------------------------------------------
 * The relay's functions
 * ---------------------------------------------------------------------
 */

/*
 * What a relay call needs of its public function, looked up once per
 * backend and function: its name, arguments, volatility, and the kept plan
 * of "SELECT * FROM dedup.outbox_<op>($1, ...)" (the calling role's OID,
 * then the function's own arguments), prepared at its first call.
 */
#define RELAY_MAX_FUNCTIONS 8
#define RELAY_MAX_ARGS 8
#define RELAY_PUBLIC_PREFIX "dedup_outbox_"

typedef struct RelayFunction
{
	Oid			fn;
	char		name[NAMEDATALEN];
	int			nargs;
	Oid			argtypes[RELAY_MAX_ARGS + 1];
	bool		read_only;
	SPIPlanPtr	plan;
} RelayFunction;


static RelayFunction relay_functions[RELAY_MAX_FUNCTIONS];

static RelayFunction *
relay_function(Oid fn)
{
	RelayFunction *rf;
	char	   *name;
	Oid		   *argtypes;
	int			nargs;
	int			slot;

	for (slot = 0; slot < RELAY_MAX_FUNCTIONS && relay_functions[slot].fn != InvalidOid; slot++)
		if (relay_functions[slot].fn == fn)
			return &relay_functions[slot];
	name = get_func_name(fn);
	get_func_signature(fn, &argtypes, &nargs);
	if (name == NULL || strncmp(name, RELAY_PUBLIC_PREFIX, strlen(RELAY_PUBLIC_PREFIX)) != 0 ||
		nargs > RELAY_MAX_ARGS)
		elog(ERROR, "dedup_outbox_relay() serves only the outbox relay's functions");
	if (slot == RELAY_MAX_FUNCTIONS)
	{
		/* the extension was created again several times: start over */
		for (int i = 0; i < RELAY_MAX_FUNCTIONS; i++)
			if (relay_functions[i].plan)
				SPI_freeplan(relay_functions[i].plan);
		memset(relay_functions, 0, sizeof(relay_functions));
		slot = 0;
	}
	rf = &relay_functions[slot];
	rf->fn = fn;
	strlcpy(rf->name, name, NAMEDATALEN);
	rf->nargs = nargs;
	rf->argtypes[0] = OIDOID;
	memcpy(rf->argtypes + 1, argtypes, nargs * sizeof(Oid));
	rf->read_only = func_volatile(fn) != PROVOLATILE_VOLATILE;
	rf->plan = NULL;
	return rf;
}

/* Its plan, prepared inside SPI at the first call. */
static SPIPlanPtr
relay_plan(RelayFunction *rf)
{
	StringInfoData sql;

	if (rf->plan)
		return rf->plan;
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT * FROM %s.%s($1", DEDUP_INTERNAL_SCHEMA,
					 quote_identifier(psprintf("outbox_%s", rf->name + strlen(RELAY_PUBLIC_PREFIX))));
	for (int i = 0; i < rf->nargs; i++)
		appendStringInfo(&sql, ", $%d", i + 2);
	appendStringInfoChar(&sql, ')');
	rf->plan = SPI_prepare(sql.data, rf->nargs + 1, rf->argtypes);
	if (rf->plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql.data, SPI_result_code_string(SPI_result));
	SPI_keepplan(rf->plan);
	return rf->plan;
}

PG_FUNCTION_INFO_V1(dedup_outbox_relay);
Datum
dedup_outbox_relay(PG_FUNCTION_ARGS)
{
	RelayFunction *rf = relay_function(fcinfo->flinfo->fn_oid);
	Oid			caller = GetUserId();
	bool		retset = fcinfo->flinfo->fn_retset;
	Datum		values[RELAY_MAX_ARGS + 1];
	char		nulls[RELAY_MAX_ARGS + 1];
	Relation	outbox;
	Oid			owner;
	Oid			save_userid;
	int			save_sec_context;
	Datum		result = (Datum) 0;
	bool		isnull = true;

	if (!rf->read_only)
		dedup_check_writable(rf->name);
	values[0] = ObjectIdGetDatum(caller);
	nulls[0] = ' ';
	for (int i = 0; i < rf->nargs; i++)
	{
		values[i + 1] = PG_GETARG_DATUM(i);
		nulls[i + 1] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	if (retset)
		InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	outbox = dedup_relation_open(DEDUP_REL_OUTBOX, AccessShareLock);
	owner = outbox->rd_rel->relowner;
	table_close(outbox, NoLock);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	SPI_connect();
	if (SPI_execute_plan(relay_plan(rf), values, nulls, rf->read_only, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run the outbox relay's %s()", rf->name);
	if (retset)
	{
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

		for (uint64 i = 0; i < SPI_processed; i++)
			tuplestore_puttuple(rsinfo->setResult, SPI_tuptable->vals[i]);
	}
	else if (SPI_processed > 0)
	{
		Oid			rettype = SPI_gettypeid(SPI_tuptable->tupdesc, 1);
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(rettype, &typlen, &typbyval);
		result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			result = SPI_datumTransfer(result, typbyval, typlen);
	}
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	if (retset)
		return (Datum) 0;
	if (isnull)
		PG_RETURN_NULL();
	return result;
}
