/* SPDX-License-Identifier: MIT
 *
 * The worker lcore(s): the trial state machine, the paced sender and the receiver.
 *
 * A trial: idle/done --/labgen/start--> starting (the receiver resets its counters and says so)
 * --> warmup (frames tagged as warm-up, on the trial's schedule) --> running (measured frames)
 * --> draining (nothing sent; receiving for drain_ns more) --> done (counters final). Only the
 * sending lcore changes the state; the receiving lcore acknowledges the start and the end of
 * the drain, so a trial's counters are reset before its first frame and frozen after its last.
 */
#include "labgen.h"

#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_udp.h>

#define ACQ(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define REL(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

const char *
lg_state_name(uint32_t state)
{
	static const char *const names[] = {"idle", "starting", "warmup", "running", "draining", "done"};

	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "unknown";
}

/* The validity rule. A paced trial is valid when every measured frame was handed to the driver
 * and the last burst of every sending port went out no later than the limit after its due time;
 * the limit is the larger of 0.001% of the scheduled duration and `tolerance` frame intervals
 * (default 64).
 *
 * siitperf sends frame i when rdtsc() >= start + i*hz/rate and, after its sending loop, declares
 * the test invalid when sending took longer than duration * 1.00001 (defines.h TOLERANCE,
 * throughput.cc): a sender that cannot keep up falls further behind with every frame, so being
 * late at the end is what "could not keep up" looks like, and 0.001% is the precision it
 * demands of the achieved rate. labgen keeps that rule and adds a floor in frames because its
 * sender is a polling loop on a shared vCPU: one pass of it (receiving up to 64 frames per
 * queue, then sending) takes microseconds, so at high rates being a burst or two behind is the
 * normal state of a sender that keeps up (64 frames = two default bursts; 6.4 us at 10 Mpps),
 * while 0.001% of a 1 s trial would be 10 us. On this kind of host the vCPU also stops for
 * milliseconds at a time (a bare rdtsc loop pinned to one CPU of these 2-vCPU VMs sees gaps of
 * 1-40 ms about a hundred times a second), after which the sender catches up by sending its
 * backlog back to back. Counting such a stall as "could not keep up" would make nearly every
 * trial invalid, so a stall in the middle does not invalidate a trial; it is reported instead
 * (lateness_ns: worst and percentiles per burst; stall_ns: the longest pause of the worker loop)
 * for the caller to judge, since the catch-up burst and the receiver's pause can cause loss of
 * their own. A stall that happens to cover the end does invalidate the trial (rare: the share
 * of bursts later than the limit is well under 1% here). With the pause rule (shift=, below) a
 * pause moves the schedule instead, at the end as anywhere. Unpaced trials (rate 0) have no
 * schedule and are always valid. */
uint64_t
lg_late_limit(const struct lg_params *p, uint64_t hz, uint64_t frames)
{
	if (p->rate == 0)
		return 0;
	uint64_t siitperf = lg_due(frames, hz, p->rate) / 100000; /* 0.001% of the duration */
	uint64_t floor = lg_due(p->tolerance, hz, p->rate);
	return siitperf > floor ? siitperf : floor;
}

static inline uint64_t
min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline uint64_t
cycles_to_ns(uint64_t cycles)
{
	return (uint64_t)((double)cycles * lg.ns_per_cycle);
}

/* ---- frames ---------------------------------------------------------------------------------- */

/* RFC 2544 appendix C.2.2 and RFC 6890: 198.18.0.0/15 is for benchmarking. Even ports send from
 * 198.18.x.y to 198.19.x.y, odd ports the other way; the flow number is in the source address
 * and the UDP source port (1024 + flow), the destination port is 1024. */
