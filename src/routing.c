/*-------------------------------------------------------------------------
 *
 * routing.c
 *	  dedup on a Citus cluster: calls forwarded to the node of their key's
 *	  shard, batches split by node, and the two-phase commit of a
 *	  transaction that sent a call.
 *
 * A call (dedup_claim, dedup_begin, dedup_advance, ...) made on a node that
 * does not hold its key's shard (shards.c) is forwarded:
 * dedup_routing_route() sends it, arguments as text, through
 * dedup.call_on_shard(key, function, args), a function Citus delegates to
 * the node of the key's shard (distributed by its first argument,
 * co-located with dedup.claims, force_delegation so that it is delegated
 * inside transactions too).  There the same function runs again, finds the
 * shard local and works on it, in the caller's transaction: a business row
 * of a table co-located with dedup.claims, written in the same
 * transaction, makes it a single-node transaction.  Before it sends a call,
 * this node takes Citus's lock on the shard's metadata (shards.c), so that
 * Citus sends it to the shard's node as of the transaction's other
 * statements; a forwarded call that finds its shard gone fails with 40001.
 *
 * A batch (dedup_routing_batch) goes in runs: each shard of this node, and
 * each other node, whose keys are sent there as a call of their own.  A
 * transaction that sent a call and wrote on this node commits with Citus's
 * two-phase commit (cluster_xact_callback, through dedup.cluster_commit).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "checks.h"
#include "fingerprint.h"
#include "routing.h"
#include "shards.h"

/* set while dedup.call_on_shard runs a forwarded call: it is not forwarded again */
static bool cluster_forwarded = false;
static DedupFingerprint cluster_forwarded_key;	/* the key it was routed by */

/* this transaction sent a call to another node (reset at its end) */
static bool cluster_sent_in_xact = false;
static bool cluster_callback_registered = false;

/*
 * The key a call running here was forwarded by (dedup.call_on_shard), or
 * NULL when it was not forwarded.
 */
const DedupFingerprint *
dedup_routing_forwarded_key(void)
{
	return cluster_forwarded ? &cluster_forwarded_key : NULL;
}

