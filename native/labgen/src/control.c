/* SPDX-License-Identifier: MIT
 *
 * labgen's telemetry commands (DPDK telemetry v2 socket, /var/run/dpdk/<prefix>/dpdk_telemetry.v2,
 * one JSON reply per command). Parameters follow the first comma as key=value pairs:
 *
 *   /labgen/info                    state (starting|ready), version, ports, queues, workers, hz, trial
 *   /labgen/ports                   per port: name, started, link, peer
 *   /labgen/port_start,N            configure and start port N (with --wait-ports)
 *   /labgen/start,rate=R,...        begin a trial (keys below); replies once the worker took it
 *   /labgen/stats                   the current or last trial: state, counters, latency, validity
 *   /labgen/streams,PORT[,FIRST]    per flow of sending port PORT (128 flows from FIRST): sent, received,
 *                                   lost, reordered, duplicate
 *   /labgen/stop                    end the current trial's sending now (it drains, then is done)
 *   /labgen/quit                    stop the process (as SIGTERM does)
 *   /labgen/clock                   {tsc, mono_ns, hz}: the TSC and CLOCK_MONOTONIC read together now
 *   /labgen/gaps,LOG[,FIRST]        the current or last trial's gaps logged as lost or refused (stats.h), 80
 *                                   from FIRST: before, after (TSC send stamps), count, filled, stream, kind
 *   /labgen/series[,FIRST]          its time bins (start key bin=), 100 from FIRST: offered, sent, received,
 *                                   p50, p99, max (latency ns of the frames sent in the bin)
 *   /labgen/window,FIRST,END        bins FIRST..END-1 merged: offered, sent, received, latency_ns summary
 *
 * start keys: rate (frames/s per sending port, 0 = as fast as possible), duration (s) or count
 * (frames per port), warmup (s), drain (s), size (64..1518), burst (1..512), flows (1..1024),
 * tolerance (frames late before the trial is invalid), shift (s: a pause of the paced sender longer
 * than this shifts its schedule instead of being caught up in a burst; 0, the default, catches up:
 * worker.c shift_schedule), ports (bit mask of sending ports), bin (s: the width of the trial's time
 * bins, 0.001..60; 0 or absent: none; at most LG_MAX_BINS of them cover warm-up and duration).
 * A command that fails replies {"error": "..."}.
 *
 * DPDK 22.11 limits (lib/telemetry/rte_telemetry.h, telemetry.c): 256 entries per dict, 512 per
 * array, 16 KiB per reply, 128-byte strings; dicts may hold dicts and arrays of numbers or strings
 * (rte_tel_data_add_dict_container); 22.11 has the _u64 adders (not _uint). Commands run on the
 * telemetry threads, one per client connection, so those on ports and trials serialise on lg.ctl.
 */
#include "labgen.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_telemetry.h>

#define ACQ(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)

static int
reply_error(struct rte_tel_data *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
reply_error(struct rte_tel_data *d, const char *fmt, ...)
{
	char msg[RTE_TEL_MAX_STRING_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "error", msg);
	return 0;
}

static int
not_ready(struct rte_tel_data *d)
{
	return reply_error(d, "labgen is %s", ACQ(lg.quit) ? "stopping" : "starting");
}

/* ---- /labgen/info, /labgen/ports, /labgen/port_start ----------------------------------------- */

static int
cmd_info(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	if (!ACQ(lg.ready)) {
		rte_tel_data_add_dict_string(d, "state", ACQ(lg.quit) ? "stopping" : "starting");
		return 0;
	}
	rte_tel_data_add_dict_string(d, "state", "ready");
	rte_tel_data_add_dict_string(d, "version", LG_VERSION);
	rte_tel_data_add_dict_u64(d, "pid", (uint64_t)getpid());
	rte_tel_data_add_dict_u64(d, "ports", lg.nb_ports);
	rte_tel_data_add_dict_u64(d, "queues", lg.nb_queues);
	rte_tel_data_add_dict_u64(d, "workers", lg.workers);
	rte_tel_data_add_dict_u64(d, "hz", lg.hz);
	rte_tel_data_add_dict_u64(d, "trial", ACQ(lg.cur_gen));
	rte_tel_data_add_dict_string(d, "trial_state", lg_state_name(ACQ(lg.state)));
	rte_tel_data_add_dict_u64(d, "rx_idle", LG_LOAD(lg.rx_idle));
	return 0;
}

static int
ports_body(const char *params, struct rte_tel_data *d)
{
	(void)params;
	rte_tel_data_start_dict(d);
	for (uint16_t port = 0; port < lg.nb_ports; port++) {
		struct rte_tel_data *p = rte_tel_data_alloc();
		struct rte_eth_link link = {0};
		char key[8];
		int started = (int)ACQ(lg.port[port].started);

		if (p == NULL)
			break;
		if (started)
			rte_eth_link_get_nowait(port, &link);
		rte_tel_data_start_dict(p);
		rte_tel_data_add_dict_string(p, "name", lg.port[port].name);
		rte_tel_data_add_dict_u64(p, "started", (uint64_t)started);
		rte_tel_data_add_dict_u64(p, "link", link.link_status == RTE_ETH_LINK_UP);
		rte_tel_data_add_dict_u64(p, "peer", lg.port[port].peer);
		snprintf(key, sizeof(key), "%u", port);
		rte_tel_data_add_dict_container(d, key, p, 0);
	}
	return 0;
}

static int
port_start_body(const char *params, struct rte_tel_data *d)
{
	char err[RTE_TEL_MAX_STRING_LEN], *end;

	if (params == NULL || *params == '\0')
		return reply_error(d, "usage: /labgen/port_start,PORT");
	errno = 0;
	unsigned long port = strtoul(params, &end, 10);
	if (errno || end == params || *end || port >= lg.nb_ports)
		return reply_error(d, "no port %s (ports: %u)", params, lg.nb_ports);
	if (lg_port_start((uint16_t)port, err, sizeof(err)) < 0)
		return reply_error(d, "%s", err);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "port", port);
	rte_tel_data_add_dict_u64(d, "started", 1);
	return 0;
}