static void
build_templates(struct lg_trial_tx *t)
{
	const struct lg_params *p = &t->p;
	uint16_t ip_len = (uint16_t)(p->size - sizeof(struct rte_ether_hdr));

	for (uint16_t port = 0; port < lg.nb_ports; port++) {
		for (uint32_t f = 0; f < p->flows; f++) {
			uint8_t *h = t->tmpl[port][f];
			struct rte_ether_hdr *eth = (struct rte_ether_hdr *)h;
			struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(h + sizeof(*eth));
			struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(h + sizeof(*eth) + sizeof(*ip));
			uint32_t a = RTE_IPV4(198, 18, 0, 0) | ((uint32_t)port << 10) | f;
			uint32_t b = RTE_IPV4(198, 19, 0, 0) | ((uint32_t)port << 10) | f;

			memset(h, 0, LG_HDR_LEN);
			rte_ether_addr_copy(&lg.port[lg.port[port].peer].mac, &eth->dst_addr);
			rte_ether_addr_copy(&lg.port[port].mac, &eth->src_addr);
			eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
			ip->version_ihl = RTE_IPV4_VHL_DEF;
			ip->total_length = rte_cpu_to_be_16(ip_len);
			ip->time_to_live = 64;
			ip->next_proto_id = IPPROTO_UDP;
			ip->src_addr = rte_cpu_to_be_32(port % 2 ? b : a);
			ip->dst_addr = rte_cpu_to_be_32(port % 2 ? a : b);
			ip->hdr_checksum = rte_ipv4_cksum(ip);
			udp->src_port = rte_cpu_to_be_16((uint16_t)(1024 + f));
			udp->dst_port = rte_cpu_to_be_16(1024);
			udp->dgram_len = rte_cpu_to_be_16((uint16_t)(ip_len - sizeof(*ip)));
			udp->dgram_cksum = 0; /* optional over IPv4 (RFC 768) */
		}
	}
}

/* A measured burst in the time bin of its send stamp: c handed to the driver, taken of them taken. */
static inline void
count_bin(struct lg_trial_tx *t, uint64_t tsc, uint32_t c, uint32_t taken)
{
	struct lg_bins *b = t->p.bins;

	if (b == NULL)
		return;
	uint64_t i = (tsc - t->t_arm) / b->width;
	if (i >= b->n) {
		LG_ADD(b->tx_outside, c);
		return;
	}
	LG_ADD(b->offered[i], c);
	LG_ADD(b->sent[i], taken);
}

static void
close_refusals(struct lg_trial_tx *t, uint16_t port, uint64_t after, uint32_t flags)
{
	struct lg_port_tx *pt = &t->port[port];
	struct lg_gap g = {.before = pt->refused_before, .after = after, .first = 0, .count = pt->refused_count,
			   .filled = 0, .stream = port,
			   .kind = LG_GAP_REFUSED | flags | (pt->refusing_head ? LG_GAP_HEAD : 0u)};

	lg_gap_add(&t->refused, &g);
	pt->refusing = 0;
}

/* Frames the driver refused (a full ring, a port whose peer is gone: net_vhost takes nothing while the
 * guest's queue is not ready) are never numbered, so the receiver cannot see them missing: the sender
 * logs each run of bursts it refused frames of as one gap, from the last burst taken before the run to
 * the first one taken whole after it. */
static inline void
track_refusals(struct lg_trial_tx *t, uint16_t port, uint64_t tsc, uint32_t c, uint32_t taken)
{
	struct lg_port_tx *pt = &t->port[port];

	if (taken < c) {
		if (!pt->refusing) {
			pt->refusing = 1;
			pt->refusing_head = !taken && !pt->last_taken;
			pt->refused_before = taken ? tsc : pt->last_taken;
			pt->refused_count = 0;
		}
		pt->refused_count += c - taken;
	} else if (pt->refusing) {
		close_refusals(t, port, tsc, 0);
	}
}

/* Send n frames of `port` starting with frame `idx`; returns how many frames were handed to the
 * driver (taken or dropped), 0 when the mempool had no mbufs. */
