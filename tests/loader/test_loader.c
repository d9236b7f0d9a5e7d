/* loader: unicorn-loader as a real process on the tiny golden model; the test
 * attaches over loader.sock (ipc/attach.h) and checks every tensor byte, the
 * exit code and message for a bad model, and that a re-attach after the model
 * file is gone still works (regions live in the loader's memory). */
#include <criterion/criterion.h>

#include "tests/proc.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/golden.h"
#include "ipc/attach.h"
#include "common/err.h"
#include "formats/model.h"

static char dir[64];
static pid_t loader_pid = -1;
/* Wait up to ms for pid; returns its wait status or -1 on timeout. */
static void stop(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(*pid, SIGTERM);
	if (proc_wait_ms(*pid, 3000) < 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
	}
	*pid = -1;
}

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/unicorn-ldr-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	chmod(dir, 0700);
}

static void teardown(void)
{
	stop(&loader_pid);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	(void)!system(cmd);
}

static void start_loader(const char *model)
{
	char exe[4096], err[128];
	snprintf(exe, sizeof exe, "%s/unicorn-loader", proc_bin_dir());
	snprintf(err, sizeof err, "%s/loader.err", dir);
	char *argv[] = { exe, "--rundir", dir, "--model", (char *)model, "--quiet", NULL };
	loader_pid = proc_spawn(argv, err);
}

/* Every tensor of the attached model equals the file's. */
static void check_same(const struct attach *a, const struct model *f)
{
	const struct model *m = a->model;
	cr_assert_eq(m->n_tensors, f->n_tensors);
	cr_assert_eq(m->cfg.n_embd, f->cfg.n_embd);
	cr_assert_eq(m->cfg.n_layer, f->cfg.n_layer);
	cr_assert_eq(m->cfg.n_vocab, f->cfg.n_vocab);
	for (size_t i = 0; i < f->n_tensors; i++) {
		const struct model_tensor *t = model_find(m, f->tensors[i].name);
		cr_assert_not_null(t, "tensor %s missing", f->tensors[i].name);
		cr_assert_eq(t->type, f->tensors[i].type);
		cr_assert_eq(t->nbytes, f->tensors[i].nbytes);
		for (int d = 0; d < 4; d++)
			cr_assert_eq(t->ne[d], f->tensors[i].ne[d]);
		cr_assert(memcmp(t->data, f->tensors[i].data, t->nbytes) == 0, "tensor %s bytes differ", t->name);
		/* data points into a shared weight region, not the file */
		bool inside = false;
		for (uint32_t r = 0; r < a->n_weights; r++) {
			const uint8_t *b = a->weights[r].addr;
			inside |= (const uint8_t *)t->data >= b && (const uint8_t *)t->data + t->nbytes <= b + a->weights[r].size;
		}
		cr_assert(inside, "tensor %s does not live in a shared region", t->name);
	}
}

Test(loader, tensors_equal_file, .init = setup, .fini = teardown, .timeout = 30)
{
	struct golden g;
	cr_assert_eq(golden_load("q4_0", &g), 0, "%s", err_msg());
	struct model *f = NULL;
	cr_assert_eq(model_open(g.model_path, &f), 0, "%s", err_msg());
	start_loader(g.model_path);
	struct attach *a = NULL;
	cr_assert_eq(attach_open(dir, 10000, &a), 0, "%s", err_msg());
	check_same(a, f);
	cr_assert(a->act.writable);
	/* activation slots: in-range rows and head areas map, the rest is refused */
	float *h;
	uint32_t *ids;
	float *vals;
	cr_assert_eq(attach_hidden(a, MSG_MAX_SLOTS - 1, MSG_MAX_TOKENS - 1, 1, &h), 0, "%s", err_msg());
	h[a->n_embd - 1] = 1.5f; /* writable */
	cr_assert_eq(attach_head(a, MSG_MAX_SLOTS - 1, &ids, &vals), 0);
	cr_assert((uint8_t *)ids >= (uint8_t *)(h + a->n_embd), "head area follows the hidden rows");
	cr_assert_eq(attach_hidden(a, MSG_MAX_SLOTS, 0, 1, &h), ERR_RANGE);
	cr_assert_eq(attach_hidden(a, 0, MSG_MAX_TOKENS - 1, 2, &h), ERR_RANGE);
	cr_assert_eq(attach_hidden(a, 0, 0, 0, &h), ERR_RANGE);
	cr_assert_eq(attach_head(a, MSG_MAX_SLOTS, &ids, &vals), ERR_RANGE);
	attach_close(a);
	model_close(f);
	/* SIGTERM is a clean stop */
	kill(loader_pid, SIGTERM);
	int st = proc_wait_ms(loader_pid, 5000);
	loader_pid = -1;
	cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "loader stop status %d", st);
	golden_free(&g);
}

