/* regioncheck: the loader's region identity and checksums (issue 37). A real
 * unicorn-loader on the tiny golden model: every attach to one loader sees the
 * same identity, a restarted loader a larger one; a weight region changed after
 * the loader computed its checksums is refused by attach_open, naming it. */
#include <criterion/criterion.h>

#include "tests/proc.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/golden.h"
#include "ipc/attach.h"
#include "common/err.h"

static char dir[64];
static pid_t loader_pid = -1;

static void stop(void)
{
	if (loader_pid <= 0)
		return;
	kill(loader_pid, SIGKILL);
	waitpid(loader_pid, NULL, 0);
	loader_pid = -1;
}

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/unicorn-rck-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	chmod(dir, 0700);
}

static void teardown(void)
{
	stop();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	(void)!system(cmd);
}

static void start_loader(const char *model)
{
	char exe[4096], err[128];
	snprintf(exe, sizeof exe, "%s/unicorn-loader", proc_bin_dir_or_skip());
	snprintf(err, sizeof err, "%s/loader.err", dir);
	char *argv[] = { exe, "--rundir", dir, "--model", (char *)model, "--quiet", NULL };
	loader_pid = proc_spawn(argv, err);
}

Test(regioncheck, identity_and_sampled_checksums, .init = setup, .fini = teardown, .timeout = 60)
{
	struct golden g;
	cr_assert_eq(golden_load("q4_0", &g), 0, "%s", err_msg());
	start_loader(g.model_path);
	struct attach *a = NULL, *b = NULL;
	cr_assert_eq(attach_open(dir, 10000, &a), 0, "%s", err_msg());
	cr_assert_eq(attach_open(dir, 10000, &b), 0, "%s", err_msg());
	cr_assert_neq(a->ident, 0);
	cr_assert_eq(a->ident, b->ident, "one loader, one identity");
	attach_close(b);
	/* change the first byte of weight region 0 (always sampled) behind the loader's back */
	uint8_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, a->weights[0].fd, 0);
	cr_assert_neq(w, MAP_FAILED, "the memfd maps writable for the test");
	w[0] ^= 0x5a;
	cr_assert_eq(attach_open(dir, 10000, &b), ERR_INVAL, "a changed region was imported");
	cr_assert(strstr(err_msg(), "weight region 0: sampled checksum"), "%s", err_msg());
	w[0] ^= 0x5a;
	cr_assert_eq(attach_open(dir, 10000, &b), 0, "%s", err_msg());
	attach_close(b);
	munmap(w, 4096);
	uint64_t first = a->ident;
	attach_close(a);
	/* a restarted loader: a new, larger identity */
	stop();
	start_loader(g.model_path);
	cr_assert_eq(attach_open(dir, 10000, &a), 0, "%s", err_msg());
	cr_assert_gt(a->ident, first, "restarted loader's identity %llx not above %llx",
		     (unsigned long long)a->ident, (unsigned long long)first);
	attach_close(a);
	golden_free(&g);
}

Test(regioncheck, info_codec_roundtrip)
{
	struct attach_info in = { .n_regions = 2, .manifest_size = 100, .size = { 4096, 8192 }, .act_size = 4096,
				  .flags = 0, .ident = 0x1234567890abcdefull, .manifest_sum = 7, .sum = { 11, 13 } };
	uint8_t buf[ATTACH_INFO_MAX];
	size_t len = 0;
	cr_assert_eq(attach_info_encode(&in, buf, sizeof buf, &len), 0, "%s", err_msg());
	struct attach_info out;
	cr_assert_eq(attach_info_decode(buf, len, &out), 0, "%s", err_msg());
	cr_assert_eq(out.ident, in.ident);
	cr_assert_eq(out.manifest_sum, 7);
	cr_assert_eq(out.sum[0], 11);
	cr_assert_eq(out.sum[1], 13);
	cr_assert_eq(attach_info_decode(buf, len - 1, &out), ERR_INVAL, "a short answer is refused");
	in.ident = 0;
	cr_assert_eq(attach_info_encode(&in, buf, sizeof buf, &len), 0);
	cr_assert_eq(attach_info_decode(buf, len, &out), ERR_INVAL, "identity 0 is refused");
}
