/* images: image_url content parts and `unicorn run --image` / `/image` through
 * a real cluster (the tiny golden model with a tiny projector from
 * unicorn-mkmodel --vision, 16 rows per image). An image request answers
 * and counts the image's rows in usage; the same image again reuses the
 * prefix cache past the image and answers the same tokens (greedy), a
 * different image does not reuse it; a bad image, a remote URL, too many
 * images and hostile base64 are 400s and the cluster keeps serving; the CLI
 * sends the image rows in its prompt; with --allow-image-urls an http URL
 * (behind a redirect) is fetched and answers as the same image inline; an
 * image whose pixels left the run directory while its request waited fails
 * that request alone (503), the others of its round answer as alone. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/hubserver.h"
#include "tests/proc.h"

/* A w x h RGB PNG whose pixels depend on seed (libpng's simplified API). */
static void write_png(const char *path, int w, int h, int seed)
{
	png_image im;
	memset(&im, 0, sizeof im);
	im.version = PNG_IMAGE_VERSION;
	im.width = (png_uint_32)w;
	im.height = (png_uint_32)h;
	im.format = PNG_FORMAT_RGB;
	unsigned char *px = malloc((size_t)w * h * 3);
	for (int i = 0; i < w * h * 3; i++)
		px[i] = (unsigned char)((i * 7 + seed * 131 + (i / (w * 3)) * 13) & 255);
	cr_assert(png_image_write_to_file(&im, path, 0, px, 0, NULL), "png: %s", im.message);
	free(px);
}

static char *b64_file(const char *path)
{
	char cmd[512], *out = malloc(1 << 20);
	snprintf(cmd, sizeof cmd, "base64 -w0 %s", path);
	cr_assert_eq(proc_sh(cmd, out, 1 << 20), 0);
	return out;
}

/* A test's files: mkdtemp(tmp) holding mkmodel's tiny vision model (model,
 * mmproj) and 40 x 30 PNGs a (seed_a) and, unless b is NULL, b (seed_b);
 * every path buffer holds FIX_PATH bytes. */
#define FIX_PATH 128
static void vision_fixture(const char *bin, char *tmp, char *model, char *mmproj, char *a, int seed_a, char *b,
			   int seed_b)
{
	char cmd[1024];
	cr_assert_not_null(mkdtemp(tmp));
	snprintf(model, FIX_PATH, "%s/tiny.gguf", tmp);
	snprintf(mmproj, FIX_PATH, "%s/mmproj-tiny.gguf", tmp);
	snprintf(cmd, sizeof cmd, "%s/unicorn-mkmodel --shape tiny --vision -o %s >/dev/null 2>&1", bin, model);
	cr_assert_eq(system(cmd), 0);
	snprintf(a, FIX_PATH, "%s/a.png", tmp);
	write_png(a, 40, 30, seed_a);
	if (b) {
		snprintf(b, FIX_PATH, "%s/b.png", tmp);
		write_png(b, 40, 30, seed_b);
	}
}

/* POST body to /v1/chat/completions: the HTTP status, the answer in out. */
static int post(const struct proc_cluster *c, const char *body, char *out, size_t cap)
{
	char path[256], cmd[512];
	snprintf(path, sizeof path, "%s/body.json", c->tmp);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(body, f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "curl -s -w '\\n%%{http_code}' --max-time 120 http://127.0.0.1:%d/v1/chat/completions -d @%s",
		 c->port, path);
	proc_sh(cmd, out, cap);
	char *nl = strrchr(out, '\n');
	cr_assert_not_null(nl, "no status: %s", out);
	*nl = 0;
	return atoi(nl + 1);
}

static char *image_body(const char *b64, const char *fmt_extra)
{
	char *b = malloc(strlen(b64) + 1024);
	sprintf(b, "{\"max_tokens\":4,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":["
		   "{\"type\":\"text\",\"text\":\"What is in the picture?\"},"
		   "{\"type\":\"image_url\",\"image_url\":{\"url\":\"%s%s\"}}%s]}]}",
		strncmp(b64, "http", 4) ? "data:image/png;base64," : "", b64, fmt_extra);
	return b;
}

static double prefix_hits(const struct proc_cluster *c)
{
	char cmd[256], out[1 << 16];
	snprintf(cmd, sizeof cmd, "curl -s http://127.0.0.1:%d/metrics | grep '^unicorn_kv_prefix_hit_tokens_total'",
		 c->port);
	proc_sh(cmd, out, sizeof out);
	const char *v = strchr(out, ' ');
	cr_assert_not_null(v, "no prefix metric: %s", out);
	return atof(v);
}

static double metric(const struct proc_cluster *c, const char *name)
{
	char cmd[256], out[1 << 16];
	snprintf(cmd, sizeof cmd, "curl -s http://127.0.0.1:%d/metrics | grep '^%s '", c->port, name);
	proc_sh(cmd, out, sizeof out);
	const char *v = strchr(out, ' ');
	cr_assert_not_null(v, "no metric %s: %s", name, out);
	return atof(v);
}

/* unicorn run --image in the background: 100 greedy tokens as JSON */
static FILE *run_bg(const char *bin, const char *name, const char *image, const char *text)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --max-tokens 100 --temp 0 --image %s --json '%s' 2>&1", bin,
		 name, image, text);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	return f;
}

