/* pipeline: --placement pipeline on the tiny golden model, two stages of
 * whole layers (gpu0: layers 0-4 and the embedding, gpu1: layer 5 and the
 * head, whose embedding matrix outweighs the tiny layers) on lavapipe's one
 * device:
 *   - under 4 concurrent greedy HTTP streams, the text of fused placement,
 *     token for token;
 *   - each stage SIGKILLed under those streams (gpu1, then gpu0): every
 *     stream still gives the uninterrupted text, its worst gap between two
 *     chunks within the uninterrupted run's + 3 s;
 *   - unicorn status shows each stage's layer range;
 *   - with decode rows on the mat-mat kernels (UNICORN_BATCH_MM_MIN=2: wide
 *     micro-batches, engine_stage_range's wide recordings), the text of fused
 *     placement's wide rounds.
 * Needs UNICORN_BIN (make test). Takes the cluster tests' lock. */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/proc.h"
#include "tests/streams.h"

#define MAX_TOKENS 40

/* pick for streams_run: the stage worker that has run longest (the two are
 * both unicorn-gpu-worker; after a kill the restarted one is the newest, so
 * two kills hit both stages). */
static pid_t oldest_stage(const struct proc_cluster *c, const void *arg)
{
	(void)arg;
	pid_t kids[16], best = 0;
	unsigned long long best_start = ~0ull;
	int n = proc_children(c->sup, kids, 16);
	for (int i = 0; i < n; i++) {
		char path[64], buf[1024];
		snprintf(path, sizeof path, "/proc/%d/cmdline", (int)kids[i]);
		FILE *f = fopen(path, "r");
		size_t k = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
		if (f)
			fclose(f);
		buf[k] = 0;
		if (!strstr(buf, "unicorn-gpu-worker"))
			continue;
		snprintf(path, sizeof path, "/proc/%d/stat", (int)kids[i]);
		f = fopen(path, "r");
		k = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
		if (f)
			fclose(f);
		buf[k] = 0;
		const char *p = strrchr(buf, ')'); /* field 22: start time, after the comm */
		unsigned long long start = 0;
		for (int fld = 2; p && fld < 22; fld++)
			p = strchr(p + 1, ' ');
		if (p)
			start = strtoull(p + 1, NULL, 10);
		if (start < best_start) {
			best_start = start;
			best = kids[i];
		}
	}
	return best;
}

/* Whether the cluster's log has what within 5 s (unicorn-up copies its
 * children's lines into it as they come, so a line may follow the ready files). */
static bool log_soon(const char *log, const char *what)
{
	for (int i = 0; i < 50; i++) {
		if (proc_log_has(log, what))
			return true;
		usleep(100 * 1000);
	}
	return false;
}

static void texts(struct stream *s, char **out)
{
	for (int i = 0; i < STREAMS_N; i++) {
		cr_assert(answer_complete(&s[i], true), "stream %d incomplete:\n%s", i, s[i].body);
		out[i] = stream_text(&s[i]);
		free(s[i].body);
	}
}

Test(pipeline, equals_fused_and_survives_stage_kills, .timeout = 300)
{
	struct stream s[STREAMS_N];
	char *fused[STREAMS_N], *pipe[STREAMS_N], *hit[STREAMS_N];
	struct proc_cluster c;
	proc_cluster_start(&c, "pipe", (const char *const[]){ "--placement", "fused", NULL });
	streams_run(&c, s, NULL, NULL, true, MAX_TOKENS, NULL);
	texts(s, fused);
	proc_cluster_stop(&c);

	proc_cluster_start(&c, "pipe", (const char *const[]){ "--placement", "pipeline", NULL });
	cr_assert(log_soon(c.log, "pipeline: stages gpu0 and gpu1 run layers 0-4,5-5"), "log %s", c.log);
	char cmd[512], out[8192];
	snprintf(cmd, sizeof cmd, "%s/unicorn status --name %s", proc_bin_dir(), c.name);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0);
	cr_assert(strstr(out, "layers 0-4 on") && strstr(out, "layers 5-5 on") && strstr(out, "gpu1"),
		  "unicorn status shows no stages:\n%s", out);
	streams_run(&c, s, NULL, NULL, true, MAX_TOKENS, NULL);
	double worst_base = 0;
	for (int i = 0; i < STREAMS_N; i++)
		worst_base = s[i].worst_gap > worst_base ? s[i].worst_gap : worst_base;
	texts(s, pipe);
	for (int i = 0; i < STREAMS_N; i++) {
		cr_assert_gt(strlen(fused[i]), 0);
		cr_assert_str_eq(pipe[i], fused[i], "stream %d: pipeline and fused differ", i);
	}
	for (int kill_no = 0; kill_no < 2; kill_no++) {
		streams_run(&c, s, oldest_stage, NULL, true, MAX_TOKENS, NULL);
		double worst = 0;
		for (int i = 0; i < STREAMS_N; i++)
			worst = s[i].worst_gap > worst ? s[i].worst_gap : worst;
		texts(s, hit);
		for (int i = 0; i < STREAMS_N; i++) {
			cr_assert_str_eq(hit[i], fused[i], "stream %d: text changed by killing stage gpu%d", i, 1 - kill_no);
			free(hit[i]);
		}
		fprintf(stderr, "pipeline: stage gpu%d killed under %d HTTP streams: worst gap %.3f s (uninterrupted "
			"%.3f s)\n", 1 - kill_no, STREAMS_N, worst, worst_base);
		cr_assert_leq(worst, worst_base + 3.0, "worst gap %.2f s after killing gpu%d (uninterrupted %.2f s)",
			      worst, 1 - kill_no, worst_base);
	}
	cr_assert(log_soon(c.log, "[unicorn-up] gpu1") && log_soon(c.log, "[gpu0]"), "log %s", c.log);
	proc_cluster_stop(&c);
	for (int i = 0; i < STREAMS_N; i++) {
		free(fused[i]);
		free(pipe[i]);
	}

	setenv("UNICORN_BATCH_MM_MIN", "2", 1);
	proc_cluster_start(&c, "pipe", (const char *const[]){ "--placement", "fused", NULL });
	streams_run(&c, s, NULL, NULL, true, MAX_TOKENS, NULL);
	texts(s, fused);
	proc_cluster_stop(&c);
	proc_cluster_start(&c, "pipe", (const char *const[]){ "--placement", "pipeline", NULL });
	streams_run(&c, s, NULL, NULL, true, MAX_TOKENS, NULL);
	texts(s, pipe);
	proc_cluster_stop(&c);
	unsetenv("UNICORN_BATCH_MM_MIN");
	for (int i = 0; i < STREAMS_N; i++) {
		cr_assert_str_eq(pipe[i], fused[i], "stream %d: wide pipeline and wide fused differ", i);
		free(fused[i]);
		free(pipe[i]);
	}
}