static uint32_t
send_frames(struct lg_trial_tx *t, uint16_t port, uint64_t idx, uint32_t n, int measured)
{
	struct rte_mbuf *m[LG_MAX_BURST];
	struct rte_mbuf *qm[LG_MAX_QUEUES][LG_MAX_BURST];
	uint16_t qs[LG_MAX_QUEUES][LG_MAX_BURST]; /* stream of each frame, to undo unsent numbers */
	uint64_t qfirst[LG_MAX_QUEUES];            /* index of each queue's first frame */
	uint32_t qn[LG_MAX_QUEUES] = {0};
	struct lg_port_tx *pt = &t->port[port];
	const struct lg_params *p = &t->p;
	uint16_t tag = (uint16_t)((t->gen << 1) | (measured ? 0 : 1));
	uint16_t nq = lg.nb_queues;

	if (rte_pktmbuf_alloc_bulk(lg.pool, m, n) != 0) {
		LG_ADD(t->alloc_fail, 1);
		return 0;
	}
	uint32_t flow = (uint32_t)(idx % p->flows); /* then counted on: no division per frame */
	for (uint32_t k = 0; k < n; k++, flow = flow + 1 == p->flows ? 0 : flow + 1) {
		uint64_t i = idx + k;
		uint16_t q = t->flow_queue[flow];
		uint16_t stream = (uint16_t)(port * p->flows + flow);
		struct lg_payload pl = {.magic = LG_MAGIC, .tag = tag, .stream = stream, .seq = 0, .tsc = 0};
		uint8_t *data = rte_pktmbuf_mtod(m[k], uint8_t *);

		if (measured) {
			pl.seq = t->tx_seq[stream];
			LG_STORE(t->tx_seq[stream], pl.seq + 1);
		}
		memcpy(data, t->tmpl[port][flow], LG_HDR_LEN);
		memcpy(data + LG_HDR_LEN, &pl, sizeof(pl));
		m[k]->data_len = (uint16_t)p->size;
		m[k]->pkt_len = p->size;
		m[k]->l2_len = sizeof(struct rte_ether_hdr);
		m[k]->l3_len = sizeof(struct rte_ipv4_hdr);
		if (qn[q] == 0)
			qfirst[q] = i;
		qs[q][qn[q]] = stream;
		qm[q][qn[q]++] = m[k];
	}
	for (uint16_t q = 0; q < nq; q++) {
		uint32_t c = qn[q];
		if (c == 0)
			continue;
		uint64_t tsc = rte_rdtsc();
		for (uint32_t k = 0; k < c; k++)
			memcpy(rte_pktmbuf_mtod_offset(qm[q][k], uint8_t *,
						       LG_HDR_LEN + offsetof(struct lg_payload, tsc)),
			       &tsc, sizeof(tsc));
		if (measured && p->rate) {
			uint64_t due = t->t0 + lg_due(qfirst[q], lg.hz, p->rate);
			uint64_t late = tsc > due ? tsc - due : 0;
			if (tsc < due)
				LG_ADD(t->early, 1); /* a self-check: never happens */
			lg_hist_add(&t->lateness, cycles_to_ns(late));
			LG_STORE(pt->late_last, late);
		}
		uint16_t taken = rte_eth_tx_burst(port, q, qm[q], (uint16_t)c);
		/* from here on the taken mbufs belong to the driver: never touched again */
		if (taken < c) {
			for (uint32_t k = taken; k < c; k++)
				if (measured)
					LG_STORE(t->tx_seq[qs[q][k]], t->tx_seq[qs[q][k]] - 1); /* never sent: reuse it */
			rte_pktmbuf_free_bulk(&qm[q][taken], c - taken);
		}
		if (measured) {
			LG_ADD(pt->offered, c);
			LG_ADD(pt->sent, taken);
			LG_ADD(pt->dropped, c - taken);
			LG_ADD(pt->q_sent[q], taken);
			LG_ADD(pt->q_dropped[q], c - taken);
			count_bin(t, tsc, c, taken);
			track_refusals(t, port, tsc, c, taken);
		} else {
			LG_ADD(pt->warmup_sent, c);
		}
		if (taken)
			pt->last_taken = tsc;
	}
	return n;
}

