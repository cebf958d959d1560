# Makefile for the dedup extension (PGXS).
#
#   make && make install     build and install into the PostgreSQL of $(PG_CONFIG)
#   make sim                 the exactly-once simulator sim/dedup-sim (a libpq client)
#   scripts/test             the whole test suite on a throwaway server (see README)
#   make installcheck        the regress, isolation and TAP tests (test/t) against
#                            the installed server (not as root: TAP runs initdb);
#                            a TAP test that needs a program not installed
#                            (PgBouncer, the exporter, Node) skips, saying which
#   make lint                checks of the sources: src/'s layers (src/README.md),
#                            the reference, META.json, C format, commit
#                            subjects, exported names' prefixes (test/lint)
#
# SQL: the install script of the current version, dedup--$(EXTVERSION).sql,
# is built from the parts in sql/ listed in SQL_PARTS, in that order (types,
# then the checks tables use, tables, functions by concern, privileges last,
# since the grant helpers name every function); the update script to it
# is built from the same function parts (see DATA_built).  Released install
# scripts (sql/dedup--1.0.sql) and update scripts (sql/updates/dedup--*.sql)
# are shipped as they are; sql/released.sha256 freezes them.

EXTENSION = dedup
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'$$/\1/p" $(EXTENSION).control)

MODULE_big = dedup
OBJS = \
	src/module.o \
	src/settings.o \
	src/checks.o \
	src/citus.o \
	src/catalog.o \
	src/shards.o \
	src/routing.o \
	src/fingerprint.o \
	src/privileges.o \
	src/scope.o \
	src/bucket.o \
	src/filter.o \
	src/history.o \
	src/store.o \
	src/claim.o \
	src/record.o \
	src/cleanup.o \
	src/outbox.o \
	src/outbox_put.o \
	src/outbox_fast.o \
	src/outbox_cluster.o \
	src/outbox_relay.o \
	src/stream.o \
	src/cleanup_stats.o \
	src/scope_counters.o \
	src/worker.o

SQL_PARTS = \
	sql/header.sql \
	sql/types/fingerprint.sql \
	sql/types/fingerprint_text.sql \
	sql/types/records.sql \
	sql/functions/checks.sql \
	sql/tables/scopes.sql \
	sql/tables/claims.sql \
	sql/tables/buckets.sql \
	sql/tables/history.sql \
	sql/tables/outbox.sql \
	sql/tables/outbox_relay.sql \
	sql/tables/grants.sql \
	sql/tables/streams.sql \
	sql/functions/scope.sql \
	sql/functions/claim.sql \
	sql/functions/record.sql \
	sql/functions/outbox_put.sql \
	sql/functions/outbox_take.sql \
	sql/functions/outbox_settle.sql \
	sql/functions/outbox_admin.sql \
	sql/functions/outbox_relay.sql \
	sql/functions/stream.sql \
	sql/functions/history.sql \
	sql/functions/cleanup.sql \
	sql/functions/cluster.sql \
	sql/grants.sql

# The update script from 1.0 to 1.1 (not released yet) is built too: the
# schema and data steps written by hand (sql/updates/1.0--1.1.pre.sql, after
# the checks it uses, and .post.sql) around the parts of the types and
# tables new in 1.1, the function parts and the privileges, which are written once, as
# CREATE OR REPLACE, for both scripts (TimescaleDB builds its updates this
# way).  A released version's
# update script is frozen like its install script (sql/released.sha256).
UPDATE_NEW_TYPE_PARTS = sql/types/fingerprint_text.sql
UPDATE_NEW_TABLE_PARTS = sql/tables/grants.sql sql/tables/streams.sql sql/tables/buckets.sql \
	sql/tables/history.sql sql/tables/outbox_relay.sql
UPDATE_FUNCTION_PARTS = $(filter-out sql/functions/checks.sql,$(filter sql/functions/%.sql,$(SQL_PARTS))) \
	sql/grants.sql
DATA_built = $(EXTENSION)--$(EXTVERSION).sql $(EXTENSION)--1.0--1.1.sql
DATA = $(filter-out sql/$(EXTENSION)--$(EXTVERSION).sql,$(wildcard sql/$(EXTENSION)--*.sql)) \
	$(wildcard sql/updates/$(EXTENSION)--*--*.sql)