/* ---- /labgen/start ---------------------------------------------------------------------------- */

static struct lg_bins *
bins_alloc(uint64_t n, uint64_t bin_ns)
{
	struct lg_bins *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return NULL;
	b->n = n;
	b->width = (uint64_t)((double)bin_ns / lg.ns_per_cycle);
	b->offered = calloc(n, sizeof(*b->offered));
	b->sent = calloc(n, sizeof(*b->sent));
	b->rx = malloc(n * sizeof(*b->rx));
	if (b->offered == NULL || b->sent == NULL || b->rx == NULL || b->width == 0) {
		lg_bins_free(b);
		return NULL;
	}
	lg_bin_reset(b->rx, n);
	return b;
}

static int
parse_seconds(const char *v, uint64_t *ns)
{
	char *end;
	errno = 0;
	double s = strtod(v, &end);
	if (errno || end == v || *end || !(s >= 0) || s > 86400)
		return -1;
	*ns = (uint64_t)llround(s * 1e9);
	return 0;
}

static int
parse_uint(const char *v, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 0);
	if (errno || end == v || *end || v[0] == '-' || x > max)
		return -1;
	*out = x;
	return 0;
}

/* key=value,key=value into p; on error writes the message into err */
static int
parse_start(const char *params, struct lg_params *p, char *err, size_t errlen)
{
	char buf[1024], *save = NULL;
	uint64_t v;

	*p = (struct lg_params){.rate = 0, .count = 0, .duration_ns = 1000000000, .warmup_ns = 0,
				.drain_ns = 100000000, .tolerance = LG_DEFAULT_TOLERANCE, .size = 64,
				.burst = 32, .flows = 1, .port_mask = (1u << lg.nb_ports) - 1};
	if (params == NULL)
		return 0;
	snprintf(buf, sizeof(buf), "%s", params);
	for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *val = strchr(kv, '=');
		int bad = 0;
		if (val == NULL) {
			snprintf(err, errlen, "%s: expected key=value", kv);
			return -1;
		}
		*val++ = '\0';
		if (strcmp(kv, "rate") == 0)
			bad = parse_uint(val, LG_MAX_RATE, &p->rate);
		else if (strcmp(kv, "count") == 0)
			bad = parse_uint(val, UINT64_C(1) << 48, &p->count);
		else if (strcmp(kv, "duration") == 0)
			bad = parse_seconds(val, &p->duration_ns);
		else if (strcmp(kv, "warmup") == 0)
			bad = parse_seconds(val, &p->warmup_ns);
		else if (strcmp(kv, "drain") == 0)
			bad = parse_seconds(val, &p->drain_ns);
		else if (strcmp(kv, "tolerance") == 0)
			bad = parse_uint(val, UINT64_C(1) << 32, &p->tolerance);
		else if (strcmp(kv, "shift") == 0)
			bad = parse_seconds(val, &p->shift_ns);
		else if (strcmp(kv, "bin") == 0)
			bad = parse_seconds(val, &p->bin_ns) ||
			      (p->bin_ns && (p->bin_ns < LG_MIN_BIN_NS || p->bin_ns > LG_MAX_BIN_NS));
		else if (strcmp(kv, "size") == 0)
			bad = parse_uint(val, LG_MAX_SIZE, &v) || v < LG_MIN_SIZE || (p->size = (uint32_t)v, 0);
		else if (strcmp(kv, "burst") == 0)
			bad = parse_uint(val, LG_MAX_BURST, &v) || v < 1 || (p->burst = (uint32_t)v, 0);
		else if (strcmp(kv, "flows") == 0)
			bad = parse_uint(val, LG_MAX_FLOWS, &v) || v < 1 || (p->flows = (uint32_t)v, 0);
		else if (strcmp(kv, "ports") == 0)
			bad = parse_uint(val, (1u << lg.nb_ports) - 1, &v) || v == 0 || (p->port_mask = (uint32_t)v, 0);
		else {
			snprintf(err, errlen, "unknown key %s (rate, duration, count, warmup, drain, size, "
				 "burst, flows, tolerance, shift, ports, bin)", kv);
			return -1;
		}
		if (bad) {
			snprintf(err, errlen, "%s=%s is out of range", kv, val);
			return -1;
		}
	}
	return 0;
}