/* ---- the sending lcore ----------------------------------------------------------------------- */

static void
begin_trial(struct lg_trial_tx *t, uint32_t gen)
{
	uint32_t flows;

	t->gen = gen;
	t->p = lg.req;
	flows = t->p.flows;
	for (uint16_t port = 0; port < lg.nb_ports; port++) {
		memset(&t->port[port], 0, sizeof(t->port[port]));
		memset(&t->tx_seq[port * flows], 0, flows * sizeof(t->tx_seq[0]));
	}
	LG_STORE(t->t0, 0);
	LG_STORE(t->t_run, 0);
	LG_STORE(t->t_sched_end, 0);
	LG_STORE(t->t_last, 0);
	LG_STORE(t->alloc_fail, 0);
	LG_STORE(t->early, 0);
	LG_STORE(t->stopped, 0);
	t->late_limit = lg_late_limit(&t->p, lg.hz, lg_measured_frames(&t->p));
	t->shift_min = (uint64_t)((double)t->p.shift_ns / lg.ns_per_cycle);
	t->last_pass = 0;
	LG_STORE(t->shifts, 0);
	LG_STORE(t->shifted, 0);
	LG_STORE(t->t_arm, 0);
	LG_STORE(t->mono_arm, 0);
	LG_STORE(t->refused.n, 0);
	LG_STORE(t->refused.dropped, 0);
	for (uint32_t f = 0; f < flows; f++)
		t->flow_queue[f] = (uint16_t)(f % lg.nb_queues); /* flow f goes out on queue f % queues */
	lg_hist_reset(&t->lateness);
	build_templates(t);
	REL(lg.state, LG_STARTING);
	REL(lg.cur_gen, gen);
}

static uint64_t
ns_to_frames(uint64_t ns, uint64_t rate)
{
	return (uint64_t)(((unsigned __int128)ns * rate + 500000000u) / 1000000000u);
}

uint64_t
lg_measured_frames(const struct lg_params *p)
{
	if (p->count || p->rate == 0)
		return p->count;
	return ns_to_frames(p->duration_ns, p->rate);
}

/* The receiver reset its counters: fix t0 and each port's frame counts, start sending. */
static void
arm_trial(struct lg_trial_tx *t, uint64_t now)
{
	const struct lg_params *p = &t->p;
	uint64_t n_warm = 0, n_meas = lg_measured_frames(p);

	if (p->rate) {
		n_warm = ns_to_frames(p->warmup_ns, p->rate);
		LG_STORE(t->t_run, now + lg_due(n_warm, lg.hz, p->rate));
		LG_STORE(t->t_sched_end, now + lg_due(n_warm + n_meas, lg.hz, p->rate));
	}
	uint64_t arm_tsc, arm_mono;
	lg_clock_pair(&arm_tsc, &arm_mono);
	LG_STORE(t->t_arm, now);
	LG_STORE(t->mono_arm, arm_mono - (uint64_t)((double)(arm_tsc - now) * lg.ns_per_cycle));
	for (uint16_t port = 0; port < lg.nb_ports; port++) {
		struct lg_port_tx *pt = &t->port[port];
		LG_STORE(pt->active, (p->port_mask >> port & 1) && ACQ(lg.port[port].started));
		pt->n_warm = n_warm;
		pt->n_total = (p->rate || p->count) ? n_warm + n_meas : UINT64_MAX;
	}
	LG_STORE(t->t0, now);
	t->last_pass = now; /* a pause before the first sending pass shifts the schedule too */
	t->caught_up = 1;
	REL(lg.state, p->warmup_ns ? LG_WARMUP : LG_RUNNING);
}

