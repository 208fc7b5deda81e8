/* SPDX-License-Identifier: MIT
 * See stats.h for what is counted and why. */
#include "stats.h"

#include <math.h>
#include <string.h>

void
lg_hist_reset(struct lg_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned int
lg_hist_index(uint64_t value)
{
	if (value < LG_HIST_SUB)
		return (unsigned int)value;
	unsigned int e = 63u - (unsigned int)__builtin_clzll(value); /* 2^e <= value, e >= 4 */
	unsigned int sub = (unsigned int)(value >> (e - LG_HIST_SUB_BITS)) & (LG_HIST_SUB - 1);
	return (e - LG_HIST_SUB_BITS + 1) * LG_HIST_SUB + sub;
}

uint64_t
lg_hist_low(unsigned int index)
{
	if (index < LG_HIST_SUB)
		return index;
	unsigned int e = index / LG_HIST_SUB + LG_HIST_SUB_BITS - 1;
	uint64_t sub = index % LG_HIST_SUB;
	return (LG_HIST_SUB + sub) << (e - LG_HIST_SUB_BITS);
}

uint64_t
lg_hist_width(unsigned int index)
{
	if (index < 2 * LG_HIST_SUB)
		return 1;
	return UINT64_C(1) << (index / LG_HIST_SUB - 1);
}

void
lg_hist_add(struct lg_hist *h, uint64_t value)
{
	unsigned int i = lg_hist_index(value);

	LG_ADD(h->bucket[i], 1);
	LG_ADD(h->count, 1);
	LG_ADD(h->sum, value);
	if (value < h->min)
		LG_STORE(h->min, value);
	if (value > h->max)
		LG_STORE(h->max, value);
}

uint64_t
lg_hist_percentile(const struct lg_hist *h, double q)
{
	uint64_t count = LG_LOAD(h->count);
	uint64_t min = LG_LOAD(h->min), max = LG_LOAD(h->max);

	if (count == 0)
		return 0;
	if (q <= 0.0)
		return min;
	if (q >= 1.0)
		return max;
	uint64_t rank = (uint64_t)ceil(q * (double)count);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned int i = 0; i < LG_HIST_BUCKETS; i++) {
		seen += LG_LOAD(h->bucket[i]);
		if (seen >= rank) {
			uint64_t mid = lg_hist_low(i) + (lg_hist_width(i) - 1) / 2;
			return mid < min ? min : (mid > max ? max : mid);
		}
	}
	return max; /* the buckets lag the count while a trial runs */
}

void
lg_hist_summarize(const struct lg_hist *h, struct lg_hist_summary *s)
{
	s->count = LG_LOAD(h->count);
	s->min = s->count ? LG_LOAD(h->min) : 0;
	s->max = LG_LOAD(h->max);
	s->mean = s->count ? LG_LOAD(h->sum) / s->count : 0;
	s->p50 = lg_hist_percentile(h, 0.50);
	s->p90 = lg_hist_percentile(h, 0.90);
	s->p99 = lg_hist_percentile(h, 0.99);
	s->p999 = lg_hist_percentile(h, 0.999);
}

void
lg_stream_reset(struct lg_stream *s)
{
	memset(s, 0, sizeof(*s));
}

static inline int
seen_test_set(struct lg_stream *s, uint64_t seq)
{
	uint64_t bit = UINT64_C(1) << (seq % 64);
	uint64_t *word = &s->seen[(seq % LG_WINDOW) / 64];
	int was = (*word & bit) != 0;

	*word |= bit; /* the bitmap is the receiver's alone: readers never look at it */
	return was;
}

enum lg_seq
lg_stream_rx(struct lg_stream *s, uint64_t seq)
{
	if (seq >= s->next) {
		enum lg_seq what = seq == s->next ? LG_SEQ_NEXT : LG_SEQ_GAP;
		/* numbers next..seq-1 did not arrive (yet): clear their bits, which still held the
		 * numbers one window below them */
		if (seq - s->next >= LG_WINDOW) {
			memset(s->seen, 0, sizeof(s->seen));
		} else {
			for (uint64_t n = s->next; n < seq; n++)
				s->seen[(n % LG_WINDOW) / 64] &= ~(UINT64_C(1) << (n % 64));
		}
		seen_test_set(s, seq);
		LG_STORE(s->next, seq + 1);
		LG_ADD(s->unique, 1);
		return what;
	}
	if (s->next - seq > LG_WINDOW) {
		LG_ADD(s->beyond_window, 1);
		LG_ADD(s->reordered, 1);
		LG_ADD(s->unique, 1);
		return LG_SEQ_BEYOND;
	}
	if (seen_test_set(s, seq)) {
		LG_ADD(s->duplicate, 1);
		return LG_SEQ_DUPLICATE;
	}
	LG_ADD(s->reordered, 1);
	LG_ADD(s->unique, 1);
	return LG_SEQ_REORDERED;
}

/* ---- gaps ------------------------------------------------------------------------------------- */

void
lg_gap_add(struct lg_gaplog *log, const struct lg_gap *g)
{
	uint64_t n = log->n;

	if (log->e == NULL || n >= log->cap) {
		LG_ADD(log->dropped, 1);
		return;
	}
	struct lg_gap *e = &log->e[n];
	LG_STORE(e->before, g->before);
	LG_STORE(e->after, g->after);
	LG_STORE(e->first, g->first);
	LG_STORE(e->count, g->count);
	LG_STORE(e->filled, g->filled);
	LG_STORE(e->stream, g->stream);
	LG_STORE(e->kind, g->kind);
	__atomic_store_n(&log->n, n + 1, __ATOMIC_RELEASE);
}