static void read_file(const char *path, char *buf, size_t cap)
{
	FILE *fp = fopen(path, "r");
	size_t n = fp ? fread(buf, 1, cap - 1, fp) : 0;
	buf[n] = 0;
	if (fp)
		fclose(fp);
}

Test(loader, bad_model_exits_2, .init = setup, .fini = teardown, .timeout = 30)
{
	char model[128];
	snprintf(model, sizeof model, "%s/broken.gguf", dir);
	FILE *fp = fopen(model, "w");
	cr_assert_not_null(fp);
	fputs("GGUF this is not a model", fp);
	fclose(fp);
	start_loader(model);
	int st = proc_wait_ms(loader_pid, 10000);
	loader_pid = -1;
	cr_assert(st >= 0 && WIFEXITED(st), "loader did not exit");
	cr_assert_eq(WEXITSTATUS(st), 2);
	char err[4096], path[128];
	snprintf(path, sizeof path, "%s/loader.err", dir);
	read_file(path, err, sizeof err);
	cr_assert_not_null(strstr(err, "broken.gguf"), "message names the file: %s", err);
	/* and a missing model too */
	snprintf(model, sizeof model, "%s/missing.gguf", dir);
	start_loader(model);
	st = proc_wait_ms(loader_pid, 10000);
	loader_pid = -1;
	cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 2);
	read_file(path, err, sizeof err);
	cr_assert_not_null(strstr(err, "missing.gguf"), "message names the file: %s", err);
}

Test(loader, reattach_without_file, .init = setup, .fini = teardown, .timeout = 30)
{
	struct golden g;
	cr_assert_eq(golden_load("q4_0", &g), 0, "%s", err_msg());
	struct model *f = NULL;
	cr_assert_eq(model_open(g.model_path, &f), 0, "%s", err_msg());
	/* a private copy of the model that we can take away */
	char copy[128], moved[128], cmd[4400];
	snprintf(copy, sizeof copy, "%s/model.gguf", dir);
	snprintf(moved, sizeof moved, "%s/gone.gguf", dir);
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", g.model_path, copy);
	cr_assert_eq(system(cmd), 0);
	start_loader(copy);
	struct attach *a = NULL;
	cr_assert_eq(attach_open(dir, 10000, &a), 0, "%s", err_msg());
	check_same(a, f);
	/* the worker side goes away, the model file is renamed and then emptied */
	attach_close(a);
	cr_assert_eq(rename(copy, moved), 0);
	cr_assert_eq(truncate(moved, 0), 0);
	cr_assert_eq(attach_open(dir, 10000, &a), 0, "%s", err_msg());
	check_same(a, f);
	attach_close(a);
	/* several attaches at once share the same regions */
	struct attach *b = NULL, *c = NULL;
	cr_assert_eq(attach_open(dir, 5000, &b), 0, "%s", err_msg());
	cr_assert_eq(attach_open(dir, 5000, &c), 0, "%s", err_msg());
	float *hb, *hc;
	cr_assert_eq(attach_hidden(b, 3, 7, 1, &hb), 0);
	cr_assert_eq(attach_hidden(c, 3, 7, 1, &hc), 0);
	hb[5] = 42.0f;
	cr_assert_eq(hc[5], 42.0f, "activation region is shared");
	attach_close(b);
	attach_close(c);
	model_close(f);
	golden_free(&g);
}

Test(loader, attach_without_loader_times_out, .init = setup, .fini = teardown, .timeout = 10)
{
	struct attach *a = NULL;
	cr_assert_eq(attach_open(dir, 300, &a), ERR_TIMEOUT);
	cr_assert_null(a);
}
