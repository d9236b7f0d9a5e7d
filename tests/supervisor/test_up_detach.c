/* unicorn-up -d's foreground output when the cluster does not start (issue
 * 35 #4): every message of the daemon is printed as a line of its own,
 * without the status digit of the notify pipe (a stray "1" came before the
 * last line), and the exit status is the first message's. */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/golden.h"
#include "tests/proc.h"

/* no line of out starts with a notify status digit */
static void no_stray_digit(const char *out)
{
	for (const char *l = out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
		cr_assert(!(*l >= '0' && *l <= '9' && !strncmp(l + 1, "unicorn-up", 10)), "stray status digit: %s", out);
}

Test(up_detach, errors_without_status_digit, .timeout = 180)
{
	const char *bin = proc_bin_dir_or_skip();
	int lock = proc_cluster_lock();
	char tmp[] = "/tmp/unicorn-detach-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	setenv("XDG_RUNTIME_DIR", tmp, 1);
	char cmd[1024], out[8192];

	/* a model that is not there */
	snprintf(cmd, sizeof cmd, "%s/unicorn-up --model %s/nonexistent.gguf --name det%d --no-http -d", bin, tmp,
		 (int)getpid());
	int st = proc_sh(cmd, out, sizeof out);
	cr_assert_neq(st, 0, "%s", out);
	cr_assert(!strncmp(out, "unicorn-up: ", 12), "%s", out);
	no_stray_digit(out);

	/* a port that is taken: the API fails, then the supervisor stops */
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
	cr_assert_eq(listen(s, 1), 0);
	socklen_t al = sizeof a;
	getsockname(s, (struct sockaddr *)&a, &al);
	snprintf(cmd, sizeof cmd, "%s/unicorn-up --model %s/golden/gemma3-tiny-q4_0.gguf --name det%d --port %d -d", bin,
		 golden_shared_dir(), (int)getpid(), ntohs(a.sin_port));
	st = proc_sh(cmd, out, sizeof out);
	cr_assert_neq(st, 0, "%s", out);
	cr_assert_not_null(strstr(out, "unicorn-up: the cluster could not start"), "%s", out);
	no_stray_digit(out);
	close(s);
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	cr_assert_eq(system(cmd), 0);
	close(lock);
}