/* The columns of a row of a forwarded call's result, as C strings (NULL for NULL) */
char	  **
dedup_routing_row_values(ArrayType *row, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	char	  **values;

	deconstruct_array(row, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	values = palloc0(sizeof(char *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		values[i] = nulls[i] ? NULL : TextDatumGetCString(elems[i]);
	return values;
}

/*
 * Add the rows of a forwarded call to a set-returning function's result
 * (materialized); returns how many.
 */
int
dedup_routing_put_rows(ReturnSetInfo *rsinfo, List *rows)
{
	AttInMetadata *meta = TupleDescGetAttInMetadata(rsinfo->setDesc);
	ListCell   *lc;

	foreach(lc, rows)
	{
		int			n;
		char	  **values = dedup_routing_row_values(lfirst(lc), &n);

		if (n != rsinfo->setDesc->natts)
			elog(ERROR, "a forwarded call returned %d columns, not %d", n, rsinfo->setDesc->natts);
		tuplestore_puttuple(rsinfo->setResult, BuildTupleFromCStrings(meta, values));
	}
	return list_length(rows);
}

/* The result of a forwarded call, from its rows, as the call itself returns it */
static Datum
cluster_result(FunctionCallInfo fcinfo, List *rows)
{
	Oid			rettype;
	TupleDesc	tupdesc;
	TypeFuncClass class;
	char	  **values;
	int			n = 0;

	if (get_func_retset(fcinfo->flinfo->fn_oid))
	{
		InitMaterializedSRF(fcinfo, 0);
		(void) dedup_routing_put_rows((ReturnSetInfo *) fcinfo->resultinfo, rows);
		return (Datum) 0;
	}
	class = get_call_result_type(fcinfo, &rettype, &tupdesc);
	if (rows == NIL)
	{
		fcinfo->isnull = true;
		return (Datum) 0;
	}
	values = dedup_routing_row_values(linitial(rows), &n);
	if (class == TYPEFUNC_COMPOSITE)
	{
		if (n != tupdesc->natts)
			elog(ERROR, "a forwarded call returned %d columns, not %d", n, tupdesc->natts);
		return HeapTupleGetDatum(BuildTupleFromCStrings(TupleDescGetAttInMetadata(BlessTupleDesc(tupdesc)),
														values));
	}
	if (rettype == VOIDOID)
		return (Datum) 0;
	if (n != 1 || values[0] == NULL)
	{
		fcinfo->isnull = true;
		return (Datum) 0;
	}
	else
	{
		Oid			input;
		Oid			ioparam;

		getTypeInputInfo(rettype, &input, &ioparam);
		return OidInputFunctionCall(input, values[0], ioparam, -1);
	}
}

/*
 * A transaction that sent a call to another node and wrote here too commits
 * with two-phase commit.  Citus uses it only for the writes it knows of (its
 * own tables' placements, several nodes); with one remote node and writes
 * of tables it does not manage here (a business table of this node, dedup's
 * outbox), it commits the remote part alone first, and a node that fails
 * during that COMMIT leaves the two parts apart: a claim without its
 * business row.  So, before Citus prepares its commit (this callback,
 * registered after Citus's, runs before it), make the transaction one that
 * wrote on two nodes as Citus sees it: delete from dedup.cluster_commit
 * (always empty, a table Citus manages whose shard is on the coordinator;
 * made by dedup_distribute()).  Citus commits a transaction that wrote on more
 * than one node with two-phase commit, whichever way the write reaches the
 * shard (run locally on the coordinator, or over a connection of its own
 * from a worker).  Only SQL and Citus's documented behaviour: no Citus
 * symbol, which PostgreSQL 16 and later build hidden.  The DELETE runs as
 * the owner of dedup's tables (no other role may write that table).
 */
static void
cluster_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_PRE_COMMIT && cluster_sent_in_xact &&
		TransactionIdIsValid(GetTopTransactionIdIfAny()))
	{
		Oid			save_userid;
		int			save_sec_context;

		cluster_sent_in_xact = false;	/* once, whatever happens */
		GetUserIdAndSecContext(&save_userid, &save_sec_context);
		SetUserIdAndSecContext(dedup_catalog_relation_owner(DEDUP_REL_CLAIMS),
							   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		/* at commit no snapshot is active: one of its own, as a statement's */
		PushActiveSnapshot(GetTransactionSnapshot());
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		if (SPI_execute("DELETE FROM dedup.cluster_commit", false, 0) != SPI_OK_DELETE)
			elog(ERROR, "the delete from dedup.cluster_commit failed");
		SPI_finish();
		PopActiveSnapshot();
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
		cluster_sent_in_xact = false;
}

/*
 * Call one of dedup's functions, with the arguments given, on the node of
 * the shard of key route, through dedup.call_on_shard, which Citus
 * delegates there by its first argument: every argument a literal, so that
 * Citus's planner sees constants (it delegates nothing else inside a
 * function).  Returns the result's rows, each a text[] of its columns.
 */
List *
dedup_routing_call(Oid fnoid, const Datum *args, const bool *argnulls,
				   const DedupFingerprint *route)
{
	Oid		   *argtypes;
	int			nargs;
	Datum	   *elems;
	int			dims[1];
	int			lbs[1] = {1};
	ArrayType  *argarray;
	char	   *sql;
	MemoryContext caller = CurrentMemoryContext;
	List	   *rows = NIL;

	(void) get_func_signature(fnoid, &argtypes, &nargs);
	elems = palloc0(sizeof(Datum) * Max(nargs, 1));
	for (int i = 0; i < nargs; i++)
	{
		if (!argnulls[i])
		{
			Oid			output;
			bool		varlena;

			getTypeOutputInfo(argtypes[i], &output, &varlena);
			elems[i] = CStringGetTextDatum(OidOutputFunctionCall(output, args[i]));
		}
	}
	dims[0] = nargs;
	argarray = construct_md_array(elems, (bool *) argnulls, 1, dims, lbs, TEXTOID, -1, false,
								  TYPALIGN_INT);

	/*
	 * run by the role that called: dedup_distribute() gave PUBLIC USAGE on
	 * dedup
	 */
	sql = psprintf("SELECT r FROM dedup.call_on_shard(%s::%s, %s, %s::pg_catalog.text[]) AS r",
				   quote_literal_cstr(dedup_fingerprint_hex(route)), format_type_be_qualified(dedup_catalog_fingerprint_type()),
				   quote_literal_cstr(format_procedure_qualified(fnoid)),
				   quote_literal_cstr(OidOutputFunctionCall(F_ARRAY_OUT, PointerGetDatum(argarray))));

	if (!cluster_callback_registered)
	{
		RegisterXactCallback(cluster_xact_callback, NULL);
		cluster_callback_registered = true;
	}
	cluster_sent_in_xact = true;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(sql, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "a forwarded call failed");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
		MemoryContext spi = MemoryContextSwitchTo(caller);

		if (isnull)
			elog(ERROR, "a forwarded call returned a null row");
		rows = lappend(rows, DatumGetArrayTypePCopy(d));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return rows;
}

/* Keys by the node, then the shard, of their place, then by fingerprint (their index) */
static int
cluster_place_cmp(const void *a, const void *b, void *arg)
{
	const DedupShardPlace *places = (const DedupShardPlace *) arg;
	int			ka = *(const int *) a;
	int			kb = *(const int *) b;

	if (places[ka].group != places[kb].group)
		return places[ka].group < places[kb].group ? -1 : 1;
	if (places[ka].shardid != places[kb].shardid)
		return places[ka].shardid < places[kb].shardid ? -1 : 1;
	return (ka > kb) - (ka < kb);
}

/*
 * The arguments of the call of fcinfo, its array arguments restricted to
 * the elements at positions[run[0..n)], in that order.
 */
static void
cluster_subset_args(FunctionCallInfo fcinfo, const int *positions, const int *run, int n,
					Datum *args, bool *nulls)
{
	Oid		   *argtypes;
	int			nargs;

	(void) get_func_signature(fcinfo->flinfo->fn_oid, &argtypes, &nargs);
	for (int i = 0; i < Min(nargs, PG_NARGS()); i++)
	{
		Oid			argtype = argtypes[i];
		Oid			elemtype;
		int16		typlen;
		bool		typbyval;
		char		typalign;
		Datum	   *elems;
		bool	   *elemnulls;
		int			nelems;
		Datum	   *sub;
		bool	   *subnulls;
		int			dims[1] = {n};
		int			lbs[1] = {1};

		nulls[i] = PG_ARGISNULL(i);
		args[i] = nulls[i] ? (Datum) 0 : PG_GETARG_DATUM(i);
		if (nulls[i] || !OidIsValid(elemtype = get_element_type(argtype)))
			continue;
		get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(i), elemtype, typlen, typbyval, typalign,
						  &elems, &elemnulls, &nelems);
		sub = palloc(sizeof(Datum) * Max(n, 1));
		subnulls = palloc(sizeof(bool) * Max(n, 1));
		for (int j = 0; j < n; j++)
		{
			sub[j] = elems[positions[run[j]]];
			subnulls[j] = elemnulls[positions[run[j]]];
		}
		args[i] = PointerGetDatum(construct_md_array(sub, subnulls, 1, dims, lbs, elemtype,
													 typlen, typbyval, typalign));
	}
}

/*
 * A call of many keys (a batch) on a Citus cluster, where its keys' shards
 * may be on several nodes.  fps[0..nkeys) are its keys, in fingerprint
 * order; positions[k], the position in the call's array arguments of key
 * k's elements.  The keys go in runs: the keys of one shard of this node,
 * given to local(run, n, arg) as indexes into fps; all the keys of another
 * node, sent there as a call of their own (this call, its arrays restricted
 * to those keys), each row of whose result, one key, is given to
 * remote_row as text.  Nodes
 * go in the order of their groups and this node's shards in turn, each run
 * in fingerprint order: two batches take their keys in the same order and
 * never deadlock.
 */
void
dedup_routing_batch(FunctionCallInfo fcinfo, DedupRelation table, const DedupFingerprint *fps,
					const int *positions, int nkeys, DedupBatchLocal local,
					DedupBatchRemoteRow remote_row, void *arg)
{
	DedupShardPlace *places = palloc(sizeof(DedupShardPlace) * Max(nkeys, 1));
	int		   *order = palloc(sizeof(int) * Max(nkeys, 1));
	Datum	   *args = palloc(sizeof(Datum) * Max(PG_NARGS(), 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(PG_NARGS(), 1));

	for (int k = 0; k < nkeys; k++)
	{
		dedup_shards_place(table, &fps[k], &places[k]);
		if (!places[k].local && cluster_forwarded)
			dedup_shards_not_here(table, places[k].shardid);
		order[k] = k;
	}
	qsort_arg(order, nkeys, sizeof(int), cluster_place_cmp, places);
	for (int start = 0; start < nkeys;)
	{
		const DedupShardPlace *first = &places[order[start]];
		const int  *run = &order[start];
		int			n = 0;

		/* a run: one shard of this node, or every key of another node */
		while (start + n < nkeys && places[run[n]].group == first->group &&
			   (!first->local || places[run[n]].shardid == first->shardid))
			n++;
		if (first->local)
			local(run, n, arg);
		else
		{
			ListCell   *lc;

			cluster_subset_args(fcinfo, positions, run, n, args, nulls);
			foreach(lc, dedup_routing_call(fcinfo->flinfo->fn_oid, args, nulls, &fps[run[0]]))
			{
				int			ncols;
				char	  **values = dedup_routing_row_values(lfirst(lc), &ncols);

				if (ncols != 1 || values[0] == NULL)
					elog(ERROR, "a batch sent to another node returned a row that is not one key");
				remote_row(values[0], arg);
			}
		}
		start += n;
	}
}

/* Run the call of fcinfo, as it was made, on the node of the shard of key fp. */
static Datum
cluster_forward(FunctionCallInfo fcinfo, const DedupFingerprint *fp)
{
	Datum	   *args = palloc(sizeof(Datum) * Max(PG_NARGS(), 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(PG_NARGS(), 1));

	for (int i = 0; i < PG_NARGS(); i++)
	{
		args[i] = PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i);
	}
	return cluster_result(fcinfo, dedup_routing_call(fcinfo->flinfo->fn_oid, args, nulls, fp));
}

/*
 * Route a call by its key: when the key's table is distributed and its
 * shard is on another node, run the call there and set *result to what it
 * returned (true); otherwise (false) the caller goes on here.  The key is
 * the fingerprint of the scope (argument 0) and of argument 1, a key of
 * typlen or a stream name.
 */
bool
dedup_routing_route(FunctionCallInfo fcinfo, DedupRelation table, DedupRouteKey how,
					int16 typlen, Datum *result)
{
	text	   *scope;
	DedupFingerprint fp;

	if (!dedup_catalog_relation_hashed(table))
		return false;
	scope = dedup_check_name_arg(fcinfo, 0, "scope");
	if (how == DEDUP_ROUTE_STREAM)
		dedup_fingerprint_stream_key(scope, dedup_check_name_arg(fcinfo, 1, "stream"), &fp);
	else
		dedup_fingerprint_key_arg(fcinfo, 1, scope, typlen, &fp);
	return dedup_routing_route_key(fcinfo, table, &fp, result);
}

/*
 * Route a call by a key already fingerprinted, fp, in table (distributed):
 * as dedup_routing_route().
 */
bool
dedup_routing_route_key(FunctionCallInfo fcinfo, DedupRelation table,
						const DedupFingerprint *fp, Datum *result)
{
	DedupShardPlace place;

	dedup_shards_place(table, fp, &place);
	if (place.local)
		return false;
	if (cluster_forwarded)
		dedup_shards_not_here(table, place.shardid);

	/*
	 * Take the shard's metadata lock here too, as Citus's executor does
	 * before it sends a write: a move holds it until its switch commits on
	 * this node, and Citus's delegation then sends the call to the shard's
	 * new node.  Without it, a call could go to the old node while the
	 * transaction's next statement went to the new one.
	 */
	dedup_shards_lock_remote(table, fp);
	if (dedup_shards_is_local(table, fp))
		return false;
	*result = cluster_forward(fcinfo, fp);
	return true;
}

/*
 * dedup.call_on_shard(key dedup_fingerprint, function text, args text[])
 *	RETURNS SETOF text[]
 *
 * A forwarded call, on the node Citus delegated it to: one of dedup's own
 * functions, called with its arguments read from text, as the role that
 * called it (EXECUTE on it is checked as for any call); the rows of its
 * result, each as text[].  key only routes the call: the function finds
 * its key's shard itself, and fails if it is not here.
 */
PG_FUNCTION_INFO_V1(dedup_call_on_shard);
Datum
dedup_call_on_shard(PG_FUNCTION_ARGS)
{
	Oid			fnoid;
	Oid		   *argtypes;
	int			nargs;
	Datum	   *elems;
	bool	   *elemnulls;
	int			nelems;
	Datum	   *values;
	char	   *nulls;
	StringInfoData sql;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		save_forwarded = cluster_forwarded;
	DedupFingerprint save_key = cluster_forwarded_key;

	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("function and args must not be null")));
	fnoid = DatumGetObjectId(DirectFunctionCall1(regprocedurein,
												 CStringGetDatum(text_to_cstring(PG_GETARG_TEXT_PP(1)))));
	if (getExtensionOfObject(ProcedureRelationId, fnoid) != get_extension_oid("dedup", false))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s is not a function of dedup that a call on a shard runs",
						format_procedure(fnoid))));
	(void) get_func_signature(fnoid, &argtypes, &nargs);
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(2), TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &elemnulls, &nelems);
	if (nelems != nargs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s takes %d arguments, not %d", format_procedure(fnoid), nargs, nelems)));
	values = palloc0(sizeof(Datum) * Max(nargs, 1));
	nulls = palloc(Max(nargs, 1) + 1);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT * FROM %s(",
					 quote_qualified_identifier(get_namespace_name(get_func_namespace(fnoid)),
												get_func_name(fnoid)));
	for (int i = 0; i < nargs; i++)
	{
		nulls[i] = elemnulls[i] ? 'n' : ' ';
		if (!elemnulls[i])
		{
			Oid			input;
			Oid			ioparam;

			getTypeInputInfo(argtypes[i], &input, &ioparam);
			values[i] = OidInputFunctionCall(input, TextDatumGetCString(elems[i]), ioparam, -1);
		}
		appendStringInfo(&sql, "%s$%d", i > 0 ? ", " : "", i + 1);
	}
	nulls[nargs] = '\0';
	appendStringInfoChar(&sql, ')');

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cluster_forwarded = true;
	if (!PG_ARGISNULL(0))
		memcpy(&cluster_forwarded_key, PG_GETARG_DEDUP_FINGERPRINT_P(0), sizeof(DedupFingerprint));
	else
		memset(&cluster_forwarded_key, 0, sizeof(DedupFingerprint));
	PG_TRY();
	{
		if (SPI_execute_with_args(sql.data, nargs, argtypes, values, nulls, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "a call on a shard failed");
	}
	PG_FINALLY();
	{
		cluster_forwarded = save_forwarded;
		cluster_forwarded_key = save_key;
	}
	PG_END_TRY();
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		TupleDesc	desc = SPI_tuptable->tupdesc;
		HeapTuple	tuple = SPI_tuptable->vals[r];
		Datum	   *cols = palloc0(sizeof(Datum) * desc->natts);
		bool	   *colnulls = palloc0(sizeof(bool) * desc->natts);
		int			dims[1] = {desc->natts};
		int			lbs[1] = {1};
		Datum		row;
		bool		rownull = false;

		for (int i = 0; i < desc->natts; i++)
		{
			char	   *value = SPI_getvalue(tuple, desc, i + 1);

			colnulls[i] = (value == NULL);
			if (value)
				cols[i] = CStringGetTextDatum(value);
		}
		row = PointerGetDatum(construct_md_array(cols, colnulls, 1, dims, lbs, TEXTOID, -1,
												 false, TYPALIGN_INT));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &row, &rownull);
	}
	SPI_finish();
	return (Datum) 0;
}
