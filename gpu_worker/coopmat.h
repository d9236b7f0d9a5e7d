/* coopmat: VK_KHR_cooperative_matrix detection and enabling (the prefill
 * mat-mat kernel shaders/mul_mm_cm.glsl runs on matrix cores through it).
 *
 * Debian 12's Vulkan headers (1.3.239) predate the extension (1.3.255), so the
 * few names used are declared here when the headers lack them (values from the
 * Vulkan registry, vk.xml). */
#ifndef UNICORN_COOPMAT_H
#define UNICORN_COOPMAT_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR ((VkStructureType)1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506002)
typedef enum VkComponentTypeKHR {
	VK_COMPONENT_TYPE_FLOAT16_KHR = 0,
	VK_COMPONENT_TYPE_FLOAT32_KHR = 1,
	VK_COMPONENT_TYPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkComponentTypeKHR;
typedef enum VkScopeKHR {
	VK_SCOPE_SUBGROUP_KHR = 3,
	VK_SCOPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkScopeKHR;
typedef struct VkCooperativeMatrixPropertiesKHR {
	VkStructureType sType;
	void *pNext;
	uint32_t MSize, NSize, KSize;
	VkComponentTypeKHR AType, BType, CType, ResultType;
	VkBool32 saturatingAccumulation;
	VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
	VkStructureType sType;
	void *pNext;
	VkBool32 cooperativeMatrix;
	VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixPropertiesKHR {
	VkStructureType sType;
	void *pNext;
	VkShaderStageFlags cooperativeMatrixSupportedStages;
} VkPhysicalDeviceCooperativeMatrixPropertiesKHR;
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
	VkPhysicalDevice physicalDevice, uint32_t *pPropertyCount, VkCooperativeMatrixPropertiesKHR *pProperties);
#endif

/* The one configuration the kernel uses: 16x16x16, f16 A and B, f32 C and
 * result, subgroup scope, in compute shaders, with shaderFloat16 and subgroup
 * basic operations (gl_SubgroupID). */
#define COOPMAT_M 16u
#define COOPMAT_N 16u
#define COOPMAT_K 16u
#define COOPMAT_DESC "KHR_coopmat 16x16x16 f16" /* as `unicorn devices` reports it */

/* Whether device pd offers it (inst: for vkGetInstanceProcAddr). */
bool coopmat_probe(VkInstance inst, VkPhysicalDevice pd);

/* The features vkCreateDevice must enable for it, as a pNext chain. */
struct coopmat_enable {
	VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm;
	VkPhysicalDeviceShaderFloat16Int8Features f16;
};
const void *coopmat_enable_chain(struct coopmat_enable *s, const void *next);

#endif