# pg_regress: test/sql/NAME.sql -> test/expected/NAME.out, in database contrib_regression
REGRESS = test_setup fingerprint claim scope record keys record_extend record_options intervals outbox outbox_shape outbox_ids outbox_batch_counter outbox_wrap outbox_reentry outbox_wait_xact streams stream_epochs cleanup buckets history scopestats errors setting_ranges security privileges history_recreate
REGRESS_OPTS = --inputdir=test --load-extension=dedup

# isolation specs: test/isolation/specs/NAME.spec -> test/isolation/expected/NAME.out
ISOLATION = claim-commit claim-abort claim-nowait claim-expired claim-batch \
	outbox-put outbox-put-held outbox-put-locks outbox-ids-race outbox-take outbox-slots outbox-slot-reuse outbox-ack-lease outbox-lapsed-settle outbox-settle-snapshot outbox-stats-snapshot outbox-trim-held outbox-order outbox-relay-death outbox-rehand outbox-update outbox-failure outbox-hot-failure outbox-hot-relays \
	outbox-heartbeat outbox-wait outbox-wake outbox-wake-rearm outbox-listen outbox-listen-race \
	claim-serializable claim-bucket record-begin record-takeover record-release \
	record-keylock record-extend record-busy-row stream-advance stream-epoch-batch history-fold bucket-writer bucket-reader bucket-wait extension-drop \
	extension-recreate scope-invalidation grants-update cleanup-skipped-step
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=dedup

# The outbox's relay both ways: `make installcheck-slow-path` runs the
# regress tests and the isolation specs of the outbox (every spec that
# drives the relay) again with dedup.outbox_fast_path off, through libpq's
# PGOPTIONS, so that every take and ack runs the PL/pgSQL functions that own
# the relay's rules (src/outbox_fast.c), against the same expected files.
# scripts/test runs it after the isolation specs (its rule is after PGXS's).
# scopestats is left out: it asserts the server's shared counters as a fresh
# server has them, and its first run filled their table (4,032 scopes).
SLOW_PATH_REGRESS = $(filter-out scopestats,$(REGRESS))
SLOW_PATH_ISOLATION = $(filter outbox-% extension-recreate,$(ISOLATION))

