/*
 * feed.c: the at-least-once feed.  Every message is delivered 1..K times:
 * its first copy in the feed's order, the others within a redelivery window
 * of time after it (or, without a window, anywhere in the feed); a consumer
 * acks a delivery when it is done with it, or puts it back (the broker
 * redelivers it after a delay) when its transaction failed or the message
 * was busy elsewhere.  The window is time, as a broker's redeliveries are,
 * so that how long after a commit a copy can come does not grow when the
 * consumers slow down (a window of messages did: on a loaded machine the
 * same 2,000 messages took several times as long).
 * The feed also remembers when each message's effect committed, to measure
 * how long after it a copy still arrived (which the dedup window must
 * cover).  Its state is the run's Feed (Sim.feed), under the Feed's lock.
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
	bool		planned;		/* a copy of the feed, not a redelivery */
} FeedRedelivery;

/* the feed of a run: Sim.feed, built by feed_build */
struct Feed
{
	pthread_mutex_t lock;		/* guards the fields up to again_size */
	int64_t    *order;			/* message index of each delivery in order */
	long		order_count;
	long		next_slot;
	long		count;			/* the feed's deliveries: copies included */
	long		handed;			/* of those, handed out */
	long		pending;		/* deliveries not yet acked */
	uint64_t	rng;			/* when a later copy comes */
	FeedRedelivery *again;
	long		again_count;
	long		again_size;
	atomic_long *applied_ms;	/* when a message's effect committed */
	atomic_int *redelivered;	/* times each message was put back */
	int		   *later_copies;	/* copies still to come after the first */
	int			window_ms;
};

static int
feed_slot_cmp(const void *a, const void *b)
{
	double		pa = ((const FeedSlot *) a)->position;
	double		pb = ((const FeedSlot *) b)->position;

	return (pa > pb) - (pa < pb);
}

/*
 * Build the deliveries.  With a window, the feed's order holds each
 * message's first copy, in message order; its other copies come when
 * feed_next hands the first out, each U(0, window) ms later.  Without one,
 * every copy of message i gets a position U(0, N) and the feed is in
 * position order.
 */
void
feed_build(Sim *sim, uint64_t *rng)
{
	long		n = sim->options.messages;
	long		total = 0;
	long		i;
	Feed	   *feed = calloc(1, sizeof(Feed));

	if (!feed)
		abort();
	for (i = 0; i < n; i++)
		total += sim->messages[i].copies;
	feed->applied_ms = calloc(n, sizeof(atomic_long));
	feed->redelivered = calloc(n, sizeof(atomic_int));
	feed->later_copies = calloc(n, sizeof(int));
	feed->order = malloc(sizeof(int64_t) * (sim->options.window > 0 ? n : total));
	if (!feed->order || !feed->applied_ms || !feed->redelivered || !feed->later_copies)
		abort();
	feed->window_ms = sim->options.window;
	feed->rng = *rng ^ 0x9e3779b97f4a7c15ULL;
	if (feed->window_ms > 0)
	{
		for (i = 0; i < n; i++)
		{
			feed->order[i] = i;
			feed->later_copies[i] = sim->messages[i].copies - 1;
		}
		feed->order_count = n;
	}
	else
	{
		FeedSlot   *slots = malloc(sizeof(FeedSlot) * total);
		long		k = 0;

		if (!slots)
			abort();
		for (i = 0; i < n; i++)
		{
			int			c;

			for (c = 0; c < sim->messages[i].copies; c++)
			{
				slots[k].position = sim_random_unit(rng) * n;
				slots[k].index = i;
				k++;
			}
		}
		qsort(slots, total, sizeof(FeedSlot), feed_slot_cmp);
		for (i = 0; i < total; i++)
			feed->order[i] = slots[i].index;
		free(slots);
		feed->order_count = total;
	}
	feed->count = total;
	feed->pending = total;
	pthread_mutex_init(&feed->lock, NULL);
	sim->feed = feed;
	sim->planned_deliveries = total;
}

long
feed_total(Sim *sim)
{
	return sim->feed->count;
}

/* How many of the feed's deliveries have been handed out (not counting
 * redeliveries). */
long
feed_position(Sim *sim)
{
	Feed	   *feed = sim->feed;
	long		pos;

	pthread_mutex_lock(&feed->lock);
	pos = feed->handed;
	pthread_mutex_unlock(&feed->lock);
	return pos;
}