/* the generated ids of run_bg's answer */
static char *gen_ids(FILE *f)
{
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	pclose(f);
	json_t *j = json_loads(buf, 0, NULL);
	cr_assert_not_null(j, "%.300s", buf);
	char *s = json_dumps(json_object_get(j, "ids"), JSON_COMPACT);
	cr_assert(s && strlen(s) > 2, "%.300s", buf);
	json_decref(j);
	return s;
}

/* content and usage.prompt_tokens of an answer */
static void answer(const char *raw, char *text, size_t cap, long *prompt_tokens)
{
	json_t *j = json_loads(raw, 0, NULL);
	cr_assert_not_null(j, "not JSON: %.300s", raw);
	json_t *m = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
	snprintf(text, cap, "%s", json_string_value(json_object_get(m, "content")));
	*prompt_tokens = (long)json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens"));
	json_decref(j);
}

Test(images, api_and_cli, .timeout = 240)
{
	const char *bin = proc_bin_dir_or_skip();
	char tmp[] = "/tmp/unicorn-img-XXXXXX", cmd[1024], model[FIX_PATH], mmproj[FIX_PATH], a[FIX_PATH], b[FIX_PATH];
	vision_fixture(bin, tmp, model, mmproj, a, 1, b, 2);
	char *ba = b64_file(a), *bb = b64_file(b);
	struct proc_cluster c;
	/* a small KV budget: four image prompts at once preempt each other (as http's kv_budget test) */
	proc_cluster_start(&c, "img", (const char *const[]){ "--mmproj", mmproj, "--kv-budget", "1792K", NULL });
	static char out[1 << 20];
	char t1[512], t2[512];
	long p_img, p_txt;

	/* text alone, then with the image: usage counts the image's 16 rows */
	int st = post(&c, "{\"max_tokens\":2,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":"
			  "\"What is in the picture?\"}]}", out, sizeof out);
	cr_assert_eq(st, 200, "%s", out);
	answer(out, t1, sizeof t1, &p_txt);
	char *body = image_body(ba, "");
	st = post(&c, body, out, sizeof out);
	cr_assert_eq(st, 200, "%s", out);
	answer(out, t1, sizeof t1, &p_img);
	cr_expect(p_img >= p_txt + 16, "prompt tokens %ld with the image, %ld without", p_img, p_txt);
	/* the same image again: the prefix cache holds it, the same answer */
	double h1 = prefix_hits(&c);
	st = post(&c, body, out, sizeof out);
	cr_assert_eq(st, 200, "%s", out);
	answer(out, t2, sizeof t2, &p_img);
	double h2 = prefix_hits(&c);
	cr_expect_str_eq(t2, t1, "the same image answered otherwise from the prefix cache");
	cr_expect_eq(metric(&c, "unicorn_image_encodes_total"), 1, "one image, encoded once");
	cr_expect(h2 - h1 >= 32, "the same image reused %g prefix positions", h2 - h1);
	/* another image: only the text before it could be shared */
	free(body);
	body = image_body(bb, "");
	st = post(&c, body, out, sizeof out);
	cr_assert_eq(st, 200, "%s", out);
	double h3 = prefix_hits(&c);
	cr_expect_eq(metric(&c, "unicorn_image_encodes_total"), 2, "a second image, a second encode");
	cr_expect(h3 - h2 < h2 - h1, "a different image reused %g positions (the same %g)", h3 - h2, h2 - h1);
	free(body);

	/* bad images: 400 naming the problem */
	body = image_body("iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB", "");
	st = post(&c, body, out, sizeof out);
	cr_expect_eq(st, 400, "%s", out);
	cr_expect(strstr(out, "image 0") != NULL, "%s", out);
	free(body);
	body = image_body("@@@not base64@@@", "");
	cr_expect_eq(post(&c, body, out, sizeof out), 400, "%s", out);
	free(body);
	body = image_body("https://example.com/cat.png", "");
	cr_expect_eq(post(&c, body, out, sizeof out), 400, "%s", out);
	cr_expect(strstr(out, "--allow-image-urls") != NULL, "%s", out);
	free(body);
	/* still serving, two images in one request */
	body = malloc(2 * strlen(ba) + 2048);
	sprintf(body, "{\"max_tokens\":2,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":["
		      "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,%s\"}},"
		      "{\"type\":\"text\",\"text\":\"and\"},"
		      "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,%s\"}}]}]}", ba, bb);
	st = post(&c, body, out, sizeof out);
	cr_expect_eq(st, 200, "%s", out);
	free(body);

	/* the CLI: the image's rows are in the prompt it sent */
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --max-tokens 2 --image %s --json 'What is in the picture?'",
		 bin, c.name, a);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	json_t *j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%s", out);
	size_t i, rows = 0;
	json_t *v;
	json_array_foreach(json_object_get(j, "prompt_ids"), i, v)
		rows += json_integer_value(v) >= 0x80000000LL;
	cr_expect_eq(rows, 16, "%s", out);
	cr_expect_str_eq(json_string_value(json_object_get(j, "reason")), "length");
	json_decref(j);
	/* preempted and recomputed image prompts give the ids they give alone */
	const char *img[4] = { a, b, a, b }, *txt[4] = { "Describe it", "Describe it", "What colour", "Tell a story" };
	char *alone[4];
	for (int k = 0; k < 4; k++)
		alone[k] = gen_ids(run_bg(bin, c.name, img[k], txt[k]));
	cr_assert_eq(metric(&c, "unicorn_kv_preemptions_total"), 0, "one at a time fits");
	FILE *f[4];
	for (int k = 0; k < 4; k++)
		f[k] = run_bg(bin, c.name, img[k], txt[k]);
	for (int k = 0; k < 4; k++) {
		char *ids = gen_ids(f[k]);
		cr_expect_str_eq(ids, alone[k], "image prompt %d: together (preempted), the ids changed", k);
		free(ids);
		free(alone[k]);
	}
	cr_expect_gt(metric(&c, "unicorn_kv_preemptions_total"), 0, "four long sequences should not fit together");
	snprintf(cmd, sizeof cmd, "printf '/image %s\\nWhat is it?\\n' | %s/unicorn chat --name %s --max-tokens 2 2>&1",
		 b, bin, c.name);
	cr_expect_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	cr_expect(strstr(out, "goes with your next message") != NULL, "%s", out);
	proc_cluster_stop(&c);
	free(ba);
	free(bb);
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	cr_expect_eq(system(cmd), 0);
}

