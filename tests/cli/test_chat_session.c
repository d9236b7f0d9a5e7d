/* unicorn chat as a user meets it (issue 35): on a terminal (tmux) the '>>> '
 * marker, /help, /set validated like the options, /clear, /bye, unknown
 * commands refused, none of them ever reaching the model (the coordinator's
 * unicorn_requests_total stays 0); Ctrl-C stops a reply and keeps the chat,
 * Ctrl-C at the prompt leaves; a conversation over the context drops its
 * oldest turns instead of failing. Real cluster on the tiny golden model. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/proc.h"

static char sock[64];
static char pane[1 << 16];

static int shf(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *capture(void)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "tmux -L %s capture-pane -p -J -S -1000 -t chat 2>/dev/null", sock);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t n = fread(pane, 1, sizeof pane - 1, f);
	pane[n] = 0;
	pclose(f);
	return pane;
}

static int count(const char *hay, const char *what)
{
	int k = 0;
	for (const char *p = hay; (p = strstr(p, what)); p += strlen(what))
		k++;
	return k;
}

/* Wait (up to s seconds) until the pane shows what at least n times. */
static void wait_for(const char *what, int n, double s)
{
	double end = proc_now_s() + s;
	while (count(capture(), what) < n) {
		if (proc_now_s() > end)
			cr_assert_fail("pane never showed '%s' %d times:\n%s", what, n, pane);
		usleep(100 * 1000);
	}
}

static void keys(const char *text)
{
	cr_assert_eq(shf("tmux -L %s send-keys -t chat -l '%s'", sock, text), 0);
	cr_assert_eq(shf("tmux -L %s send-keys -t chat Enter", sock), 0);
}

/* Sum of the coordinator's unicorn_requests_total (all end reasons). */
static long requests(const struct proc_cluster *c)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "curl -s http://127.0.0.1:%d/metrics", c->port);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	char line[512];
	long sum = 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "unicorn_requests_total", 22)) {
			char *sp = strrchr(line, ' ');
			sum += sp ? strtol(sp + 1, NULL, 10) : 0;
		}
	pclose(f);
	return sum;
}

static void start_chat(const struct proc_cluster *c, const char *opts)
{
	snprintf(sock, sizeof sock, "unicorn-chat-%d", (int)getpid());
	shf("tmux -L %s kill-server 2>/dev/null", sock);
	cr_assert_eq(shf("tmux -L %s new-session -d -s chat -x 160 -y 50 "
			 "'trap true INT; XDG_RUNTIME_DIR=%s %s/unicorn chat --name %s %s; echo CHAT-EXIT=$?; sleep 60'",
			 sock, c->tmp, proc_bin_dir_or_skip(), c->name, opts), 0);
}

static void stop_chat(void)
{
	shf("tmux -L %s kill-server 2>/dev/null", sock);
}

Test(chat_session, commands_stay_local, .timeout = 300)
{
	struct proc_cluster c;
	proc_cluster_start(&c, "chatss", NULL);
	start_chat(&c, "--max-tokens 3");
	wait_for("Chatting with gemma3-tiny-q4_0.gguf", 1, 20);
	wait_for(">>> ", 1, 20);

	keys("/help");
	wait_for("Chat commands (never sent to the model)", 1, 10);
	wait_for(">>> ", 2, 10);
	keys("/set temp 5");
	wait_for("/set temp: 5 outside [0, 2]", 1, 10);
	keys("/set max-tokens 0");
	wait_for("/set max-tokens: 0 outside 1..", 1, 10);
	keys("/set top-k many");
	wait_for("/set top-k: bad number 'many'", 1, 10);
	keys("/set temp 0.5");
	wait_for("(temp = 0.5)", 1, 10);
	keys("/set temp 0");
	wait_for("(temp = 0)", 1, 10);
	keys("/frobnicate now");
	wait_for("unknown command '/frobnicate'", 1, 10);
	keys("/clear");
	wait_for("(conversation cleared)", 1, 10);
	wait_for(">>> ", 9, 10);
	cr_assert_eq(requests(&c), 0, "a chat command reached the model");

	keys("hello there");
	wait_for(">>> ", 10, 60);
	cr_assert_eq(requests(&c), 1);
	keys("/set");
	wait_for("conversation: 2 turns", 1, 10);
	keys("/clear");
	keys("/set");
	wait_for("conversation: 0 turns", 1, 10);
	cr_assert_eq(requests(&c), 1, "a chat command reached the model");

	keys("/bye");
	wait_for("CHAT-EXIT=0", 1, 10);
	stop_chat();
	proc_cluster_stop(&c);
}

Test(chat_session, ctrl_c_stops_a_reply, .timeout = 300)
{
	struct proc_cluster c;
	proc_cluster_start(&c, "chatcc", NULL);
	/* a reply long enough to be interrupted (random text; the tiny model
	 * rarely ends a turn) */
	start_chat(&c, "--max-tokens 4000 --temp 1 --seed 7");
	wait_for(">>> ", 1, 20);
	keys("write a long story");
	usleep(1500 * 1000);
	cr_assert_eq(shf("tmux -L %s send-keys -t chat C-c", sock), 0);
	wait_for("(stopped)", 1, 20);
	wait_for(">>> ", 2, 10);
	capture();
	cr_assert_null(strstr(pane, "CHAT-EXIT"), "Ctrl-C during a reply ended the chat:\n%s", pane);
	/* the chat goes on: the stopped reply is in the conversation */
	keys("/set");
	wait_for("conversation: 2 turns", 1, 10);
	/* Ctrl-C at the prompt leaves */
	cr_assert_eq(shf("tmux -L %s send-keys -t chat C-c", sock), 0);
	wait_for("CHAT-EXIT=0", 1, 10);
	stop_chat();
	proc_cluster_stop(&c);
}

Test(chat_session, history_over_context_drops_oldest, .timeout = 300)
{
	struct proc_cluster c;
	/* four messages of ~400 tokens in a context of 1,024 (--ctx): the third
	 * and fourth turns only fit without the oldest ones (the model's 4,096
	 * with 1,500-token messages took lavapipe over a minute a request when
	 * the machine was busy) */
	const char *const ctx[] = { "--ctx", "1024", NULL };
	proc_cluster_start(&c, "chatctx", ctx);
	char path[256];
	snprintf(path, sizeof path, "%s/msgs.txt", c.tmp);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	for (int m = 0; m < 4; m++) {
		for (int i = 0; i < 400; i++)
			fputs(" hi", f);
		fputs("\n", f);
	}
	fclose(f);
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "%s/unicorn chat --name %s --system 'be brief' --max-tokens 2 < %s 2>&1",
		 proc_bin_dir_or_skip(), c.name, path);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = fread(pane, 1, sizeof pane - 1, p);
	pane[n] = 0;
	int st = pclose(p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d:\n%s", st, pane);
	cr_assert_not_null(strstr(pane, "the conversation outgrew the context: dropped the oldest"), "%s", pane);
	cr_assert_not_null(strstr(pane, "kept the system prompt"), "%s", pane);
	cr_assert_null(strstr(pane, "do not fit"), "%s", pane);
	/* no marker when standard input is not a terminal */
	cr_assert_null(strstr(pane, ">>> "), "%s", pane);
	cr_assert_eq(requests(&c), 4);
	proc_cluster_stop(&c);
}
