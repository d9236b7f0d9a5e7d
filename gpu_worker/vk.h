/* vk: a thin Vulkan compute runtime — instance and device selection, buffers,
 * staging transfers, pipelines from embedded SPIR-V, descriptor sets, command
 * buffers and timestamp queries. No model knowledge lives here (see engine.h).
 *
 * Every function returns 0 or a negative ERR_* (common/err.h) with a message. */
#ifndef UNICORN_VK_H
#define UNICORN_VK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#define VK_MAX_BUFFER_BYTES ((VkDeviceSize)2 << 30) /* one VkBuffer never exceeds 2 GiB */
#define VK_MAX_BINDINGS 11
#define VK_MAX_HEAPS 16

struct vk_device_info {
	uint32_t index;
	char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
	const char *type;           /* "discrete", "integrated", "virtual", "cpu", "other" */
	uint32_t vendor_id, device_id;
	char driver[VK_MAX_DRIVER_NAME_SIZE + VK_MAX_DRIVER_INFO_SIZE + 4];
	uint32_t api_version;
	uint32_t subgroup_size;
	uint32_t subgroup_ops;       /* VkSubgroupFeatureFlags usable in compute shaders (0 if none) */
	uint32_t n_heaps;
	uint64_t heap_size[VK_MAX_HEAPS];
	bool heap_device_local[VK_MAX_HEAPS];
	uint64_t device_local_bytes;  /* sum of device-local heaps */
	bool coopmat;                /* VK_KHR_cooperative_matrix 16x16x16 f16 -> f32 (gpu_worker/coopmat.h) */
	bool idot;                   /* shader integer dot product (VK_KHR_shader_integer_dot_product), 4x8-bit packed */
};

/* Whether physical device pd offers device extension name. */
bool vk_has_ext(VkPhysicalDevice pd, const char *name);

/* List physical devices (up to max). ERR_DEVICE when no Vulkan driver or no device. */
int vk_list_devices(struct vk_device_info *out, uint32_t max, uint32_t *count);

struct vk_ctx {
	VkInstance instance;
	VkPhysicalDevice phys;
	VkDevice dev;
	VkQueue queue;
	uint32_t queue_family;
	VkCommandPool cmd_pool;
	VkDescriptorPool desc_pool;
	VkFence fence;
	uint32_t spin_us;            /* common/spin.h: poll the fence this long before sleeping */
	/* vk_submit_wait_n's own time: calls, ns inside vkQueueSubmit, ns from
	 * then until the fence was seen signalled (`unicorn-*-worker` profile) */
	uint64_t n_submits, submit_ns, wait_ns;
	VkQueryPool query_pool;
	uint32_t n_queries;
	VkPhysicalDeviceProperties props;
	VkPhysicalDeviceMemoryProperties mem;
	struct vk_device_info info;
	bool has_budget;             /* VK_EXT_memory_budget enabled */
	/* called between pieces of long work (each upload chunk, buffer, pipeline):
	 * a worker's heartbeat while it starts (ipc/ctl.h); NULL = none */
	void (*progress)(void *arg);
	void *progress_arg;
	bool timestamps;             /* the queue family supports timestamps */
	bool host_import;            /* VK_EXT_external_memory_host enabled (vk_buf_import_host) */
	bool coopmat;                /* VK_KHR_cooperative_matrix and shaderFloat16 enabled (info.coopmat) */
	bool idot;                   /* shaderIntegerDotProduct enabled (info.idot): the x16 decode kernels */
	/* UNICORN_VK_PIPE_STATS=1 and VK_KHR_pipeline_executable_properties: each
	 * pipeline's compiler statistics (NVIDIA: registers per thread, which set
	 * how many workgroups an SM holds) go to stderr as it is created */
	PFN_vkGetPipelineExecutableStatisticsKHR pipe_stats;
	VkDeviceSize host_import_align; /* minImportedHostPointerAlignment (0 without the extension) */
	PFN_vkGetMemoryHostPointerPropertiesEXT get_host_ptr_props;
	/* staging ring used by vk_upload/vk_download */
	struct vk_buf *staging;
	/* bytes placed so far */
	uint64_t bytes_device_local, bytes_host_visible;
	uint64_t bytes_imported;     /* host memory used in place (vk_buf_import_host) */
};

enum vk_buf_kind {
	VK_BUF_DEVICE = 1,   /* device-local preferred, host-visible fallback */
	VK_BUF_HOST = 2,     /* host-visible coherent, persistently mapped */
};

struct vk_buf {
	VkBuffer buf;
	VkDeviceMemory mem;
	VkDeviceSize size;
	void *map;            /* non-NULL when host-visible */
	bool device_local;
	bool imported;        /* host memory imported in place: read-only for us (no upload/fill) */
};