/* A model without a projector: image parts are a 400 saying so. */
Test(images, no_projector, .timeout = 120)
{
	proc_bin_dir_or_skip();
	struct proc_cluster c;
	proc_cluster_start(&c, "noimg", NULL);
	static char out[1 << 16];
	char *body = image_body("iVBORw0KGgo=", "");
	cr_expect_eq(post(&c, body, out, sizeof out), 400, "%s", out);
	cr_expect(strstr(out, "this model has no vision projector") != NULL, "%s", out);
	free(body);
	proc_cluster_stop(&c);
}

/* unicorn-up --allow-image-urls: an http(s) image_url is fetched (here from
 * a loopback server, through its redirect) and is the same image as the same
 * bytes inline: the same answer, no second encode (the digest is of the
 * bytes). A 404, a closed port and an image over the 20 MiB cap are 400s
 * that say why, and the cluster keeps serving. */
Test(images, remote_urls_with_allow_image_urls, .timeout = 180)
{
	const char *bin = proc_bin_dir_or_skip();
	char tmp[] = "/tmp/unicorn-imgurl-XXXXXX", cmd[1024], model[FIX_PATH], mmproj[FIX_PATH], a[FIX_PATH];
	vision_fixture(bin, tmp, model, mmproj, a, 3, NULL, 0);
	FILE *pf = fopen(a, "rb");
	cr_assert_not_null(pf);
	static unsigned char png[1 << 16];
	size_t n_png = fread(png, 1, sizeof png, pf);
	fclose(pf);
	cr_assert(n_png > 0 && n_png < sizeof png);
	static struct hubserver hs;
	hs_start(&hs);
	hs_add(&hs, "pics/cats", "a.png", png, n_png);
	unsigned char *big = hs_bytes((20u << 20) + 1, 5);
	hs_add(&hs, "pics/cats", "big.png", big, (20u << 20) + 1);
	free(big);
	struct proc_cluster c;
	proc_cluster_start(&c, "imgurl", (const char *const[]){ "--mmproj", mmproj, "--allow-image-urls", NULL });
	static char out[1 << 20];
	char t_inline[512], t_url[512], url[256];
	long p1, p2;
	char *ba = b64_file(a), *body = image_body(ba, "");
	int st = post(&c, body, out, sizeof out);
	cr_assert_eq(st, 200, "%s", out);
	answer(out, t_inline, sizeof t_inline, &p1);
	free(body);
	snprintf(url, sizeof url, "%s/pics/cats/resolve/main/a.png", hs.url);
	body = image_body(url, "");
	st = post(&c, body, out, sizeof out);
	cr_assert_eq(st, 200, "%s\n%s", out, hs_dump(&hs));
	answer(out, t_url, sizeof t_url, &p2);
	free(body);
	cr_expect_str_eq(t_url, t_inline, "the same bytes by URL answered otherwise");
	cr_expect_eq(p2, p1);
	cr_expect_eq(metric(&c, "unicorn_image_encodes_total"), 1, "the same bytes by URL: the image encoded once");
	cr_expect_eq(hs_count(&hs, "GET /cdn/", NULL), 1, "%s", hs_dump(&hs));
	const struct {
		const char *path, *why;
	} bad[] = { { "/pics/cats/resolve/main/none.png", "HTTP status 404" },
		    { "/pics/cats/resolve/main/big.png", "larger than" },
		    { NULL, "not fetched" } };
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		if (bad[k].path)
			snprintf(url, sizeof url, "%s%s", hs.url, bad[k].path);
		else
			snprintf(url, sizeof url, "http://127.0.0.1:1/a.png"); /* nothing listens on port 1 */
		body = image_body(url, "");
		cr_expect_eq(post(&c, body, out, sizeof out), 400, "%s: %s", url, out);
		cr_expect(strstr(out, bad[k].why) != NULL, "%s: %s", url, out);
		free(body);
	}
	st = post(&c, "{\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"still there?\"}]}", out,
		  sizeof out);
	cr_expect_eq(st, 200, "%s", out);
	proc_cluster_stop(&c);
	hs_stop(&hs);
	free(ba);
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	cr_expect_eq(system(cmd), 0);
}

