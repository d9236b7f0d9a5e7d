/* vk: Vulkan compute runtime (see vk.h). */
#include "gpu_worker/vk.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_worker/coopmat.h"
#include "gpu_worker/shaders.h"
#include "common/err.h"
#include "common/spin.h"

#define VK_STAGING_BYTES ((VkDeviceSize)64 << 20)
#define VK_QUERIES 2048
/* vk_submit_wait_expect: shorter sleeps are polled instead; from this
 * expectation on (a prefill chunk), a late wake-up costs nothing worth the
 * risk of sleeping past a faster run, and the wait blocks as before */
#define WAIT_SLEEP_MIN_NS 50000
#define WAIT_EXPECT_MAX_NS 50000000

static const char *vk_res(VkResult r)
{
	switch (r) {
	case VK_SUCCESS: return "VK_SUCCESS";
	case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
	case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
	case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
	case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
	case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
	case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
	case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
	case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
	default: return "VkResult error";
	}
}

static int vk_fail(VkResult r, const char *what)
{
	int code = (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY) ? ERR_NOMEM : ERR_DEVICE;
	return err_set(code, "vulkan: %s: %s (%d)", what, vk_res(r), (int)r);
}

static bool layer_present(const char *name)
{
	uint32_t n = 0;
	if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
		return false;
	VkLayerProperties *p = calloc(n, sizeof *p);
	if (!p)
		return false;
	bool found = false;
	if (vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
		for (uint32_t i = 0; i < n; i++)
			if (strcmp(p[i].layerName, name) == 0)
				found = true;
	free(p);
	return found;
}

static int instance_create(VkInstance *out)
{
	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.pApplicationName = "unicorn",
		.apiVersion = VK_API_VERSION_1_2,
	};
	const char *layers[1];
	uint32_t n_layers = 0;
	const char *v = getenv("UNICORN_VK_VALIDATE");
	if (v && strcmp(v, "1") == 0 && layer_present("VK_LAYER_KHRONOS_validation"))
		layers[n_layers++] = "VK_LAYER_KHRONOS_validation";
	VkInstanceCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.pApplicationInfo = &app,
		.enabledLayerCount = n_layers,
		.ppEnabledLayerNames = layers,
	};
	VkResult r = vkCreateInstance(&ci, NULL, out);
	if (r != VK_SUCCESS)
		return err_set(ERR_DEVICE, "vulkan: no Vulkan driver: vkCreateInstance (Vulkan 1.2 loader and an ICD) failed: %s",
			       vk_res(r));
	return 0;
}

static const char *type_name(VkPhysicalDeviceType t)
{
	switch (t) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
	default: return "other";
	}
}

static void fill_info(VkInstance inst, VkPhysicalDevice pd, uint32_t index, struct vk_device_info *d)
{
	memset(d, 0, sizeof *d);
	VkPhysicalDeviceSubgroupProperties sg = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES };
	VkPhysicalDeviceDriverProperties drv = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &sg };
	VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &drv };
	vkGetPhysicalDeviceProperties2(pd, &p2);
	d->index = index;
	snprintf(d->name, sizeof d->name, "%s", p2.properties.deviceName);
	d->type = type_name(p2.properties.deviceType);
	d->vendor_id = p2.properties.vendorID;
	d->device_id = p2.properties.deviceID;
	d->api_version = p2.properties.apiVersion;
	snprintf(d->driver, sizeof d->driver, "%s %s", drv.driverName, drv.driverInfo);
	d->subgroup_size = sg.subgroupSize;
	d->subgroup_ops = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ? sg.supportedOperations : 0;
	d->coopmat = coopmat_probe(inst, pd);
	if (d->api_version >= VK_API_VERSION_1_2 && vk_has_ext(pd, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)) {
		VkPhysicalDeviceShaderIntegerDotProductFeatures idf = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
		};
		VkPhysicalDeviceFeatures2 f2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &idf };
		vkGetPhysicalDeviceFeatures2(pd, &f2);
		d->idot = idf.shaderIntegerDotProduct;
	}
	VkPhysicalDeviceMemoryProperties mp;
	vkGetPhysicalDeviceMemoryProperties(pd, &mp);
	d->n_heaps = mp.memoryHeapCount < VK_MAX_HEAPS ? mp.memoryHeapCount : VK_MAX_HEAPS;
	for (uint32_t i = 0; i < d->n_heaps; i++) {
		d->heap_size[i] = mp.memoryHeaps[i].size;
		d->heap_device_local[i] = mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
		if (d->heap_device_local[i])
			d->device_local_bytes += d->heap_size[i];
	}
}