static int
start_body(const char *params, struct rte_tel_data *d)
{
	char err[RTE_TEL_MAX_STRING_LEN];
	struct lg_params p;

	if (parse_start(params, &p, err, sizeof(err)) < 0)
		return reply_error(d, "%s", err);
	uint32_t sending = 0;
	for (uint16_t port = 0; port < lg.nb_ports; port++)
		sending |= (p.port_mask >> port & 1) && ACQ(lg.port[port].started);
	if (!sending)
		return reply_error(d, "no started port to send from (ports mask 0x%x)", p.port_mask);
	if (p.rate && lg_measured_frames(&p) == 0)
		return reply_error(d, "rate %" PRIu64 " for %.9f s is no frame", p.rate, (double)p.duration_ns / 1e9);
	if (p.rate && (lg_measured_frames(&p) + p.rate * (p.warmup_ns / 1000000000u + 1)) / p.rate > 86400)
		return reply_error(d, "a schedule longer than a day (%" PRIu64 " frames at %" PRIu64 "/s)",
				   lg_measured_frames(&p), p.rate);
	if (p.rate == 0 && p.count == 0 && p.duration_ns == 0)
		return reply_error(d, "an unpaced trial needs a duration or a count");

	uint32_t state = ACQ(lg.state), gen = ACQ(lg.cur_gen);
	if ((state != LG_IDLE && state != LG_DONE) || ACQ(lg.req_gen) != gen)
		return reply_error(d, "trial %u is %s: /labgen/stop it or wait", gen, lg_state_name(state));
	/* the last trial is done (its receiver froze) or there was none: neither lcore touches its bins */
	lg_bins_free(lg.bins);
	lg.bins = NULL;
	if (p.bin_ns) {
		uint64_t span = p.warmup_ns + p.duration_ns;
		span += span / 20 + 2000000000u; /* room for shifted pauses and a late end */
		uint64_t n = span / p.bin_ns + 1;
		if (n > LG_MAX_BINS)
			return reply_error(d, "bin=%.3f s over %.1f s is %" PRIu64 " bins (at most %d): use wider bins",
					   (double)p.bin_ns / 1e9, (double)span / 1e9, n, LG_MAX_BINS);
		lg.bins = bins_alloc(n, p.bin_ns);
		if (lg.bins == NULL)
			return reply_error(d, "cannot allocate %" PRIu64 " time bins", n);
	}
	p.bins = lg.bins;
	lg.req = p;
	uint32_t next = (gen + 1) & 0x7fff ? gen + 1 : gen + 2; /* the 15-bit tag of trial 0 means "none" */
	__atomic_store_n(&lg.req_gen, next, __ATOMIC_RELEASE);
	for (int i = 0; i < 20000 && ACQ(lg.cur_gen) != next; i++)
		usleep(100);
	if (ACQ(lg.cur_gen) != next)
		return reply_error(d, "the worker lcore did not take trial %u within 2 s", next);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "trial", next);
	rte_tel_data_add_dict_string(d, "state", lg_state_name(ACQ(lg.state)));
	rte_tel_data_add_dict_u64(d, "frames", lg_measured_frames(&p));
	rte_tel_data_add_dict_u64(d, "late_limit_ns", (uint64_t)((double)lg_late_limit(&p, lg.hz, lg_measured_frames(&p)) * lg.ns_per_cycle));
	return 0;
}

/* ---- /labgen/stop, /labgen/quit --------------------------------------------------------------- */

static int
stop_body(const char *params, struct rte_tel_data *d)
{
	(void)params;
	uint32_t gen = ACQ(lg.cur_gen);
	__atomic_store_n(&lg.stop_gen, gen, __ATOMIC_RELEASE);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "trial", gen);
	rte_tel_data_add_dict_string(d, "state", lg_state_name(ACQ(lg.state)));
	return 0;
}

static int
cmd_quit(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	__atomic_store_n(&lg.quit, 1, __ATOMIC_RELEASE);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "quit", 1);
	return 0;
}

/* ---- /labgen/stats ---------------------------------------------------------------------------- */

static void
add_summary_of(struct rte_tel_data *d, const char *name, const struct lg_hist_summary *sum, uint64_t extra_limit,
	       uint64_t extra_end, int with_extra)
{
	struct rte_tel_data *c = rte_tel_data_alloc();
	const struct lg_hist_summary s = *sum;

	if (c == NULL)
		return;
	rte_tel_data_start_dict(c);
	rte_tel_data_add_dict_u64(c, "count", s.count);
	rte_tel_data_add_dict_u64(c, "min", s.min);
	rte_tel_data_add_dict_u64(c, "mean", s.mean);
	rte_tel_data_add_dict_u64(c, "p50", s.p50);
	rte_tel_data_add_dict_u64(c, "p90", s.p90);
	rte_tel_data_add_dict_u64(c, "p99", s.p99);
	rte_tel_data_add_dict_u64(c, "p999", s.p999);
	rte_tel_data_add_dict_u64(c, "max", s.max);
	if (with_extra) {
		rte_tel_data_add_dict_u64(c, "limit", extra_limit);
		rte_tel_data_add_dict_u64(c, "end", extra_end);
	}
	rte_tel_data_add_dict_container(d, name, c, 0);
}

