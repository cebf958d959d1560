/*-------------------------------------------------------------------------
 *
 * stream.c
 *	  Sequence marks, Kafka's idempotent producer in SQL: per (scope, stream)
 *	  one narrow row of dedup.streams holding the last sequence number
 *	  applied (the mark) and the producer's epoch, advanced in the caller's
 *	  transaction.  dedup_advance(), dedup_advance_batch(),
 *	  dedup_new_epoch(), dedup_new_epoch_batch(), dedup_position() and
 *	  dedup_streams().
 *
 * A sequence at or below the mark is a duplicate: false, and nothing is
 * written (no WAL, no dead tuple).  Above it: true, and the row is updated
 * in place (a HOT update: no indexed column changes).  A scope whose
 * sequence_mode is strict accepts only mark + 1, and refuses a gap (55000,
 * naming the sequence expected).  A stream's first advance, and the first
 * of a new epoch, may start at any sequence.
 *
 * Epochs fence zombie producers: once a stream has an epoch, a call with
 * an older epoch, or with none, is refused (55006); a newer epoch starts the
 * sequence afresh.  dedup_new_epoch() bumps the epoch for a producer that
 * restarts; dedup_new_epoch_batch() gives all of a producer's streams one
 * new epoch at once.
 *
 * The mark is the last sequence applied, not the next one to read: a Kafka
 * consumer that keeps its offsets here seeks to mark + 1.
 *
 * Rows are written through store.c, with the claims' key lock and
 * concurrency protocol: two advancers of one stream serialize, the second
 * waiting for the first's transaction and then deciding on its outcome
 * (with nowait: 55P03).  A row expires the scope's retention after its
 * last advance, and the cleanup then deletes it: a late sequence after
 * that starts the stream afresh.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "checks.h"
#include "fingerprint.h"
#include "routing.h"
#include "scope.h"
#include "shards.h"
#include "store.h"

/* A stream's name and the arguments of one advance. */
typedef struct StreamAdvance
{
	text	   *stream;
	DedupFingerprint fp;
	int64		seq;
	bool		has_epoch;
	int64		epoch;
	int			pos;			/* in a batch's input */
} StreamAdvance;

static int64
stream_int8_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	int64		value;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	value = PG_GETARG_INT64(argno);
	if (value < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", what)));
	return value;
}

/* A row of dedup.streams, to write with key_store_write(). */
static HeapTuple
stream_tuple(KeyStore *ks, const StreamAdvance *a, TimestampTz expires_at,
			 const DedupStreamRow *next)
{
	Datum		values[Natts_streams];
	bool		nulls[Natts_streams] = {false};

	values[Anum_key_key - 1] = PointerGetDatum(&a->fp);
	values[Anum_key_expires_at - 1] = TimestampTzGetDatum(expires_at);
	values[Anum_streams_epoch - 1] = Int64GetDatum(next->epoch);
	nulls[Anum_streams_epoch - 1] = !next->has_epoch;
	values[Anum_streams_mark - 1] = Int64GetDatum(next->mark);
	nulls[Anum_streams_mark - 1] = !next->has_mark;
	values[Anum_streams_scope - 1] = PointerGetDatum(ks->scope);
	values[Anum_streams_stream - 1] = PointerGetDatum(a->stream);
	return heap_form_tuple(RelationGetDescr(ks->heap), values, nulls);
}

static void
stream_report_fenced(KeyStore *ks, const StreamAdvance *a, const KeyRow *row)
{
	char	   *stream = text_to_cstring(a->stream);

	key_store_unlock((KeyRow *) row);
	if (!a->has_epoch)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("stream \"%s\" of scope \"%s\" is fenced by epoch %lld",
						stream, text_to_cstring(ks->scope), (long long) row->stream.epoch),
				 errdetail("The stream has a producer epoch, and the call gave none."),
				 errhint("Pass the epoch dedup_new_epoch() returned; nothing was changed.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("producer epoch %lld of stream \"%s\" of scope \"%s\" is fenced",
					(long long) a->epoch, stream, text_to_cstring(ks->scope)),
			 errdetail("The stream is at epoch %lld: a newer producer took it over.",
					   (long long) row->stream.epoch),
			 errhint("This producer instance must stop; nothing was changed.")));
}

