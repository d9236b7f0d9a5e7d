/* `unicorn devices`: list the Vulkan devices this machine offers. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_worker/coopmat.h"
#include "gpu_worker/vk.h"
#include "common/err.h"

#define MAX_DEV 16

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn devices [--json]\n"
		   "List Vulkan devices: index, name, type, driver, device-local memory, subgroup size,\n"
		   "and whether prefill runs on matrix cores (VK_KHR_cooperative_matrix).\n"
		   "Select one elsewhere with --vk-device INDEX or a case-insensitive name substring\n"
		   "(unicorn-up, unicorn bench, unicorn logits; unicorn-up also --attn-device/--ffn-device).\n");
}

int cli_devices(int argc, char **argv)
{
	int json = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "unicorn devices: unknown argument %s\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	struct vk_device_info d[MAX_DEV];
	uint32_t n = 0;
	int rc = vk_list_devices(d, MAX_DEV, &n);
	if (rc) {
		fprintf(stderr, "unicorn devices: %s\n", err_msg());
		return 1;
	}
	if (json) {
		json_t *arr = json_array();
		for (uint32_t i = 0; i < n; i++) {
			json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:I, s:i, s:i, s:i, s:s?}", "index", (int)d[i].index, "name",
					      d[i].name, "type", d[i].type, "driver", d[i].driver, "device_local_bytes",
					      (json_int_t)d[i].device_local_bytes, "subgroup_size", (int)d[i].subgroup_size,
					      "vendor_id", (int)d[i].vendor_id, "device_id", (int)d[i].device_id,
					      "matrix_cores", d[i].coopmat ? COOPMAT_DESC : NULL);
			json_t *heaps = json_array();
			for (uint32_t h = 0; h < d[i].n_heaps; h++)
				json_array_append_new(heaps, json_pack("{s:I, s:b}", "bytes", (json_int_t)d[i].heap_size[h],
								       "device_local", d[i].heap_device_local[h]));
			json_object_set_new(o, "heaps", heaps);
			json_object_set_new(o, "integer_dot_product", json_boolean(d[i].idot));
			json_array_append_new(arr, o);
		}
		char *s = json_dumps(arr, JSON_INDENT(2));
		if (s)
			puts(s);
		free(s);
		json_decref(arr);
		return 0;
	}
	printf("%-5s %-40s %-10s %-12s %-8s %s\n", "index", "name", "type", "memory", "subgroup", "driver");
	for (uint32_t i = 0; i < n; i++)
		printf("%-5u %-40s %-10s %8.1f GiB %-8u %s\n", d[i].index, d[i].name, d[i].type,
		       (double)d[i].device_local_bytes / (1024.0 * 1024 * 1024), d[i].subgroup_size, d[i].driver);
	for (uint32_t i = 0; i < n; i++)
		printf("device %u matrix cores: %s; integer dot products: %s\n", d[i].index,
		       d[i].coopmat ? COOPMAT_DESC : "none (mul_mm prefill)",
		       d[i].idot ? "yes (x16 decode kernels)" : "no (float decode kernels)");
	return 0;
}