static void
add_summary(struct rte_tel_data *d, const char *name, const struct lg_hist *h, uint64_t extra_limit,
	    uint64_t extra_end, int with_extra)
{
	struct lg_hist_summary s;

	lg_hist_summarize(h, &s);
	add_summary_of(d, name, &s, extra_limit, extra_end, with_extra);
}

static void
add_array(struct rte_tel_data *d, const char *name, const uint64_t *v, unsigned int n)
{
	struct rte_tel_data *a = rte_tel_data_alloc();

	if (a == NULL)
		return;
	rte_tel_data_start_array(a, RTE_TEL_U64_VAL);
	for (unsigned int i = 0; i < n; i++)
		rte_tel_data_add_array_u64(a, LG_LOAD(v[i]));
	rte_tel_data_add_dict_container(d, name, a, 0);
}

struct totals {
	uint64_t offered, sent, dropped, unsent, warmup_tx;
	uint64_t received, unique, lost, reordered, duplicate, beyond, warmup_rx, stray, late;
};

struct stream_counts {
	uint64_t sent, unique, lost, reordered, duplicate, beyond;
};

/* one stream (flow f of a sending port): sent counts only what the driver took, so sent - unique is
 * what the device under test lost after taking it */
static struct stream_counts
stream_counts(const struct lg_trial_tx *t, const struct lg_trial_rx *r, uint16_t port, uint32_t f)
{
	const struct lg_stream *st = &r->stream[port * t->p.flows + f];
	struct stream_counts c = {.sent = LG_LOAD(t->tx_seq[port * t->p.flows + f]), .unique = LG_LOAD(st->unique),
				  .reordered = LG_LOAD(st->reordered), .duplicate = LG_LOAD(st->duplicate),
				  .beyond = LG_LOAD(st->beyond_window)};

	c.lost = c.sent > c.unique ? c.sent - c.unique : 0;
	return c;
}

/* per sending port: what its streams lost, reordered and duplicated */
static void
stream_totals(const struct lg_trial_tx *t, const struct lg_trial_rx *r, uint16_t port, struct totals *s)
{
	for (uint32_t f = 0; f < t->p.flows; f++) {
		struct stream_counts c = stream_counts(t, r, port, f);
		s->unique += c.unique;
		s->lost += c.lost;
		s->reordered += c.reordered;
		s->duplicate += c.duplicate;
		s->beyond += c.beyond;
	}
}

static void
add_ports(struct rte_tel_data *d, const struct lg_trial_tx *t, const struct lg_trial_rx *r, struct totals *all)
{
	struct rte_tel_data *ports = rte_tel_data_alloc();

	if (ports == NULL)
		return;
	rte_tel_data_start_dict(ports);
	for (uint16_t port = 0; port < lg.nb_ports; port++) {
		const struct lg_port_tx *pt = &t->port[port];
		const struct lg_port_rx *pr = &r->port[port];
		struct rte_tel_data *c = rte_tel_data_alloc();
		struct totals s = {0};
		char key[8];

		if (c == NULL)
			break;
		s.offered = LG_LOAD(pt->offered);
		s.sent = LG_LOAD(pt->sent);
		s.dropped = LG_LOAD(pt->dropped);
		s.unsent = LG_LOAD(pt->unsent);
		s.warmup_tx = LG_LOAD(pt->warmup_sent);
		for (uint16_t q = 0; q < lg.nb_queues; q++)
			s.received += LG_LOAD(pr->q_rx[q]);
		s.warmup_rx = LG_LOAD(pr->warmup);
		s.stray = LG_LOAD(pr->stray);
		s.late = LG_LOAD(pr->late);
		stream_totals(t, r, port, &s);

		rte_tel_data_start_dict(c);
		rte_tel_data_add_dict_u64(c, "active", (uint64_t)LG_LOAD(pt->active));
		rte_tel_data_add_dict_u64(c, "offered", s.offered);
		rte_tel_data_add_dict_u64(c, "sent", s.sent);
		rte_tel_data_add_dict_u64(c, "tx_dropped", s.dropped);
		rte_tel_data_add_dict_u64(c, "unsent", s.unsent);
		rte_tel_data_add_dict_u64(c, "rx", s.received);
		rte_tel_data_add_dict_u64(c, "lost", s.lost);
		rte_tel_data_add_dict_u64(c, "reordered", s.reordered);
		rte_tel_data_add_dict_u64(c, "duplicate", s.duplicate);
		rte_tel_data_add_dict_u64(c, "warmup_tx", s.warmup_tx);
		rte_tel_data_add_dict_u64(c, "warmup_rx", s.warmup_rx);
		rte_tel_data_add_dict_u64(c, "stray", s.stray);
		rte_tel_data_add_dict_u64(c, "late", s.late);
		add_array(c, "q_tx", pt->q_sent, lg.nb_queues);
		add_array(c, "q_tx_dropped", pt->q_dropped, lg.nb_queues);
		add_array(c, "q_rx", pr->q_rx, lg.nb_queues);
		snprintf(key, sizeof(key), "%u", port);
		rte_tel_data_add_dict_container(ports, key, c, 0);

		all->offered += s.offered;
		all->sent += s.sent;
		all->dropped += s.dropped;
		all->unsent += s.unsent;
		all->warmup_tx += s.warmup_tx;
		all->received += s.received;
		all->unique += s.unique;
		all->lost += s.lost;
		all->reordered += s.reordered;
		all->duplicate += s.duplicate;
		all->beyond += s.beyond;
		all->warmup_rx += s.warmup_rx;
		all->stray += s.stray;
		all->late += s.late;
	}
	rte_tel_data_add_dict_container(d, "port", ports, 0);
}

