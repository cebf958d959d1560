/*-------------------------------------------------------------------------
 *
 * privileges.c
 *	  Who may use a scope: the privileges of dedup.grants and their check.
 *
 * A role may use a scope as an application (usage: claims, records, outbox
 * puts, reading its settings) or as a relay (relay: taking, acking and
 * nacking its outbox events, their figures) when dedup.grants has a row of
 * that privilege for the role, or for a role whose privileges it has
 * (has_privs_of_role, as PostgreSQL's own ACLs count membership), whose
 * scope is NULL (every scope), the scope itself, or a prefix of it written
 * with a trailing '*'.  Superusers and roles with the extension owner's
 * privileges may use every scope.  The function-level EXECUTE grants stay:
 * a role needs both.
 *
 * What dedup.grants says is cached per backend, by scope and role, once
 * per privilege looked up.  A statement trigger on dedup.grants
 * (dedup.scopes_changed, scope.c) sends a relcache invalidation of the
 * table, role changes (membership, attributes) a syscache invalidation, and
 * the callbacks below empty the cache.  scope.c checks a call's caller here
 * as it reads the scope's settings (dedup_scope_use); the relay's PL/pgSQL
 * asks dedup.has_privilege(), below.
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "checks.h"
#include "privileges.h"

/* Column numbers of dedup.grants */
#define Anum_grants_role		1
#define Anum_grants_privilege	2
#define Anum_grants_scope		3

/*
 * The backend's cache of what dedup.grants says of a role on a scope: the
 * privileges (DEDUP_PRIV_* bits) looked up, and of those, the ones it has.
 */
typedef struct PrivilegesCacheKey
{
	char		scope[DEDUP_MAX_SCOPE_BYTES + 1];	/* zero-padded */
	Oid			roleid;
} PrivilegesCacheKey;

typedef struct PrivilegesCacheEntry
{
	PrivilegesCacheKey key;		/* hash key */
	uint8		known;			/* DEDUP_PRIV_* bits looked up */
	uint8		allowed;		/* of those, the ones the role has */
} PrivilegesCacheEntry;

#define PRIVILEGES_CACHE_MAX 10000

static HTAB *privileges_cache = NULL;
static Oid	privileges_grants_relid = InvalidOid;
static uint64 privileges_cache_generation = 0;	/* counts invalidations */

static void
privileges_cache_reset(void)
{
	privileges_cache_generation++;
	if (privileges_cache != NULL)
	{
		hash_destroy(privileges_cache);
		privileges_cache = NULL;
	}
}

static void
privileges_relcache_callback(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == privileges_grants_relid)
		privileges_cache_reset();
}

/* a role's membership or attributes changed: privileges may have too */
static void
privileges_role_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	privileges_cache_reset();
}

static const char *
privileges_name(int privilege)
{
	return privilege == DEDUP_PRIV_RELAY ? "relay" : "usage";
}

/*
 * Whether a grant's scope (NULL: every scope; "p*": prefix p) covers a scope
 * (NULL: every scope, which only a grant of every scope, or of prefix "",
 * covers).
 */
static bool
privileges_grant_covers(Datum granted, bool isnull, const text *scope)
{
	text	   *g;
	Size		glen;
	Size		slen;

	if (isnull)
		return true;
	g = DatumGetTextPP(granted);
	glen = VARSIZE_ANY_EXHDR(g);
	if (scope == NULL)
		return glen == 1 && VARDATA_ANY(g)[0] == '*';
	slen = VARSIZE_ANY_EXHDR(scope);
	if (glen > 0 && VARDATA_ANY(g)[glen - 1] == '*')
		return glen - 1 <= slen && memcmp(VARDATA_ANY(g), VARDATA_ANY(scope), glen - 1) == 0;
	return glen == slen && memcmp(VARDATA_ANY(g), VARDATA_ANY(scope), slen) == 0;
}