static int enum_phys(VkInstance inst, VkPhysicalDevice **out, uint32_t *n)
{
	*n = 0;
	VkResult r = vkEnumeratePhysicalDevices(inst, n, NULL);
	if (r != VK_SUCCESS)
		return vk_fail(r, "vkEnumeratePhysicalDevices");
	if (*n == 0)
		return err_set(ERR_DEVICE, "vulkan: no Vulkan physical device found (looked for any GPU or CPU "
			       "implementation through the Vulkan loader; install a driver such as mesa-vulkan-drivers)");
	*out = calloc(*n, sizeof **out);
	if (!*out)
		return err_set(ERR_NOMEM, "vulkan: device list: out of memory");
	r = vkEnumeratePhysicalDevices(inst, n, *out);
	if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
		free(*out);
		return vk_fail(r, "vkEnumeratePhysicalDevices");
	}
	return 0;
}

int vk_list_devices(struct vk_device_info *out, uint32_t max, uint32_t *count)
{
	VkInstance inst;
	int rc = instance_create(&inst);
	if (rc)
		return rc;
	VkPhysicalDevice *pds;
	uint32_t n;
	rc = enum_phys(inst, &pds, &n);
	if (rc)
		goto out_inst;
	for (uint32_t i = 0; i < n && i < max; i++)
		fill_info(inst, pds[i], i, &out[i]);
	*count = n < max ? n : max;
	free(pds);
out_inst:
	vkDestroyInstance(inst, NULL);
	return rc;
}

static bool str_icase_contains(const char *hay, const char *needle)
{
	size_t nl = strlen(needle);
	for (const char *h = hay; *h; h++) {
		size_t i = 0;
		while (i < nl && h[i] && tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i]))
			i++;
		if (i == nl)
			return true;
	}
	return nl == 0;
}

static int pick_device(VkPhysicalDevice *pds, uint32_t n, const char *sel, uint32_t *idx)
{
	if (!sel || !*sel) {
		for (uint32_t i = 0; i < n; i++) {
			VkPhysicalDeviceProperties p;
			vkGetPhysicalDeviceProperties(pds[i], &p);
			if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) {
				*idx = i;
				return 0;
			}
		}
		*idx = 0;
		return 0;
	}
	char *end;
	unsigned long v = strtoul(sel, &end, 10);
	if (*end == '\0' && end != sel) {
		if (v >= n)
			return err_set(ERR_DEVICE, "vulkan: device index %lu out of range (%u devices)", v, n);
		*idx = (uint32_t)v;
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		VkPhysicalDeviceProperties p;
		vkGetPhysicalDeviceProperties(pds[i], &p);
		if (str_icase_contains(p.deviceName, sel)) {
			*idx = i;
			return 0;
		}
	}
	return err_set(ERR_DEVICE, "vulkan: no device whose name contains \"%s\" (%u devices; see `unicorn devices`)", sel, n);
}

bool vk_has_ext(VkPhysicalDevice pd, const char *name)
{
	uint32_t n = 0;
	if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS)
		return false;
	VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
	if (!e)
		return false;
	bool found = false;
	if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
		for (uint32_t i = 0; i < n; i++)
			if (strcmp(e[i].extensionName, name) == 0)
				found = true;
	free(e);
	return found;
}

