/* SPDX-License-Identifier: MIT
 *
 * labgen: a paced traffic generator and sink for DPDK ports (vhost-user, virtio_user, ring).
 *
 * DPDK 22.11's testpmd cannot pace on vhost/virtio ports (its queue rate limit is an ethdev op
 * those PMDs lack: rte_eth_set_queue_rate_limit returns -ENOTSUP), so labgen paces in software:
 * frame i of a trial is due at t0 + ceil(i * hz / rate) TSC cycles and a burst is handed to the
 * driver as soon as its oldest frame is due, never earlier (stats.h lg_due). Sending and
 * receiving run in the same process, so the TSC stamped in a frame and the TSC read when it comes
 * back are the same clock (the CPUs here show constant_tsc and nonstop_tsc).
 *
 * Topology, as testpmd's default "paired" port topology: port 2k sends to port 2k+1 and port
 * 2k+1 to port 2k, both at once; an odd last port (or a single one) is looped to itself. With
 * several queues per port, flow f goes out on queue f % queues.
 *
 * Threads: the EAL main lcore waits for SIGTERM/SIGINT or /labgen/quit; DPDK's telemetry threads
 * run the /labgen/ commands (control.c; they are control threads, placed on the CPUs no lcore
 * uses or else on the main lcore's: DPDK 22.11 eal_common_options.c compute_ctrl_threads_cpuset);
 * one worker lcore sends and receives, or with two workers the first sends and the second
 * receives (worker.c).
 */
#ifndef LABGEN_H
#define LABGEN_H

#include <pthread.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_mempool.h>

#include "stats.h"

#define LG_VERSION "1.1"
#define LG_MAX_PORTS 16
#define LG_MAX_QUEUES 16
/* /labgen/stats carries about 0.9 KB per port with 8 queues (13 counters, 3 per-queue arrays of
 * up to 20-digit numbers): 64 port-queues keep it well inside telemetry's 16 KiB reply (MAX_OUTPUT_LEN
 * in DPDK 22.11 lib/telemetry/telemetry.c) */
#define LG_MAX_PORT_QUEUES 64
#define LG_MAX_FLOWS 1024
#define LG_MAX_BURST 512 /* testpmd's MAX_PKT_BURST (app/test-pmd/testpmd.h) */
/* what one rx_burst asks for: net_vhost dequeues at most 32 per call (VHOST_MAX_PKT_BURST in DPDK
 * 22.11 drivers/net/vhost/rte_eth_vhost.c; lib/vhost caps a dequeue at MAX_PKT_BURST 32), so more
 * only loops in the PMD; 32 is testpmd's default burst too. With 64, the embedded guest forwarded
 * visibly less to labgen than to flowgen here (0.6-0.8 vs 0.8-1.2 Mpps per port, 3 pairs). */
#define LG_RX_BURST 32
#define LG_MIN_SIZE 64   /* frame sizes are the mbuf's pkt_len, as testpmd's --txpkts: virtual */
#define LG_MAX_SIZE 1518 /* ports carry no FCS, so labgen's 64 is labctl's packet_size 64 */
#define LG_MAX_RATE UINT64_C(1000000000)
#define LG_PAUSED_MAX_PCT 10 /* a paced trial whose shifted pauses took more of its time is invalid */
#define LG_DEFAULT_TOLERANCE 64 /* frames; see lg_late_limit() in worker.c for the rule */
#define LG_MAX_GAPS 65536       /* gaps each log keeps per trial (48 bytes each); more are counted as dropped */
#define LG_MAX_BINS 16384       /* time bins per trial (2.2 KB each: 35 MB at most, touched as used) */
#define LG_MIN_BIN_NS 1000000u  /* 1 ms */
#define LG_MAX_BIN_NS UINT64_C(60000000000) /* 60 s: a bin's 32-bit histogram counts stay below 2^32 */

