/* unicorn bench on the demo model (262,144-token vocabulary) on a device
 * whose maxStorageBufferRange does not hold 512 rows of logits (lavapipe:
 * 128 MiB): the default batch is lowered with a note, an explicit -b that
 * does not fit is a clear error (issue 35 #5: the default failed). */
#include <criterion/criterion.h>
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
