#include <criterion/criterion.h>
#include <string.h>

#include "common/err.h"

Test(err, set_and_prefix)
{
	cr_assert_eq(err_set(ERR_INVAL, "model.gguf: bad magic %x", 0x1234), ERR_INVAL);
	cr_assert_str_eq(err_msg(), "model.gguf: bad magic 1234");
	cr_assert_eq(err_prefix(ERR_INVAL, "loading"), ERR_INVAL);
	cr_assert_str_eq(err_msg(), "loading: model.gguf: bad magic 1234");
	err_clear();
	cr_assert_str_eq(err_msg(), "no error message recorded");
	cr_assert_str_eq(err_name(ERR_RANGE), "out of range");
}
