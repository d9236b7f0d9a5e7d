/* Long contexts in a real cluster (issue 30): --ctx caps a sequence and a
 * longer prompt gets a 400 naming the limit; the KV cache's type and size in
 * `unicorn status` and /metrics; a budget that cannot hold one sequence stops
 * the start with the bytes needed and the options that help; a worker that
 * starts slowly but reports progress is not taken for a hung one; a prompt of
 * more than 16K tokens through the API on a tiny model with a 64K context;
 * prompts past one message's 32,768 tokens through the API and the CLI. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "api/openai.h"
#include "tests/golden.h"
#include "tests/proc.h"

/* curl a JSON body to the cluster's /v1/completions: "CODE BODY" in out */
static int post(const struct proc_cluster *c, const char *body_file, char *out, size_t cap)
{
	char cmd[768];
	snprintf(cmd, sizeof cmd, "curl -s -m 600 -o /dev/stdout -w ' HTTP%%{http_code}' -H 'Content-Type: application/json' "
		 "--data-binary @%s http://127.0.0.1:%d/v1/completions", body_file, c->port);
	return proc_sh(cmd, out, cap);
}

/* A prompt of n words ("w0 w1 ...": roughly a token each) as a completion body. */
static void write_body(const char *path, int n, int max_tokens)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "{\"prompt\":\"");
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? " " : "", (const char *[]){ "the", "cat", "sat", "on", "a", "mat" }[i % 6]);
	fprintf(f, "\",\"max_tokens\":%d,\"temperature\":0}", max_tokens);
	fclose(f);
}

Test(longctx, ctx_cap_refuses_with_400_and_status_shows_kv, .timeout = 400)
{
	struct proc_cluster c;
	proc_cluster_start(&c, "lctx", (const char *const[]){ "--ctx", "256", "--max-seqs", "2", NULL });
	char body[256], out[8192];
	snprintf(body, sizeof body, "%s/long.json", c.tmp);
	write_body(body, 400, 4);
	cr_assert_eq(post(&c, body, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "HTTP400"), "a prompt over --ctx 256 should be a 400: %.400s", out);
	cr_assert(strstr(out, "256 tokens") && strstr(out, "context_length_exceeded"), "the 400 names the limit: %.400s",
		  out);
	write_body(body, 40, 2);
	cr_assert_eq(post(&c, body, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "HTTP200"), "a short prompt still answers: %.400s", out);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn status --name %s", proc_bin_dir_or_skip(), c.name);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "kv cache f16, 256 positions per sequence"), "status: %s", out);
	snprintf(cmd, sizeof cmd, "curl -s -m 30 http://127.0.0.1:%d/metrics", c.port);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "unicorn_kv_cache_type{type=\"f16\"} 1"), "/metrics: %.2000s", out);
	cr_assert(strstr(out, "unicorn_kv_context_tokens 256"), "/metrics: %.2000s", out);
	proc_cluster_stop(&c);
}

/* unicorn-up in the foreground with extra arguments and environment; it must
 * fail (exit != 0) at start: its output in out. */
static void up_fails(const char *env, const char *args, char *out, size_t cap)
{
	char tmp[] = "/tmp/unicorn-lbud-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "env XDG_RUNTIME_DIR=%s %s timeout 120 %s/unicorn-up --model "
		 "%s/golden/gemma3-tiny-q4_0.gguf --name lbud --no-http %s 2>&1; echo \"exit $?\"", tmp, env,
		 proc_bin_dir_or_skip(), golden_shared_dir(), args);
	proc_sh(cmd, out, cap);
	cr_assert_null(strstr(out, "exit 0"), "unicorn-up started: %s", out);
	cr_assert_null(strstr(out, "exit 124"), "unicorn-up hung instead of failing: %s", out);
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	char junk[256];
	proc_sh(cmd, junk, sizeof junk);
}

Test(longctx, impossible_budget_stops_the_start, .timeout = 300)
{
	int lock = proc_cluster_lock();
	static char out[65536];
	/* an explicit budget below one sequence */
	up_fails("", "--kv-budget 64K", out, sizeof out);
	cr_assert(strstr(out, "does not hold one sequence of 4096 positions") && strstr(out, "--kv-budget") &&
		  strstr(out, "--ctx") && strstr(out, "q8_0"), "%s", out);
	/* auto on a device with 100 MB free: nothing left after the headroom */
	up_fails("UNICORN_KV_DEVICE_FREE=100000000", "", out, sizeof out);
	cr_assert(strstr(out, "MiB free") && strstr(out, "lower --ctx") && strstr(out, "--vk-device"), "%s", out);
	close(lock);
}

