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

#include <stddef.h>
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
 * trial's frames had time to arrive (the sender counts what the driver took, per stream).
 *
 * `last_stamp` is the send stamp (TSC) of frame next-1, the newest frame in order: when a frame
 * jumps ahead of `next`, the numbers between were lost (or are late), and they were all sent
 * between last_stamp and the new frame's stamp, which is how an outage is placed in time
 * (lg_track below). */
#define LG_WINDOW 1024u

struct lg_stream {
	uint64_t next;
	uint64_t unique;
	uint64_t reordered;
	uint64_t duplicate;
	uint64_t beyond_window;
	uint64_t last_stamp;
	uint64_t seen[LG_WINDOW / 64];
};

/* What lg_stream_rx made of a frame. */
enum lg_seq {
	LG_SEQ_NEXT,      /* the next number: in order */
	LG_SEQ_GAP,       /* ahead of the next number: in order, numbers skipped before it */
	LG_SEQ_REORDERED, /* below the next number, not seen before: late, counted once */
	LG_SEQ_DUPLICATE, /* seen before: not counted again */
	LG_SEQ_BEYOND,    /* too far below to check: counted as reordered and unique */
};

void lg_stream_reset(struct lg_stream *s);
enum lg_seq lg_stream_rx(struct lg_stream *s, uint64_t seq);

/* ---- gaps: where frames went missing, in time -----------------------------------------------
 * A gap is a run of frames that did not arrive (kind LG_GAP_LOST: numbers a stream skipped, found
 * by the receiver) or that the driver refused to take (kind LG_GAP_REFUSED: a sending port's
 * tx_burst returned fewer than it was handed, found by the sender; those frames are never
 * numbered, see worker.c send_frames). `before` and `after` are the send stamps (TSC) of the
 * frames that got through on either side: every frame of the gap was sent strictly between them.
 * `filled` counts frames of a LOST gap that arrived later after all (reordered): the gap's loss
 * is count - filled. A gap with LG_GAP_HEAD has no frame before it in its stream (before is 0);
 * one with LG_GAP_TAIL lasted to the end of sending (after is the last send stamp).
 *
 * The log is an array written by one lcore; entries are complete before `n` counts them
 * (release), so a reader that loads `n` (acquire) reads whole entries below it. */
#define LG_GAP_LOST 0u
#define LG_GAP_REFUSED 1u
#define LG_GAP_HEAD 0x100u
#define LG_GAP_TAIL 0x200u
#define LG_GAP_LOOKBACK 256u /* gaps searched for the one a late frame fills */

struct lg_gap {
	uint64_t before, after; /* TSC send stamps of the frames on either side */
	uint64_t first;         /* LOST: the first missing number of the stream */
	uint64_t count;         /* frames in the gap */
	uint64_t filled;        /* LOST: of them, arrived late (reordered) */
	uint32_t stream;        /* LOST: the stream; REFUSED: the sending port */
	uint32_t kind;          /* LG_GAP_LOST | LG_GAP_REFUSED, with LG_GAP_HEAD / LG_GAP_TAIL */
};

struct lg_gaplog {
	uint64_t n;       /* entries written (atomic, release) */
	uint64_t dropped; /* gaps that did not fit (atomic) */
	uint64_t cap;
	struct lg_gap *e;
};

void lg_gap_add(struct lg_gaplog *log, const struct lg_gap *g);
/* A late frame (LG_SEQ_REORDERED) of `stream` numbered `seq`: the recent gap holding it counts it filled. */
void lg_gap_fill(struct lg_gaplog *log, uint32_t stream, uint64_t seq);
/* One received frame of a stream through lg_stream_rx; a number skipped is logged as a LOST gap
 * between the stream's last stamp and this frame's. Returns what lg_stream_rx made of it. */
enum lg_seq lg_track(struct lg_stream *s, struct lg_gaplog *log, uint32_t stream, uint64_t seq, uint64_t stamp);
/* At the end of a trial: the frames a stream sent after the last one that arrived (sent - next),
 * logged as a LOST gap with LG_GAP_TAIL from its last stamp to `end` (the last send stamp). */
void lg_track_tail(const struct lg_stream *s, struct lg_gaplog *log, uint32_t stream, uint64_t sent, uint64_t end);

/* ---- time bins ------------------------------------------------------------------------------
 * A trial with bins counts every measured frame in the bin of its send stamp (bin i holds the
 * stamps [t_arm + i * width, t_arm + (i+1) * width)): the sender what it offered and what the driver
 * took, the receiver what arrived (unique numbers only) and its latency in a small histogram of
 * its own. A bin's loss is offered - received, exact once its frames had time to arrive; a series
 * of bins is the trial over time, and merging bins gives any window's counts and percentiles.
 *
 * The bin histogram is lg_hist's first LG_BIN_BUCKETS buckets as 32-bit counts (2.1 KB a bin):
 * the same 1/16 resolution up to 2^35 ns (34 s), above which values fall into the last bucket;
 * min, max, count and sum stay exact. */
#define LG_BIN_BUCKETS 528u

struct lg_bin {
	uint64_t count, sum, min, max; /* min is UINT64_MAX while empty */
	uint32_t bucket[LG_BIN_BUCKETS];
};

void lg_bin_reset(struct lg_bin *b, size_t n);
void lg_bin_add(struct lg_bin *b, uint64_t value);
/* The summary of n bins merged (p50..p999 as lg_hist_percentile: the middle of the bucket). */
void lg_bins_summarize(const struct lg_bin *b, size_t n, struct lg_hist_summary *s);

/* ---- the transmit schedule -------------------------------------------------------------------
 * Frame i of a trial is due at t0 + ceil(i * hz / rate) TSC cycles: the exact time rounded up,
 * so that no frame is ever sent before its time. */
uint64_t lg_due(uint64_t i, uint64_t hz, uint64_t rate);
/* How many frames are due at `elapsed` cycles after t0: 1 + the largest i with due(i) <= elapsed. */
uint64_t lg_due_count(uint64_t elapsed, uint64_t hz, uint64_t rate);

#endif