int vk_create(const char *select, struct vk_ctx **out)
{
	*out = NULL;
	struct vk_ctx *vk = calloc(1, sizeof *vk);
	if (!vk)
		return err_set(ERR_NOMEM, "vulkan: context: out of memory");
	int rc = instance_create(&vk->instance);
	if (rc) {
		free(vk);
		return rc;
	}
	VkPhysicalDevice *pds;
	uint32_t n, idx;
	rc = enum_phys(vk->instance, &pds, &n);
	if (rc)
		goto fail;
	rc = pick_device(pds, n, select, &idx);
	if (rc) {
		free(pds);
		goto fail;
	}
	vk->phys = pds[idx];
	free(pds);
	fill_info(vk->instance, vk->phys, idx, &vk->info);
	vkGetPhysicalDeviceProperties(vk->phys, &vk->props);
	vkGetPhysicalDeviceMemoryProperties(vk->phys, &vk->mem);

	uint32_t nq = 0;
	vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, NULL);
	VkQueueFamilyProperties qf[16];
	if (nq > 16)
		nq = 16;
	vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, qf);
	uint32_t fam = UINT32_MAX;
	/* prefer a compute queue family that also does graphics (the main one) */
	for (uint32_t i = 0; i < nq; i++)
		if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && fam == UINT32_MAX)
			fam = i;
	if (fam == UINT32_MAX) {
		rc = err_set(ERR_DEVICE, "vulkan: %s: no queue family with compute", vk->info.name);
		goto fail;
	}
	vk->queue_family = fam;
	vk->timestamps = qf[fam].timestampValidBits > 0 && vk->props.limits.timestampPeriod > 0;

	const char *exts[6];
	uint32_t n_ext = 0;
	if (vk_has_ext(vk->phys, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME)) {
		exts[n_ext++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
		vk->has_budget = true;
	}
	/* host-pointer import lets the engine use the loader's shared weight
	 * regions in place (VK_KHR_external_memory is core since 1.1) */
	if (vk->props.apiVersion >= VK_API_VERSION_1_1 && vk_has_ext(vk->phys, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME)) {
		VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT,
		};
		VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &hp };
		vkGetPhysicalDeviceProperties2(vk->phys, &p2);
		VkDeviceSize a = hp.minImportedHostPointerAlignment;
		if (a && (a & (a - 1)) == 0) {
			exts[n_ext++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
			vk->host_import_align = a;
		}
	}
	/* matrix cores for the prefill kernel (shaders/mul_mm_cm.glsl) */
	struct coopmat_enable cme;
	const void *features = NULL;
	if (vk->info.coopmat) {
		exts[n_ext++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
		features = coopmat_enable_chain(&cme, NULL);
		vk->coopmat = true;
	}
	/* integer dot products for the x16 decode kernels (shaders/x16.glsl) */
	VkPhysicalDeviceShaderIntegerDotProductFeatures idf = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES, .pNext = (void *)features,
		.shaderIntegerDotProduct = VK_TRUE,
	};
	if (vk->info.idot) {
		exts[n_ext++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
		features = &idf;
		vk->idot = true;
	}
	/* compiler statistics per pipeline, for kernel work (vk_pipe_create) */
	const char *stats_env = getenv("UNICORN_VK_PIPE_STATS");
	VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pef = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
		.pNext = (void *)features, .pipelineExecutableInfo = VK_TRUE,
	};
	bool want_stats = stats_env && strcmp(stats_env, "1") == 0;
	if (want_stats && vk_has_ext(vk->phys, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
		exts[n_ext++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
		features = &pef;
	} else if (want_stats) {
		fprintf(stderr, "vulkan: %s: no VK_KHR_pipeline_executable_properties: UNICORN_VK_PIPE_STATS has nothing to show\n",
			vk->info.name);
		want_stats = false;
	}
	float prio = 1.0f;
	VkDeviceQueueCreateInfo qci = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = fam, .queueCount = 1, .pQueuePriorities = &prio,
	};
	VkDeviceCreateInfo dci = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = features,
		.queueCreateInfoCount = 1, .pQueueCreateInfos = &qci,
		.enabledExtensionCount = n_ext, .ppEnabledExtensionNames = exts,
	};
	VkResult r = vkCreateDevice(vk->phys, &dci, NULL, &vk->dev);
	if (r != VK_SUCCESS) {
		rc = vk_fail(r, "vkCreateDevice");
		goto fail;
	}
	vkGetDeviceQueue(vk->dev, fam, 0, &vk->queue);
	if (want_stats)
		vk->pipe_stats = (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(
			vk->dev, "vkGetPipelineExecutableStatisticsKHR");
	if (vk->host_import_align) {
		vk->get_host_ptr_props = (PFN_vkGetMemoryHostPointerPropertiesEXT)vkGetDeviceProcAddr(
			vk->dev, "vkGetMemoryHostPointerPropertiesEXT");
		vk->host_import = vk->get_host_ptr_props != NULL;
		if (!vk->host_import)
			vk->host_import_align = 0;
	}
	VkCommandPoolCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
		.queueFamilyIndex = fam,
	};
	if ((r = vkCreateCommandPool(vk->dev, &pci, NULL, &vk->cmd_pool)) != VK_SUCCESS) {
		rc = vk_fail(r, "vkCreateCommandPool");
		goto fail;
	}
	VkDescriptorPoolSize ps = { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 16384 };
	VkDescriptorPoolCreateInfo dpci = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
		.maxSets = 4096, .poolSizeCount = 1, .pPoolSizes = &ps,
	};
	if ((r = vkCreateDescriptorPool(vk->dev, &dpci, NULL, &vk->desc_pool)) != VK_SUCCESS) {
		rc = vk_fail(r, "vkCreateDescriptorPool");
		goto fail;
	}
	vk->spin_us = spin_us(vk->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU);
	VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
	if ((r = vkCreateFence(vk->dev, &fci, NULL, &vk->fence)) != VK_SUCCESS) {
		rc = vk_fail(r, "vkCreateFence");
		goto fail;
	}
	if (vk->timestamps) {
		VkQueryPoolCreateInfo qpci = {
			.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
			.queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = VK_QUERIES,
		};
		if (vkCreateQueryPool(vk->dev, &qpci, NULL, &vk->query_pool) == VK_SUCCESS)
			vk->n_queries = VK_QUERIES;
		else
			vk->timestamps = false;
	}
	rc = vk_buf_create(vk, VK_BUF_HOST, VK_STAGING_BYTES, &vk->staging);
	if (rc)
		goto fail;
	/* the staging buffer is scratch, not a model placement */
	vk->bytes_host_visible = 0;
	*out = vk;
	return 0;
fail:
	vk_destroy(vk);
	return rc;
}