# TAP tests: test/t/NNN_name.pl, PostgreSQL's own harness
# (PostgreSQL::Test::Cluster, through test/perl/DedupNode.pm), each on
# servers of its own, with the settings of every test server
# (test/perl/dedup.conf, which scripts/lib.sh's server_start reads too): every
# test on servers of its own that the harness can drive, the simulator's
# included (the shell scripts left, test/integration, are what it cannot:
# doc/tests.md); PGXS's prove_installcheck runs them after the regress
# and isolation tests, against the installed PostgreSQL, as a user that may
# run initdb (not root: scripts/lib.sh's run_tap_tests runs them as
# postgres).  A plain `make installcheck` runs all three; a caller that
# names its REGRESS or ISOLATION tests on the command line (scripts/test,
# one step at a time) runs no TAP test unless it says TAP_TESTS=1 too.
# One file: make installcheck REGRESS= ISOLATION= TAP_TESTS=1 PROVE_TESTS=test/t/002_crash.pl
ifeq ($(origin REGRESS)$(origin ISOLATION),filefile)
TAP_TESTS = 1
endif
# the longest first (test/t/013_sim.pl takes about five minutes, the
# others two and a half at most): files run TAP_JOBS at a time, and one
# started last would end minutes after the rest
PROVE_SLOWEST = test/t/013_sim.pl test/t/014_upgrade.pl test/t/004_worker.pl test/t/007_history.pl
PROVE_TESTS = $(PROVE_SLOWEST) $(filter-out $(PROVE_SLOWEST),$(sort $(wildcard test/t/*.pl)))

PG_CFLAGS = -Wall -Wmissing-prototypes -Werror
# fingerprint.c hashes with OpenSSL's EVP interface (libpq-dev brings libssl-dev)
SHLIB_LINK = -lcrypto
# rebuild what includes a changed header (PGXS tracks dependencies with -MMD)
override autodepend = yes

# the simulator: a client program, built beside the extension, not installed
SIM_OBJS = sim/main.o sim/feed.o sim/db.o sim/consumer.o sim/relay.o sim/log.o \
	sim/faults.o sim/report.o
EXTRA_CLEAN = sim/dedup-sim $(SIM_OBJS)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# after PGXS, whose Makefile.global empties it: where DedupNode.pm is, and
# TAP_JOBS=N to run N test files at a time (scripts/test runs three)
PROVE_FLAGS = -I test/perl $(if $(TAP_JOBS),-j$(TAP_JOBS))

# test/t/013_sim.pl runs the simulator: a run of the TAP tests builds it
# first (after PGXS, so that installcheck is not the default goal)
ifneq ($(TAP_TESTS),)
installcheck: sim
endif

.PHONY: installcheck-slow-path
installcheck-slow-path:
	PGOPTIONS="$(PGOPTIONS) -c dedup.outbox_fast_path=off" $(MAKE) installcheck \
		REGRESS="$(SLOW_PATH_REGRESS)" ISOLATION="$(SLOW_PATH_ISOLATION)" TAP_TESTS=

$(EXTENSION)--$(EXTVERSION).sql: $(SQL_PARTS) $(EXTENSION).control
	cat $(filter %.sql,$^) > $@

$(EXTENSION)--1.0--1.1.sql: sql/functions/checks.sql sql/updates/1.0--1.1.pre.sql \
		$(UPDATE_NEW_TYPE_PARTS) $(UPDATE_NEW_TABLE_PARTS) $(UPDATE_FUNCTION_PARTS) \
		sql/updates/1.0--1.1.post.sql
	{ sed -n '1,/^\\echo /p' sql/updates/1.0--1.1.pre.sql; cat sql/functions/checks.sql; \
	  sed '1,/^\\echo /d' sql/updates/1.0--1.1.pre.sql; \
	  cat $(UPDATE_NEW_TYPE_PARTS) $(UPDATE_NEW_TABLE_PARTS) $(UPDATE_FUNCTION_PARTS) \
	      sql/updates/1.0--1.1.post.sql; } > $@

# make lint: checks of the sources, each a prerequisite of its own, each
# saying "ok   lint-NAME" or "FAIL lint-NAME" and, on failure, why
# (scripts/test runs make -k lint and counts them).
# lint-layers: no C file includes a header of a layer above its own, and
# the includes make no circle (scripts/check-layers; the layers are in
# src/README.md).
# lint-reference: doc/reference.md against the installed extension (on a
# server of its own; test/lint/reference.sh).
# lint-meta: META.json against dedup.control and LICENSE (test/lint/meta.sh).
# lint-format: the C sources' layout, pgindent's when it is installed, and
# src/typedefs.list complete (test/lint/format.sh).
# lint-commits: commit subjects of at most 72 characters (test/lint/commits.sh).
# lint-names: every name a C file exports carries its file's prefix
# (test/lint/names.sh, on the built objects).
LINT = lint-layers lint-reference lint-meta lint-format lint-commits lint-names
.PHONY: lint $(LINT)
lint: $(LINT)

lint_run = if out=$$($(1) 2>&1); then echo "ok   $@"; \
	else echo "FAIL $@"; echo "$$out" | tail -n 40; exit 1; fi

lint-layers:
	@$(call lint_run,scripts/check-layers src)
lint-reference:
	@$(call lint_run,bash test/lint/reference.sh)
lint-meta:
	@$(call lint_run,bash test/lint/meta.sh)
lint-format:
	@$(call lint_run,bash test/lint/format.sh)
lint-commits:
	@$(call lint_run,bash test/lint/commits.sh)
lint-names: all
	@$(call lint_run,bash test/lint/names.sh)

.PHONY: sim
sim: sim/dedup-sim

sim/dedup-sim: $(SIM_OBJS)
	$(CC) -o $@ $(SIM_OBJS) -L$(shell $(PG_CONFIG) --libdir) -lpq -lm -pthread

sim/%.o: sim/%.c sim/sim.h
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -Wmissing-prototypes \
		-Werror -pthread -I$(shell $(PG_CONFIG) --includedir) -c -o $@ $<
