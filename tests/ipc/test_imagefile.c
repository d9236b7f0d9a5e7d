/* imagefile: pixels through the run directory: written once, read back
 * exactly, a file of another size or none refused, at most IMAGEFILE_MAX kept
 * (the least recently written go), row ids carry the digest. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "ipc/imagefile.h"

Test(imagefile, write_read_trim)
{
	char dir[] = "/tmp/unicorn-imgf-XXXXXX", cmd[128], sub[160];
	cr_assert_not_null(mkdtemp(dir));
	uint8_t d[MSG_DIGEST] = { 1, 2, 3 };
	float px[12], back[12];
	for (int i = 0; i < 12; i++)
		px[i] = (float)i * 0.5f;
	cr_assert_eq(imagefile_write(dir, d, px, 12), 0, "%s", err_msg());
	cr_assert_eq(imagefile_read(dir, d, back, 12), 0, "%s", err_msg());
	cr_expect_arr_eq(back, px, sizeof px);
	cr_expect_eq(imagefile_read(dir, d, back, 11), ERR_INVAL, "another size");
	d[0] = 9;
	cr_expect_eq(imagefile_read(dir, d, back, 12), ERR_NOTFOUND);
	for (uint32_t i = 0; i < IMAGEFILE_MAX + 3; i++) {
		d[1] = (uint8_t)i;
		d[2] = (uint8_t)(i >> 8);
		cr_assert_eq(imagefile_write(dir, d, px, 12), 0);
	}
	snprintf(sub, sizeof sub, "ls %s/images | wc -l", dir);
	FILE *f = popen(sub, "r");
	int n = 0;
	cr_assert_eq(fscanf(f, "%d", &n), 1);
	pclose(f);
	cr_expect_eq(n, IMAGEFILE_MAX);
	cr_expect_eq(imagefile_read(dir, d, back, 12), 0, "the newest stays");
	/* row ids: bit 31, different rows and digests differ */
	uint8_t e[MSG_DIGEST] = { 0 };
	cr_expect(imagefile_row_id(d, 0) & 0x80000000u);
	cr_expect_neq(imagefile_row_id(d, 0), imagefile_row_id(d, 8));
	cr_expect_neq(imagefile_row_id(d, 0), imagefile_row_id(e, 0)); /* word 0 differs */
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}
