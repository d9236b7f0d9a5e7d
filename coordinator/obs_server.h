/* obs_server: the coordinator's observability answers for the API process
 * (api/, which serves /metrics, /metrics.json, /dashboard and /trace over
 * HTTP; docs/observability.md), on RUNDIR/obs.ipc.
 *
 * A req/rep link of raw bytes (ipc/bus.h bus_serve_bytes): answers can be
 * megabytes (a trace), more than an ipc/msg.h message holds. One thread
 * blocks in receive (no polling) and answers one request at a time:
 *
 *   "metrics"          -> Prometheus text (metrics_render_prom)
 *   "metrics.json"     -> the JSON snapshot (metrics_snapshot)
 *   "trace SINCE_NS"   -> the spans since CLOCK_MONOTONIC SINCE_NS (the
 *                         clock is system-wide, so the API's own reading of
 *                         it marks the start of a /trace window)
 *
 * Each answer starts with a status line "200\n" (or "400\n"/"503\n" and a
 * sentence), then the body. */
#ifndef UNICORN_OBS_SERVER_H
#define UNICORN_OBS_SERVER_H

/* The coordinator's STATUS device while a worker is down (status.json; the
 * API's /health answers 503 then). */
#define COORD_DEGRADED "coordinator (worker down)"
#define OBS_MAX_ANSWER (256u << 20) /* the API's receive limit */

struct metrics;
struct trace;
struct obs_server;

/* Listen on RUNDIR/obs.ipc and serve m and t (either may be NULL: 503). */
int obs_server_start(const char *rundir, struct metrics *m, struct trace *t, struct obs_server **out);
void obs_server_stop(struct obs_server *s);

#endif