/* Adds a delivery due at due_ms to the redeliveries; the lock is held. */
static void
feed_push_locked(Feed *feed, int64_t index, int64_t due_ms, bool planned)
{
	if (feed->again_count == feed->again_size)
	{
		feed->again_size = feed->again_size ? feed->again_size * 2 : 64;
		feed->again = realloc(feed->again, sizeof(FeedRedelivery) * feed->again_size);
		if (!feed->again)
			abort();
	}
	feed->again[feed->again_count].index = index;
	feed->again[feed->again_count].due_ms = due_ms;
	feed->again[feed->again_count].planned = planned;
	feed->again_count++;
}

/*
 * The next delivery: a redelivery or later copy that is due, else the
 * feed's next one (whose later copies it schedules).  Waits while only
 * deliveries not yet due remain; false when every delivery has been acked.
 */
bool
feed_next(Sim *sim, int64_t *index)
{
	Feed	   *feed = sim->feed;

	for (;;)
	{
		int64_t		now = sim_now_ms();
		long		i;
		bool		done;

		pthread_mutex_lock(&feed->lock);
		for (i = 0; i < feed->again_count; i++)
		{
			if (feed->again[i].due_ms <= now)
			{
				*index = feed->again[i].index;
				if (feed->again[i].planned)
					feed->handed++;
				feed->again[i] = feed->again[--feed->again_count];
				pthread_mutex_unlock(&feed->lock);
				atomic_fetch_add(&sim->counters.deliveries, 1);
				return true;
			}
		}
		if (feed->next_slot < feed->order_count)
		{
			int64_t		m = feed->order[feed->next_slot++];
			int			c;

			for (c = 0; c < feed->later_copies[m]; c++)
				feed_push_locked(feed, m,
								 now + (int64_t) (sim_random_unit(&feed->rng) * feed->window_ms),
								 true);
			feed->handed++;
			*index = m;
			pthread_mutex_unlock(&feed->lock);
			atomic_fetch_add(&sim->counters.deliveries, 1);
			return true;
		}
		done = feed->pending == 0;
		pthread_mutex_unlock(&feed->lock);
		if (done)
			return false;
		sim_sleep_ms(2);
	}
}

/* A delivery more, due in delay_ms; more_pending: not yet counted. */
static void
feed_push(Feed *feed, int64_t index, int delay_ms, int more_pending)
{
	pthread_mutex_lock(&feed->lock);
	feed_push_locked(feed, index, sim_now_ms() + delay_ms, false);
	feed->pending += more_pending;
	pthread_mutex_unlock(&feed->lock);
}

/* The consumer is done with a delivery: applied, duplicate or rejected. */
void
feed_ack(Sim *sim, int64_t index)
{
	Feed	   *feed = sim->feed;

	(void) index;
	pthread_mutex_lock(&feed->lock);
	feed->pending--;
	pthread_mutex_unlock(&feed->lock);
}

/* The delivery failed: the broker delivers it again after delay_ms. */
void
feed_requeue(Sim *sim, int64_t index, int delay_ms)
{
	Feed	   *feed = sim->feed;

	if (atomic_fetch_add(&feed->redelivered[index], 1) >= FEED_MAX_REDELIVERIES)
	{
		if (atomic_fetch_add(&sim->counters.unexpected, 1) < 10)
			fprintf(stderr, "\ndedup-sim: message %lld put back %d times: given up\n",
					(long long) sim->messages[index].id, FEED_MAX_REDELIVERIES);
		feed_ack(sim, index);
		return;
	}
	atomic_fetch_add(&sim->counters.redeliveries, 1);
	feed_push(feed, index, delay_ms, 0);
}

/* One more delivery of a message (a client retrying a request). */
void
feed_add(Sim *sim, int64_t index, int delay_ms)
{
	feed_push(sim->feed, index, delay_ms, 1);
}

/* The message's business transaction committed (as far as we know). */
void
feed_applied(Sim *sim, int64_t index)
{
	Feed	   *feed = sim->feed;
	long		zero = 0;

	atomic_compare_exchange_strong(&feed->applied_ms[index], &zero, (long) sim_now_ms());
}

/*
 * A copy of the message arrived: if its effect committed before, how long
 * ago is the gap the dedup window has to cover.
 */
void
feed_seen(Sim *sim, int64_t index)
{
	Feed	   *feed = sim->feed;
	long		applied = atomic_load(&feed->applied_ms[index]);
	long		gap;
	long		max;

	if (applied == 0)
		return;
	gap = (long) sim_now_ms() - applied;
	max = atomic_load(&sim->counters.max_gap_ms);
	while (gap > max &&
		   !atomic_compare_exchange_weak(&sim->counters.max_gap_ms, &max, gap))
		;
}