void vk_destroy(struct vk_ctx *vk)
{
	if (!vk)
		return;
	if (vk->dev) {
		vkDeviceWaitIdle(vk->dev);
		vk_buf_destroy(vk, vk->staging);
		if (vk->query_pool)
			vkDestroyQueryPool(vk->dev, vk->query_pool, NULL);
		if (vk->fence)
			vkDestroyFence(vk->dev, vk->fence, NULL);
		if (vk->desc_pool)
			vkDestroyDescriptorPool(vk->dev, vk->desc_pool, NULL);
		if (vk->cmd_pool)
			vkDestroyCommandPool(vk->dev, vk->cmd_pool, NULL);
		vkDestroyDevice(vk->dev, NULL);
	}
	if (vk->instance)
		vkDestroyInstance(vk->instance, NULL);
	free(vk);
}

uint64_t vk_device_local_free(struct vk_ctx *vk)
{
	uint64_t total = 0;
	if (vk->has_budget) {
		VkPhysicalDeviceMemoryBudgetPropertiesEXT b = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT };
		VkPhysicalDeviceMemoryProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &b };
		vkGetPhysicalDeviceMemoryProperties2(vk->phys, &p2);
		for (uint32_t i = 0; i < vk->mem.memoryHeapCount; i++)
			if ((vk->mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && b.heapBudget[i] > b.heapUsage[i])
				total += b.heapBudget[i] - b.heapUsage[i];
		return total;
	}
	for (uint32_t i = 0; i < vk->mem.memoryHeapCount; i++)
		if (vk->mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
			total += vk->mem.memoryHeaps[i].size;
	return total > vk->bytes_device_local ? total - vk->bytes_device_local : 0;
}

static int find_type(struct vk_ctx *vk, uint32_t bits, VkMemoryPropertyFlags want, uint32_t *out)
{
	for (uint32_t i = 0; i < vk->mem.memoryTypeCount; i++)
		if ((bits & (1u << i)) && (vk->mem.memoryTypes[i].propertyFlags & want) == want) {
			*out = i;
			return 0;
		}
	return ERR_NOTFOUND;
}

int vk_buf_create(struct vk_ctx *vk, enum vk_buf_kind kind, VkDeviceSize size, struct vk_buf **out)
{
	if (vk->progress)
		vk->progress(vk->progress_arg);
	*out = NULL;
	if (size == 0)
		size = 4;
	if (size > VK_MAX_BUFFER_BYTES)
		return err_set(ERR_UNSUP, "vulkan: buffer of %llu bytes exceeds the 2 GiB per-buffer limit",
			       (unsigned long long)size);
	struct vk_buf *b = calloc(1, sizeof *b);
	if (!b)
		return err_set(ERR_NOMEM, "vulkan: buffer: out of memory");
	size = (size + 15) & ~(VkDeviceSize)15;
	b->size = size;
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = size,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
			 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkResult r = vkCreateBuffer(vk->dev, &bci, NULL, &b->buf);
	if (r != VK_SUCCESS) {
		free(b);
		return vk_fail(r, "vkCreateBuffer");
	}
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(vk->dev, b->buf, &req);
	const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
	VkMemoryPropertyFlags tries[3];
	int nt = 0;
	if (kind == VK_BUF_DEVICE) {
		/* device-local while the budget lasts, then host-visible memory */
		if (req.size <= vk_device_local_free(vk))
			tries[nt++] = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
		tries[nt++] = hv;
		tries[nt++] = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
	} else {
		tries[nt++] = hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
		tries[nt++] = hv;
	}
	r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
	uint32_t ti = 0;
	for (int t = 0; t < nt && r != VK_SUCCESS; t++) {
		if (find_type(vk, req.memoryTypeBits, tries[t], &ti))
			continue;
		VkMemoryAllocateInfo ai = {
			.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
			.allocationSize = req.size, .memoryTypeIndex = ti,
		};
		r = vkAllocateMemory(vk->dev, &ai, NULL, &b->mem);
	}
	if (r != VK_SUCCESS) {
		vkDestroyBuffer(vk->dev, b->buf, NULL);
		free(b);
		return vk_fail(r, "vkAllocateMemory");
	}
	VkMemoryPropertyFlags f = vk->mem.memoryTypes[ti].propertyFlags;
	b->device_local = f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
	if (b->device_local)
		vk->bytes_device_local += req.size;
	else
		vk->bytes_host_visible += req.size;
	vkBindBufferMemory(vk->dev, b->buf, b->mem, 0);
	if (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
		r = vkMapMemory(vk->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map);
		if (r != VK_SUCCESS) {
			vk_buf_destroy(vk, b);
			return vk_fail(r, "vkMapMemory");
		}
	}
	*out = b;
	return 0;
}