static int
stats_body(const char *params, struct rte_tel_data *d)
{
	(void)params; /* under lg.ctl: no new trial begins while this one is read */
	const struct lg_trial_tx *t = lg.tx;
	const struct lg_trial_rx *r = lg.rx;
	uint32_t gen = ACQ(lg.cur_gen), state = ACQ(lg.state);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "state", lg_state_name(state));
	rte_tel_data_add_dict_u64(d, "trial", gen);
	if (gen == 0 || state == LG_STARTING)
		return 0;
	const struct lg_params *p = &t->p;
	uint64_t active = 0;
	for (uint16_t port = 0; port < lg.nb_ports; port++)
		active += (uint64_t)LG_LOAD(t->port[port].active);
	rte_tel_data_add_dict_u64(d, "rate", p->rate);
	rte_tel_data_add_dict_u64(d, "frames", lg_measured_frames(p));
	rte_tel_data_add_dict_u64(d, "size", p->size);
	rte_tel_data_add_dict_u64(d, "burst", p->burst);
	rte_tel_data_add_dict_u64(d, "flows", p->flows);
	rte_tel_data_add_dict_u64(d, "sending_ports", active);
	rte_tel_data_add_dict_u64(d, "hz", lg.hz);

	/* the measured window: from the first measured frame's due time (paced) or its sending
	 * (unpaced) to the later of the last send and the schedule's end */
	uint64_t t_run = LG_LOAD(t->t_run), t_last = LG_LOAD(t->t_last);
	uint64_t t_end = state >= LG_DRAINING ? t_last : rte_rdtsc();
	if (p->rate && LG_LOAD(t->t_sched_end) > t_end && state >= LG_DRAINING && !LG_LOAD(t->stopped))
		t_end = LG_LOAD(t->t_sched_end);
	uint64_t shifted = LG_LOAD(t->shifted); /* pauses the schedule was shifted by: not running time */
	uint64_t window_ns = t_run && t_end > t_run + shifted ?
			     (uint64_t)((double)(t_end - t_run - shifted) * lg.ns_per_cycle) : 0;
	rte_tel_data_add_dict_u64(d, "window_ns", window_ns);
	rte_tel_data_add_dict_u64(d, "shifts", LG_LOAD(t->shifts));
	uint64_t paused_ns = (uint64_t)((double)shifted * lg.ns_per_cycle);
	rte_tel_data_add_dict_u64(d, "paused_ns", paused_ns);
	/* the trial's clock: TSC stamps (gaps, bins) relate to CLOCK_MONOTONIC through arm_tsc/arm_mono_ns */
	rte_tel_data_add_dict_u64(d, "arm_tsc", LG_LOAD(t->t_arm));
	rte_tel_data_add_dict_u64(d, "arm_mono_ns", LG_LOAD(t->mono_arm));
	rte_tel_data_add_dict_u64(d, "run_tsc", t_run);
	rte_tel_data_add_dict_u64(d, "last_tsc", t_last);
	const struct lg_bins *b = p->bins;
	rte_tel_data_add_dict_u64(d, "bins", b ? b->n : 0);
	rte_tel_data_add_dict_u64(d, "bin_cycles", b ? b->width : 0);
	rte_tel_data_add_dict_u64(d, "bins_outside", b ? LG_LOAD(b->tx_outside) + LG_LOAD(b->rx_outside) : 0);
	rte_tel_data_add_dict_u64(d, "gaps_lost", ACQ(r->lost.n));
	rte_tel_data_add_dict_u64(d, "gaps_refused", ACQ(t->refused.n));
	rte_tel_data_add_dict_u64(d, "gaps_dropped", LG_LOAD(r->lost.dropped) + LG_LOAD(t->refused.dropped));

	struct totals all = {0};
	add_ports(d, t, r, &all);
	rte_tel_data_add_dict_u64(d, "offered", all.offered);
	rte_tel_data_add_dict_u64(d, "sent", all.sent);
	rte_tel_data_add_dict_u64(d, "tx_dropped", all.dropped);
	rte_tel_data_add_dict_u64(d, "unsent", all.unsent);
	rte_tel_data_add_dict_u64(d, "received", all.received);
	rte_tel_data_add_dict_u64(d, "unique", all.unique);
	rte_tel_data_add_dict_u64(d, "lost", all.lost);
	rte_tel_data_add_dict_u64(d, "reordered", all.reordered);
	rte_tel_data_add_dict_u64(d, "duplicate", all.duplicate);
	rte_tel_data_add_dict_u64(d, "beyond_window", all.beyond);
	rte_tel_data_add_dict_u64(d, "warmup_tx", all.warmup_tx);
	rte_tel_data_add_dict_u64(d, "warmup_rx", all.warmup_rx);
	rte_tel_data_add_dict_u64(d, "stray", all.stray);
	rte_tel_data_add_dict_u64(d, "late", all.late);
	rte_tel_data_add_dict_u64(d, "alloc_fail", LG_LOAD(t->alloc_fail));
	rte_tel_data_add_dict_u64(d, "early", LG_LOAD(t->early));
	rte_tel_data_add_dict_u64(d, "stopped", LG_LOAD(t->stopped));
	rte_tel_data_add_dict_u64(d, "achieved_rate", window_ns && active ?
				  (uint64_t)((double)all.offered * 1e9 / (double)window_ns / (double)active) : 0);

	uint64_t limit_ns = (uint64_t)((double)t->late_limit * lg.ns_per_cycle);
	uint64_t end = 0;
	for (uint16_t port = 0; port < lg.nb_ports; port++)
		if (LG_LOAD(t->port[port].late_last) > end)
			end = LG_LOAD(t->port[port].late_last);
	uint64_t end_ns = (uint64_t)((double)end * lg.ns_per_cycle);
	rte_tel_data_add_dict_u64(d, "stall_ns", (uint64_t)((double)LG_LOAD(r->stall_max) * lg.ns_per_cycle));
	add_summary(d, "latency_ns", &r->latency, 0, 0, 0);
	add_summary(d, "lateness_ns", &t->lateness, limit_ns, end_ns, 1);

	char reason[RTE_TEL_MAX_STRING_LEN];
	uint64_t late_max = LG_LOAD(t->lateness.max);
	int valid = 0;
	if (state != LG_DONE)
		snprintf(reason, sizeof(reason), "trial is %s", lg_state_name(state));
	else if (LG_LOAD(t->stopped))
		snprintf(reason, sizeof(reason), "stopped before the end of its schedule");
	else if (p->rate == 0)
		valid = 1, snprintf(reason, sizeof(reason), "unpaced (as fast as possible)");
	else if (all.unsent)
		snprintf(reason, sizeof(reason), "generator fell behind: %" PRIu64 " frames not sent by the "
			 "end of the schedule + %.1f us", all.unsent, (double)limit_ns / 1e3);
	else if (end_ns > limit_ns)
		snprintf(reason, sizeof(reason), "generator fell behind: its last burst went %.1f us late "
			 "(limit %.1f us)", (double)end_ns / 1e3, (double)limit_ns / 1e3);
	else if (paused_ns * 100 > (window_ns + paused_ns) * LG_PAUSED_MAX_PCT)
		snprintf(reason, sizeof(reason), "generator paused too long: its schedule shifted by %.1f ms in %" PRIu64
			 " pauses, %.1f%% of the trial (limit %d%%)", (double)paused_ns / 1e6, LG_LOAD(t->shifts),
			 100.0 * (double)paused_ns / (double)(window_ns + paused_ns), LG_PAUSED_MAX_PCT);
	else
		valid = 1, snprintf(reason, sizeof(reason), "kept up: last burst %.1f us late (limit %.1f us), "
				    "worst %.1f us", (double)end_ns / 1e3, (double)limit_ns / 1e3,
				    (double)late_max / 1e3);
	rte_tel_data_add_dict_u64(d, "valid", (uint64_t)valid);
	rte_tel_data_add_dict_string(d, "reason", reason);
	return 0;
}