static void
end_sending(struct lg_trial_tx *t, uint64_t now)
{
	for (uint16_t port = 0; port < lg.nb_ports; port++) {
		struct lg_port_tx *pt = &t->port[port];
		if (pt->refusing)
			close_refusals(t, port, t->t_last ? t->t_last : now, LG_GAP_TAIL);
		if (pt->active && pt->n_total != UINT64_MAX && pt->idx < pt->n_total) {
			uint64_t measured_left = pt->n_total - (pt->idx > pt->n_warm ? pt->idx : pt->n_warm);
			LG_STORE(pt->unsent, measured_left);
		}
	}
	LG_STORE(t->t_last, now);
	LG_STORE(t->t_drain, now + (uint64_t)((double)t->p.drain_ns / lg.ns_per_cycle));
	REL(lg.state, LG_DRAINING);
}

/* The pause rule (start key shift=S, 0 = off). A paced sender on these VMs stops now and then for
 * milliseconds (see the validity rule above), and by default catches up when it runs again: the
 * frames due during the pause go out back to back, a burst of rate * pause frames at the speed of
 * the loop. A real generator does not pause, so that burst is this host's, not the traffic asked
 * for, and near a no-loss rate it is what overflows the receiving ring (rate * pause > ring).
 * With shift=S, a gap between two sending passes longer than S moves the rest of the schedule
 * (t0, the measured window's start if still ahead, its end) later by the gap: after the pause the
 * sender goes on at the asked rate from where it was, as if the clock had stopped with it. The
 * frames are all sent, at the asked rate while the sender runs; the measured window leaves out the
 * pauses it was shifted by (stats: shifts, paused_ns), so the achieved rate is over running time.
 * A gap counts as a pause only when the pass before it was caught up (it sent every frame due when
 * it began) and frames remain to be sent. A sender that cannot keep up has more due at the start of
 * its passes than one pass sends (a burst per port), is never caught up, and is never shifted, so
 * the validity rule still sees it. A sender whose every pass is slow but sends all that is due (below
 * burst / shift frames per second) would be shifted at every pass and send slower than asked:
 * control.c bounds that, as any host that pauses too much, by calling a trial whose pauses took over
 * LG_PAUSED_MAX_PCT of its time invalid. */
static int
frames_left(const struct lg_trial_tx *t)
{
	for (uint16_t port = 0; port < lg.nb_ports; port++)
		if (t->port[port].active && t->port[port].idx < t->port[port].n_total)
			return 1;
	return 0;
}

static void
shift_schedule(struct lg_trial_tx *t, uint64_t gap)
{
	LG_STORE(t->t0, t->t0 + gap);
	if (t->t_run > t->last_pass)
		LG_STORE(t->t_run, t->t_run + gap); /* the measured phase had not begun: it begins later */
	else {
		LG_ADD(t->shifts, 1);
		LG_ADD(t->shifted, gap);
	}
	LG_STORE(t->t_sched_end, t->t_sched_end + gap);
}

