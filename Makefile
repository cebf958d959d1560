# Makefile for the dedup extension (PGXS).
#
#   make && make install     build and install into the PostgreSQL of $(PG_CONFIG)
#   scripts/test             the whole test suite on a throwaway server (see README)
#   sim/dedup-sim            the exactly-once simulator (a libpq client; built by make)

MODULE_big = dedup
OBJS = \
	src/dedup.o \
	src/fingerprint.o \
	src/scope.o \
	src/store.o \
	src/claim.o \
	src/record.o \
	src/cleanup.o \
	src/outbox.o \
	src/stats.o \
	src/worker.o

EXTENSION = dedup
DATA = $(wildcard sql/dedup--*.sql)

# pg_regress: sql/NAME.sql -> expected/NAME.out, in database contrib_regression
REGRESS = test_setup fingerprint claim scope record outbox cleanup errors security privileges
REGRESS_OPTS = --load-extension=dedup

# isolation specs: test/isolation/specs/NAME.spec -> test/isolation/expected/NAME.out
ISOLATION = claim-commit claim-abort claim-nowait claim-expired claim-batch \
	outbox-take outbox-ack-lease outbox-order \
	claim-serializable record-begin record-takeover record-release
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=dedup

PG_CFLAGS = -Wall -Wmissing-prototypes -Werror

# the simulator: a client program, built beside the extension, not installed
SIM_OBJS = sim/main.o sim/feed.o sim/db.o sim/consumer.o sim/relay.o \
	sim/faults.o sim/report.o
EXTRA_CLEAN = sim/dedup-sim $(SIM_OBJS)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

all: sim/dedup-sim

sim/dedup-sim: $(SIM_OBJS)
	$(CC) -o $@ $(SIM_OBJS) -L$(shell $(PG_CONFIG) --libdir) -lpq -lm -pthread

sim/%.o: sim/%.c sim/sim.h
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -Wmissing-prototypes \
		-Werror -pthread -I$(shell $(PG_CONFIG) --includedir) -c -o $@ $<
