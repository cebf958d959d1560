/*
 * feed.c: the at-least-once feed.  Every message is delivered 1..K times,
 * in random order within a redelivery window; a consumer acks a delivery
 * when it is done with it, or puts it back (the broker redelivers it after
 * a delay) when its transaction failed or the message was busy elsewhere.
 * The feed also remembers when each message's effect committed, to measure
 * how long after it a copy still arrived (which the dedup window must
 * cover).
 *
 * Copyright (c) 2026, The dedup authors.  PostgreSQL License: see LICENSE.
 */
#include "sim.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * A message put back this often is stuck (a key that never frees up): the
 * run counts it as unexpected and stops redelivering it, rather than loop.
 */
#define FEED_MAX_REDELIVERIES 1000

typedef struct FeedSlot
{
	double		position;
	int64_t		index;
} FeedSlot;

typedef struct FeedRedelivery
{
	int64_t		index;
	int64_t		due_ms;
} FeedRedelivery;

static pthread_mutex_t feed_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t *feed_order;		/* message index of every delivery */
static long feed_count;
static long feed_next_slot;
static long feed_pending;		/* deliveries not yet acked */
static FeedRedelivery *feed_again;
static long feed_again_count;
static long feed_again_size;
static atomic_long *feed_applied_ms;	/* when a message's effect committed */
static atomic_int *feed_redelivered;	/* times each message was put back */

static int
feed_slot_cmp(const void *a, const void *b)
{
	double		pa = ((const FeedSlot *) a)->position;
	double		pb = ((const FeedSlot *) b)->position;

	return (pa > pb) - (pa < pb);
}

/*
 * Build the deliveries: message i's copies get positions i + U(0, window)
 * (or U(0, N) without a window), and the feed is in position order.
 */
void
feed_build(uint64_t *rng)
{
	long		n = sim_options.messages;
	long		total = 0;
	long		i;
	FeedSlot   *slots;

	for (i = 0; i < n; i++)
		total += sim_messages[i].copies;
	slots = malloc(sizeof(FeedSlot) * total);
	feed_order = malloc(sizeof(int64_t) * total);
	feed_applied_ms = calloc(n, sizeof(atomic_long));
	feed_redelivered = calloc(n, sizeof(atomic_int));
	if (!slots || !feed_order || !feed_applied_ms || !feed_redelivered)
		abort();
	total = 0;
	for (i = 0; i < n; i++)
	{
		int			c;

		for (c = 0; c < sim_messages[i].copies; c++)
		{
			double		u = sim_random_unit(rng);

			slots[total].position = sim_options.window > 0 ?
				i + u * sim_options.window : u * n;
			slots[total].index = i;
			total++;
		}
	}
	qsort(slots, total, sizeof(FeedSlot), feed_slot_cmp);
	for (i = 0; i < total; i++)
		feed_order[i] = slots[i].index;
	free(slots);
	feed_count = total;
	feed_pending = total;
}

long
feed_total(void)
{
	return feed_count;
}

/* How many of the feed's deliveries have been handed out (not counting
 * redeliveries). */
long
feed_position(void)
{
	long		pos;

	pthread_mutex_lock(&feed_lock);
	pos = feed_next_slot;
	pthread_mutex_unlock(&feed_lock);
	return pos;
}

/*
 * The next delivery: a redelivery that is due, else the feed's next one.
 * Waits while only redeliveries not yet due remain; false when every
 * delivery has been acked.
 */
bool
feed_next(int64_t *index)
{
	for (;;)
	{
		int64_t		now = sim_now_ms();
		long		i;
		bool		done;

		pthread_mutex_lock(&feed_lock);
		for (i = 0; i < feed_again_count; i++)
		{
			if (feed_again[i].due_ms <= now)
			{
				*index = feed_again[i].index;
				feed_again[i] = feed_again[--feed_again_count];
				pthread_mutex_unlock(&feed_lock);
				atomic_fetch_add(&sim_counters.deliveries, 1);
				return true;
			}
		}
		if (feed_next_slot < feed_count)
		{
			*index = feed_order[feed_next_slot++];
			pthread_mutex_unlock(&feed_lock);
			atomic_fetch_add(&sim_counters.deliveries, 1);
			return true;
		}
		done = feed_pending == 0;
		pthread_mutex_unlock(&feed_lock);
		if (done)
			return false;
		sim_sleep_ms(2);
	}
}

static void
feed_push(int64_t index, int delay_ms, int more_pending)
{
	pthread_mutex_lock(&feed_lock);
	if (feed_again_count == feed_again_size)
	{
		feed_again_size = feed_again_size ? feed_again_size * 2 : 64;
		feed_again = realloc(feed_again, sizeof(FeedRedelivery) * feed_again_size);
		if (!feed_again)
			abort();
	}
	feed_again[feed_again_count].index = index;
	feed_again[feed_again_count].due_ms = sim_now_ms() + delay_ms;
	feed_again_count++;
	feed_pending += more_pending;
	pthread_mutex_unlock(&feed_lock);
}

/* The consumer is done with a delivery: applied, duplicate or rejected. */
void
feed_ack(int64_t index)
{
	(void) index;
	pthread_mutex_lock(&feed_lock);
	feed_pending--;
	pthread_mutex_unlock(&feed_lock);
}

/* The delivery failed: the broker delivers it again after delay_ms. */
void
feed_requeue(int64_t index, int delay_ms)
{
	if (atomic_fetch_add(&feed_redelivered[index], 1) >= FEED_MAX_REDELIVERIES)
	{
		if (atomic_fetch_add(&sim_counters.unexpected, 1) < 10)
			fprintf(stderr, "\ndedup-sim: message %lld put back %d times: given up\n",
					(long long) sim_messages[index].id, FEED_MAX_REDELIVERIES);
		feed_ack(index);
		return;
	}
	atomic_fetch_add(&sim_counters.redeliveries, 1);
	feed_push(index, delay_ms, 0);
}

/* One more delivery of a message (a client retrying a request). */
void
feed_add(int64_t index, int delay_ms)
{
	feed_push(index, delay_ms, 1);
}

/* The message's business transaction committed (as far as we know). */
void
feed_applied(int64_t index)
{
	long		zero = 0;

	atomic_compare_exchange_strong(&feed_applied_ms[index], &zero, (long) sim_now_ms());
}

/*
 * A copy of the message arrived: if its effect committed before, how long
 * ago is the gap the dedup window has to cover.
 */
void
feed_seen(int64_t index)
{
	long		applied = atomic_load(&feed_applied_ms[index]);
	long		gap;
	long		max;

	if (applied == 0)
		return;
	gap = (long) sim_now_ms() - applied;
	max = atomic_load(&sim_counters.max_gap_ms);
	while (gap > max &&
		   !atomic_compare_exchange_weak(&sim_counters.max_gap_ms, &max, gap))
		;
}
