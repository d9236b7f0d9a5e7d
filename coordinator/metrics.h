/* metrics: the coordinator's metric registry (docs/observability.md).
 *
 * Counters, gauges and histograms (fixed buckets), each with at most one
 * label (e.g. worker="gpu") and up to METRICS_MAX_SERIES label values. The
 * coordinator's loop updates them; HTTP threads render them (Prometheus text
 * exposition format 0.0.4 for GET /metrics, a JSON snapshot for /metrics.json
 * and the dashboard), so every call takes the registry's mutex.
 *
 * Rates: metrics_tick() (called by the loop about once a second) remembers
 * each counter's value and stores its per-second rate over the last interval,
 * so one snapshot carries tokens/s and utilisation without a second sample. */
#ifndef UNICORN_METRICS_H
#define UNICORN_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define METRICS_MAX 48            /* metrics per registry */
#define METRICS_MAX_SERIES 16     /* label values per metric */
#define METRICS_MAX_BUCKETS 24    /* finite histogram bounds (+Inf is implicit) */
#define METRICS_NAME_MAX 64
#define METRICS_LABEL_MAX 64

enum metrics_kind { METRICS_COUNTER = 1, METRICS_GAUGE, METRICS_HISTOGRAM };

struct metrics;

int metrics_create(struct metrics **out);
void metrics_destroy(struct metrics *m);

/* Define a metric. name: [a-zA-Z_:][a-zA-Z0-9_:]*; label: NULL (none) or a
 * label name [a-zA-Z_][a-zA-Z0-9_]*; buckets: strictly increasing finite
 * upper bounds (histograms only). Returns the metric id (>= 0) or ERR_*. */
int metrics_define(struct metrics *m, const char *name, enum metrics_kind kind, const char *help,
		   const char *label, const double *buckets, size_t n_buckets);

/* Updates. label_value is ignored for unlabelled metrics (pass NULL); a
 * new label value beyond METRICS_MAX_SERIES is dropped (returns ERR_RANGE).
 * add: counter += v (v >= 0) or gauge += v; set: gauge = v, or a counter
 * mirrored from elsewhere (e.g. a restart count); observe: histograms. */
int metrics_add(struct metrics *m, int id, const char *label_value, double v);
int metrics_set(struct metrics *m, int id, const char *label_value, double v);
int metrics_observe(struct metrics *m, int id, const char *label_value, double v);

/* Current value (counter/gauge) or count (histogram); 0 if unknown. */
double metrics_value(struct metrics *m, int id, const char *label_value);
/* Per-second rate of a counter over the last metrics_tick interval. */
double metrics_rate(struct metrics *m, int id, const char *label_value);

/* Update the rates if at least min_interval_s passed since the last tick
 * (now_s: monotonic seconds). Returns 1 when it ticked, else 0. */
int metrics_tick(struct metrics *m, double now_s, double min_interval_s);

/* Prometheus text format (version 0.0.4): "# HELP", "# TYPE", one line per
 * series, histograms as cumulative _bucket{le=...} lines, _sum and _count.
 * *out is malloc'ed and NUL-terminated. */
int metrics_render_prom(struct metrics *m, char **out, size_t *len);

/* JSON snapshot:
 * {"time": unix s, "metrics": {NAME: {"type": "counter"|"gauge"|"histogram",
 *   "label": LABEL|null, "series": {VALUE|"": {"value", "rate"} or
 *   {"count", "sum", "p50", "p90", "p99", "buckets": [[le, cumulative]...]}}}}}
 * New reference, NULL when out of memory. */
json_t *metrics_snapshot(struct metrics *m);

/* Estimated quantile q (0..1) of a histogram series from its buckets (linear
 * within a bucket, like PromQL's histogram_quantile); NaN when empty. */
double metrics_quantile(struct metrics *m, int id, const char *label_value, double q);

/* Write the escaped form of a label value ('\\' -> "\\\\", '"' -> "\\\"",
 * newline -> "\\n") into out[cap]. Returns the length (truncated to fit). */
size_t metrics_escape_label(const char *v, char *out, size_t cap);

/* --- the coordinator's metric set ------------------------------------------ */

struct metrics_cluster {
	int tokens, prompt_tokens, requests, steps;
	int worker_steps, worker_busy, link_busy, worker_util, handoff, status_busy;
	int ttft, itl;
	int queue_depth, active, slots, kv_used, kv_capacity, kv_ratio;
	int kv_prefix_hits, kv_preemptions, kv_evictions, kv_cached, kv_ctx, kv_type, kv_pool_bytes;
	int image_encodes;
	int kv_bytes, weights_bytes, scratch_bytes, restarts, uptime;
	int draining;
	int stage_first, stage_last; /* pipeline placement: each stage's layer range, by worker */
};

/* Define the set (docs/observability.md lists it). */
int metrics_cluster_define(struct metrics *m, struct metrics_cluster *ids);

/* Fold the supervisor's status.json (per-process restarts, KV/weights/
 * scratch bytes, the workers' own STATUS busy time) into the registry. A
 * missing or unreadable file is not an error (the supervisor rewrites it
 * every second). */
int metrics_cluster_load_status(struct metrics *m, const struct metrics_cluster *ids,
				const char *path);

#endif
