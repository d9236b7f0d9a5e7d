/* A cluster on the demo model (Gemma 3's real 262,144-token vocabulary,
 * random weights), end to end (issue 35):
 *  - sampling at temperature > 0 (the top-k head: lavapipe cut the one-
 *    workgroup kernel short at this size and the head read garbage ids), the
 *    OpenAI default temperature, and greedy logprobs against the argmax head;
 *  - text that is not UTF-8 (byte tokens, a character cut by max_tokens):
 *    U+FFFD in /detokenize, the non-streamed and streamed replies and
 *    `unicorn run --json`, never a failed reply. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/utf8.h"
#include "tests/proc.h"

#define R UTF8_REPLACEMENT

struct buf {
	char *p;
	size_t n;
};

static size_t on_data(char *d, size_t sz, size_t nm, void *arg)
{
	struct buf *b = arg;
	char *t = realloc(b->p, b->n + sz * nm + 1);
	cr_assert_not_null(t);
	memcpy(t + b->n, d, sz * nm);
	b->p = t;
	b->n += sz * nm;
	b->p[b->n] = 0;
	return sz * nm;
}

/* POST body to path: the answer's body (malloc'd), its status in *status */
static char *post(const struct proc_cluster *c, const char *path, const char *body, long *status)
{
	char url[256];
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", c->port, path);
	CURL *h = curl_easy_init();
	cr_assert_not_null(h);
	struct buf b = { calloc(1, 1), 0 };
	struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
	CURLcode rc = curl_easy_perform(h);
	cr_assert_eq(rc, CURLE_OK, "%s: %s", path, curl_easy_strerror(rc));
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(hd);
	curl_easy_cleanup(h);
	return b.p;
}

static json_t *post_json(const struct proc_cluster *c, const char *path, const char *body)
{
	long st = 0;
	char *r = post(c, path, body, &st);
	cr_assert_eq(st, 200, "%s %s: %ld %s", path, body, st, r);
	json_t *j = json_loads(r, 0, NULL);
	cr_assert_not_null(j, "%s: %s", path, r);
	free(r);
	return j;
}

static json_t *run_json(const struct proc_cluster *c, const char *opts)
{
	char cmd[512];
	static char out[65536];
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --json %s", proc_bin_dir_or_skip(), c->name, opts);
	int st = proc_sh(cmd, out, sizeof out);
	cr_assert_eq(st, 0, "%s: status %d: %s", cmd, st, out);
	json_t *j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%s: %s", cmd, out);
	return j;
}

static void start_demo(struct proc_cluster *c)
{
	char model[512];
	snprintf(model, sizeof model, "%s/unicorn-demo.gguf", proc_bin_dir_or_skip());
	proc_cluster_start(c, "demo", (const char *const[]){ "--model", model, NULL });
}

static const char *chat_content(json_t *j)
{
	json_t *c = json_array_get(json_object_get(j, "choices"), 0);
	return json_string_value(json_object_get(json_object_get(c, "message"), "content"));
}

Test(demo_vocab, sampling_and_logprobs, .timeout = 300)
{
	struct proc_cluster c;
	start_demo(&c);
	/* temperature > 0: the top-k head's ids are in the vocabulary */
	const char *temps[] = { "0.5", "1", "2" };
	for (int t = 0; t < 3; t++) {
		char opts[128];
		snprintf(opts, sizeof opts, "--temp %s --seed %d --max-tokens 8 hi", temps[t], t + 1);
		json_t *j = run_json(&c, opts);
		json_t *ids = json_object_get(j, "ids");
		cr_assert_eq(json_array_size(ids), 8, "temp %s", temps[t]);
		for (size_t i = 0; i < 8; i++)
			cr_assert_lt(json_integer_value(json_array_get(ids, i)), 262144);
		cr_assert_not_null(json_object_get(j, "text"));
		json_decref(j);
	}
	/* status --json: the OpenAI base URL as clients want it */
	{
		char cmd[512];
		static char so[65536];
		snprintf(cmd, sizeof cmd, "%s/unicorn status --name %s --json", proc_bin_dir_or_skip(), c.name);
		cr_assert_eq(proc_sh(cmd, so, sizeof so), 0, "%s", so);
		json_t *sj = json_loads(so, 0, NULL);
		cr_assert_not_null(sj, "%s", so);
		char want[256];
		snprintf(want, sizeof want, "%s/v1", json_string_value(json_object_get(sj, "url")));
		cr_assert_str_eq(json_string_value(json_object_get(sj, "api_base")), want);
		json_decref(sj);
	}
	/* a prompt of several words: joined by spaces */
	json_t *hw = run_json(&c, "--max-tokens 1 Hello world");
	json_t *pi = json_object_get(hw, "prompt_ids");
	cr_assert_eq(json_array_size(pi), 3, "BOS Hello ' world'");
	json_decref(hw);
	/* a plain OpenAI chat (default temperature 1) */
	json_t *ch = post_json(&c, "/v1/chat/completions",
			       "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":6}");
	cr_assert_not_null(chat_content(ch));
	json_decref(ch);
	/* greedy with logprobs runs the top-k head: the same tokens as the
	 * argmax head, each the best of its top_logprobs */
	json_t *am = run_json(&c, "--temp 0 --max-tokens 4 hi");
	json_t *lp = post_json(&c, "/v1/completions",
			       "{\"prompt\":\"hi\",\"max_tokens\":4,\"temperature\":0,\"logprobs\":5}");
	json_t *ch0 = json_array_get(json_object_get(lp, "choices"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(ch0, "text")), json_string_value(json_object_get(am, "text")));
	json_t *lpo = json_object_get(ch0, "logprobs");
	json_t *tl = json_object_get(lpo, "token_logprobs"), *top = json_object_get(lpo, "top_logprobs");
	cr_assert_eq(json_array_size(tl), 4);
	for (size_t i = 0; i < 4; i++) {
		double mine = json_real_value(json_array_get(tl, i)), best = -1e30;
		const char *k;
		json_t *v;
		json_object_foreach(json_array_get(top, i), k, v)
			if (json_real_value(v) > best)
				best = json_real_value(v);
		cr_assert(mine <= 0 && mine == best, "token %zu: logprob %g, best alternative %g", i, mine, best);
	}
	json_decref(lp);
	json_decref(am);
	proc_cluster_stop(&c);
}