/* Ethernet (14) + IPv4 (20) + UDP (8) */
#define LG_HDR_LEN 42
#define LG_MAGIC 0x4c47 /* "LG" */

/* What labgen writes after the UDP header: 22 bytes, so that it fits a 64-byte frame. The tag
 * is the trial number times two, plus one for warm-up frames: frames of another trial (or of a
 * warm-up) never count in this one. */
struct lg_payload {
	uint16_t magic;
	uint16_t tag;
	uint16_t stream; /* sending port * flows + flow */
	uint64_t seq;    /* per stream, counting only frames the driver took */
	uint64_t tsc;    /* read just before the burst was handed to rte_eth_tx_burst */
} __attribute__((packed));

enum lg_state { LG_IDLE, LG_STARTING, LG_WARMUP, LG_RUNNING, LG_DRAINING, LG_DONE };

/* A trial's time bins (stats.h): the sending lcore's counts and the receiving lcore's, by send stamp.
 * Allocated by /labgen/start (control.c) and freed there when the next trial starts, when neither lcore
 * can touch them any more (the last trial is done: sending ended and the receiver froze). */
struct lg_bins {
	uint64_t n;                /* bins */
	uint64_t width;            /* TSC cycles a bin spans */
	uint64_t *offered, *sent;  /* sending lcore: frames handed to the driver, and taken by it */
	struct lg_bin *rx;         /* receiving lcore: unique frames received, latency */
	uint64_t tx_outside;       /* frames stamped after the last bin (atomic, sending lcore) */
	uint64_t rx_outside;       /* (atomic, receiving lcore) */
};

struct lg_params {
	uint64_t rate;        /* frames per second per sending port; 0: as fast as possible */
	uint64_t count;       /* measured frames per sending port; 0: rate * duration */
	uint64_t duration_ns; /* measured phase (with rate 0 and no count: how long to send) */
	uint64_t warmup_ns;   /* sent before the measured phase on the same schedule, not counted */
	uint64_t drain_ns;    /* how long to keep receiving after the last frame was sent */
	uint64_t tolerance;   /* frames the sender may fall behind its schedule (validity) */
	uint64_t shift_ns;    /* a pause of the sender longer than this shifts its schedule; 0: catch up */
	uint64_t bin_ns;      /* width of the time bins; 0: no bins */
	uint32_t size, burst, flows, port_mask;
	struct lg_bins *bins; /* set by /labgen/start when bin_ns > 0 */
};

struct lg_port {
	uint16_t id;
	uint16_t peer;
	uint32_t started; /* atomic: set (release) once rte_eth_dev_start succeeded */
	struct rte_ether_addr mac;
	char name[64];
};

/* ---- owned by the sending lcore ---- */
struct lg_port_tx {
	int active;
	uint64_t idx;      /* next frame of this port (warm-up frames first, then measured ones) */
	uint64_t next_due; /* cycles after t0 when frame idx is due */
	uint64_t n_warm, n_total;
	uint64_t offered, sent, dropped, unsent, warmup_sent;
	uint64_t late_last; /* cycles: how late this port's last measured burst went */
	/* a run of bursts the driver refused frames of (worker.c send_frames): logged as one gap */
	int refusing, refusing_head;
	uint64_t refused_before, refused_count;
	uint64_t last_taken; /* send stamp of the last burst the driver took frames of */
	uint64_t q_sent[LG_MAX_QUEUES], q_dropped[LG_MAX_QUEUES];
};

