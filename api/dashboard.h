/* dashboard: the coordinator's observability endpoints, served by the HTTP
 * server (api/http.c) from its connection threads
 * (docs/observability.md):
 *
 *   GET /metrics           Prometheus text (metrics_render_prom)
 *   GET /metrics.json      JSON snapshot (metrics_snapshot)
 *   GET /dashboard         the web dashboard (api/dashboard.html, embedded)
 *   GET /dashboard/events  server-sent events: one snapshot per second
 *   GET /trace?seconds=N   waits N s (1..60, default 2), then the spans of
 *                          those seconds as Chrome/Perfetto trace JSON
 *
 * The numbers live in the coordinator (coordinator/metrics.h, trace.h); the
 * API process registers a source that asks it for them
 * (coordinator/obs_server.h) once at start-up (dashboard_register). */
#ifndef UNICORN_DASHBOARD_H
#define UNICORN_DASHBOARD_H

#include <stddef.h>

struct MHD_Connection;
struct MHD_Response;

enum dashboard_route {
	DASH_NONE = 0, DASH_METRICS, DASH_METRICS_JSON, DASH_PAGE, DASH_EVENTS, DASH_TRACE,
};

#define DASHBOARD_TRACE_MAX_S 60

/* The page (api/dashboard_page.c, the text of dashboard.html). */
extern const char dashboard_page_html[];

/* Where the numbers come from: fn(arg, what, &body, &len) gives 0 and a
 * malloc'ed body for what = "metrics" (Prometheus text), "metrics.json" or
 * "trace SINCE_NS" (spans since that CLOCK_MONOTONIC time), else ERR_* (the
 * endpoint answers 503). Called from connection threads. */
typedef int (*dashboard_source_fn)(void *arg, const char *what, char **body, size_t *len);
void dashboard_register(dashboard_source_fn fn, void *arg);
/* Stop SSE streams and pending /trace waits (before the server stops). */
void dashboard_shutdown(void);

/* Which endpoint url (path, no query) is; DASH_NONE if none of ours. */
int dashboard_route(const char *url);

/* Build the answer of route for connection c (may block: /trace waits its
 * seconds, /dashboard/events streams). *status = the HTTP status. NULL when
 * out of memory. The caller adds its common headers and queues it. */
struct MHD_Response *dashboard_response(struct MHD_Connection *c, int route, unsigned *status);

/* --- client side (unicorn top, unicorn trace) -------------------------------- */

/* GET path (e.g. "/metrics.json") from the coordinator of cluster name:
 * its URL from RUNDIR/http, with Authorization: Bearer $UNICORN_API_KEY when
 * that is set. *body (malloc'ed, NUL-terminated) and *http_status on
 * success. ERR_NOTFOUND when the cluster has no HTTP server, ERR_IO when it
 * cannot be reached, ERR_TIMEOUT after timeout_s. */
int dashboard_fetch(const char *name, const char *path, int timeout_s, char **body,
		    size_t *len, int *http_status);

#endif