/*
 * Advance one stream to a->seq: true when it moved, false for a duplicate.
 * Waits for a transaction in progress that wrote the stream (with nowait:
 * 55P03).
 */
static bool
stream_advance(KeyStore *ks, const StreamAdvance *a, bool strict, TimestampTz expires_at,
			   bool nowait)
{
	KeyBusyPolicy busy = nowait ? KEY_BUSY_ERROR : KEY_BUSY_WAIT;

	for (;;)
	{
		KeyRow		row;
		DedupStreamRow next;
		bool		live = key_store_find(ks, &a->fp, busy, &row) == KEY_LIVE;
		bool		new_epoch;

		if (live && row.stream.has_epoch && (!a->has_epoch || a->epoch < row.stream.epoch))
			stream_report_fenced(ks, a, &row);
		new_epoch = live && a->has_epoch && (!row.stream.has_epoch || a->epoch > row.stream.epoch);
		if (live && row.stream.has_mark && !new_epoch)
		{
			if (a->seq <= row.stream.mark)
			{
				key_store_unlock(&row);
				return false;
			}
			if (strict && a->seq != row.stream.mark + 1)
			{
				key_store_unlock(&row);
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("sequence %lld of stream \"%s\" of scope \"%s\" leaves a gap",
								(long long) a->seq, text_to_cstring(a->stream),
								text_to_cstring(ks->scope)),
						 errdetail("The stream's mark is %lld: the next sequence must be %lld.",
								   (long long) row.stream.mark, (long long) row.stream.mark + 1),
						 errhint("The scope's sequence_mode is strict; send %lld first, or set the mode to monotonic.",
								 (long long) row.stream.mark + 1)));
			}
		}
		next.has_epoch = a->has_epoch || (live && row.stream.has_epoch);
		next.epoch = a->has_epoch ? a->epoch : row.stream.epoch;
		next.has_mark = true;
		next.mark = a->seq;
		if (key_store_write(ks, &a->fp, &row, stream_tuple(ks, a, expires_at, &next), busy))
			return true;
	}
}

/*
 * dedup_advance(scope text, stream text, seq bigint, epoch bigint DEFAULT NULL,
 *				 nowait boolean DEFAULT false) RETURNS boolean
 */
PG_FUNCTION_INFO_V1(dedup_advance);
Datum
dedup_advance(PG_FUNCTION_ARGS)
{
	DedupScopeSettings settings;
	text	   *scope;
	Datum		route_result;
	StreamAdvance a;
	bool		nowait;
	KeyStore	ks;
	bool		moved;

	if (dedup_routing_route(fcinfo, DEDUP_REL_STREAMS, DEDUP_ROUTE_STREAM, 0, &route_result))
		return route_result;
	scope = dedup_scope_of_call(fcinfo, "scope", "dedup_advance", DEDUP_PRIV_USAGE, &settings);

	a.stream = dedup_check_name_arg(fcinfo, 1, "stream");
	a.seq = stream_int8_arg(fcinfo, 2, "seq");
	a.has_epoch = !PG_ARGISNULL(3);
	a.epoch = a.has_epoch ? stream_int8_arg(fcinfo, 3, "epoch") : 0;
	if (a.epoch == PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epoch must be less than %lld", (long long) PG_INT64_MAX),
				 errdetail("dedup_new_epoch() must be able to give a newer one.")));
	nowait = dedup_check_bool_arg(fcinfo, 4, "nowait");
	dedup_fingerprint_stream_key(scope, a.stream, &a.fp);

	key_store_open(&ks, DEDUP_REL_STREAMS, scope, &a.fp, true);
	moved = stream_advance(&ks, &a, settings.strict,
						   dedup_check_timestamp_plus(ks.now, &settings.value[DEDUP_SCOPE_RETENTION]),
						   nowait);
	key_store_close(&ks);
	PG_RETURN_BOOL(moved);
}