/*
 * Whether a role has one privilege on a scope (NULL: on every scope), read
 * from dedup.grants.  A database whose extension is still at 1.0 has no
 * dedup.grants: there, EXECUTE on the function is the whole privilege, as it
 * was.
 */
static bool
privileges_load(Oid roleid, const text *scope, int privilege)
{
	Relation	rel;
	Snapshot	snapshot;
	TableScanDesc scan;
	HeapTuple	tuple;
	const char *name = privileges_name(privilege);
	bool		allowed;

	if (superuser_arg(roleid) || !OidIsValid(dedup_catalog_relation_lookup(DEDUP_REL_GRANTS)))
		return true;
	rel = dedup_catalog_relation_open(DEDUP_REL_GRANTS, AccessShareLock);
	allowed = has_privs_of_role(roleid, rel->rd_rel->relowner);
	snapshot = dedup_catalog_cache_snapshot();
	scan = table_beginscan(rel, snapshot, 0, NULL);
	while (!allowed && (tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		Datum		priv = heap_getattr(tuple, Anum_grants_privilege, desc, &isnull);
		Datum		role = heap_getattr(tuple, Anum_grants_role, desc, &isnull);
		Datum		granted;

		CHECK_FOR_INTERRUPTS();
		if (strcmp(TextDatumGetCString(priv), name) != 0 ||
			!has_privs_of_role(roleid, DatumGetObjectId(role)))
			continue;
		granted = heap_getattr(tuple, Anum_grants_scope, desc, &isnull);
		allowed = privileges_grant_covers(granted, isnull, scope);
	}
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	return allowed;
}

/* Note what dedup.grants said of a role's privilege on a scope. */
static void
privileges_remember(const PrivilegesCacheKey *key, int privilege, bool allowed)
{
	PrivilegesCacheEntry *entry;
	bool		found;

	/* a backend that sees very many scopes and roles starts over */
	if (privileges_cache != NULL &&
		hash_get_num_entries(privileges_cache) >= PRIVILEGES_CACHE_MAX)
	{
		hash_destroy(privileges_cache);
		privileges_cache = NULL;
	}
	if (privileges_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(PrivilegesCacheKey);
		ctl.entrysize = sizeof(PrivilegesCacheEntry);
		ctl.hcxt = CacheMemoryContext;
		privileges_cache = hash_create("dedup scope privileges", 64, &ctl,
									   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(privileges_cache, key, HASH_ENTER, &found);
	if (!found)
		entry->known = entry->allowed = 0;
	entry->known |= privilege;
	if (allowed)
		entry->allowed |= privilege;
}

/*
 * Whether a role has any of the privileges (DEDUP_PRIV_* bits) on a scope,
 * looked up in dedup.grants once per scope, role and privilege.  Looking up
 * may process invalidations that empty the cache: from then on, what was
 * read before is not trusted, and nothing is noted.  A parallel worker notes
 * nothing either (it reads with the transaction's snapshot).
 */
bool
dedup_privileges_allow(const text *scope, Oid roleid, int privileges)
{
	static bool registered = false;
	PrivilegesCacheKey key;
	PrivilegesCacheEntry *entry;
	Oid			grants_relid;
	uint8		known = 0;
	uint8		allowed_bits = 0;
	bool		keep = true;

	/* the buffer's bound: callers check first, this is the last word */
	dedup_check_scope_name(scope, "scope");
	memset(&key, 0, sizeof(key));
	memcpy(key.scope, VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope));
	key.roleid = roleid;

	if (!registered)
	{
		dedup_catalog_relcache_register(privileges_relcache_callback);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, privileges_role_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, privileges_role_callback, (Datum) 0);
		registered = true;
	}

	/*
	 * What was noted under another dedup.grants, or under none (an extension
	 * at 1.0, where EXECUTE was the whole privilege), says nothing of this
	 * one: ALTER EXTENSION dedup UPDATE creates the table, and no
	 * invalidation of it can reach a cache that did not know its OID.
	 */
	grants_relid = dedup_catalog_relation_lookup(DEDUP_REL_GRANTS);
	if (grants_relid != privileges_grants_relid)
	{
		privileges_cache_reset();
		privileges_grants_relid = grants_relid;
	}
	entry = privileges_cache ? hash_search(privileges_cache, &key, HASH_FIND, NULL) : NULL;
	if (entry != NULL)
	{
		known = entry->known;
		allowed_bits = entry->allowed;
	}
	for (int p = DEDUP_PRIV_USAGE; p <= DEDUP_PRIV_RELAY; p <<= 1)
	{
		bool		allowed;

		if (!(privileges & p))
			continue;
		if (keep && (known & p))
			allowed = (allowed_bits & p) != 0;
		else
		{
			uint64		generation = privileges_cache_generation;

			allowed = privileges_load(roleid, scope, p);
			if (generation != privileges_cache_generation)
				keep = false;
			else if (keep && !IsInParallelMode())
				privileges_remember(&key, p, allowed);
		}
		if (allowed)
			return true;
	}
	return false;
}

/* 42501: a role has none of the privileges (DEDUP_PRIV_* bits) on a scope */
void
dedup_privileges_denied(const text *scope, Oid roleid, int privileges)
{
	char	   *name = text_to_cstring(scope);
	const char *role = GetUserNameFromId(roleid, true);
	bool		relay = privileges == DEDUP_PRIV_RELAY;

	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for scope \"%s\"", name),
			 errdetail("Role \"%s\" has no %s privilege on scope \"%s\".",
					   role ? role : "?",
					   privileges == (DEDUP_PRIV_USAGE | DEDUP_PRIV_RELAY) ?
					   "usage or relay" : privileges_name(privileges),
					   name),
			 errhint("The extension's owner grants it with %s(role, ARRAY['%s']).",
					 relay ? "dedup_grant_relay" : "dedup_grant_usage", name)));
	pg_unreachable();
}

