/* The `unicorn` command line (issue 35 #6, #7): -h on every command, `unicorn
 * help CMD`, --version, a prompt of several words, errors that name the
 * option, one --temp range with the HTTP API. No cluster is needed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/proc.h"

static char out[65536];

/* bin/unicorn ARGS with stdout and stderr in out; the exit status */
static int uni(const char *args)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "XDG_RUNTIME_DIR=/tmp/unicorn-cli-args-none %s/unicorn %s 2>&1 </dev/null",
		 proc_bin_dir_or_skip(), args);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = 0;
	int st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(cli_args, help_everywhere)
{
	cr_assert_eq(uni("run -h"), 0, "%s", out);
	cr_assert(!strncmp(out, "usage: unicorn run", 18), "%s", out);
	cr_assert_eq(uni("chat -h"), 0, "%s", out);
	cr_assert(!strncmp(out, "usage: unicorn chat", 19), "%s", out);
	cr_assert_eq(uni("help run"), 0, "%s", out);
	cr_assert(!strncmp(out, "usage: unicorn run", 18), "%s", out);
	cr_assert_eq(uni("help bench"), 0, "%s", out);
	cr_assert(!strncmp(out, "usage: unicorn bench", 20), "%s", out);
	cr_assert_eq(uni("help nosuch"), 2, "%s", out);
	cr_assert_not_null(strstr(out, "unknown command 'nosuch'"), "%s", out);
	cr_assert_eq(uni("help"), 0, "%s", out);
	cr_assert(!strncmp(out, "usage: unicorn COMMAND", 22), "%s", out);
}

Test(cli_args, version)
{
	cr_assert_eq(uni("--version"), 0, "%s", out);
	cr_assert(!strncmp(out, "unicorn ", 8) && strlen(out) > 9, "%s", out);
}

Test(cli_args, numbers_name_the_option)
{
	cr_assert_eq(uni("run --temp abc hi"), 2, "%s", out);
	cr_assert_not_null(strstr(out, "--temp: bad number 'abc'"), "%s", out);
	cr_assert_eq(uni("run --top-p x1 hi"), 2, "%s", out);
	cr_assert_not_null(strstr(out, "--top-p: bad number 'x1'"), "%s", out);
	cr_assert_eq(uni("chat --seed zz"), 2, "%s", out);
	cr_assert_not_null(strstr(out, "--seed: bad number 'zz'"), "%s", out);
}

Test(cli_args, temp_range_as_http)
{
	/* HTTP takes temperature 0..2 (api/openai.c): the CLI too */
	cr_assert_eq(uni("run --temp 2.5 hi"), 2, "%s", out);
	cr_assert_not_null(strstr(out, "--temp: 2.5 outside [0, 2]"), "%s", out);
	cr_assert_eq(uni("chat --temp 50"), 2, "%s", out);
	cr_assert_not_null(strstr(out, "outside [0, 2]"), "%s", out);
	/* in range: on to looking for the cluster */
	cr_assert_eq(uni("run --name nocluster35 --temp 2 hi"), 1, "%s", out);
	cr_assert_not_null(strstr(out, "no cluster 'nocluster35' is running"), "%s", out);
}

Test(cli_args, prompt_of_words)
{
	/* several words are the prompt, not a usage error */
	cr_assert_eq(uni("run --name nocluster35 Hello world"), 1, "%s", out);
	cr_assert_null(strstr(out, "usage:"), "%s", out);
	cr_assert_not_null(strstr(out, "no cluster 'nocluster35' is running"), "%s", out);
	cr_assert_eq(uni("run --name nocluster35"), 2, "%s", out);
	cr_assert_not_null(strstr(out, "no prompt"), "%s", out);
}

/* help texts that agree with the options (issue 35 #7) */
Test(cli_args, help_texts_agree)
{
	cr_assert_eq(uni("devices --help"), 0, "%s", out);
	cr_assert_not_null(strstr(out, "--vk-device"), "%s", out);
	cr_assert_null(strstr(out, " --device"), "%s", out);
	cr_assert_eq(uni("--help"), 0, "%s", out);
	const char *q = strstr(out, "quantize ");
	cr_assert_not_null(q, "%s", out);
	cr_assert_null(strstr(out, "q8_0/q4_0 GGUF"), "%s", out);
	cr_assert_not_null(strstr(q, "q4_k_m"), "%s", out);
}