/* One pass of the sending lcore: take a new trial, move it along, send what is due. */
static void
tx_step(struct lg_trial_tx *t)
{
	uint32_t state = ACQ(lg.state);
	uint64_t now = rte_rdtsc();

	if (state == LG_IDLE || state == LG_DONE) {
		uint32_t gen = ACQ(lg.req_gen);
		if (gen != t->gen)
			begin_trial(t, gen);
		return;
	}
	if (state == LG_STARTING) {
		if (ACQ(lg.rx_gen_ack) == t->gen)
			arm_trial(t, now);
		return;
	}
	if (state == LG_DRAINING) {
		if (ACQ(lg.rx_final_gen) == t->gen)
			REL(lg.state, LG_DONE);
		return;
	}

	const struct lg_params *p = &t->p;
	if (ACQ(lg.stop_gen) == t->gen) {
		LG_STORE(t->stopped, 1);
		end_sending(t, now);
		return;
	}
	if (p->rate && t->shift_min && t->caught_up && now - t->last_pass > t->shift_min && frames_left(t))
		shift_schedule(t, now - t->last_pass);
	int sending = 0, warming = 0, behind = 0;
	uint64_t elapsed = now - t->t0;
	for (uint16_t port = 0; port < lg.nb_ports; port++) {
		struct lg_port_tx *pt = &t->port[port];
		uint32_t n;
		int measured;

		if (!pt->active || pt->idx >= pt->n_total)
			continue;
		if (p->rate) {
			sending = 1;
			if (elapsed < pt->next_due) {
				warming |= pt->idx < pt->n_warm;
				continue;
			}
			uint64_t due = lg_due_count(elapsed, lg.hz, p->rate) - pt->idx;
			uint64_t limit = pt->idx < pt->n_warm ? pt->n_warm : pt->n_total;
			n = (uint32_t)min_u64(min_u64(due, p->burst), limit - pt->idx);
			measured = pt->idx >= pt->n_warm;
			behind |= due > n; /* frames due stay behind this pass */
		} else {
			measured = now >= t->t0 + (uint64_t)((double)p->warmup_ns / lg.ns_per_cycle);
			if (measured && t->t_run == 0)
				LG_STORE(t->t_run, now);
			if (measured && !p->count &&
			    now >= t->t_run + (uint64_t)((double)p->duration_ns / lg.ns_per_cycle))
				continue;
			sending = 1;
			n = (uint32_t)min_u64(p->burst, pt->n_total - pt->idx);
			if (!measured) {
				send_frames(t, port, 0, n, 0); /* warm-up frames do not advance the count */
				warming = 1;
				continue;
			}
		}
		uint32_t asked = n;
		n = send_frames(t, port, pt->idx, n, measured);
		behind |= n < asked; /* no mbufs: what was due is still due */
		pt->idx += n;
		warming |= pt->idx < pt->n_warm;
		if (p->rate)
			pt->next_due = lg_due(pt->idx, lg.hz, p->rate);
		if (measured)
			LG_STORE(t->t_last, rte_rdtsc());
	}
	if (p->rate && t->shift_min) {
		t->last_pass = now; /* this pass's start */
		t->caught_up = !behind;
	}
	if (state == LG_WARMUP && !warming)
		REL(lg.state, LG_RUNNING);
	if (!sending) {
		end_sending(t, t->t_last ? t->t_last : now);
		return;
	}
	/* cannot keep up: once the last frame is later than the limit the trial is invalid anyway */
	if (p->rate && now > t->t_sched_end + t->late_limit)
		end_sending(t, now);
}

/* ---- the receiving lcore --------------------------------------------------------------------- */

static void
rx_reset(struct lg_trial_rx *r, const struct lg_trial_tx *t, uint32_t gen)
{
	uint32_t streams = lg.nb_ports * t->p.flows; /* t->p was written before cur_gen (release) */

	r->gen = gen;
	r->streams = streams;
	r->tag = (uint16_t)(gen << 1);
	r->frozen = 0;
	r->last_pass = 0;
	r->t_arm = 0;
	r->bins = t->p.bins;
	LG_STORE(r->lost.n, 0);
	LG_STORE(r->lost.dropped, 0);
	LG_STORE(r->stall_max, 0);
	lg_hist_reset(&r->latency);
	memset(r->port, 0, sizeof(r->port));
	for (uint32_t s = 0; s < streams; s++)
		lg_stream_reset(&r->stream[s]);
	REL(lg.rx_gen_ack, gen);
}