struct lg_trial_tx {
	uint32_t gen;
	struct lg_params p;
	uint64_t t0, t_run, t_sched_end, t_last, t_drain;
	uint64_t t_arm;    /* when the trial was armed: never shifted; the time bins count from it */
	uint64_t mono_arm; /* CLOCK_MONOTONIC ns read with t_arm (lg_clock_pair) */
	uint64_t late_limit; /* cycles */
	uint64_t shift_min;  /* cycles: p.shift_ns */
	uint64_t last_pass;  /* when the last sending pass of a paced trial began */
	int caught_up;       /* that pass sent every frame due when it began */
	uint64_t shifts, shifted; /* atomic: pauses the schedule was shifted by in the measured phase, and their sum (cycles) */
	uint64_t alloc_fail;
	uint64_t early; /* measured bursts handed to the driver before their due time: always 0 */
	uint32_t stopped;
	struct lg_hist lateness; /* ns, one value per burst handed to the driver */
	struct lg_gaplog refused; /* runs of refused frames, per sending port */
	struct lg_port_tx port[LG_MAX_PORTS];
	uint64_t tx_seq[LG_MAX_PORTS * LG_MAX_FLOWS]; /* = frames of each stream the driver took */
	uint16_t flow_queue[LG_MAX_FLOWS];
	uint8_t tmpl[LG_MAX_PORTS][LG_MAX_FLOWS][LG_HDR_LEN];
};

/* ---- owned by the receiving lcore ---- */
struct lg_port_rx {
	uint64_t q_rx[LG_MAX_QUEUES]; /* this trial's measured frames, by receiving queue */
	uint64_t warmup, stray, late;
};

struct lg_trial_rx {
	uint32_t gen;
	uint16_t tag;
	int frozen;
	uint32_t streams;
	uint64_t last_pass; /* TSC of the worker loop's previous pass */
	uint64_t stall_max; /* cycles: the longest gap between two passes during the trial */
	uint64_t t_arm;     /* the sending lcore's t_arm, read once the trial is armed */
	struct lg_bins *bins;
	struct lg_gaplog lost; /* numbers skipped by a stream */
	struct lg_hist latency; /* ns */
	struct lg_port_rx port[LG_MAX_PORTS];
	struct lg_stream stream[LG_MAX_PORTS * LG_MAX_FLOWS];
};

struct lg_app {
	/* set up once in main() */
	uint16_t nb_ports, nb_queues, rxd, txd;
	uint32_t mbufs;
	int wait_ports;
	uint64_t hz;
	double ns_per_cycle;
	struct rte_mempool *pool;
	struct lg_port port[LG_MAX_PORTS];
	unsigned int tx_lcore, rx_lcore, workers;
	uint32_t ready;
	uint32_t quit; /* atomic */

	/* control (telemetry threads, under ctl) -> sending lcore */
	pthread_mutex_t ctl;
	struct lg_params req;
	uint32_t req_gen;  /* atomic, release after req is written */
	uint32_t stop_gen; /* atomic */

	/* published by the workers */
	uint32_t state;        /* atomic enum lg_state, written by the sending lcore */
	uint32_t cur_gen;      /* atomic: the trial the sending lcore took */
	uint32_t rx_gen_ack;   /* atomic: the receiving lcore reset its counters for this trial */
	uint32_t rx_final_gen; /* atomic: the receiving lcore drained and froze this trial */
	uint64_t rx_idle;      /* frames received outside any trial (receiving lcore) */

	struct lg_trial_tx *tx;
	struct lg_trial_rx *rx;
	struct lg_bins *bins; /* the last trial's bins (control, under ctl) */
};

extern struct lg_app lg;

/* worker.c */
int lg_worker(void *arg);
const char *lg_state_name(uint32_t state);
uint64_t lg_late_limit(const struct lg_params *p, uint64_t hz, uint64_t frames);
uint64_t lg_measured_frames(const struct lg_params *p);

/* main.c */
int lg_port_start(uint16_t port, char *err, size_t errlen);
/* (TSC, CLOCK_MONOTONIC ns) read together: the TSC half-way between two reads around clock_gettime,
 * the closest of three tries; how labctl relates labgen's stamps to its own clock. */
void lg_clock_pair(uint64_t *tsc, uint64_t *mono_ns);
void lg_bins_free(struct lg_bins *b);

/* control.c */
int lg_register_commands(void);

#endif
