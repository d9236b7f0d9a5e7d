/* metrics and trace: Prometheus text exactness (HELP/TYPE, label escaping,
 * cumulative histogram buckets, _sum, _count), rates, quantiles, the JSON
 * snapshot; the trace ring and its Trace Event JSON; the embedded dashboard
 * page equals api/dashboard.html; the progress bar prints plain lines
 * (no '\r') when its stream is not a terminal. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "api/dashboard.h"
#include "coordinator/metrics.h"
#include "coordinator/trace.h"
#include "common/err.h"
#include "ipc/msg.h"
#include "common/progress.h"

Test(metrics, prometheus_text_exact)
{
	struct metrics *m;
	cr_assert_eq(metrics_create(&m), 0);
	int c = metrics_define(m, "t_requests_total", METRICS_COUNTER, "Requests\\done\nok.",
			       "worker", NULL, 0);
	int g = metrics_define(m, "t_queue", METRICS_GAUGE, "Queue depth.", NULL, NULL, 0);
	double b[] = { 0.1, 1, 2.5 };
	int h = metrics_define(m, "t_latency_seconds", METRICS_HISTOGRAM, "Latency.", NULL, b, 3);
	int hl = metrics_define(m, "t_hop_seconds", METRICS_HISTOGRAM, "Hop.", "worker", b, 1);
	cr_assert(c >= 0 && g >= 0 && h >= 0 && hl >= 0);
	cr_assert_eq(metrics_add(m, c, "gpu", 3), 0);
	cr_assert_eq(metrics_add(m, c, "a\"b\\c\nd", 1), 0);
	cr_assert_eq(metrics_set(m, g, NULL, 2.5), 0);
	/* 0.05 -> le 0.1; 0.1 -> le 0.1 (upper bound inclusive); 2 -> 2.5; 7 -> +Inf */
	double obs[] = { 0.05, 0.1, 2, 7 };
	for (int i = 0; i < 4; i++)
		cr_assert_eq(metrics_observe(m, h, NULL, obs[i]), 0);
	cr_assert_eq(metrics_observe(m, hl, "npu", 0.5), 0);
	/* wrong operations for the kind are refused */
	cr_assert_eq(metrics_observe(m, c, "gpu", 1), ERR_INVAL);
	cr_assert_eq(metrics_add(m, c, "gpu", -1), ERR_INVAL);
	cr_assert_eq(metrics_add(m, h, NULL, 1), ERR_INVAL);
	char *s;
	size_t n;
	cr_assert_eq(metrics_render_prom(m, &s, &n), 0);
	const char *want =
		"# HELP t_requests_total Requests\\\\done\\nok.\n"
		"# TYPE t_requests_total counter\n"
		"t_requests_total{worker=\"gpu\"} 3\n"
		"t_requests_total{worker=\"a\\\"b\\\\c\\nd\"} 1\n"
		"# HELP t_queue Queue depth.\n"
		"# TYPE t_queue gauge\n"
		"t_queue 2.5\n"
		"# HELP t_latency_seconds Latency.\n"
		"# TYPE t_latency_seconds histogram\n"
		"t_latency_seconds_bucket{le=\"0.1\"} 2\n"
		"t_latency_seconds_bucket{le=\"1\"} 2\n"
		"t_latency_seconds_bucket{le=\"2.5\"} 3\n"
		"t_latency_seconds_bucket{le=\"+Inf\"} 4\n"
		"t_latency_seconds_sum 9.15\n"
		"t_latency_seconds_count 4\n"
		"# HELP t_hop_seconds Hop.\n"
		"# TYPE t_hop_seconds histogram\n"
		"t_hop_seconds_bucket{worker=\"npu\",le=\"0.1\"} 0\n"
		"t_hop_seconds_bucket{worker=\"npu\",le=\"+Inf\"} 1\n"
		"t_hop_seconds_sum{worker=\"npu\"} 0.5\n"
		"t_hop_seconds_count{worker=\"npu\"} 1\n";
	cr_assert_str_eq(s, want);
	cr_assert_eq(n, strlen(want));
	free(s);
	metrics_destroy(m);
}