void
lg_gap_fill(struct lg_gaplog *log, uint32_t stream, uint64_t seq)
{
	uint64_t n = log->n, stop = n > LG_GAP_LOOKBACK ? n - LG_GAP_LOOKBACK : 0;

	for (uint64_t i = n; i-- > stop;) {
		struct lg_gap *e = &log->e[i];
		if ((e->kind & 0xffu) == LG_GAP_LOST && e->stream == stream && seq >= e->first &&
		    seq - e->first < e->count) {
			if (e->filled < e->count)
				LG_ADD(e->filled, 1);
			return;
		}
	}
}

enum lg_seq
lg_track(struct lg_stream *s, struct lg_gaplog *log, uint32_t stream, uint64_t seq, uint64_t stamp)
{
	uint64_t next = s->next, last = s->last_stamp;
	enum lg_seq what = lg_stream_rx(s, seq);

	switch (what) {
	case LG_SEQ_GAP: {
		struct lg_gap g = {.before = next ? last : 0, .after = stamp, .first = next, .count = seq - next,
				   .filled = 0, .stream = stream, .kind = LG_GAP_LOST | (next ? 0u : LG_GAP_HEAD)};
		lg_gap_add(log, &g);
	}
		/* fall through */
	case LG_SEQ_NEXT:
		s->last_stamp = stamp;
		break;
	case LG_SEQ_REORDERED:
	case LG_SEQ_BEYOND:
		lg_gap_fill(log, stream, seq);
		break;
	case LG_SEQ_DUPLICATE:
		break;
	}
	return what;
}

void
lg_track_tail(const struct lg_stream *s, struct lg_gaplog *log, uint32_t stream, uint64_t sent, uint64_t end)
{
	if (sent <= s->next)
		return;
	struct lg_gap g = {.before = s->next ? s->last_stamp : 0, .after = end, .first = s->next,
			   .count = sent - s->next, .filled = 0, .stream = stream,
			   .kind = LG_GAP_LOST | LG_GAP_TAIL | (s->next ? 0u : LG_GAP_HEAD)};
	lg_gap_add(log, &g);
}

/* ---- bins ------------------------------------------------------------------------------------- */

void
lg_bin_reset(struct lg_bin *b, size_t n)
{
	memset(b, 0, n * sizeof(*b));
	for (size_t i = 0; i < n; i++)
		b[i].min = UINT64_MAX;
}

void
lg_bin_add(struct lg_bin *b, uint64_t value)
{
	unsigned int i = lg_hist_index(value);

	if (i >= LG_BIN_BUCKETS)
		i = LG_BIN_BUCKETS - 1;
	LG_ADD(b->bucket[i], 1);
	LG_ADD(b->count, 1);
	LG_ADD(b->sum, value);
	if (value < b->min)
		LG_STORE(b->min, value);
	if (value > b->max)
		LG_STORE(b->max, value);
}

static uint64_t
bins_percentile(const struct lg_bin *b, size_t n, uint64_t count, uint64_t min, uint64_t max, double q)
{
	if (count == 0)
		return 0;
	uint64_t rank = (uint64_t)ceil(q * (double)count);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned int i = 0; i < LG_BIN_BUCKETS; i++) {
		for (size_t k = 0; k < n; k++)
			seen += LG_LOAD(b[k].bucket[i]);
		if (seen >= rank) {
			uint64_t mid = lg_hist_low(i) + (lg_hist_width(i) - 1) / 2;
			return mid < min ? min : (mid > max ? max : mid);
		}
	}
	return max; /* the buckets lag the count while a trial runs */
}

void
lg_bins_summarize(const struct lg_bin *b, size_t n, struct lg_hist_summary *s)
{
	uint64_t count = 0, sum = 0, min = UINT64_MAX, max = 0;

	for (size_t k = 0; k < n; k++) {
		uint64_t c = LG_LOAD(b[k].count);
		if (c == 0)
			continue;
		count += c;
		sum += LG_LOAD(b[k].sum);
		if (LG_LOAD(b[k].min) < min)
			min = LG_LOAD(b[k].min);
		if (LG_LOAD(b[k].max) > max)
			max = LG_LOAD(b[k].max);
	}
	s->count = count;
	s->min = count ? min : 0;
	s->max = max;
	s->mean = count ? sum / count : 0;
	s->p50 = bins_percentile(b, n, count, s->min, max, 0.50);
	s->p90 = bins_percentile(b, n, count, s->min, max, 0.90);
	s->p99 = bins_percentile(b, n, count, s->min, max, 0.99);
	s->p999 = bins_percentile(b, n, count, s->min, max, 0.999);
}

uint64_t
lg_due(uint64_t i, uint64_t hz, uint64_t rate)
{
	unsigned __int128 t = (unsigned __int128)i * hz;

	return (uint64_t)((t + rate - 1) / rate);
}

uint64_t
lg_due_count(uint64_t elapsed, uint64_t hz, uint64_t rate)
{
	/* due(i) <= elapsed  <=>  ceil(i*hz/rate) <= elapsed  <=>  i*hz <= elapsed*rate */
	return (uint64_t)((unsigned __int128)elapsed * rate / hz) + 1;
}