/*
 * Element i (from 0) of a batch's streams, checked as a stream name is:
 * not empty, at most DEDUP_MAX_SCOPE_BYTES.
 */
static text *
stream_batch_name(Datum name, int i)
{
	text	   *stream = DatumGetTextPP(name);
	Size		len = VARSIZE_ANY_EXHDR(stream);

	if (len == 0 || len > DEDUP_MAX_SCOPE_BYTES)
		ereport(ERROR,
				(errcode(len == 0 ? ERRCODE_INVALID_PARAMETER_VALUE :
						 ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg(len == 0 ? "stream must not be empty" : "stream name is too long"),
				 errdetail("Element %d has %zu bytes; the limit is %d.", i + 1, len,
						   DEDUP_MAX_SCOPE_BYTES)));
	return stream;
}

static int
stream_advance_cmp(const void *x, const void *y)
{
	const StreamAdvance *a = (const StreamAdvance *) x;
	const StreamAdvance *b = (const StreamAdvance *) y;

	return dedup_fingerprint_compare(&a->fp, &b->fp);
}

/* A batch of advances, for the runs of its streams on a Citus cluster */
typedef struct StreamBatch
{
	const text *scope;
	DedupScopeSettings *settings;
	StreamAdvance *adv;			/* in fingerprint order */
	int			n;
	TimestampTz expires_at;
	bool		nowait;
	bool	   *moved;			/* by position given */
} StreamBatch;

/* Streams of one store (dedup.streams, or one shard of it here): advanced, in order. */
static void
stream_batch_local(const int *run, int n, void *arg)
{
	StreamBatch *b = (StreamBatch *) arg;
	KeyStore	ks;

	key_store_open(&ks, DEDUP_REL_STREAMS, b->scope, &b->adv[run[0]].fp, true);
	for (int i = 0; i < n; i++)
	{
		StreamAdvance *a = &b->adv[run[i]];

		b->moved[a->pos] = stream_advance(&ks, a, b->settings->strict, b->expires_at, b->nowait);
	}
	key_store_close(&ks);
}

/* A stream another node moved, by name: found again by its fingerprint. */
static void
stream_batch_remote_row(const char *stream, void *arg)
{
	StreamBatch *b = (StreamBatch *) arg;
	StreamAdvance key;
	StreamAdvance *found;

	dedup_fingerprint_stream_key(b->scope, cstring_to_text(stream), &key.fp);
	found = bsearch(&key, b->adv, b->n, sizeof(StreamAdvance), stream_advance_cmp);
	if (found == NULL)
		elog(ERROR, "a batch sent to another node moved a stream it was not given");
	b->moved[found->pos] = true;
}

/* The elements of a one-dimensional array argument, or an error. */
static void
stream_array_arg(FunctionCallInfo fcinfo, int argno, const char *what, Oid elemtype,
				 Datum **elems, bool **nulls, int *n)
{
	ArrayType  *array;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	array = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", what)));
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(array, elemtype, typlen, typbyval, typalign, elems, nulls, n);
}

/*
 * dedup_advance_batch(scope text, streams text[], seqs bigint[],
 *					   epochs bigint[] DEFAULT NULL, nowait boolean DEFAULT false)
 *	RETURNS SETOF text
 *
 * Advances each stream to its sequence (an epoch each, or NULL) in one call,
 * in fingerprint order so that two batches never deadlock; returns the
 * streams that moved, in the order given.  A stream given twice is refused.
 */
PG_FUNCTION_INFO_V1(dedup_advance_batch);
Datum
dedup_advance_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DedupScopeSettings settings;
	text	   *scope = dedup_scope_of_call(fcinfo, "scope", "dedup_advance_batch", DEDUP_PRIV_USAGE, &settings);
	Datum	   *names;
	bool	   *name_nulls;
	int			n;
	Datum	   *seqs;
	bool	   *seq_nulls;
	int			nseqs;
	Datum	   *epochs = NULL;
	bool	   *epoch_nulls = NULL;
	int			nepochs = 0;
	bool		nowait;
	StreamAdvance *adv;
	bool	   *moved;
	TimestampTz expires_at;

	stream_array_arg(fcinfo, 1, "streams", TEXTOID, &names, &name_nulls, &n);
	stream_array_arg(fcinfo, 2, "seqs", INT8OID, &seqs, &seq_nulls, &nseqs);
	if (!PG_ARGISNULL(3))
		stream_array_arg(fcinfo, 3, "epochs", INT8OID, &epochs, &epoch_nulls, &nepochs);
	nowait = dedup_check_bool_arg(fcinfo, 4, "nowait");
	if (nseqs != n || (epochs && nepochs != n))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("streams, seqs and epochs must have one element per stream"),
				 errdetail("There are %d streams, %d seqs and %d epochs.", n, nseqs,
						   epochs ? nepochs : n)));
	if (n > DEDUP_MAX_BATCH_KEYS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many streams in one batch"),
				 errdetail("The batch has %d streams; the limit is %d.", n, DEDUP_MAX_BATCH_KEYS)));

	/* check every element before writing anything */
	adv = palloc(sizeof(StreamAdvance) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (name_nulls[i] || seq_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("streams and seqs must not contain null"),
					 errdetail("Element %d is null.", i + 1)));
		adv[i].stream = stream_batch_name(names[i], i);
		adv[i].seq = DatumGetInt64(seqs[i]);
		adv[i].has_epoch = epochs != NULL && !epoch_nulls[i];
		adv[i].epoch = adv[i].has_epoch ? DatumGetInt64(epochs[i]) : 0;
		if (adv[i].seq < 0 || (adv[i].has_epoch && (adv[i].epoch < 0 || adv[i].epoch == PG_INT64_MAX)))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("seqs and epochs must not be negative, and epochs less than %lld",
							(long long) PG_INT64_MAX),
					 errdetail("Element %d is out of range.", i + 1)));
		adv[i].pos = i;
		dedup_fingerprint_stream_key(scope, adv[i].stream, &adv[i].fp);
	}
	qsort(adv, n, sizeof(StreamAdvance), stream_advance_cmp);
	for (int i = 1; i < n; i++)
		if (dedup_fingerprint_compare(&adv[i].fp, &adv[i - 1].fp) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("stream \"%s\" is given twice", text_to_cstring(adv[i].stream)),
					 errhint("Advance each stream once a call, to its highest sequence.")));

	moved = palloc0(sizeof(bool) * Max(n, 1));
	expires_at = dedup_check_timestamp_plus(GetCurrentTimestamp(), &settings.value[DEDUP_SCOPE_RETENTION]);
	{
		StreamBatch b = {scope, &settings, adv, n, expires_at, nowait, moved};

		if (dedup_catalog_relation_hashed(DEDUP_REL_STREAMS))
		{
			DedupFingerprint *fps = palloc(sizeof(DedupFingerprint) * Max(n, 1));
			int		   *positions = palloc(sizeof(int) * Max(n, 1));

			for (int i = 0; i < n; i++)
			{
				fps[i] = adv[i].fp;
				positions[i] = adv[i].pos;
			}
			dedup_routing_batch(fcinfo, DEDUP_REL_STREAMS, fps, positions, n,
								stream_batch_local, stream_batch_remote_row, &b);
		}
		else if (n > 0)
		{
			int		   *all = palloc(sizeof(int) * n);

			for (int i = 0; i < n; i++)
				all[i] = i;
			stream_batch_local(all, n, &b);
		}
	}

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	for (int i = 0; i < n; i++)
	{
		bool		isnull = false;

		if (moved[i])
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &names[i], &isnull);
	}
	return (Datum) 0;
}