/* A GPU worker whose start takes 10 s, under a 2 s stall limit: its start-up
 * progress keeps it alive (without it the watchdog kills it after 2 s, again
 * and again, and the cluster is never ready). */
Test(longctx, slow_start_with_progress_is_not_restarted, .timeout = 240)
{
	setenv("UNICORN_STALL_MS", "2000", 1);
	setenv("UNICORN_TEST_START_DELAY_MS", "10000", 1);
	struct proc_cluster c;
	double t0 = proc_now_s();
	proc_cluster_start(&c, "lslow", (const char *const[]){ "--no-http", NULL });
	unsetenv("UNICORN_TEST_START_DELAY_MS");
	cr_assert_geq(proc_now_s() - t0, 10.0, "the start should have taken the delay");
	cr_assert(!proc_log_has(c.log, "killing it"), "the watchdog killed a worker that was starting");
	char cmd[512], out[16384];
	snprintf(cmd, sizeof cmd, "%s/unicorn status --name %s --json", proc_bin_dir_or_skip(), c.name);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "\"restarts\": 0") && !strstr(out, "\"restarts\": 1"), "%s", out);
	proc_cluster_stop(&c);
	unsetenv("UNICORN_STALL_MS");
}

/* A tiny model with a 64K context (mkmodel --shape tinyctx, the golden
 * model's vocabulary) takes a prompt of LONG_WORDS words (a token each) through
 * the API: past 16K positions, beyond the old 4096 cap and the 16-bit range
 * of anything that was sized for it. */
#define LONG_WORDS 16500
Test(longctx, long_prompt_through_the_api, .timeout = 1200)
{
	const char *bin = proc_bin_dir_or_skip();
	char model[] = "/tmp/unicorn-lctx-XXXXXX.gguf";
	int fd = mkstemps(model, 5);
	cr_assert_geq(fd, 0);
	close(fd);
	char cmd[1024], out[16384];
	snprintf(cmd, sizeof cmd, "%s/unicorn-mkmodel --shape tinyctx --seed 3 --vocab %s/golden/gemma3-tiny-f32.gguf -q -o %s",
		 bin, golden_shared_dir(), model);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	struct proc_cluster c;
	proc_cluster_start(&c, "llong", (const char *const[]){ "--model", model, "--max-seqs", "1", NULL });
	char body[256];
	snprintf(body, sizeof body, "%s/long.json", c.tmp);
	write_body(body, LONG_WORDS, 3);
	cr_assert_eq(post(&c, body, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "HTTP200"), "%.600s", out);
	char *pt = strstr(out, "\"prompt_tokens\":");
	cr_assert_not_null(pt, "%.600s", out);
	long n = strtol(pt + 16, NULL, 10);
	cr_assert_gt(n, 16384, "the prompt should be past 16K tokens: %ld", n);
	cr_assert(strstr(out, "\"completion_tokens\":3"), "%.600s", out);
	proc_cluster_stop(&c);
	unlink(model);
}

/* A text file of n words (as write_body's prompt) for `unicorn run -`. */
static void write_words(const char *path, int n)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? " " : "", (const char *[]){ "the", "cat", "sat", "on", "a", "mat" }[i % 6]);
	fclose(f);
}

/* Prompts longer than one GEN_REQ carries (32,768 token ids, 131,072 bytes of
 * text) go ahead in GEN_PROMPT parts: PAST_32K_WORDS words (a token each) on
 * a one-layer tinyctx model (a sliding layer only: such a prompt costs
 * seconds on lavapipe) through the API (token ids: 5 parts' worth) and
 * through `unicorn run -` (text: 2 parts), the same greedy answer both ways;
 * past the context a 400 that names it; a body over the API's cap a 413; and
 * the cluster still answers. */
