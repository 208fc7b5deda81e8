/* SPDX-License-Identifier: MIT
 *
 * labgen's counting that needs no DPDK: the latency/lateness histogram, the per-stream loss,
 * reorder and duplicate tracker and the exact transmit schedule. Built into labgen and into
 * labgen-selftest, which feeds it known inputs (tests/unit/dpdk/test_labgen_selftest.py).
 *
 * Concurrency: every structure here has ONE writer (the lcore that owns it) and may be read at
 * any time by the telemetry threads. Writers store with relaxed atomics and readers load with
 * relaxed atomics, so a reader sees each 64-bit counter whole (never torn) though not
 * necessarily consistent with the others while a trial runs; once the trial is done (published
 * with release/acquire on its state) nothing changes any more.
 */
#ifndef LABGEN_STATS_H
#define LABGEN_STATS_H

#include <stdint.h>

#define LG_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define LG_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define LG_ADD(x, n) LG_STORE((x), (x) + (n)) /* single writer: a plain add, stored whole */

/* ---- log-bucket histogram ----------------------------------------------------------------
 * Values (nanoseconds) 0..15 have a bucket each; above, every power of two [2^e, 2^(e+1)) is
 * cut into 16 linear sub-buckets of width 2^(e-4): the relative resolution is 1/16 (6.25%)
 * everywhere, in 976 buckets for the whole 64-bit range (the scheme of HdrHistogram with 4
 * significant bits). Min, max, count and sum are exact. */
#define LG_HIST_SUB_BITS 4
#define LG_HIST_SUB (1u << LG_HIST_SUB_BITS)
#define LG_HIST_BUCKETS ((64 - LG_HIST_SUB_BITS + 1) * LG_HIST_SUB)

struct lg_hist {
	uint64_t count;
	uint64_t sum;
	uint64_t min;
	uint64_t max;
	uint64_t bucket[LG_HIST_BUCKETS];
};

void lg_hist_reset(struct lg_hist *h);
void lg_hist_add(struct lg_hist *h, uint64_t value);
unsigned int lg_hist_index(uint64_t value);
uint64_t lg_hist_low(unsigned int index);   /* smallest value of a bucket */
uint64_t lg_hist_width(unsigned int index); /* how many values a bucket holds */

/* A reader's consistent copy of the summary of a histogram. */
struct lg_hist_summary {
	uint64_t count, min, max, mean;
	uint64_t p50, p90, p99, p999;
};

/* Percentile q in [0, 1] by nearest rank (the smallest value with at least ceil(q * count)
 * values at or below it), reported as the middle of its bucket, clamped to [min, max]: the
 * true value lies in the same bucket, so the error is under one bucket width. */
uint64_t lg_hist_percentile(const struct lg_hist *h, double q);
void lg_hist_summarize(const struct lg_hist *h, struct lg_hist_summary *s);

/* ---- per-stream sequence tracking -----------------------------------------------------------
 * Each stream (one flow of one sending port) numbers its frames 0, 1, 2, ... A receiver keeps
 * `next` (one past the highest number seen) and a bitmap of the last LG_WINDOW numbers below
 * it. A frame numbered below `next` arrived after a later one: it is "reordered" (RFC 4737
 * section 3: a packet whose sequence number is below the next expected one), unless its bit
 * is already set: then it is a duplicate, not counted as received again. A frame more than
 * LG_WINDOW below `next` cannot be checked for duplication; it counts as reordered and unique
 * ("beyond_window" says how many). Lost frames are sent - unique, known exactly once the
 * trial's frames had time to arrive (the sender counts what the driver took, per stream). */
#define LG_WINDOW 1024u

struct lg_stream {
	uint64_t next;
	uint64_t unique;
	uint64_t reordered;
	uint64_t duplicate;
	uint64_t beyond_window;
	uint64_t seen[LG_WINDOW / 64];
};

void lg_stream_reset(struct lg_stream *s);
void lg_stream_rx(struct lg_stream *s, uint64_t seq);

/* ---- the transmit schedule -------------------------------------------------------------------
 * Frame i of a trial is due at t0 + ceil(i * hz / rate) TSC cycles: the exact time rounded up,
 * so that no frame is ever sent before its time. */
uint64_t lg_due(uint64_t i, uint64_t hz, uint64_t rate);
/* How many frames are due at `elapsed` cycles after t0: 1 + the largest i with due(i) <= elapsed. */
uint64_t lg_due_count(uint64_t elapsed, uint64_t hz, uint64_t rate);

#endif