/* the deltas of an SSE stream, concatenated */
static char *sse_text(char *body, bool chat)
{
	size_t cap = strlen(body) + 1, n = 0;
	char *out = calloc(1, cap);
	for (char *l = strtok(body, "\n"); l; l = strtok(NULL, "\n")) {
		if (strncmp(l, "data: {", 7))
			continue;
		json_t *j = json_loads(l + 6, 0, NULL);
		cr_assert_not_null(j, "%s", l);
		json_t *c = json_array_get(json_object_get(j, "choices"), 0);
		const char *t = chat ? json_string_value(json_object_get(json_object_get(c, "delta"), "content"))
				     : json_string_value(json_object_get(c, "text"));
		if (t) {
			cr_assert(utf8_valid(t, strlen(t)));
			size_t k = strlen(t);
			cr_assert_lt(n + k, cap);
			memcpy(out + n, t, k + 1);
			n += k;
		}
		json_decref(j);
	}
	return out;
}

Test(demo_vocab, not_utf8_text, .timeout = 300)
{
	struct proc_cluster c;
	start_demo(&c);
	/* "Hello" and a byte that starts a character nobody finishes */
	json_t *d = post_json(&c, "/detokenize", "{\"tokens\":[9259,478]}");
	cr_assert_str_eq(json_string_value(json_object_get(d, "text")), "Hello" R);
	json_decref(d);
	/* the greedy reply's second token is a byte token (478): the reply is
	 * there, valid, with U+FFFD for the byte; streamed the same text */
	const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4,"
			   "\"temperature\":0%s}";
	char b1[256], b2[256];
	snprintf(b1, sizeof b1, body, "");
	snprintf(b2, sizeof b2, body, ",\"stream\":true");
	json_t *j = post_json(&c, "/v1/chat/completions", b1);
	const char *text = chat_content(j);
	cr_assert_not_null(text);
	cr_assert(utf8_valid(text, strlen(text)));
	cr_assert_not_null(strstr(text, R), "no U+FFFD in '%s'", text);
	long st;
	char *sse = post(&c, "/v1/chat/completions", b2, &st);
	cr_assert_eq(st, 200);
	cr_assert_not_null(strstr(sse, "[DONE]"), "%s", sse);
	char *streamed = sse_text(sse, true);
	cr_assert_str_eq(streamed, text);
	free(streamed);
	free(sse);
	/* the CLI's --json has the text too */
	json_t *cj = run_json(&c, "--chat --max-tokens 4 hi");
	cr_assert_not_null(json_object_get(cj, "text"), "no text");
	cr_assert_str_eq(json_string_value(json_object_get(cj, "text")), text);
	json_decref(cj);
	json_decref(j);
	proc_cluster_stop(&c);
}

/* a prompt over the context: the CLI says how many tokens it has (it said
 * "0 tokens + 0 resumed": the count was read after it was freed) */
Test(demo_vocab, prompt_over_context, .timeout = 300)
{
	struct proc_cluster c;
	start_demo(&c);
	char path[256], cmd[512];
	static char out[65536];
	snprintf(path, sizeof path, "%s/long.txt", c.tmp);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	for (int i = 0; i < 5000; i++)
		fputs(" hi", f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --max-tokens 2 - < %s", proc_bin_dir_or_skip(), c.name,
		 path);
	int st = proc_sh(cmd, out, sizeof out);
	cr_assert_neq(st, 0, "%s", out);
	cr_assert_not_null(strstr(out, "prompt: 5001 tokens + 0 resumed do not fit the context of"), "%s", out);
	proc_cluster_stop(&c);
}