/*
 * dedup_new_epoch(scope text, stream text) RETURNS bigint
 *
 * A producer that restarts takes a new epoch: the stream's epoch + 1 (1 for
 * a stream without one), with no mark, so that its first advance may start
 * anywhere and every call with an older epoch is fenced once this commits.
 */
PG_FUNCTION_INFO_V1(dedup_new_epoch);
Datum
dedup_new_epoch(PG_FUNCTION_ARGS)
{
	DedupScopeSettings settings;
	text	   *scope;
	Datum		route_result;
	StreamAdvance a;
	KeyStore	ks;
	DedupStreamRow next;

	if (dedup_routing_route(fcinfo, DEDUP_REL_STREAMS, DEDUP_ROUTE_STREAM, 0, &route_result))
		return route_result;
	scope = dedup_scope_of_call(fcinfo, "scope", "dedup_new_epoch", DEDUP_PRIV_USAGE, &settings);

	memset(&a, 0, sizeof(a));
	a.stream = dedup_check_name_arg(fcinfo, 1, "stream");
	dedup_fingerprint_stream_key(scope, a.stream, &a.fp);
	key_store_open(&ks, DEDUP_REL_STREAMS, scope, &a.fp, true);
	for (;;)
	{
		KeyRow		row;
		bool		present = key_store_find(&ks, &a.fp, KEY_BUSY_WAIT, &row) != KEY_ABSENT;

		/*
		 * Count on from an expired row's epoch too: epochs never go back. The
		 * largest epoch dedup_advance() takes is PG_INT64_MAX - 1: a stream
		 * there has no newer one to give, and a wrap would make every fenced
		 * producer newer again.
		 */
		if (present && row.stream.has_epoch && row.stream.epoch >= PG_INT64_MAX - 1)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("stream \"%s\" of scope \"%s\" has no newer epoch to give",
							text_to_cstring(a.stream), text_to_cstring(scope)),
					 errdetail("The stream is at epoch %lld, the largest an epoch can be.",
							   (long long) row.stream.epoch),
					 errhint("Use another stream name for the new producer; nothing was changed.")));
		next.has_epoch = true;
		next.epoch = (present && row.stream.has_epoch ? row.stream.epoch : 0) + 1;
		next.has_mark = false;
		next.mark = 0;
		if (key_store_write(&ks, &a.fp, &row,
							stream_tuple(&ks, &a,
										 dedup_check_timestamp_plus(ks.now,
																	&settings.value[DEDUP_SCOPE_RETENTION]),
										 &next),
							KEY_BUSY_WAIT))
			break;
	}
	key_store_close(&ks);
	PG_RETURN_INT64(next.epoch);
}