/* /labgen/streams,PORT[,FIRST]: per flow of sending port PORT, flows FIRST.. (at most
 * LG_STREAMS_PER_REPLY of them: five arrays of up to 20-digit numbers stay under 16 KiB) */
#define LG_STREAMS_PER_REPLY 128

static int
streams_body(const char *params, struct rte_tel_data *d)
{
	const struct lg_trial_tx *t = lg.tx;
	const struct lg_trial_rx *r = lg.rx;
	unsigned long port = 0, first = 0;
	char extra;
	int n = params ? sscanf(params, "%lu,%lu%c", &port, &first, &extra) : 0;

	if (n < 1 || n > 2 || port >= lg.nb_ports)
		return reply_error(d, "usage: /labgen/streams,PORT[,FIRST] (ports: %u)", lg.nb_ports);
	uint32_t state = ACQ(lg.state), gen = ACQ(lg.cur_gen);
	if (gen == 0 || state == LG_STARTING)
		return reply_error(d, "no trial to report (trial %u is %s)", gen, lg_state_name(state));
	if (first >= t->p.flows)
		return reply_error(d, "flow %lu: trial %u has %u flows", first, gen, t->p.flows);
	uint32_t flows = t->p.flows, last = (uint32_t)RTE_MIN((unsigned long)flows, first + LG_STREAMS_PER_REPLY);
	static const char *const names[] = {"sent", "received", "lost", "reordered", "duplicate"};
	struct rte_tel_data *a[5];

	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "trial", gen);
	rte_tel_data_add_dict_string(d, "state", lg_state_name(state));
	rte_tel_data_add_dict_u64(d, "port", port);
	rte_tel_data_add_dict_u64(d, "flows", flows);
	rte_tel_data_add_dict_u64(d, "first", first);
	for (int k = 0; k < 5; k++) {
		a[k] = rte_tel_data_alloc();
		if (a[k] == NULL) {
			while (k--)
				rte_tel_data_free(a[k]);
			return reply_error(d, "out of memory");
		}
		rte_tel_data_start_array(a[k], RTE_TEL_U64_VAL);
	}
	for (uint32_t f = (uint32_t)first; f < last; f++) {
		struct stream_counts c = stream_counts(t, r, (uint16_t)port, f);
		uint64_t v[5] = {c.sent, c.unique, c.lost, c.reordered, c.duplicate};
		for (int k = 0; k < 5; k++)
			rte_tel_data_add_array_u64(a[k], v[k]);
	}
	for (int k = 0; k < 5; k++)
		rte_tel_data_add_dict_container(d, names[k], a[k], 0);
	return 0;
}