/* --device-mem: a model (tiny256 shape, 48 f32 layers: 32.8 MiB of
 * embedding, 86 MiB of layers) whose weights, one sequence's KV cache and the
 * engine's scratch do not fit a 190 MiB cap refuses to start fused, naming
 * the bytes it needs and the way out; the same cap holds each half of it, so
 * `--devices 0,0` with `--layers 0-23,24-47` (two stages of equal memory:
 * both hold the embedding) serves it. */
static char mem_model[64], mem_run[64];

/* the model file and the refused run's directory go whatever the outcome */
static void mem_cleanup(void)
{
	if (mem_model[0])
		unlink(mem_model);
	if (mem_run[0]) {
		char cmd[128], out[256];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", mem_run);
		proc_sh(cmd, out, sizeof out);
	}
}

Test(pipeline, device_mem_cap_runs_across_two_stages, .timeout = 180, .fini = mem_cleanup)
{
	const char *bin = proc_bin_dir_or_skip();
	char *model = mem_model;
	snprintf(mem_model, sizeof mem_model, "/tmp/unicorn-pipemem-XXXXXX");
	int fd = mkstemp(model);
	cr_assert_geq(fd, 0);
	close(fd);
	char cmd[1024], out[16384];
	snprintf(cmd, sizeof cmd, "'%s/unicorn-mkmodel' --shape tiny256 --type f32 --layers 48 --synthetic-vocab -o '%s'",
		 bin, model);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	/* fused under the cap: unicorn-up stops with the worker's reason */
	int lock = proc_cluster_lock();
	char *tmp = mem_run;
	snprintf(mem_run, sizeof mem_run, "/tmp/unicorn-pipemem-run-XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	snprintf(cmd, sizeof cmd, "XDG_RUNTIME_DIR=%s timeout 60 '%s/unicorn-up' --model '%s' --name memcap --no-http "
		 "--device-mem 190M", tmp, bin, model);
	int st = proc_sh(cmd, out, sizeof out);
	close(lock);
	cr_assert_eq(st, 2, "fused under --device-mem 190M: exit %d, want 2:\n%s", st, out);
	cr_assert(strstr(out, "over --device-mem 190.0 MiB") && strstr(out, "--placement pipeline"),
		  "no clear refusal:\n%s", out);
	/* two stages under the same cap */
	struct proc_cluster c;
	proc_cluster_start(&c, "pipemem", (const char *const[]){ "--model", model, "--devices", "0,0", "--device-mem",
								  "190M", "--layers", "0-23,24-47", NULL });
	cr_assert(log_soon(c.log, "placement pipeline"), "--devices 0,0 did not choose pipeline (log %s)", c.log);
	cr_assert(log_soon(c.log, "--device-mem 190.0 MiB: layers 0-23 take"), "log %s", c.log);
	cr_assert(log_soon(c.log, "--device-mem 190.0 MiB: layers 24-47 take"), "log %s", c.log);
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --max-tokens 4 --raw hello", bin, c.name);
	st = proc_sh(cmd, out, sizeof out);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert(strstr(out, "<tok_"), "no tokens: %s", out);
	proc_cluster_stop(&c);
}