/* The epoch a stream's row has, 0 for none (absent, or no epoch yet). */
static int64
stream_epoch_of(const KeyRow *row)
{
	return row->state != KEY_ABSENT && row->stream.has_epoch ? row->stream.epoch : 0;
}

static void
stream_report_no_newer_epoch(const text *scope, const text *stream, int64 epoch)
{
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("stream \"%s\" of scope \"%s\" has no newer epoch to give",
					text_to_cstring(stream), text_to_cstring(scope)),
			 errdetail("The stream is at epoch %lld, the largest an epoch can be.",
					   (long long) epoch),
			 errhint("Use another stream name for the new producer; nothing was changed.")));
}

/*
 * dedup_new_epoch_batch(scope text, streams text[]) RETURNS bigint
 *
 * A producer that restarts fences all its streams (a Kafka producer, its
 * partitions) at once: one new epoch, newer than every one of the streams'
 * (counting expired rows: epochs never go back), taken by each, with no
 * mark; returns it.  A stream given twice counts once.  The streams are
 * read, then written, in fingerprint order, so that two such calls never
 * deadlock; one that finds a stream moved on by another call in between
 * (which it waited for) takes a newer epoch and writes every stream again.
 */
PG_FUNCTION_INFO_V1(dedup_new_epoch_batch);
Datum
dedup_new_epoch_batch(PG_FUNCTION_ARGS)
{
	DedupScopeSettings settings;
	text	   *scope = dedup_scope_of_call(fcinfo, "scope", "dedup_new_epoch_batch", DEDUP_PRIV_USAGE,
											&settings);
	Datum	   *names;
	bool	   *name_nulls;
	int			n;
	int			nstreams;
	StreamAdvance *adv;
	KeyStore	ks;
	int64		epoch = 1;
	TimestampTz expires_at;
	bool		again;

	stream_array_arg(fcinfo, 1, "streams", TEXTOID, &names, &name_nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("streams must not be empty"),
				 errhint("Name the producer's streams, such as its topic's partitions.")));
	if (n > DEDUP_MAX_BATCH_KEYS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many streams in one batch"),
				 errdetail("The batch has %d streams; the limit is %d.", n, DEDUP_MAX_BATCH_KEYS)));
	if (dedup_catalog_relation_hashed(DEDUP_REL_STREAMS))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dedup_new_epoch_batch() is not supported on a Citus cluster"),
				 errdetail("dedup.streams is distributed: the streams may be on several nodes."),
				 errhint("Take a new epoch a stream at a time with dedup_new_epoch(), and pass each stream its own.")));

	/* check every element before writing anything */
	adv = palloc0(sizeof(StreamAdvance) * n);
	for (int i = 0; i < n; i++)
	{
		if (name_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("streams must not contain null"),
					 errdetail("Element %d is null.", i + 1)));
		adv[i].stream = stream_batch_name(names[i], i);
		adv[i].pos = i;
		dedup_fingerprint_stream_key(scope, adv[i].stream, &adv[i].fp);
	}
	qsort(adv, n, sizeof(StreamAdvance), stream_advance_cmp);
	nstreams = 0;
	for (int i = 0; i < n; i++)
		if (i == 0 || dedup_fingerprint_compare(&adv[i].fp, &adv[nstreams - 1].fp) != 0)
			adv[nstreams++] = adv[i];

	key_store_open(&ks, DEDUP_REL_STREAMS, scope, &adv[0].fp, true);
	expires_at = dedup_check_timestamp_plus(ks.now, &settings.value[DEDUP_SCOPE_RETENTION]);

	/* the newest epoch of the streams, each read once its writer ended */
	for (int i = 0; i < nstreams; i++)
	{
		KeyRow		row;
		int64		cur;

		key_store_find(&ks, &adv[i].fp, KEY_BUSY_WAIT, &row);
		cur = stream_epoch_of(&row);
		key_store_unlock(&row);
		if (cur >= PG_INT64_MAX - 1)
			stream_report_no_newer_epoch(scope, adv[i].stream, cur);
		epoch = Max(epoch, cur + 1);
	}

	/* every stream takes it: again with a newer one if a stream moved since */
	do
	{
		DedupStreamRow next = {true, epoch, false, 0};

		again = false;
		for (int i = 0; i < nstreams && !again; i++)
		{
			for (;;)
			{
				KeyRow		row;
				int64		cur;

				key_store_find(&ks, &adv[i].fp, KEY_BUSY_WAIT, &row);
				cur = stream_epoch_of(&row);
				if (cur >= epoch)
				{
					key_store_unlock(&row);
					if (cur >= PG_INT64_MAX - 1)
						stream_report_no_newer_epoch(scope, adv[i].stream, cur);
					epoch = cur + 1;
					again = true;
					break;
				}
				if (key_store_write(&ks, &adv[i].fp, &row,
									stream_tuple(&ks, &adv[i], expires_at, &next), KEY_BUSY_WAIT))
					break;
			}
		}
		/* let the next round update the rows this one wrote */
		if (again)
			CommandCounterIncrement();
	} while (again);
	key_store_close(&ks);
	PG_RETURN_INT64(epoch);
}