/* Create a context on the device chosen by `select`: NULL/"" = first discrete GPU
 * else first device; a decimal index; or a case-insensitive name substring. */
int vk_create(const char *select, struct vk_ctx **out);
void vk_destroy(struct vk_ctx *vk);

/* Free device-local bytes per VK_EXT_memory_budget (or heap sizes). */
uint64_t vk_device_local_free(struct vk_ctx *vk);

int vk_buf_create(struct vk_ctx *vk, enum vk_buf_kind kind, VkDeviceSize size, struct vk_buf **out);
void vk_buf_destroy(struct vk_ctx *vk, struct vk_buf *b);
/* Use size bytes of host memory at ptr in place as a storage buffer
 * (VK_EXT_external_memory_host, HOST_ALLOCATION_BIT): no copy. ptr and size
 * must be multiples of vk->host_import_align (ERR_INVAL otherwise); ERR_UNSUP
 * without the extension or when the driver refuses this memory (e.g. RADV and
 * file-backed pages). The buffer is read-only for vk_upload/vk_fill_zero (the
 * memory may be mapped read-only) and the caller keeps the memory mapped
 * until vk_buf_destroy. */
int vk_buf_import_host(struct vk_ctx *vk, const void *ptr, VkDeviceSize size, struct vk_buf **out);
/* Copy host <-> buffer through the staging buffer in chunks (waits). */
int vk_upload(struct vk_ctx *vk, struct vk_buf *dst, VkDeviceSize off, const void *src, size_t n);
int vk_download(struct vk_ctx *vk, struct vk_buf *src, VkDeviceSize off, void *dst, size_t n);
int vk_fill_zero(struct vk_ctx *vk, struct vk_buf *b);

struct vk_pipe {
	VkPipeline pipe;
	VkPipelineLayout layout;
	VkDescriptorSetLayout dsl;
	uint32_t n_bindings;
	uint32_t push_size;
	uint32_t local_x;     /* workgroup size x (specialization constant 0) */
};

/* Build a compute pipeline from shader `name` with n_bindings storage buffers at
 * bindings 0..n-1, push_size bytes of push constants, and specialization
 * constants spec[0..n_spec) at constant ids 0..n_spec-1 (id 0 = workgroup size x). */
int vk_pipe_create(struct vk_ctx *vk, const char *name, uint32_t n_bindings, uint32_t push_size,
		   const uint32_t *spec, uint32_t n_spec, struct vk_pipe *out);
void vk_pipe_destroy(struct vk_ctx *vk, struct vk_pipe *p);

/* A binding: a buffer range (size 0 = to the end of the buffer). */
struct vk_bind { struct vk_buf *buf; VkDeviceSize off, size; };

/* Allocate and write a descriptor set for p from the context's pool. */
int vk_set_create(struct vk_ctx *vk, const struct vk_pipe *p, const struct vk_bind *b, VkDescriptorSet *out);

int vk_cmd_alloc(struct vk_ctx *vk, VkCommandBuffer *out);
int vk_cmd_begin(VkCommandBuffer cb, bool one_time);
void vk_cmd_dispatch(VkCommandBuffer cb, const struct vk_pipe *p, VkDescriptorSet set,
		     const void *push, uint32_t gx, uint32_t gy, uint32_t gz);
/* A compute->compute (and transfer) memory barrier. */
void vk_cmd_barrier(VkCommandBuffer cb);
/* End (if still recording, pass end=true), submit, wait. */
int vk_submit_wait(struct vk_ctx *vk, VkCommandBuffer cb);
/* Several command buffers in one submission (in order), one fence wait. */
int vk_submit_wait_n(struct vk_ctx *vk, const VkCommandBuffer *cbs, uint32_t n);
/* The same for a submission expected to run expect_ns on the GPU (0: no
 * idea): it sleeps until one poll bound (spin_us) before that, then polls up
 * to one bound past it, then blocks. Expectations under two bounds or from
 * 50 ms on wait as vk_submit_wait_n does. */
int vk_submit_wait_expect(struct vk_ctx *vk, const VkCommandBuffer *cbs, uint32_t n, uint64_t expect_ns);
void vk_cmd_free(struct vk_ctx *vk, VkCommandBuffer cb);

/* Timestamps: vk_cmd_timestamp writes query i; vk_query_ns reads n values as ns. */
void vk_cmd_reset_queries(VkCommandBuffer cb, struct vk_ctx *vk, uint32_t first, uint32_t n);
void vk_cmd_timestamp(VkCommandBuffer cb, struct vk_ctx *vk, uint32_t i);
int vk_query_ns(struct vk_ctx *vk, uint32_t first, uint32_t n, uint64_t *ns);

#endif
