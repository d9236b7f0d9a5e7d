/* unicorn bench on the demo model (262,144-token vocabulary) on a device
 * whose maxStorageBufferRange does not hold 512 rows of logits (lavapipe:
 * 128 MiB): the default batch is lowered with a note, an explicit -b that
 * does not fit is a clear error (issue 35 #5: the default failed). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "gpu_worker/vk.h"
#include "tests/proc.h"

Test(cli_bench, demo_vocab_batch_fits, .timeout = 240)
{
	const char *bin = proc_bin_dir_or_skip();
	char cmd[512], out[16384];
	/* rows of 262,144 logits that fit a binding of the default device */
	struct vk_ctx *vk;
	cr_assert_eq(vk_create(NULL, &vk), 0);
	uint64_t fit = vk->props.limits.maxStorageBufferRange / (262144ull * 4);
	vk_destroy(vk);
	/* the command */
	snprintf(cmd, sizeof cmd, "%s/unicorn bench %s/unicorn-demo.gguf -p 32 -n 2 -r 1", bin, bin);
	int st = proc_sh(cmd, out, sizeof out);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert_not_null(strstr(out, "pp32"), "%s", out);
	/* a prompt longer than what fits: the default batch is lowered */
	snprintf(cmd, sizeof cmd, "%s/unicorn bench %s/unicorn-demo.gguf -p 200 -n 0 -r 1 --json", bin, bin);
	st = proc_sh(cmd, out, sizeof out);
	cr_assert_eq(st, 0, "%s", out);
	if (fit < 200)
		cr_assert_not_null(strstr(out, "maxStorageBufferRange"), "%s", out);
	/* -b that does not fit: refused, with the largest that does */
	snprintf(cmd, sizeof cmd, "%s/unicorn bench %s/unicorn-demo.gguf -p 512 -n 0 -r 1 -b 512", bin, bin);
	if (fit >= 512)
		return;
	st = proc_sh(cmd, out, sizeof out);
	cr_assert_eq(st, 2, "%s", out);
	cr_assert_not_null(strstr(out, "-b 512: the batch's logits"), "%s", out);
	cr_assert_not_null(strstr(out, " or less"), "%s", out);
}

/* --parallel B: B sequences decode together; every entry says its B, its
 * kernels and its step time, and the step time is B tokens at that rate. */
Test(cli_bench, parallel_reports_steps, .timeout = 240)
{
	const char *bin = proc_bin_dir_or_skip();
	char cmd[512], out[65536];
	snprintf(cmd, sizeof cmd,
		 "%s/unicorn bench ../shared/golden/gemma3-tiny-q4_0.gguf --parallel 1,3 -n 3 -r 1 --json", bin);
	int st = proc_sh(cmd, out, sizeof out);
	cr_assert_eq(st, 0, "%s", out);
	json_error_t jerr;
	const char *js = strchr(out, '{'); /* after the progress lines */
	cr_assert_not_null(js, "%s", out);
	json_t *o = json_loads(js, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", jerr.text, out);
	json_t *tests = json_object_get(o, "tests");
	cr_assert(json_is_array(tests), "%s", out);
	int seen[4] = { 0 };
	for (size_t i = 0; i < json_array_size(tests); i++) {
		json_t *t = json_array_get(tests, i);
		int b = (int)json_integer_value(json_object_get(t, "n_parallel"));
		const char *k = json_string_value(json_object_get(t, "kernel"));
		double ts = json_real_value(json_object_get(t, "avg_ts")), ms = json_real_value(json_object_get(t, "ms_per_step"));
		cr_assert(b == 1 || b == 3, "only the B asked for (no pp/tg with --parallel alone): %s", out);
		cr_assert(k && (strcmp(k, "narrow") == 0 || strcmp(k, "wide") == 0), "%s", out);
		cr_assert(ts > 0 && ms > 0, "%s", out);
		cr_assert(fabs(ts * ms / 1000.0 - b) < 1e-6 * b, "B tokens per step: %g tok/s x %g ms", ts, ms);
		seen[b] += strcmp(k, "narrow") == 0;
	}
	cr_assert(seen[1] == 1 && seen[3] == 1, "one narrow entry per B: %s", out);
	json_decref(o);
	/* a B past what a step holds is refused before loading anything */
	snprintf(cmd, sizeof cmd, "%s/unicorn bench ../shared/golden/gemma3-tiny-q4_0.gguf --parallel 300", bin);
	st = proc_sh(cmd, out, sizeof out);
	cr_assert_eq(st, 2, "%s", out);
	cr_assert_not_null(strstr(out, "at most 256 sequences"), "%s", out);
}