/* POST body to /v1/chat/completions in the background (curl through popen):
 * bg_wait gives its HTTP status and answer. */
static FILE *bg_post(const struct proc_cluster *c, const char *body, const char *name)
{
	char path[256], cmd[512];
	snprintf(path, sizeof path, "%s/%s.json", c->tmp, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(body, f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "curl -s -w '\\n%%{http_code}' --max-time 120 http://127.0.0.1:%d/v1/chat/completions -d @%s",
		 c->port, path);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	return p;
}

static int bg_wait(FILE *p, char *out, size_t cap)
{
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = 0;
	pclose(p);
	char *nl = strrchr(out, '\n');
	cr_assert_not_null(nl, "no status: %s", out);
	*nl = 0;
	return atoi(nl + 1);
}

/* Poll metric name until it is at least want (10 s): false when it never was. */
static bool metric_reaches(const struct proc_cluster *c, const char *name, double want)
{
	for (double t0 = proc_now_s(); proc_now_s() - t0 < 10;) {
		if (metric(c, name) >= want)
			return true;
		usleep(10000);
	}
	return false;
}

/* An image whose pixels leave the run directory while its request waits in
 * the queue (removed here, as 64 newer images evict it) fails that request
 * alone when its round comes: a 503 that says why. The requests running
 * beside it in that round (a text prompt, another image) answer exactly as
 * they do alone (greedy), and the same image sent again is encoded again
 * (the failed encode left no slot behind) and answers. --max-seqs 2 holds the
 * request in the queue, deterministically, until the image request beside
 * the text one ends: the pixels go while it waits. */
Test(images, evicted_image_fails_alone, .timeout = 180)
{
	const char *bin = proc_bin_dir_or_skip();
	char tmp[] = "/tmp/unicorn-imgev-XXXXXX", cmd[1024], model[FIX_PATH], mmproj[FIX_PATH], a[FIX_PATH], b[FIX_PATH],
	     px[512];
	vision_fixture(bin, tmp, model, mmproj, a, 5, b, 6);
	char *ba = b64_file(a), *bb = b64_file(b);
	/* the evicted image's file: RUNDIR/images/<sha256 of its bytes> */
	char sum[256];
	snprintf(cmd, sizeof cmd, "sha256sum %s", a);
	cr_assert_eq(proc_sh(cmd, sum, sizeof sum), 0, "%s", sum);
	sum[64] = 0;
	struct proc_cluster c;
	proc_cluster_start(&c, "imgev", (const char *const[]){ "--mmproj", mmproj, "--max-seqs", "2", NULL });
	snprintf(px, sizeof px, "%s/images/%s", c.dir, sum);
	static char out[1 << 20], ob[1 << 16], oc[1 << 16];
	const char *text_body = "{\"max_tokens\":160,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":"
				"\"Tell me a long story about the sea\"}]}";
	char *img_body = malloc(strlen(bb) + 1024), *bad_body = malloc(strlen(ba) + 1024);
	sprintf(img_body, "{\"max_tokens\":64,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":["
			  "{\"type\":\"text\",\"text\":\"Describe it\"},"
			  "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,%s\"}}]}]}", bb);
	sprintf(bad_body, "{\"max_tokens\":8,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":["
			  "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,%s\"}},"
			  "{\"type\":\"text\",\"text\":\"What is this?\"}]}]}", ba);
	char t_text[8192], t_img[8192], t[8192];
	long pt;

	/* alone: the answers the others must give beside the failing request;
	 * both run to max_tokens, so the image one ends after as many steps */
	double t0 = proc_now_s();
	int st = post(&c, text_body, out, sizeof out);
	cr_assert_eq(st, 200, "%s", out);
	cr_assert(strstr(out, "\"finish_reason\":\"length\"") != NULL, "%.300s", out);
	answer(out, t_text, sizeof t_text, &pt);
	st = post(&c, img_body, out, sizeof out);
	cr_assert_eq(st, 200, "%s", out);
	cr_assert(strstr(out, "\"finish_reason\":\"length\"") != NULL, "%.300s", out);
	answer(out, t_img, sizeof t_img, &pt);
	double alone_s = proc_now_s() - t0;
	double enc0 = metric(&c, "unicorn_image_encodes_total"), gen0 = metric(&c, "unicorn_generated_tokens_total");

	/* together: the text and the image request take both slots and
	 * generate; the bad request is accepted and waits in the queue */
	FILE *fb = bg_post(&c, text_body, "text"), *fc = bg_post(&c, img_body, "img");
	cr_assert(metric_reaches(&c, "unicorn_active_requests", 2), "the two requests did not start");
	cr_assert(metric_reaches(&c, "unicorn_generated_tokens_total", gen0 + 4), "no tokens");
	FILE *fa = bg_post(&c, bad_body, "bad");
	cr_assert(metric_reaches(&c, "unicorn_queue_depth", 1), "the request with the image did not wait");
	/* its pixels go while it waits: its round fails it alone */
	cr_assert_eq(unlink(px), 0, "%s: %s", px, strerror(errno));
	st = bg_wait(fa, out, sizeof out);
	cr_expect_eq(st, 503, "the request whose image is gone: %s", out);
	cr_expect(strstr(out, "image_unavailable") && strstr(out, "evicted"), "%s", out);
	int sb = bg_wait(fb, ob, sizeof ob), sc = bg_wait(fc, oc, sizeof oc);
	cr_assert_eq(sb, 200, "the text request beside it failed: %s", ob);
	cr_assert_eq(sc, 200, "the image request beside it failed: %s", oc);
	answer(ob, t, sizeof t, &pt);
	cr_expect_str_eq(t, t_text, "the text request beside the failed one answered otherwise");
	answer(oc, t, sizeof t, &pt);
	cr_expect_str_eq(t, t_img, "the image request beside the failed one answered otherwise");
	cr_expect_eq(metric(&c, "unicorn_image_encodes_total"), enc0 + 1, "one encode tried (the failed one)");
	snprintf(cmd, sizeof cmd, "curl -s http://127.0.0.1:%d/metrics | grep '^unicorn_requests_total{reason=\"image\"} 1'",
		 c.port);
	cr_expect_eq(proc_sh(cmd, out, sizeof out), 0, "requests ended for an image: %s", out);
	cr_expect(proc_log_has(c.log, "only this request fails"), "the coordinator's log does not say why");

	/* still serving: the same image again (the API writes its pixels
	 * again) is encoded again, its failed slot forgotten */
	st = post(&c, bad_body, out, sizeof out);
	cr_expect_eq(st, 200, "%s", out);
	cr_expect_eq(metric(&c, "unicorn_image_encodes_total"), enc0 + 2, "the image sent again was not encoded again");
	fprintf(stderr, "images/evicted_image_fails_alone: the two alone %.1f s, the whole test %.1f s\n", alone_s,
		proc_now_s() - t0);
	proc_cluster_stop(&c);
	free(img_body);
	free(bad_body);
	free(ba);
	free(bb);
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	cr_expect_eq(system(cmd), 0);
}
