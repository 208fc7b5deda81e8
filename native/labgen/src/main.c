/* SPDX-License-Identifier: MIT
 *
 * labgen's process: EAL, mbuf pool, ports, workers; then it waits for /labgen/quit, SIGTERM or
 * SIGINT and stops, closes and cleans up after itself.
 *
 *   labgen EAL-OPTIONS -- [--queues N] [--rxd N] [--txd N] [--mbufs N] [--wait-ports]
 *
 * --wait-ports leaves every port unconfigured until /labgen/port_start,N: a net_vhost port in
 * client mode (client=1) connects to its socket when it is configured (DPDK 22.11
 * drivers/net/vhost/rte_eth_vhost.c: eth_dev_configure -> vhost_driver_setup ->
 * rte_vhost_driver_start), and the embedded lab's guest listens on socket N+1 only after socket
 * N was connected, so each port must connect only once its peer listens (testpmd does this with
 * --disable-device-start and "port start N").
 */
#include "labgen.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

struct lg_app lg = {.ctl = PTHREAD_MUTEX_INITIALIZER};

static char runtime_dir[4096];

static void
on_signal(int signum)
{
	(void)signum;
	__atomic_store_n(&lg.quit, 1, __ATOMIC_RELEASE);
}

/* Registered before rte_eal_init, so it runs after DPDK's own exit handlers (atexit runs them
 * in reverse order), among them telemetry's unlink_sockets: the runtime directory is then empty
 * (with --in-memory nothing else is written there) and goes too. */
static void
remove_runtime_dir(void)
{
	if (runtime_dir[0])
		rmdir(runtime_dir);
}

int
lg_port_start(uint16_t port, char *err, size_t errlen)
{
	struct rte_eth_conf conf;
	uint16_t rxd = lg.rxd, txd = lg.txd;
	int rc;

	if (port >= lg.nb_ports) {
		snprintf(err, errlen, "no port %u (ports: %u)", port, lg.nb_ports);
		return -EINVAL;
	}
	if (__atomic_load_n(&lg.port[port].started, __ATOMIC_ACQUIRE))
		return 0;
	memset(&conf, 0, sizeof(conf));
	rc = rte_eth_dev_configure(port, lg.nb_queues, lg.nb_queues, &conf);
	if (rc < 0) {
		snprintf(err, errlen, "port %u: configure failed: %s", port, rte_strerror(-rc));
		return rc;
	}
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
	if (rc < 0) {
		snprintf(err, errlen, "port %u: descriptors: %s", port, rte_strerror(-rc));
		return rc;
	}
	int socket = rte_eth_dev_socket_id(port);
	socket = socket < 0 ? (int)rte_socket_id() : socket;
	for (uint16_t q = 0; q < lg.nb_queues; q++) {
		rc = rte_eth_rx_queue_setup(port, q, rxd, (unsigned int)socket, NULL, lg.pool);
		if (rc == 0)
			rc = rte_eth_tx_queue_setup(port, q, txd, (unsigned int)socket, NULL);
		if (rc < 0) {
			snprintf(err, errlen, "port %u queue %u: setup failed: %s", port, q, rte_strerror(-rc));
			return rc;
		}
	}
	rc = rte_eth_dev_start(port);
	if (rc < 0) {
		snprintf(err, errlen, "port %u: start failed: %s", port, rte_strerror(-rc));
		return rc;
	}
	rte_eth_promiscuous_enable(port); /* not every PMD has it (vhost does not): no matter */
	rte_eth_macaddr_get(port, &lg.port[port].mac);
	__atomic_store_n(&lg.port[port].started, 1, __ATOMIC_RELEASE);
	printf("labgen: port %u (%s) started, %u queues, %u/%u descriptors\n", port, lg.port[port].name,
	       lg.nb_queues, rxd, txd);
	return 0;
}

void
lg_clock_pair(uint64_t *tsc, uint64_t *mono_ns)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 3; i++) {
		struct timespec ts;
		uint64_t a = rte_rdtsc();
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t b = rte_rdtsc();
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*mono_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		}
	}
}

void
lg_bins_free(struct lg_bins *b)
{
	if (b == NULL)
		return;
	free(b->offered);
	free(b->sent);
	free(b->rx);
	free(b);
}

static int
parse_u32(const char *text, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(text, &end, 10);
	if (errno || end == text || *end || v < min || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int
parse_app_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{"queues", required_argument, NULL, 'q'}, {"rxd", required_argument, NULL, 'r'},
		{"txd", required_argument, NULL, 't'},    {"mbufs", required_argument, NULL, 'm'},
		{"wait-ports", no_argument, NULL, 'w'},   {NULL, 0, NULL, 0},
	};
	uint32_t v;
	int c;

	lg.nb_queues = 1;
	lg.rxd = lg.txd = 1024;
	lg.mbufs = 16384;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			if (parse_u32(optarg, 1, LG_MAX_QUEUES, &v) < 0)
				goto bad;
			lg.nb_queues = (uint16_t)v;
			break;
		case 'r':
		case 't':
			if (parse_u32(optarg, 64, 32768, &v) < 0)
				goto bad;
			*(c == 'r' ? &lg.rxd : &lg.txd) = (uint16_t)v;
			break;
		case 'm':
			if (parse_u32(optarg, 1024, UINT32_MAX / 2, &v) < 0)
				goto bad;
			lg.mbufs = v;
			break;
		case 'w':
			lg.wait_ports = 1;
			break;
		default:
			goto bad;
		}
	}
	if (optind != argc)
		goto bad;
	return 0;