int vk_buf_import_host(struct vk_ctx *vk, const void *ptr, VkDeviceSize size, struct vk_buf **out)
{
	*out = NULL;
	if (!vk->host_import)
		return err_set(ERR_UNSUP, "vulkan: %s: host memory import: VK_EXT_external_memory_host not supported",
			       vk->info.name);
	VkDeviceSize a = vk->host_import_align;
	if (!ptr || size == 0 || (uintptr_t)ptr % a || size % a)
		return err_set(ERR_INVAL, "vulkan: host memory import: pointer %p and size %llu must be non-zero multiples "
			       "of minImportedHostPointerAlignment %llu of %s", ptr, (unsigned long long)size,
			       (unsigned long long)a, vk->info.name);
	if (size > VK_MAX_BUFFER_BYTES)
		return err_set(ERR_UNSUP, "vulkan: host memory import of %llu bytes exceeds the 2 GiB per-buffer limit",
			       (unsigned long long)size);
	struct vk_buf *b = calloc(1, sizeof *b);
	if (!b)
		return err_set(ERR_NOMEM, "vulkan: buffer: out of memory");
	b->size = size;
	b->imported = true;
	VkExternalMemoryBufferCreateInfo ebci = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
		.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
	};
	/* no TRANSFER_DST: nothing may write memory that can be mapped read-only */
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = &ebci, .size = size,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkResult r = vkCreateBuffer(vk->dev, &bci, NULL, &b->buf);
	if (r != VK_SUCCESS) {
		free(b);
		return vk_fail(r, "vkCreateBuffer (host import)");
	}
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(vk->dev, b->buf, &req);
	VkMemoryHostPointerPropertiesEXT hp = { .sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT };
	r = vk->get_host_ptr_props(vk->dev, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, ptr, &hp);
	uint32_t bits = r == VK_SUCCESS ? hp.memoryTypeBits & req.memoryTypeBits : 0;
	int rc = 0;
	if (r != VK_SUCCESS)
		rc = err_set(ERR_UNSUP, "vulkan: %s: vkGetMemoryHostPointerPropertiesEXT refused %p: %s", vk->info.name, ptr,
			     vk_res(r));
	else if (!bits || req.size > size || req.alignment > a)
		rc = err_set(ERR_UNSUP, "vulkan: %s: host memory at %p: no memory type fits a %llu-byte buffer "
			     "(types 0x%x, buffer types 0x%x, needs %llu bytes)", vk->info.name, ptr, (unsigned long long)size,
			     hp.memoryTypeBits, req.memoryTypeBits, (unsigned long long)req.size);
	if (rc) {
		vkDestroyBuffer(vk->dev, b->buf, NULL);
		free(b);
		return rc;
	}
	uint32_t ti = 0;
	while (!(bits & (1u << ti)))
		ti++;
	VkImportMemoryHostPointerInfoEXT imp = {
		.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
		.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
		.pHostPointer = (void *)ptr, /* the API is not const; the device only reads it */
	};
	VkMemoryAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &imp, .allocationSize = size, .memoryTypeIndex = ti,
	};
	r = vkAllocateMemory(vk->dev, &ai, NULL, &b->mem);
	if (r == VK_SUCCESS)
		r = vkBindBufferMemory(vk->dev, b->buf, b->mem, 0);
	if (r != VK_SUCCESS) {
		rc = err_set(ERR_UNSUP, "vulkan: %s: import of %llu bytes of host memory at %p failed: %s", vk->info.name,
			     (unsigned long long)size, ptr, vk_res(r));
		vk_buf_destroy(vk, b);
		return rc;
	}
	b->device_local = vk->mem.memoryTypes[ti].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
	vk->bytes_imported += size;
	*out = b;
	return 0;
}

void vk_buf_destroy(struct vk_ctx *vk, struct vk_buf *b)
{
	if (!b)
		return;
	if (b->map)
		vkUnmapMemory(vk->dev, b->mem);
	vkDestroyBuffer(vk->dev, b->buf, NULL);
	if (b->mem)
		vkFreeMemory(vk->dev, b->mem, NULL);
	free(b);
}

int vk_cmd_alloc(struct vk_ctx *vk, VkCommandBuffer *out)
{
	VkCommandBufferAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.commandPool = vk->cmd_pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1,
	};
	VkResult r = vkAllocateCommandBuffers(vk->dev, &ai, out);
	return r == VK_SUCCESS ? 0 : vk_fail(r, "vkAllocateCommandBuffers");
}

void vk_cmd_free(struct vk_ctx *vk, VkCommandBuffer cb)
{
	if (cb)
		vkFreeCommandBuffers(vk->dev, vk->cmd_pool, 1, &cb);
}

int vk_cmd_begin(VkCommandBuffer cb, bool one_time)
{
	VkCommandBufferBeginInfo bi = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = one_time ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0,
	};
	VkResult r = vkBeginCommandBuffer(cb, &bi);
	return r == VK_SUCCESS ? 0 : vk_fail(r, "vkBeginCommandBuffer");
}

int vk_submit_wait(struct vk_ctx *vk, VkCommandBuffer cb)
{
	return vk_submit_wait_n(vk, &cb, 1);
}

int vk_submit_wait_n(struct vk_ctx *vk, const VkCommandBuffer *cbs, uint32_t n)
{
	return vk_submit_wait_expect(vk, cbs, n, 0);
}

