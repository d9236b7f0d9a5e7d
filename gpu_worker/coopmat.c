/* coopmat: see coopmat.h. */
#include "gpu_worker/coopmat.h"

#include <stdlib.h>

#include "gpu_worker/vk.h"

bool coopmat_probe(VkInstance inst, VkPhysicalDevice pd)
{
	VkPhysicalDeviceProperties props;
	vkGetPhysicalDeviceProperties(pd, &props);
	if (props.apiVersion < VK_API_VERSION_1_2 || !vk_has_ext(pd, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME))
		return false;
	VkPhysicalDeviceCooperativeMatrixFeaturesKHR cmf = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR };
	VkPhysicalDeviceShaderFloat16Int8Features f16 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, .pNext = &cmf,
	};
	VkPhysicalDeviceFeatures2 f2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f16 };
	vkGetPhysicalDeviceFeatures2(pd, &f2);
	VkPhysicalDeviceCooperativeMatrixPropertiesKHR cmp = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR,
	};
	VkPhysicalDeviceSubgroupProperties sg = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &cmp };
	VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg };
	vkGetPhysicalDeviceProperties2(pd, &p2);
	if (!cmf.cooperativeMatrix || !f16.shaderFloat16 || !(cmp.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
	    !(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) || !(sg.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT))
		return false;
	PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get =
		(PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
			inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
	uint32_t n = 0;
	if (!get || get(pd, &n, NULL) != VK_SUCCESS || n == 0 || n > 4096)
		return false;
	VkCooperativeMatrixPropertiesKHR *p = calloc(n, sizeof *p);
	if (!p)
		return false;
	for (uint32_t i = 0; i < n; i++)
		p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
	bool ok = false;
	VkResult r = get(pd, &n, p);
	for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < n && !ok; i++)
		ok = p[i].MSize == COOPMAT_M && p[i].NSize == COOPMAT_N && p[i].KSize == COOPMAT_K &&
		     p[i].AType == VK_COMPONENT_TYPE_FLOAT16_KHR && p[i].BType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
		     p[i].CType == VK_COMPONENT_TYPE_FLOAT32_KHR && p[i].ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
		     !p[i].saturatingAccumulation && p[i].scope == VK_SCOPE_SUBGROUP_KHR;
	free(p);
	return ok;
}

const void *coopmat_enable_chain(struct coopmat_enable *s, const void *next)
{
	s->cm = (VkPhysicalDeviceCooperativeMatrixFeaturesKHR){
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, .pNext = (void *)next,
		.cooperativeMatrix = VK_TRUE,
	};
	s->f16 = (VkPhysicalDeviceShaderFloat16Int8Features){
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, .pNext = &s->cm,
		.shaderFloat16 = VK_TRUE,
	};
	return &s->f16;
}