#define PAST_32K_WORDS 45000
Test(longctx, prompts_past_32k_tokens_through_api_and_cli, .timeout = 600)
{
	const char *bin = proc_bin_dir_or_skip();
	char model[] = "/tmp/unicorn-l32k-XXXXXX.gguf";
	int fd = mkstemps(model, 5);
	cr_assert_geq(fd, 0);
	close(fd);
	char cmd[1024], out[16384];
	snprintf(cmd, sizeof cmd, "%s/unicorn-mkmodel --shape tinyctx --layers 1 --seed 3 --vocab "
		 "%s/golden/gemma3-tiny-f32.gguf -q -o %s", bin, golden_shared_dir(), model);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	struct proc_cluster c;
	proc_cluster_start(&c, "l32k", (const char *const[]){ "--model", model, "--max-seqs", "1", NULL });
	char body[256], words[256];
	snprintf(body, sizeof body, "%s/long.json", c.tmp);
	write_body(body, PAST_32K_WORDS, 3);
	double t0 = proc_now_s();
	cr_assert_eq(post(&c, body, out, sizeof out), 0, "%s", out);
	double t_api = proc_now_s() - t0;
	cr_assert(strstr(out, "HTTP200"), "%.600s", out);
	char *pt = strstr(out, "\"prompt_tokens\":");
	cr_assert_not_null(pt, "%.600s", out);
	long n = strtol(pt + 16, NULL, 10);
	cr_assert_gt(n, 32768, "the prompt should be past 32K tokens: %ld", n);
	cr_assert(strstr(out, "\"completion_tokens\":3"), "%.600s", out);
	char *js = strchr(out, '{'), *hc = strstr(out, " HTTP200");
	*hc = 0;
	json_t *api = json_loads(js, 0, NULL);
	cr_assert_not_null(api, "%.600s", js);
	const char *api_text = json_string_value(json_object_get(json_array_get(json_object_get(api, "choices"), 0), "text"));
	cr_assert_not_null(api_text, "%.600s", js);

	/* the CLI sends text: over 131,072 bytes, staged too */
	snprintf(words, sizeof words, "%s/words.txt", c.tmp);
	write_words(words, PAST_32K_WORDS);
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --max-tokens 3 --temp 0 --json - < %s", bin, c.name, words);
	size_t cap = 1u << 20;
	char *big = malloc(cap);
	cr_assert_not_null(big);
	t0 = proc_now_s();
	cr_assert_eq(proc_sh(cmd, big, cap), 0, "%.600s", big);
	double t_cli = proc_now_s() - t0;
	json_t *cli = json_loads(big, 0, NULL);
	cr_assert_not_null(cli, "%.600s", big);
	cr_assert_eq(json_array_size(json_object_get(cli, "prompt_ids")), (size_t)n, "the same prompt both ways");
	cr_assert_eq(json_array_size(json_object_get(cli, "ids")), 3);
	const char *cli_text = json_string_value(json_object_get(cli, "text"));
	cr_assert_not_null(cli_text);
	cr_assert_str_eq(cli_text, api_text, "the same greedy text both ways");
	json_decref(cli);
	json_decref(api);
	free(big);
	/* the coordinator put each whole prompt together from its parts */
	snprintf(cmd, sizeof cmd, "grep -c 'coordinator: request .*: %ld prompt tokens' %s", n, c.log);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	cr_assert_eq(atoi(out), 2, "both requests reached the coordinator whole: %s", out);
	fprintf(stderr, "longctx: %d-word prompt: API %.1f s, CLI %.1f s\n", PAST_32K_WORDS, t_api, t_cli);

	/* past the model's 65,536 positions: a 400 naming the context */
	write_body(body, 70000, 3);
	cr_assert_eq(post(&c, body, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "HTTP400") && strstr(out, "65536 tokens") && strstr(out, "context_length_exceeded"),
		  "%.600s", out);
	/* a body over the API's cap: 413 before any of it is parsed */
	FILE *f = fopen(body, "w");
	cr_assert_not_null(f);
	fputs("{\"prompt\":\"", f);
	for (uint32_t i = 0; i < OAI_MAX_BODY / 64 + 1; i++)
		fputs("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", f);
	fputs("\"}", f);
	fclose(f);
	cr_assert_eq(post(&c, body, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "HTTP413") && strstr(out, "body_too_large"), "%.600s", out);
	write_body(body, 20, 2);
	cr_assert_eq(post(&c, body, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "HTTP200"), "the cluster still answers: %.600s", out);
	cr_assert(!proc_log_has(c.log, "recovering"), "no worker was lost on the way");
	proc_cluster_stop(&c);
	unlink(model);
}