bad:
	fprintf(stderr, "labgen: usage: labgen EAL-OPTIONS -- [--queues 1..%d] [--rxd N] [--txd N] "
			"[--mbufs N] [--wait-ports]\n", LG_MAX_QUEUES);
	return -1;
}

static void
stop_ports(void)
{
	for (uint16_t port = 0; port < lg.nb_ports; port++) {
		if (__atomic_load_n(&lg.port[port].started, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&lg.port[port].started, 0, __ATOMIC_RELEASE);
			rte_eth_dev_stop(port);
		}
		rte_eth_dev_close(port);
	}
}

int
main(int argc, char **argv)
{
	char err[256];
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	atexit(remove_runtime_dir);
	if (lg_register_commands() < 0) {
		fprintf(stderr, "labgen: cannot register telemetry commands\n");
		return 1;
	}
	rc = rte_eal_init(argc, argv);
	if (rc < 0) {
		fprintf(stderr, "labgen: EAL init failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	snprintf(runtime_dir, sizeof(runtime_dir), "%s", rte_eal_get_runtime_dir());
	argc -= rc;
	argv += rc;
	optind = 1;
	if (parse_app_args(argc, argv) < 0) {
		rte_eal_cleanup();
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	int exit_code = 1;
	lg.hz = rte_get_tsc_hz();
	lg.ns_per_cycle = 1e9 / (double)lg.hz;
	lg.nb_ports = rte_eth_dev_count_avail();
	if (lg.nb_ports == 0 || lg.nb_ports > LG_MAX_PORTS) {
		fprintf(stderr, "labgen: %u ports (need 1..%d: pass --vdev)\n", lg.nb_ports, LG_MAX_PORTS);
		lg.nb_ports = 0;
		goto out;
	}
	if (lg.nb_ports * lg.nb_queues > LG_MAX_PORT_QUEUES) {
		fprintf(stderr, "labgen: %u ports x %u queues is more than %d: /labgen/stats would not fit "
			"DPDK telemetry's 16 KiB reply\n", lg.nb_ports, lg.nb_queues, LG_MAX_PORT_QUEUES);
		goto out;
	}
	unsigned int workers[2], nw = 0, lcore;
	RTE_LCORE_FOREACH_WORKER(lcore) {
		if (nw < 2)
			workers[nw++] = lcore;
	}
	if (nw == 0) {
		fprintf(stderr, "labgen: needs a worker lcore besides the main one (--lcores 0@...,1@CPU)\n");
		goto out;
	}
	lg.workers = nw;
	lg.tx_lcore = workers[0];
	lg.rx_lcore = workers[nw - 1];
	lg.pool = rte_pktmbuf_pool_create("labgen", lg.mbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
					  (int)rte_socket_id());
	lg.tx = calloc(1, sizeof(*lg.tx));
	lg.rx = calloc(1, sizeof(*lg.rx));
	if (lg.tx != NULL && lg.rx != NULL) {
		lg.tx->refused.cap = lg.rx->lost.cap = LG_MAX_GAPS;
		lg.tx->refused.e = calloc(LG_MAX_GAPS, sizeof(struct lg_gap));
		lg.rx->lost.e = calloc(LG_MAX_GAPS, sizeof(struct lg_gap));
	}
	if (lg.pool == NULL || lg.tx == NULL || lg.rx == NULL || lg.tx->refused.e == NULL || lg.rx->lost.e == NULL) {
		fprintf(stderr, "labgen: cannot allocate %u mbufs or the trial state: %s\n", lg.mbufs,
			rte_strerror(rte_errno));
		goto out;
	}
	for (uint16_t port = 0; port < lg.nb_ports; port++) {
		lg.port[port].id = port;
		/* testpmd's paired topology: 0<->1, 2<->3, ...; an odd last port is looped to itself */
		lg.port[port].peer = (port ^ 1) < lg.nb_ports ? (uint16_t)(port ^ 1) : port;
		rte_eth_dev_get_name_by_port(port, lg.port[port].name);
		rte_eth_macaddr_get(port, &lg.port[port].mac);
		if (!lg.wait_ports && lg_port_start(port, err, sizeof(err)) < 0) {
			fprintf(stderr, "labgen: %s\n", err);
			goto out;
		}
	}
	lg.req.flows = 1;
	if (nw == 2)
		rte_eal_remote_launch(lg_worker, NULL, workers[1]);
	rte_eal_remote_launch(lg_worker, NULL, workers[0]);
	__atomic_store_n(&lg.ready, 1, __ATOMIC_RELEASE);
	printf("labgen: ready: %u ports, %u queues, %u worker(s) (tx lcore %u, rx lcore %u), "
	       "TSC %lu Hz\n", lg.nb_ports, lg.nb_queues, nw, lg.tx_lcore, lg.rx_lcore,
	       (unsigned long)lg.hz);
	while (!__atomic_load_n(&lg.quit, __ATOMIC_ACQUIRE))
		usleep(10000);
	printf("labgen: stopping\n");
	rte_eal_mp_wait_lcore();
	exit_code = 0;
out:
	__atomic_store_n(&lg.quit, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&lg.ctl); /* no command runs now, and none will touch ports or trials */
	__atomic_store_n(&lg.ready, 0, __ATOMIC_RELEASE);
	stop_ports();
	pthread_mutex_unlock(&lg.ctl);
	rte_eal_cleanup();
	if (lg.tx != NULL)
		free(lg.tx->refused.e);
	if (lg.rx != NULL)
		free(lg.rx->lost.e);
	free(lg.tx);
	free(lg.rx);
	lg_bins_free(lg.bins);
	return exit_code;
}