/* Columns of dedup_position's and dedup_streams' results */
#define POSITION_NATTS 3

static void
stream_position_values(const DedupStreamRow *s, TimestampTz expires_at, Datum *values, bool *nulls)
{
	values[0] = Int64GetDatum(s->mark);
	nulls[0] = !s->has_mark;
	values[1] = Int64GetDatum(s->epoch);
	nulls[1] = !s->has_epoch;
	values[2] = TimestampTzGetDatum(expires_at);
	nulls[2] = false;
}

/*
 * dedup_position(scope text, stream text) RETURNS TABLE (mark bigint,
 *		epoch bigint, expires_at timestamptz)
 *
 * The stream's mark and epoch as the statement's snapshot sees them; no row
 * for a stream never advanced, or expired.  Changes nothing.
 */
PG_FUNCTION_INFO_V1(dedup_position);
Datum
dedup_position(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *scope;
	Datum		route_result;
	text	   *stream;
	DedupFingerprint fp;
	KeyStore	ks;
	KeyRow		row;
	Datum		values[POSITION_NATTS];
	bool		nulls[POSITION_NATTS];

	if (dedup_routing_route(fcinfo, DEDUP_REL_STREAMS, DEDUP_ROUTE_STREAM, 0, &route_result))
		return route_result;
	scope = dedup_scope_of_call(fcinfo, "scope", NULL, DEDUP_PRIV_USAGE, NULL);
	stream = dedup_check_name_arg(fcinfo, 1, "stream");

	dedup_fingerprint_stream_key(scope, stream, &fp);
	InitMaterializedSRF(fcinfo, 0);
	key_store_open(&ks, DEDUP_REL_STREAMS, scope, &fp, false);
	if (key_store_read(&ks, &fp, &row) == KEY_LIVE)
	{
		stream_position_values(&row.stream, row.expires_at, values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	key_store_close(&ks);
	return (Datum) 0;
}

/*
 * dedup_streams(scope text) RETURNS TABLE (stream text, mark bigint,
 *		epoch bigint, expires_at timestamptz)
 *
 * Every live stream of a scope, as the statement's snapshot sees them, in
 * no particular order; a scan of dedup.streams (one row a stream).  On a
 * Citus cluster, the same call on the node of each shard (forwarded by a
 * key of that shard, the part of its outbox partition), which scans that
 * shard.
 */
PG_FUNCTION_INFO_V1(dedup_streams);
Datum
dedup_streams(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *scope = dedup_scope_of_call(fcinfo, "scope", NULL, DEDUP_PRIV_USAGE, NULL);
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *slot;
	TimestampTz now = GetCurrentTimestamp();

	InitMaterializedSRF(fcinfo, 0);
	if (dedup_catalog_relation_hashed(DEDUP_REL_STREAMS))
	{
		const DedupFingerprint *forwarded = dedup_routing_forwarded_key();
		Relation	index;

		if (forwarded == NULL)
		{
			DedupFingerprint *shard_keys;
			bool	   *local;
			int			nshards = dedup_shards_partitions(&shard_keys, &local);
			Datum		arg = PG_GETARG_DATUM(0);
			bool		argnull = false;

			for (int i = 0; i < nshards; i++)
				(void) dedup_routing_put_rows(rsinfo,
											  dedup_routing_call(fcinfo->flinfo->fn_oid, &arg,
																 &argnull, &shard_keys[i]));
			return (Datum) 0;
		}
		dedup_shards_shard_open(DEDUP_REL_STREAMS, forwarded, AccessShareLock, &rel, &index);
		index_close(index, NoLock);
	}
	else
		rel = dedup_catalog_relation_open(DEDUP_REL_STREAMS, AccessShareLock);
	slot = table_slot_create(rel, NULL);
	scan = table_beginscan(rel, GetActiveSnapshot(), 0, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		text	   *row_scope;
		DedupStreamRow s;
		TimestampTz expires_at;
		Datum		values[POSITION_NATTS + 1];
		bool		nulls[POSITION_NATTS + 1];

		CHECK_FOR_INTERRUPTS();
		row_scope = DatumGetTextPP(slot_getattr(slot, Anum_streams_scope, &isnull));
		if (VARSIZE_ANY_EXHDR(row_scope) != VARSIZE_ANY_EXHDR(scope) ||
			memcmp(VARDATA_ANY(row_scope), VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope)) != 0)
			continue;
		expires_at = DatumGetTimestampTz(slot_getattr(slot, Anum_key_expires_at, &isnull));
		if (expires_at <= now)
			continue;
		key_store_stream_of(slot, &s);
		values[0] = slot_getattr(slot, Anum_streams_stream, &nulls[0]);
		stream_position_values(&s, expires_at, values + 1, nulls + 1);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, NoLock);
	return (Datum) 0;
}