static inline void
rx_frame(struct lg_trial_rx *r, struct lg_port_rx *pr, uint16_t q, const struct rte_mbuf *m,
	 uint64_t now)
{
	struct lg_payload pl;

	if (m->data_len < LG_HDR_LEN + sizeof(pl)) {
		LG_ADD(pr->stray, 1);
		return;
	}
	memcpy(&pl, rte_pktmbuf_mtod_offset(m, const uint8_t *, LG_HDR_LEN), sizeof(pl));
	if (pl.magic != LG_MAGIC || r->gen == 0 || (pl.tag >> 1) != (r->tag >> 1) || pl.stream >= r->streams) {
		LG_ADD(pr->stray, 1);
		return;
	}
	if (pl.tag & 1) {
		LG_ADD(pr->warmup, 1);
		return;
	}
	if (r->frozen) {
		LG_ADD(pr->late, 1);
		return;
	}
	LG_ADD(pr->q_rx[q], 1);
	enum lg_seq what = lg_track(&r->stream[pl.stream], &r->lost, pl.stream, pl.seq, pl.tsc);
	uint64_t latency = now > pl.tsc ? cycles_to_ns(now - pl.tsc) : 0;
	lg_hist_add(&r->latency, latency);
	struct lg_bins *b = r->bins;
	if (b != NULL && what != LG_SEQ_DUPLICATE && r->t_arm) {
		uint64_t i = pl.tsc > r->t_arm ? (pl.tsc - r->t_arm) / b->width : 0;
		if (i < b->n)
			lg_bin_add(&b->rx[i], latency);
		else
			LG_ADD(b->rx_outside, 1);
	}
}

/* The receiver froze the trial: what each stream sent after its last frame that arrived is lost too. */
static void
log_tails(struct lg_trial_rx *r, const struct lg_trial_tx *t)
{
	uint64_t end = LG_LOAD(t->t_last);

	for (uint32_t s = 0; s < r->streams; s++)
		lg_track_tail(&r->stream[s], &r->lost, s, LG_LOAD(t->tx_seq[s]), end);
}

static void
rx_step(struct lg_trial_rx *r, const struct lg_trial_tx *t)
{
	struct rte_mbuf *m[LG_RX_BURST];
	uint32_t gen = ACQ(lg.cur_gen);

	if (gen != r->gen)
		rx_reset(r, t, gen);
	uint32_t state = ACQ(lg.state);
	uint64_t pass = rte_rdtsc();
	if (state >= LG_WARMUP && state <= LG_DRAINING && !r->frozen) {
		if (r->last_pass && pass - r->last_pass > r->stall_max)
			LG_STORE(r->stall_max, pass - r->last_pass);
		r->last_pass = pass;
	}
	if (!r->t_arm && state >= LG_WARMUP && state <= LG_DONE)
		r->t_arm = LG_LOAD(t->t_arm); /* stored before the state left starting (release) */
	if (!r->frozen && state == LG_DRAINING && pass >= LG_LOAD(t->t_drain)) {
		r->frozen = 1;
		log_tails(r, t);
		REL(lg.rx_final_gen, r->gen);
	}
	int in_trial = r->gen != 0 && ACQ(lg.rx_gen_ack) == r->gen;
	for (uint16_t port = 0; port < lg.nb_ports; port++) {
		if (!ACQ(lg.port[port].started))
			continue;
		for (uint16_t q = 0; q < lg.nb_queues; q++) {
			uint16_t n = rte_eth_rx_burst(port, q, m, LG_RX_BURST);
			if (n == 0)
				continue;
			uint64_t now = rte_rdtsc();
			if (in_trial) {
				for (uint16_t k = 0; k < n; k++) {
					if (k + 1 < n)
						rte_prefetch0(rte_pktmbuf_mtod(m[k + 1], void *));
					rx_frame(r, &r->port[port], q, m[k], now);
				}
			} else {
				LG_ADD(lg.rx_idle, n);
			}
			rte_pktmbuf_free_bulk(m, n);
		}
	}
}

int
lg_worker(void *arg)
{
	(void)arg;
	unsigned int self = rte_lcore_id();
	int do_tx = self == lg.tx_lcore, do_rx = self == lg.rx_lcore;

	while (!ACQ(lg.quit)) {
		if (do_tx)
			tx_step(lg.tx);
		if (do_rx)
			rx_step(lg.rx, lg.tx);
	}
	return 0;
}