/* Sleep until the monotonic time t (ns), when that is worth a timer. */
static void sleep_until_ns(int64_t t)
{
	if (t - spin_now_ns() < WAIT_SLEEP_MIN_NS)
		return;
	struct timespec ts = { .tv_sec = t / 1000000000, .tv_nsec = t % 1000000000 };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

int vk_submit_wait_expect(struct vk_ctx *vk, const VkCommandBuffer *cbs, uint32_t n, uint64_t expect_ns)
{
	VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = n, .pCommandBuffers = cbs };
	int64_t t0 = spin_now_ns();
	VkResult r = vkQueueSubmit(vk->queue, 1, &si, vk->fence);
	if (r != VK_SUCCESS)
		return vk_fail(r, "vkQueueSubmit");
	int64_t t1 = spin_now_ns();
	r = VK_NOT_READY;
	if (vk->spin_us) {
		/* a short submission is done sooner than a sleeping wait wakes up;
		 * one expected to take longer than two poll bounds sleeps until one
		 * bound before its expected end, then polls up to a bound past it
		 * (the poll's time moves from the start of the step, where nothing
		 * ends, to its end; the timer's slack, 50 us, falls inside it) */
		int64_t spin = (int64_t)vk->spin_us * 1000, until = t1 + spin;
		if (expect_ns > (uint64_t)(2 * spin) && expect_ns < (uint64_t)WAIT_EXPECT_MAX_NS) {
			int64_t wake = t1 + (int64_t)expect_ns - spin;
			sleep_until_ns(wake);
			until = wake + 2 * spin;
		}
		while ((r = vkGetFenceStatus(vk->dev, vk->fence)) == VK_NOT_READY && spin_now_ns() < until)
			spin_pause();
	}
	if (r == VK_NOT_READY)
		r = vkWaitForFences(vk->dev, 1, &vk->fence, VK_TRUE, UINT64_MAX);
	vk->n_submits++;
	vk->submit_ns += (uint64_t)(t1 - t0);
	vk->wait_ns += (uint64_t)(spin_now_ns() - t1);
	vkResetFences(vk->dev, 1, &vk->fence);
	return r == VK_SUCCESS ? 0 : vk_fail(r, "vkWaitForFences");
}

void vk_cmd_barrier(VkCommandBuffer cb)
{
	VkMemoryBarrier mb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
				 VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT,
	};
	vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
			     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
			     0, 1, &mb, 0, NULL, 0, NULL);
}

/* One staged copy of at most the staging size; dir 0 = upload, 1 = download. */
static int copy_chunk(struct vk_ctx *vk, struct vk_buf *b, VkDeviceSize off, void *host, size_t n, int dir)
{
	VkCommandBuffer cb;
	int rc = vk_cmd_alloc(vk, &cb);
	if (rc)
		return rc;
	if (dir == 0)
		memcpy(vk->staging->map, host, n);
	rc = vk_cmd_begin(cb, true);
	if (rc)
		goto out;
	VkBufferCopy c = { .srcOffset = dir == 0 ? 0 : off, .dstOffset = dir == 0 ? off : 0, .size = n };
	if (dir == 0)
		vkCmdCopyBuffer(cb, vk->staging->buf, b->buf, 1, &c);
	else
		vkCmdCopyBuffer(cb, b->buf, vk->staging->buf, 1, &c);
	vk_cmd_barrier(cb);
	VkResult r = vkEndCommandBuffer(cb);
	if (r != VK_SUCCESS) {
		rc = vk_fail(r, "vkEndCommandBuffer");
		goto out;
	}
	rc = vk_submit_wait(vk, cb);
	if (!rc && dir == 1)
		memcpy(host, vk->staging->map, n);
out:
	vk_cmd_free(vk, cb);
	return rc;
}

static int copy(struct vk_ctx *vk, struct vk_buf *b, VkDeviceSize off, void *host, size_t n, int dir)
{
	if (dir == 0 && b->imported)
		return err_set(ERR_INVAL, "vulkan: upload into imported host memory refused (it may be mapped read-only)");
	if (off > b->size || n > b->size - off)
		return err_set(ERR_RANGE, "vulkan: copy of %zu bytes at %llu exceeds buffer of %llu bytes", n,
			       (unsigned long long)off, (unsigned long long)b->size);
	if (b->map) {
		/* host-visible coherent: copy directly */
		if (dir == 0)
			memcpy((char *)b->map + off, host, n);
		else
			memcpy(host, (char *)b->map + off, n);
		return 0;
	}
	for (size_t done = 0; done < n;) {
		size_t c = n - done < vk->staging->size ? n - done : (size_t)vk->staging->size;
		int rc = copy_chunk(vk, b, off + done, (char *)host + done, c, dir);
		if (rc)
			return rc;
		done += c;
		if (vk->progress)
			vk->progress(vk->progress_arg);
	}
	return 0;
}

int vk_upload(struct vk_ctx *vk, struct vk_buf *dst, VkDeviceSize off, const void *src, size_t n)
{
	return copy(vk, dst, off, (void *)src, n, 0);
}

int vk_download(struct vk_ctx *vk, struct vk_buf *src, VkDeviceSize off, void *dst, size_t n)
{
	return copy(vk, src, off, dst, n, 1);
}

