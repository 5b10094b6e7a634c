/* An example custom-op library for onnxc (ABI: onnxc_custom_op.h), built by the tests.
 *
 *   ai.example::ScaledAdd(A, B) -> A + alpha * B      (float, same shapes; attribute alpha)
 *   ai.example::RepeatRows(X)   -> X repeated `times` times along axis 0 (any rank >= 1)
 */
#include <stdlib.h>
#include <string.h>

#include "onnxc_custom_op.h"

/* A number attribute from the JSON object the compiler passes ({"alpha": 0.5, ...}). */
static double number_attribute(const char *json, const char *key, double fallback)
{
    char pattern[64];
    const char *at;
    size_t n = strlen(key);
    if (n + 4 > sizeof pattern)
        return fallback;
    pattern[0] = '"';
    memcpy(pattern + 1, key, n);
    memcpy(pattern + 1 + n, "\":", 3);
    at = strstr(json, pattern);
    return at != NULL ? strtod(at + n + 3, NULL) : fallback;
}

static int64_t numel(const onnxc_tensor *t)
{
    int64_t n = 1;
    for (int32_t d = 0; d < t->rank; ++d)
        n *= t->dims[d];
    return n;
}

static int scaled_add_shape(const onnxc_tensor *in, int32_t n_in, const char *attrs, int64_t *out_dims,
                            const char **error)
{
    (void)n_in;
    (void)attrs;
    if (in[0].rank != in[1].rank || numel(&in[0]) != numel(&in[1])) {
        *error = "ScaledAdd: A and B must have the same shape";
        return 1;
    }
    for (int32_t d = 0; d < in[0].rank; ++d)
        out_dims[d] = in[0].dims[d];
    return 0;
}

static int scaled_add(const onnxc_tensor *in, int32_t n_in, onnxc_tensor *out, int32_t n_out, const char *attrs,
                      const char **error)
{
    const float alpha = (float)number_attribute(attrs, "alpha", 1.0);
    const float *a = (const float *)in[0].data, *b = (const float *)in[1].data;
    float *y = (float *)out[0].data;
    (void)n_in;
    (void)n_out;
    (void)error;
    for (int64_t i = 0; i < numel(&in[0]); ++i)
        y[i] = a[i] + alpha * b[i];
    return 0;
}

static int repeat_rows_shape(const onnxc_tensor *in, int32_t n_in, const char *attrs, int64_t *out_dims,
                             const char **error)
{
    const int64_t times = (int64_t)number_attribute(attrs, "times", 1);
    (void)n_in;
    if (in[0].rank < 1 || times < 0) {
        *error = "RepeatRows: X needs rank >= 1 and times >= 0";
        return 1;
    }
    out_dims[0] = in[0].dims[0] * times;
    for (int32_t d = 1; d < in[0].rank; ++d)
        out_dims[d] = in[0].dims[d];
    return 0;
}

static int repeat_rows(const onnxc_tensor *in, int32_t n_in, onnxc_tensor *out, int32_t n_out, const char *attrs,
                       const char **error)
{
    const int64_t times = (int64_t)number_attribute(attrs, "times", 1);
    const size_t item = in[0].type == 11 || in[0].type == 7 ? 8 : 4;  /* double/int64, else 4-byte types */
    const size_t bytes = (size_t)numel(&in[0]) * item;
    (void)n_in;
    (void)n_out;
    (void)error;
    for (int64_t t = 0; t < times; ++t)
        memcpy((char *)out[0].data + (size_t)t * bytes, in[0].data, bytes);
    return 0;
}

static const int32_t same_as_input0[1] = { -1 };

static const onnxc_custom_op ops[2] = {
    { "ai.example", "ScaledAdd", 1, 2, 1, same_as_input0, same_as_input0, scaled_add_shape, scaled_add },
    { "ai.example", "RepeatRows", 1, 1, 1, same_as_input0, same_as_input0, repeat_rows_shape, repeat_rows },
};

const onnxc_custom_op *onnxc_custom_ops(int32_t abi_version, int32_t *count)
{
    if (abi_version != ONNXC_CUSTOM_OP_ABI)
        return NULL;
    *count = 2;
    return ops;
}