Test(metrics, define_rules)
{
	struct metrics *m;
	cr_assert_eq(metrics_create(&m), 0);
	double bad[] = { 1, 1 };
	cr_assert_eq(metrics_define(m, "9bad", METRICS_GAUGE, "", NULL, NULL, 0), ERR_INVAL);
	cr_assert_eq(metrics_define(m, "ok", METRICS_GAUGE, "", "le", NULL, 0), ERR_INVAL);
	cr_assert_eq(metrics_define(m, "ok", METRICS_GAUGE, "", "a-b", NULL, 0), ERR_INVAL);
	cr_assert_eq(metrics_define(m, "h", METRICS_HISTOGRAM, "", NULL, bad, 2), ERR_INVAL);
	cr_assert_eq(metrics_define(m, "h", METRICS_HISTOGRAM, "", NULL, NULL, 0), ERR_INVAL);
	cr_assert_eq(metrics_define(m, "ok", METRICS_GAUGE, "", NULL, NULL, 0), 0);
	cr_assert_lt(metrics_define(m, "ok", METRICS_GAUGE, "", NULL, NULL, 0), 0, "defined twice");
	/* label values beyond the series cap are dropped, not a crash */
	int c = metrics_define(m, "c_total", METRICS_COUNTER, "", "w", NULL, 0);
	char lv[16];
	for (int i = 0; i < METRICS_MAX_SERIES; i++) {
		snprintf(lv, sizeof lv, "w%d", i);
		cr_assert_eq(metrics_add(m, c, lv, 1), 0);
	}
	cr_assert_eq(metrics_add(m, c, "one-too-many", 1), ERR_RANGE);
	cr_assert_eq(metrics_set(m, 999, NULL, 1), ERR_RANGE);
	cr_assert_eq(metrics_add(m, c, "w0", NAN), ERR_INVAL);
	metrics_destroy(m);
}

Test(metrics, rates_quantiles_snapshot)
{
	struct metrics *m;
	cr_assert_eq(metrics_create(&m), 0);
	int c = metrics_define(m, "x_total", METRICS_COUNTER, "x", NULL, NULL, 0);
	double b[] = { 1, 2, 4 };
	int h = metrics_define(m, "lat_seconds", METRICS_HISTOGRAM, "l", NULL, b, 3);
	cr_assert_eq(metrics_tick(m, 100.0, 1.0), 1);
	metrics_add(m, c, NULL, 10);
	cr_assert_eq(metrics_tick(m, 100.5, 1.0), 0, "ticks at most once per interval");
	cr_assert_eq(metrics_tick(m, 102.0, 1.0), 1);
	cr_assert_float_eq(metrics_rate(m, c, NULL), 5.0, 1e-9);
	/* a mirrored counter that went down (restart) counts from zero */
	metrics_set(m, c, NULL, 4);
	metrics_tick(m, 104.0, 1.0);
	cr_assert_float_eq(metrics_rate(m, c, NULL), 2.0, 1e-9);
	cr_assert(isnan(metrics_quantile(m, h, NULL, 0.5)));
	/* 10 observations: 4 in (0,1], 4 in (1,2], 2 in (2,4] */
	for (int i = 0; i < 4; i++)
		metrics_observe(m, h, NULL, 0.5);
	for (int i = 0; i < 4; i++)
		metrics_observe(m, h, NULL, 1.5);
	metrics_observe(m, h, NULL, 3);
	metrics_observe(m, h, NULL, 3);
	/* rank 5 of 10: 1 into the (1,2] bucket of 4 -> 1 + 1/4 */
	cr_assert_float_eq(metrics_quantile(m, h, NULL, 0.5), 1.25, 1e-9);
	/* rank 9: 1 into (2,4] of 2 -> 2 + 2 * 1/2 */
	cr_assert_float_eq(metrics_quantile(m, h, NULL, 0.9), 3.0, 1e-9);
	json_t *j = metrics_snapshot(m);
	cr_assert_not_null(j);
	json_t *x = json_object_get(json_object_get(json_object_get(j, "metrics"), "x_total"),
				    "series");
	cr_assert_float_eq(json_number_value(json_object_get(json_object_get(x, ""), "value")), 4.0,
			   1e-9);
	json_t *l = json_object_get(json_object_get(json_object_get(json_object_get(j, "metrics"),
								    "lat_seconds"), "series"), "");
	cr_assert_eq(json_integer_value(json_object_get(l, "count")), 10);
	cr_assert_float_eq(json_number_value(json_object_get(l, "p50")), 1.25, 1e-9);
	json_t *bk = json_object_get(l, "buckets");
	cr_assert_eq(json_array_size(bk), 3);
	cr_assert_eq(json_integer_value(json_array_get(json_array_get(bk, 2), 1)), 10,
		     "cumulative");
	cr_assert(json_is_number(json_object_get(j, "time")));
	json_decref(j);
	metrics_destroy(m);
}