int vk_fill_zero(struct vk_ctx *vk, struct vk_buf *b)
{
	if (vk->progress)
		vk->progress(vk->progress_arg);
	if (b->imported)
		return err_set(ERR_INVAL, "vulkan: fill of imported host memory refused (it may be mapped read-only)");
	if (b->map) {
		memset(b->map, 0, b->size);
		return 0;
	}
	VkCommandBuffer cb;
	int rc = vk_cmd_alloc(vk, &cb);
	if (rc)
		return rc;
	rc = vk_cmd_begin(cb, true);
	if (!rc) {
		vkCmdFillBuffer(cb, b->buf, 0, VK_WHOLE_SIZE, 0);
		vk_cmd_barrier(cb);
		vkEndCommandBuffer(cb);
		rc = vk_submit_wait(vk, cb);
	}
	vk_cmd_free(vk, cb);
	return rc;
}

/* One line per pipeline: its name, specialization constants and the
 * driver's statistics of its (compute) executable. */
static void pipe_stats_print(struct vk_ctx *vk, const char *name, const uint32_t *spec, uint32_t n_spec, VkPipeline pipe)
{
	VkPipelineExecutableInfoKHR ei = { .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = pipe };
	VkPipelineExecutableStatisticKHR st[16];
	uint32_t n = 16;
	for (uint32_t i = 0; i < n; i++)
		st[i] = (VkPipelineExecutableStatisticKHR){ .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR };
	VkResult r = vk->pipe_stats(vk->dev, &ei, &n, st);
	if (r != VK_SUCCESS && r != VK_INCOMPLETE)
		return;
	char line[1024];
	int len = snprintf(line, sizeof line, "vulkan: pipeline %s [", name);
	for (uint32_t i = 0; i < n_spec && len < (int)sizeof line; i++)
		len += snprintf(line + len, sizeof line - len, "%s%u", i ? " " : "", spec[i]);
	if (len < (int)sizeof line) /* snprintf's size must not wrap below zero */
		len += snprintf(line + len, sizeof line - len, "]");
	for (uint32_t i = 0; i < n && len < (int)sizeof line; i++) {
		const VkPipelineExecutableStatisticKHR *s = &st[i];
		if (s->format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR)
			len += snprintf(line + len, sizeof line - len, " %s=%llu", s->name, (unsigned long long)s->value.u64);
		else if (s->format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR)
			len += snprintf(line + len, sizeof line - len, " %s=%lld", s->name, (long long)s->value.i64);
		else if (s->format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR)
			len += snprintf(line + len, sizeof line - len, " %s=%g", s->name, s->value.f64);
	}
	fprintf(stderr, "%s\n", line);
}

int vk_pipe_create(struct vk_ctx *vk, const char *name, uint32_t n_bindings, uint32_t push_size,
		   const uint32_t *spec, uint32_t n_spec, struct vk_pipe *out)
{
	memset(out, 0, sizeof *out);
	if (vk->progress)
		vk->progress(vk->progress_arg);
	const struct shader_blob *sb = shader_find(name);
	if (!sb)
		return err_set(ERR_NOTFOUND, "vulkan: shader %s: not embedded in this binary", name);
	if (n_bindings > VK_MAX_BINDINGS || n_spec > 8 || push_size > vk->props.limits.maxPushConstantsSize)
		return err_set(ERR_INVAL, "vulkan: shader %s: too many bindings/constants", name);
	VkShaderModuleCreateInfo smci = { .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = sb->size, .pCode = sb->code };
	VkShaderModule sm;
	VkResult r = vkCreateShaderModule(vk->dev, &smci, NULL, &sm);
	if (r != VK_SUCCESS)
		return vk_fail(r, name);
	VkDescriptorSetLayoutBinding lb[VK_MAX_BINDINGS];
	for (uint32_t i = 0; i < n_bindings; i++)
		lb[i] = (VkDescriptorSetLayoutBinding){ i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL };
	VkDescriptorSetLayoutCreateInfo dlci = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = n_bindings, .pBindings = lb,
	};
	int rc = 0;
	if ((r = vkCreateDescriptorSetLayout(vk->dev, &dlci, NULL, &out->dsl)) != VK_SUCCESS) {
		rc = vk_fail(r, name);
		goto out_sm;
	}
	VkPushConstantRange pcr = { VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size };
	VkPipelineLayoutCreateInfo plci = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
		.setLayoutCount = 1, .pSetLayouts = &out->dsl,
		.pushConstantRangeCount = push_size ? 1 : 0, .pPushConstantRanges = &pcr,
	};
	if ((r = vkCreatePipelineLayout(vk->dev, &plci, NULL, &out->layout)) != VK_SUCCESS) {
		rc = vk_fail(r, name);
		goto out_sm;
	}
	VkSpecializationMapEntry me[8];
	for (uint32_t i = 0; i < n_spec; i++)
		me[i] = (VkSpecializationMapEntry){ i, i * 4, 4 };
	VkSpecializationInfo si = { n_spec, me, n_spec * 4, spec };
	VkComputePipelineCreateInfo cpci = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			.stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = sm, .pName = "main",
			.pSpecializationInfo = n_spec ? &si : NULL,
		},
		.layout = out->layout,
		.flags = vk->pipe_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
	};
	if ((r = vkCreateComputePipelines(vk->dev, VK_NULL_HANDLE, 1, &cpci, NULL, &out->pipe)) != VK_SUCCESS) {
		rc = vk_fail(r, name);
		goto out_sm;
	}
	if (vk->pipe_stats)
		pipe_stats_print(vk, name, spec, n_spec, out->pipe);
	out->n_bindings = n_bindings;
	out->push_size = push_size;
	out->local_x = n_spec ? spec[0] : 0;