/* ---- /labgen/clock, /labgen/gaps, /labgen/series, /labgen/window ------------------------------- */

static int
cmd_clock(const char *cmd, const char *params, struct rte_tel_data *d)
{
	uint64_t tsc, mono;

	(void)cmd;
	(void)params;
	lg_clock_pair(&tsc, &mono);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "tsc", tsc);
	rte_tel_data_add_dict_u64(d, "mono_ns", mono);
	rte_tel_data_add_dict_u64(d, "hz", lg.hz);
	return 0;
}

static int
no_trial(struct rte_tel_data *d)
{
	uint32_t state = ACQ(lg.state), gen = ACQ(lg.cur_gen);

	if (gen != 0 && state != LG_STARTING)
		return 0;
	reply_error(d, "no trial to report (trial %u is %s)", gen, lg_state_name(state));
	return 1;
}

static struct rte_tel_data *
u64_array(void)
{
	struct rte_tel_data *a = rte_tel_data_alloc();

	if (a != NULL)
		rte_tel_data_start_array(a, RTE_TEL_U64_VAL);
	return a;
}

/* columns[k] named names[k]; freed on failure */
static int
add_columns(struct rte_tel_data *d, struct rte_tel_data **columns, const char *const *names, int n)
{
	int ok = 1;

	for (int k = 0; k < n; k++)
		ok &= columns[k] != NULL;
	if (!ok) {
		for (int k = 0; k < n; k++)
			if (columns[k] != NULL)
				rte_tel_data_free(columns[k]);
		return reply_error(d, "out of memory");
	}
	for (int k = 0; k < n; k++)
		rte_tel_data_add_dict_container(d, names[k], columns[k], 0);
	return 0;
}

#define LG_GAPS_PER_REPLY 80 /* six arrays of up to 20-digit numbers: about 10 KB */

static int
gaps_body(const char *params, struct rte_tel_data *d)
{
	char kind[16] = "", extra;
	unsigned long first = 0;
	int n = params ? sscanf(params, "%15[a-z],%lu%c", kind, &first, &extra) : 0;

	if (n < 1 || n > 2 || (strcmp(kind, "lost") != 0 && strcmp(kind, "refused") != 0))
		return reply_error(d, "usage: /labgen/gaps,lost|refused[,FIRST]");
	if (no_trial(d))
		return 0;
	const struct lg_gaplog *log = strcmp(kind, "lost") == 0 ? &lg.rx->lost : &lg.tx->refused;
	uint64_t total = ACQ(log->n), last = RTE_MIN(total, (uint64_t)first + LG_GAPS_PER_REPLY);
	static const char *const names[] = {"before", "after", "count", "filled", "stream", "kind"};
	struct rte_tel_data *a[6];

	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "log", kind);
	rte_tel_data_add_dict_u64(d, "total", total);
	rte_tel_data_add_dict_u64(d, "dropped", LG_LOAD(log->dropped));
	rte_tel_data_add_dict_u64(d, "first", first);
	for (int k = 0; k < 6; k++)
		a[k] = u64_array();
	if (a[0] != NULL && a[5] != NULL)
		for (uint64_t i = first; i < last; i++) {
			const struct lg_gap *g = &log->e[i];
			uint64_t v[6] = {LG_LOAD(g->before), LG_LOAD(g->after), LG_LOAD(g->count), LG_LOAD(g->filled),
					 LG_LOAD(g->stream), LG_LOAD(g->kind)};
			for (int k = 0; k < 6; k++)
				if (a[k] != NULL)
					rte_tel_data_add_array_u64(a[k], v[k]);
		}
	return add_columns(d, a, names, 6);
}

#define LG_SERIES_PER_REPLY 100 /* six arrays of up to 11-digit numbers: about 7 KB */

