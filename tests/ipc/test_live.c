/* live: the liveness page a cluster process shares with the supervisor
 * (ipc/live.h). Writer and reader in one test process, and a reader in
 * another process, over a real file in a temporary runtime dir. */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "ipc/live.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/unicorn-live-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char p[128];
	snprintf(p, sizeof p, "%s/%s", dir, live_file(MSG_ROLE_GPU_WORKER));
	unlink(p);
	rmdir(dir);
}

TestSuite(live, .init = setup, .fini = teardown);

Test(live, beat_and_row_reach_a_reader_of_this_pid_only)
{
	const struct live_page *r;
	cr_assert_eq(live_open(dir, MSG_ROLE_GPU_WORKER, getpid(), &r), ERR_AGAIN, "no page yet");
	struct live_page *w;
	cr_assert_eq(live_create(dir, MSG_ROLE_GPU_WORKER, 1234, &w), 0, "%s", err_msg());
	cr_assert_eq(live_open(dir, MSG_ROLE_GPU_WORKER, getpid() + 1, &r), ERR_AGAIN, "another pid's page");
	cr_assert_eq(live_open(dir, MSG_ROLE_GPU_WORKER, getpid(), &r), 0, "%s", err_msg());
	struct msg_status st = { .role = MSG_ROLE_GPU_WORKER, .pid = (uint32_t)getpid(), .steps = 7 };
	msg_set_str(st.device, sizeof st.device, "a device");
	live_beat(w, 424242);
	live_publish(w, &st);
	uint64_t beat;
	uint32_t stall;
	struct msg_status got;
	cr_assert(live_read(r, &beat, &stall, &got));
	cr_assert_eq(beat, 424242u);
	cr_assert_eq(stall, 1234u);
	cr_assert_eq(got.steps, 7u);
	cr_assert_str_eq(got.device, "a device");
	/* the writer's next row is seen through the same mapping */
	st.steps = 8;
	live_publish(w, &st);
	cr_assert(live_read(r, &beat, &stall, &got));
	cr_assert_eq(got.steps, 8u);
	live_unmap(r);
	live_close(w, dir, MSG_ROLE_GPU_WORKER, true);
	cr_assert_eq(live_open(dir, MSG_ROLE_GPU_WORKER, getpid(), &r), ERR_AGAIN, "a clean exit removes the page");
}

/* A page is renamed into place whole: a reader looking for the new pid
 * never maps the old incarnation's page, and a child's page is read by its
 * parent as the supervisor reads it. */
Test(live, a_new_incarnation_replaces_the_page)
{
	struct live_page *old;
	cr_assert_eq(live_create(dir, MSG_ROLE_GPU_WORKER, 0, &old), 0, "%s", err_msg());
	int go[2];
	cr_assert_eq(pipe(go), 0);
	pid_t kid = fork();
	cr_assert_geq(kid, 0);
	if (kid == 0) {
		struct live_page *p;
		if (live_create(dir, MSG_ROLE_GPU_WORKER, 0, &p))
			_exit(1);
		struct msg_status st = { .pid = (uint32_t)getpid(), .steps = 99 };
		live_publish(p, &st);
		live_beat(p, 77);
		char c = 1;
		if (write(go[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c;
	cr_assert_eq(read(go[0], &c, 1), 1);
	const struct live_page *r;
	cr_assert_eq(live_open(dir, MSG_ROLE_GPU_WORKER, getpid(), &r), ERR_AGAIN, "the old page is gone");
	cr_assert_eq(live_open(dir, MSG_ROLE_GPU_WORKER, kid, &r), 0, "%s", err_msg());
	uint64_t beat;
	uint32_t stall;
	struct msg_status got;
	cr_assert(live_read(r, &beat, &stall, &got));
	cr_assert_eq(beat, 77u);
	cr_assert_eq(got.steps, 99u);
	cr_assert_eq(stall, 0u);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	live_unmap(r);
	live_close(old, dir, MSG_ROLE_GPU_WORKER, false);
}

/* A short or foreign file in the page's place is "not up", never a crash. */
Test(live, a_hostile_file_is_not_a_page)
{
	char p[128];
	snprintf(p, sizeof p, "%s/%s", dir, live_file(MSG_ROLE_GPU_WORKER));
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs("short", f);
	fclose(f);
	const struct live_page *r;
	cr_assert_eq(live_open(dir, MSG_ROLE_GPU_WORKER, getpid(), &r), ERR_AGAIN);
	f = fopen(p, "w");
	cr_assert_not_null(f);
	char junk[4096];
	memset(junk, 0x5a, sizeof junk);
	fwrite(junk, 1, sizeof junk, f);
	fclose(f);
	cr_assert_eq(live_open(dir, MSG_ROLE_GPU_WORKER, getpid(), &r), ERR_AGAIN);
	cr_assert_null(live_file(MSG_ROLE_SUPERVISOR));
}
