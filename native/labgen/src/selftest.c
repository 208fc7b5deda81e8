/* SPDX-License-Identifier: MIT
 *
 * labgen-selftest: runs labgen's counting code (stats.c, the very code labgen links) on inputs
 * given on the command line or on stdin and prints one JSON object, so that tests can check
 * exact counts and percentiles against values computed independently:
 *
 *   labgen-selftest stream SENT SEQ...   loss, reorder and duplicate counts of one stream
 *   labgen-selftest hist VALUE...        histogram summary (count, min, p50, p90, p99, p999, max)
 *   labgen-selftest bucket VALUE...      bucket index, lowest value and width of each value
 *   labgen-selftest due HZ RATE I...     due(i) and due_count(due(i)) of the transmit schedule
 *   labgen-selftest gaps SENT SEQ...     the gaps lg_track logs for one stream whose frame n was stamped
 *                                        1000 + 10 n, and the tail after the last (ending at the stamp of
 *                                        frame SENT-1)
 *   labgen-selftest bins K VALUE...      the values dealt round-robin into K time bins, merged: the summary
 *                                        (as hist; the bins keep 32-bit buckets up to 2^35)
 *
 * A single "-" instead of the numbers reads them, whitespace-separated, from stdin.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

struct numbers {
	uint64_t *v;
	size_t n, cap;
};

static int
push(struct numbers *nums, const char *text)
{
	char *end;

	errno = 0;
	unsigned long long x = strtoull(text, &end, 10);
	if (errno || end == text || *end != '\0' || text[0] == '-') {
		fprintf(stderr, "labgen-selftest: not a number: %s\n", text);
		return -1;
	}
	if (nums->n == nums->cap) {
		size_t cap = nums->cap ? 2 * nums->cap : 1024;
		uint64_t *v = realloc(nums->v, cap * sizeof(*v));
		if (v == NULL)
			return -1;
		nums->v = v;
		nums->cap = cap;
	}
	nums->v[nums->n++] = x;
	return 0;
}

static int
read_numbers(int argc, char **argv, struct numbers *nums)
{
	if (argc == 1 && strcmp(argv[0], "-") == 0) {
		char word[32];
		while (scanf("%31s", word) == 1)
			if (push(nums, word) < 0)
				return -1;
		return 0;
	}
	for (int i = 0; i < argc; i++)
		if (push(nums, argv[i]) < 0)
			return -1;
	return 0;
}

static int
cmd_stream(const struct numbers *nums)
{
	if (nums->n < 1) {
		fprintf(stderr, "labgen-selftest: stream SENT SEQ...\n");
		return 2;
	}
	struct lg_stream *s = malloc(sizeof(*s));
	if (s == NULL)
		return 1;
	lg_stream_reset(s);
	uint64_t sent = nums->v[0];
	for (size_t i = 1; i < nums->n; i++)
		lg_stream_rx(s, nums->v[i]);
	uint64_t lost = sent > s->unique ? sent - s->unique : 0;
	printf("{\"received\": %zu, \"unique\": %" PRIu64 ", \"lost\": %" PRIu64 ", \"reordered\": %" PRIu64
	       ", \"duplicate\": %" PRIu64 ", \"beyond_window\": %" PRIu64 ", \"window\": %u}\n",
	       nums->n - 1, s->unique, lost, s->reordered, s->duplicate, s->beyond_window, LG_WINDOW);
	free(s);
	return 0;
}

static int
cmd_hist(const struct numbers *nums)
{
	struct lg_hist *h = malloc(sizeof(*h));
	struct lg_hist_summary sum;

	if (h == NULL)
		return 1;
	lg_hist_reset(h);
	for (size_t i = 0; i < nums->n; i++)
		lg_hist_add(h, nums->v[i]);
	lg_hist_summarize(h, &sum);
	printf("{\"count\": %" PRIu64 ", \"min\": %" PRIu64 ", \"mean\": %" PRIu64 ", \"p50\": %" PRIu64
	       ", \"p90\": %" PRIu64 ", \"p99\": %" PRIu64 ", \"p999\": %" PRIu64 ", \"max\": %" PRIu64 "}\n",
	       sum.count, sum.min, sum.mean, sum.p50, sum.p90, sum.p99, sum.p999, sum.max);
	free(h);
	return 0;
}

static int
cmd_bucket(const struct numbers *nums)
{
	printf("[");
	for (size_t i = 0; i < nums->n; i++) {
		unsigned int b = lg_hist_index(nums->v[i]);
		printf("%s{\"value\": %" PRIu64 ", \"index\": %u, \"low\": %" PRIu64 ", \"width\": %" PRIu64 "}",
		       i ? ", " : "", nums->v[i], b, lg_hist_low(b), lg_hist_width(b));
	}
	printf("]\n");
	return 0;
}

static int
cmd_due(const struct numbers *nums)
{
	if (nums->n < 2 || nums->v[0] == 0 || nums->v[1] == 0) {
		fprintf(stderr, "labgen-selftest: due HZ RATE I... (HZ, RATE > 0)\n");
		return 2;
	}
	uint64_t hz = nums->v[0], rate = nums->v[1];
	printf("[");
	for (size_t k = 2; k < nums->n; k++) {
		uint64_t due = lg_due(nums->v[k], hz, rate);
		printf("%s{\"i\": %" PRIu64 ", \"due\": %" PRIu64 ", \"count_at_due\": %" PRIu64
		       ", \"count_before\": %" PRIu64 "}", k > 2 ? ", " : "", nums->v[k], due,
		       lg_due_count(due, hz, rate), due ? lg_due_count(due - 1, hz, rate) : 0);
	}
	printf("]\n");
	return 0;
}

static uint64_t
stamp_of(uint64_t seq)
{
	return 1000 + 10 * seq;
}

static int
cmd_gaps(const struct numbers *nums)
{
	if (nums->n < 1) {
		fprintf(stderr, "labgen-selftest: gaps SENT SEQ...\n");
		return 2;
	}
	struct lg_stream *s = malloc(sizeof(*s));
	struct lg_gaplog log = {.n = 0, .dropped = 0, .cap = 4096, .e = calloc(4096, sizeof(struct lg_gap))};
	if (s == NULL || log.e == NULL) {
		free(s);
		free(log.e);
		return 1;
	}
	lg_stream_reset(s);
	uint64_t sent = nums->v[0];
	for (size_t i = 1; i < nums->n; i++)
		lg_track(s, &log, 7, nums->v[i], stamp_of(nums->v[i]));
	lg_track_tail(s, &log, 7, sent, sent ? stamp_of(sent - 1) : 0);
	printf("{\"unique\": %" PRIu64 ", \"reordered\": %" PRIu64 ", \"duplicate\": %" PRIu64 ", \"gaps\": [",
	       s->unique, s->reordered, s->duplicate);
	for (uint64_t i = 0; i < log.n; i++) {
		const struct lg_gap *g = &log.e[i];
		printf("%s{\"first\": %" PRIu64 ", \"count\": %" PRIu64 ", \"filled\": %" PRIu64 ", \"before\": %" PRIu64
		       ", \"after\": %" PRIu64 ", \"stream\": %u, \"head\": %s, \"tail\": %s}", i ? ", " : "", g->first,
		       g->count, g->filled, g->before, g->after, g->stream, g->kind & LG_GAP_HEAD ? "true" : "false",
		       g->kind & LG_GAP_TAIL ? "true" : "false");
	}
	printf("]}\n");
	free(s);
	free(log.e);
	return 0;
}

static int
cmd_bins(const struct numbers *nums)
{
	if (nums->n < 1 || nums->v[0] == 0 || nums->v[0] > 1024) {
		fprintf(stderr, "labgen-selftest: bins K VALUE... (K in 1..1024)\n");
		return 2;
	}
	size_t k = (size_t)nums->v[0];
	struct lg_bin *b = malloc(k * sizeof(*b));
	struct lg_hist_summary sum;
	if (b == NULL)
		return 1;
	lg_bin_reset(b, k);
	for (size_t i = 1; i < nums->n; i++)
		lg_bin_add(&b[(i - 1) % k], nums->v[i]);
	lg_bins_summarize(b, k, &sum);
	printf("{\"count\": %" PRIu64 ", \"min\": %" PRIu64 ", \"mean\": %" PRIu64 ", \"p50\": %" PRIu64
	       ", \"p90\": %" PRIu64 ", \"p99\": %" PRIu64 ", \"p999\": %" PRIu64 ", \"max\": %" PRIu64 "}\n",
	       sum.count, sum.min, sum.mean, sum.p50, sum.p90, sum.p99, sum.p999, sum.max);
	free(b);
	return 0;
}

int
main(int argc, char **argv)
{
	struct numbers nums = {0};
	int rc;

	if (argc < 2) {
		fprintf(stderr, "usage: labgen-selftest stream|hist|bucket|due|gaps|bins NUMBER... (or -)\n");
		return 2;
	}
	if (read_numbers(argc - 2, argv + 2, &nums) < 0)
		return 2;
	if (strcmp(argv[1], "stream") == 0)
		rc = cmd_stream(&nums);
	else if (strcmp(argv[1], "hist") == 0)
		rc = cmd_hist(&nums);
	else if (strcmp(argv[1], "bucket") == 0)
		rc = cmd_bucket(&nums);
	else if (strcmp(argv[1], "due") == 0)
		rc = cmd_due(&nums);
	else if (strcmp(argv[1], "gaps") == 0)
		rc = cmd_gaps(&nums);
	else if (strcmp(argv[1], "bins") == 0)
		rc = cmd_bins(&nums);
	else {
		fprintf(stderr, "labgen-selftest: unknown command %s\n", argv[1]);
		rc = 2;
	}
	free(nums.v);
	return rc;
}