Test(metrics, cluster_set_and_status_json)
{
	struct metrics *m;
	struct metrics_cluster ids;
	cr_assert_eq(metrics_create(&m), 0);
	cr_assert_eq(metrics_cluster_define(m, &ids), 0);
	char path[] = "/tmp/unicorn-metrics-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "{\"processes\":[{\"name\":\"loader\",\"role\":2,\"restarts\":1},"
		   "{\"name\":\"gpu\",\"role\":4,\"restarts\":3,\"kv_bytes\":4096,"
		   "\"weights_bytes\":100,\"scratch_bytes\":7,\"busy_s\":1.5}]}");
	fclose(f);
	cr_assert_eq(metrics_cluster_load_status(m, &ids, path), 0);
	unlink(path);
	cr_assert_float_eq(metrics_value(m, ids.restarts, "gpu"), 3, 1e-9);
	cr_assert_float_eq(metrics_value(m, ids.restarts, "loader"), 1, 1e-9);
	cr_assert_float_eq(metrics_value(m, ids.kv_bytes, "gpu"), 4096, 1e-9);
	cr_assert_float_eq(metrics_value(m, ids.status_busy, "gpu"), 1.5, 1e-9);
	cr_assert_eq(metrics_cluster_load_status(m, &ids, "/nonexistent/status.json"), 0);
	char *s;
	size_t n;
	cr_assert_eq(metrics_render_prom(m, &s, &n), 0);
	cr_assert_not_null(strstr(s, "# TYPE unicorn_time_to_first_token_seconds histogram\n"));
	cr_assert_not_null(strstr(s, "# TYPE unicorn_inter_token_latency_seconds histogram\n"));
	cr_assert_not_null(strstr(s, "unicorn_time_to_first_token_seconds_bucket{le=\"+Inf\"} 0\n"));
	cr_assert_not_null(strstr(s, "unicorn_process_restarts_total{process=\"gpu\"} 3\n"));
	free(s);
	metrics_destroy(m);
}

/* Every step message the coordinator traces has its own name (the fused
 * placement's batch and chunk steps were "msg 22" / "msg 24"). */
