/* onnxc custom operator ABI, version 1.
 *
 * A custom-op library is a shared library exporting onnxc_custom_ops (declared at the end),
 * which returns `*count` operator descriptions (static storage), or NULL when it does not
 * support `abi_version`. Register it with SessionOptions.register_custom_ops_library(path).
 * The compiler reads the descriptions (domain, name, input and output counts, output types
 * and ranks); the generated code calls `shape` to size the outputs, then `compute`.
 * Attributes reach both as the node's attributes in JSON ({"alpha": 0.5, "mode": "x", ...}).
 * Both return 0 on success, or nonzero with `*error` set to a static message.
 */
#ifndef ONNXC_CUSTOM_OP_H
#define ONNXC_CUSTOM_OP_H

#include <stdint.h>

#define ONNXC_CUSTOM_OP_ABI 1

typedef struct onnxc_tensor {
    int32_t type;          /* ONNX TensorProto.DataType code (1 float, 7 int64, ...) */
    int32_t rank;
    const int64_t *dims;   /* rank dims */
    void *data;            /* elements, row-major; read-only for inputs */
} onnxc_tensor;

typedef struct onnxc_custom_op {
    const char *domain;             /* e.g. "ai.example" */
    const char *name;               /* the node's op_type */
    int32_t since_version;          /* the domain's opset from which it exists */
    int32_t num_inputs;
    int32_t num_outputs;
    const int32_t *output_types;    /* per output: a TensorProto code, or -1 - k: input k's type */
    const int32_t *output_ranks;    /* per output: its rank, or -1 - k: input k's rank */
    /* Writes the dims of every output, one after another (ranks as declared), into out_dims. */
    int (*shape)(const onnxc_tensor *inputs, int32_t num_inputs, const char *attributes_json,
                 int64_t *out_dims, const char **error);
    /* Computes the outputs (allocated with the dims `shape` gave) from the inputs. */
    int (*compute)(const onnxc_tensor *inputs, int32_t num_inputs, onnxc_tensor *outputs,
                   int32_t num_outputs, const char *attributes_json, const char **error);
} onnxc_custom_op;

const onnxc_custom_op *onnxc_custom_ops(int32_t abi_version, int32_t *count);

#endif