out_sm:
	vkDestroyShaderModule(vk->dev, sm, NULL);
	if (rc)
		vk_pipe_destroy(vk, out);
	return rc;
}

void vk_pipe_destroy(struct vk_ctx *vk, struct vk_pipe *p)
{
	if (p->pipe)
		vkDestroyPipeline(vk->dev, p->pipe, NULL);
	if (p->layout)
		vkDestroyPipelineLayout(vk->dev, p->layout, NULL);
	if (p->dsl)
		vkDestroyDescriptorSetLayout(vk->dev, p->dsl, NULL);
	memset(p, 0, sizeof *p);
}

int vk_set_create(struct vk_ctx *vk, const struct vk_pipe *p, const struct vk_bind *b, VkDescriptorSet *out)
{
	VkDescriptorSetAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
		.descriptorPool = vk->desc_pool, .descriptorSetCount = 1, .pSetLayouts = &p->dsl,
	};
	VkResult r = vkAllocateDescriptorSets(vk->dev, &ai, out);
	if (r != VK_SUCCESS)
		return vk_fail(r, "vkAllocateDescriptorSets");
	VkDescriptorBufferInfo bi[VK_MAX_BINDINGS];
	VkWriteDescriptorSet w[VK_MAX_BINDINGS];
	for (uint32_t i = 0; i < p->n_bindings; i++) {
		if (!b[i].buf)
			return err_set(ERR_INVAL, "vulkan: descriptor set: binding %u has no buffer", i);
		VkDeviceSize size = b[i].size ? b[i].size : b[i].buf->size - b[i].off;
		if (b[i].off > b[i].buf->size || size > b[i].buf->size - b[i].off)
			return err_set(ERR_RANGE, "vulkan: descriptor set: binding %u range out of bounds", i);
		if (size > vk->props.limits.maxStorageBufferRange)
			return err_set(ERR_UNSUP, "vulkan: binding %u: %llu bytes exceed maxStorageBufferRange %u of %s", i,
				       (unsigned long long)size, vk->props.limits.maxStorageBufferRange, vk->info.name);
		bi[i] = (VkDescriptorBufferInfo){ b[i].buf->buf, b[i].off, size };
		w[i] = (VkWriteDescriptorSet){
			.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = *out, .dstBinding = i,
			.descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &bi[i],
		};
	}
	vkUpdateDescriptorSets(vk->dev, p->n_bindings, w, 0, NULL);
	return 0;
}

void vk_cmd_dispatch(VkCommandBuffer cb, const struct vk_pipe *p, VkDescriptorSet set,
		     const void *push, uint32_t gx, uint32_t gy, uint32_t gz)
{
	vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipe);
	vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, NULL);
	if (p->push_size)
		vkCmdPushConstants(cb, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_size, push);
	vkCmdDispatch(cb, gx, gy, gz);
}

void vk_cmd_reset_queries(VkCommandBuffer cb, struct vk_ctx *vk, uint32_t first, uint32_t n)
{
	if (vk->timestamps && first + n <= vk->n_queries)
		vkCmdResetQueryPool(cb, vk->query_pool, first, n);
}

void vk_cmd_timestamp(VkCommandBuffer cb, struct vk_ctx *vk, uint32_t i)
{
	if (vk->timestamps && i < vk->n_queries)
		vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, vk->query_pool, i);
}

int vk_query_ns(struct vk_ctx *vk, uint32_t first, uint32_t n, uint64_t *ns)
{
	if (!vk->timestamps)
		return err_set(ERR_UNSUP, "vulkan: %s: no timestamp support on the compute queue", vk->info.name);
	if (first > vk->n_queries || n > vk->n_queries - first)
		return err_set(ERR_RANGE, "vulkan: query range out of bounds");
	VkResult r = vkGetQueryPoolResults(vk->dev, vk->query_pool, first, n, n * sizeof(uint64_t), ns,
					   sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
	if (r != VK_SUCCESS)
		return vk_fail(r, "vkGetQueryPoolResults");
	double period = vk->props.limits.timestampPeriod;
	for (uint32_t i = 0; i < n; i++)
		ns[i] = (uint64_t)((double)ns[i] * period);
	return 0;
}