Test(trace, span_names)
{
	static const struct {
		uint16_t type;
		uint8_t stage;
		const char *want;
	} cases[] = {
		{ MSG_EMBED, 0, "embed" },
		{ MSG_HEAD, 0, "head" },
		{ MSG_RUN, 0, "run" },
		{ MSG_RUN_BATCH, 0, "run batch" },
		{ MSG_RUN_CHUNKS, 0, "run chunks" },
		{ MSG_STAGE, MSG_STAGE_ATTN, "attn L3" },
		{ MSG_STAGE, MSG_STAGE_FFN, "ffn L3" },
		{ MSG_STAGE, MSG_STAGE_LAYERS, "layers L3" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct trace_span s = { .msg_type = cases[i].type, .stage = cases[i].stage, .layer = 3 };
		char name[48];
		trace_span_name(&s, name, sizeof name);
		cr_assert_str_eq(name, cases[i].want);
	}
}

Test(trace, ring_and_export)
{
	static const char *const names[] = { "gpu", "npu" };
	struct trace *t;
	cr_assert_eq(trace_create(4, names, 2, &t), 0);
	/* 6 spans into a ring of 4: the first two are gone */
	for (int i = 0; i < 6; i++) {
		struct trace_span s = { .t_start_ns = 1000000 + i * 10000,
					.t_end_ns = 1000000 + i * 10000 + 2500, .work_ns = 2000,
					.msg_type = MSG_STAGE, .worker = (uint8_t)(i % 2),
					.stage = i % 2 ? MSG_STAGE_ATTN : MSG_STAGE_FFN,
					.layer = (uint16_t)i, .slot = 1, .n = 1, .pos0 = 7 };
		trace_record(t, &s);
	}
	cr_assert_eq(trace_total(t), 6);
	char *s;
	size_t n, nx;
	cr_assert_eq(trace_export_json(t, 0, &s, &n, &nx), 0);
	cr_assert_eq(nx, 4);
	json_error_t e;
	json_t *j = json_loads(s, 0, &e);
	cr_assert_not_null(j, "%s", e.text);
	json_t *ev = json_object_get(j, "traceEvents");
	cr_assert(json_is_array(ev));
	int n_x = 0, n_m = 0;
	bool threads[3] = { false };
	size_t i;
	json_t *x;
	json_array_foreach(ev, i, x) {
		const char *ph = json_string_value(json_object_get(x, "ph"));
		cr_assert_not_null(ph);
		cr_assert(json_is_integer(json_object_get(x, "pid")));
		if (!strcmp(ph, "M")) {
			n_m++;
			if (!strcmp(json_string_value(json_object_get(x, "name")), "thread_name"))
				threads[json_integer_value(json_object_get(x, "tid"))] = true;
			continue;
		}
		cr_assert_str_eq(ph, "X");
		int layer = (int)json_integer_value(
			json_object_get(json_object_get(x, "args"), "layer"));
		cr_assert_geq(layer, 2, "overwritten spans are not exported");
		char want[32];
		snprintf(want, sizeof want, "%s L%d", layer % 2 ? "attn" : "ffn", layer);
		cr_assert_str_eq(json_string_value(json_object_get(x, "name")), want);
		cr_assert_eq(json_integer_value(json_object_get(x, "tid")), layer % 2 + 1);
		cr_assert_float_eq(json_number_value(json_object_get(x, "ts")),
				   (1000000 + layer * 10000) / 1e3, 1e-9);
		cr_assert_float_eq(json_number_value(json_object_get(x, "dur")), 2.5, 1e-9);
		n_x++;
	}
	cr_assert_eq(n_x, 4);
	cr_assert(threads[1] && threads[2], "a thread_name per worker");
	cr_assert_geq(n_m, 3);
	json_decref(j);
	free(s);
	/* since: only spans that started at or after it */
	cr_assert_eq(trace_export_json(t, 1000000 + 45000, &s, &n, &nx), 0);
	cr_assert_eq(nx, 1);
	free(s);
	trace_destroy(t);
}

Test(dashboard, page_matches_html_and_routes)
{
	FILE *f = fopen("api/dashboard.html", "rb");
	cr_assert_not_null(f, "run from the repository root");
	static char buf[1 << 18];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	cr_assert_eq(strlen(dashboard_page_html), n,
		     "api/dashboard_page.c is stale: regenerate it from dashboard.html "
		     "(docs/observability.md)");
	cr_assert_str_eq(dashboard_page_html, buf);
	/* self-contained: no external scripts or styles */
	cr_assert_null(strstr(buf, "<script src"));
	cr_assert_null(strstr(buf, "https://"));
	cr_assert_eq(dashboard_route("/metrics"), DASH_METRICS);
	cr_assert_eq(dashboard_route("/metrics.json"), DASH_METRICS_JSON);
	cr_assert_eq(dashboard_route("/dashboard"), DASH_PAGE);
	cr_assert_eq(dashboard_route("/dashboard/events"), DASH_EVENTS);
	cr_assert_eq(dashboard_route("/trace"), DASH_TRACE);
	cr_assert_eq(dashboard_route("/v1/models"), DASH_NONE);
}

/* common/progress: a non-terminal stream gets whole lines, never '\r'. */
Test(progress, plain_lines_when_not_a_tty)
{
	FILE *f = tmpfile();
	cr_assert_not_null(f);
	struct progress p;
	progress_init(&p, f, "loading", 1000);
	cr_assert(!p.tty);
	p.interval = 0; /* every update is due */
	for (int i = 1; i <= 4; i++) {
		p.t_last = 0;
		progress_update(&p, (uint64_t)i * 200);
	}
	progress_finish(&p);
	fflush(f);
	rewind(f);
	char out[4096];
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = 0;
	fclose(f);
	cr_assert_gt(n, 0);
	cr_assert_null(strchr(out, '\r'), "carriage return in non-tty output: %s", out);
	int lines = 0;
	for (char *q = out; *q; q++)
		lines += *q == '\n';
	cr_assert_geq(lines, 2, "%s", out);
	cr_assert_eq(out[n - 1], '\n');
	cr_assert_not_null(strstr(out, "loading"), "%s", out);
}
