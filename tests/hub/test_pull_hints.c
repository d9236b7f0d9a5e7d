/* `unicorn pull` errors say what to do next (issue 35 #8): a 404 for the
 * repo suggests checking the name and quant and `unicorn list`; a 404 for a
 * file the list named suggests another quant. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "hub/hub.h"
#include "tests/hubserver.h"
#include "tests/proc.h"

Test(pull_hints, not_found_says_what_next, .timeout = 60)
{
	const char *bin = proc_bin_dir_or_skip();
	struct hubserver s;
	hs_start(&s);
	unsigned char *d = hs_bytes(1000, 4);
	hs_add(&s, "acme/two-GGUF", "m-Q4_0.gguf", d, 1000);
	free(d);
	char store[] = "/tmp/unicorn-pullhints-XXXXXX";
	cr_assert_not_null(mkdtemp(store));
	char cmd[1024], out[8192];
	snprintf(cmd, sizeof cmd, "UNICORN_MODELS=%s HF_ENDPOINT=%s HF_TOKEN= %s/unicorn pull acme/missing 2>&1", store,
		 s.url, bin);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = 0;
	cr_assert_neq(pclose(f), 0, "%s", out);
	cr_assert_not_null(strstr(out, "404 Not Found"), "%s", out);
	cr_assert_not_null(strstr(out, "no model acme/missing"), "%s", out);
	cr_assert_not_null(strstr(out, "check the name"), "%s", out);
	cr_assert_not_null(strstr(out, "unicorn list"), "%s", out);

	struct hub_opts o;
	hub_opts_default(&o);
	o.endpoint = s.url;
	o.token = "";
	o.quiet = true;
	char dest[128];
	snprintf(dest, sizeof dest, "%s/gone.gguf", store);
	cr_assert_eq(hub_download(&o, "acme/two-GGUF", "gone.gguf", dest), ERR_NOTFOUND);
	cr_assert_not_null(strstr(err_msg(), "choose another quant with acme/two-GGUF:QUANT"), "%s", err_msg());
	hs_stop(&s);
	snprintf(cmd, sizeof cmd, "rm -rf %s", store);
	cr_assert_eq(system(cmd), 0);
}