static int
series_body(const char *params, struct rte_tel_data *d)
{
	unsigned long first = 0;
	char extra;

	if (params != NULL && *params && sscanf(params, "%lu%c", &first, &extra) != 1)
		return reply_error(d, "usage: /labgen/series[,FIRST]");
	if (no_trial(d))
		return 0;
	const struct lg_bins *b = lg.tx->p.bins;
	if (b == NULL)
		return reply_error(d, "trial %u has no time bins (start it with bin=S)", ACQ(lg.cur_gen));
	uint64_t last = RTE_MIN(b->n, (uint64_t)first + LG_SERIES_PER_REPLY);
	static const char *const names[] = {"offered", "sent", "received", "p50", "p99", "max"};
	struct rte_tel_data *a[6];

	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "trial", ACQ(lg.cur_gen));
	rte_tel_data_add_dict_u64(d, "bins", b->n);
	rte_tel_data_add_dict_u64(d, "bin_cycles", b->width);
	rte_tel_data_add_dict_u64(d, "first", first);
	for (int k = 0; k < 6; k++)
		a[k] = u64_array();
	for (uint64_t i = first; i < last && a[0] != NULL && a[5] != NULL; i++) {
		struct lg_hist_summary sum;
		lg_bins_summarize(&b->rx[i], 1, &sum);
		uint64_t v[6] = {LG_LOAD(b->offered[i]), LG_LOAD(b->sent[i]), sum.count, sum.p50, sum.p99, sum.max};
		for (int k = 0; k < 6; k++)
			if (a[k] != NULL)
				rte_tel_data_add_array_u64(a[k], v[k]);
	}
	return add_columns(d, a, names, 6);
}

static int
window_body(const char *params, struct rte_tel_data *d)
{
	unsigned long first = 0, end = 0;
	char extra;

	if (params == NULL || sscanf(params, "%lu,%lu%c", &first, &end, &extra) != 2 || end < first)
		return reply_error(d, "usage: /labgen/window,FIRST,END (bins FIRST..END-1)");
	if (no_trial(d))
		return 0;
	const struct lg_bins *b = lg.tx->p.bins;
	if (b == NULL)
		return reply_error(d, "trial %u has no time bins (start it with bin=S)", ACQ(lg.cur_gen));
	if (end > b->n)
		end = b->n;
	if (first > end)
		first = end;
	uint64_t offered = 0, sent = 0;
	for (uint64_t i = first; i < end; i++) {
		offered += LG_LOAD(b->offered[i]);
		sent += LG_LOAD(b->sent[i]);
	}
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "first", first);
	rte_tel_data_add_dict_u64(d, "end", end);
	rte_tel_data_add_dict_u64(d, "offered", offered);
	rte_tel_data_add_dict_u64(d, "sent", sent);
	struct lg_hist_summary s;
	lg_bins_summarize(&b->rx[first], end - first, &s);
	rte_tel_data_add_dict_u64(d, "received", s.count);
	add_summary_of(d, "latency_ns", &s, 0, 0, 0);
	return 0;
}

/* Commands on ports and trials: labgen must be ready (checked again under the lock: main() clears
 * it under lg.ctl before it stops the ports), and they run one at a time. */
static int
locked(int (*body)(const char *params, struct rte_tel_data *d), const char *params, struct rte_tel_data *d)
{
	int rc;

	if (!ACQ(lg.ready))
		return not_ready(d);
	pthread_mutex_lock(&lg.ctl);
	rc = ACQ(lg.ready) ? body(params, d) : not_ready(d);
	pthread_mutex_unlock(&lg.ctl);
	return rc;
}

#define LOCKED_COMMAND(name)                                                                  \
	static int cmd_##name(const char *cmd, const char *params, struct rte_tel_data *d)    \
	{                                                                                      \
		(void)cmd;                                                                     \
		return locked(name##_body, params, d);                                         \
	}
LOCKED_COMMAND(ports)
LOCKED_COMMAND(port_start)
LOCKED_COMMAND(start)
LOCKED_COMMAND(stop)
LOCKED_COMMAND(stats)
LOCKED_COMMAND(streams)
LOCKED_COMMAND(gaps)
LOCKED_COMMAND(series)
LOCKED_COMMAND(window)

int
lg_register_commands(void)
{
	static const struct {
		const char *name;
		telemetry_cb fn;
		const char *help;
	} cmds[] = {
		{"/labgen/info", cmd_info, "labgen's state, ports, queues, workers, TSC hz. No parameters"},
		{"/labgen/ports", cmd_ports, "Per port: name, started, link, peer. No parameters"},
		{"/labgen/port_start", cmd_port_start, "Configure and start a port. Parameter: port id"},
		{"/labgen/start", cmd_start, "Begin a trial. Parameters: rate=,duration=|count=,warmup=,"
					     "drain=,size=,burst=,flows=,tolerance=,shift=,ports=,bin="},
		{"/labgen/stats", cmd_stats, "The current or last trial. No parameters"},
		{"/labgen/streams", cmd_streams, "Per flow of a sending port: sent, received, lost, reordered, "
						 "duplicate. Parameters: port[,first flow]"},
		{"/labgen/stop", cmd_stop, "End the current trial's sending now. No parameters"},
		{"/labgen/clock", cmd_clock, "The TSC and CLOCK_MONOTONIC read together. No parameters"},
		{"/labgen/gaps", cmd_gaps, "Gaps of the current or last trial. Parameters: lost|refused[,first]"},
		{"/labgen/series", cmd_series, "Time bins of the current or last trial. Parameters: [first]"},
		{"/labgen/window", cmd_window, "Time bins merged. Parameters: first,end"},
		{"/labgen/quit", cmd_quit, "Stop labgen. No parameters"},
	};

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (rte_telemetry_register_cmd(cmds[i].name, cmds[i].fn, cmds[i].help) < 0)
			return -1;
	return 0;
}