/* A privilege named in SQL: 'usage' or 'relay'. */
static int
privileges_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *name;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("privilege must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (strcmp(name, "usage") == 0)
		return DEDUP_PRIV_USAGE;
	if (strcmp(name, "relay") == 0)
		return DEDUP_PRIV_RELAY;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown dedup privilege \"%s\"", name),
			 errhint("The privileges are usage and relay.")));
	return 0;					/* keep the compiler quiet */
}

/*
 * dedup.has_privilege(role oid, scope text, privilege text, raise boolean):
 * whether the role has the privilege ('usage' or 'relay') on the scope; with
 * raise, 42501 when it has not.  For the relay functions, which run as the
 * extension owner on behalf of the role that called them.  Scope NULL asks
 * whether the role has it on every scope (a grant of every scope, or the
 * owner's or a superuser's), for what names no scope (a key of 1.0 in
 * dedup.outbox_keys); read from dedup.grants each time, and never raising
 * (raise with NULL is 22004, as ever).
 */
PG_FUNCTION_INFO_V1(dedup_has_privilege);
Datum
dedup_has_privilege(PG_FUNCTION_ARGS)
{
	Oid			roleid;
	text	   *scope;
	int			privilege;
	bool		allowed;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("role must not be null")));
	roleid = PG_GETARG_OID(0);
	if (PG_ARGISNULL(1) && !(!PG_ARGISNULL(3) && PG_GETARG_BOOL(3)))
		PG_RETURN_BOOL(privileges_load(roleid, NULL, privileges_arg(fcinfo, 2)));
	scope = dedup_check_name_arg(fcinfo, 1, "topic");
	privilege = privileges_arg(fcinfo, 2);
	allowed = dedup_privileges_allow(scope, roleid, privilege);
	if (!allowed && !PG_ARGISNULL(3) && PG_GETARG_BOOL(3))
		dedup_privileges_denied(scope, roleid, privilege);
	PG_RETURN_BOOL(allowed);
}
