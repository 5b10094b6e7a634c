"""The footprint models as TensorFlow Lite flatbuffers, for TensorFlow Lite Micro's column of the
footprint table (onnxc.benchmarks.tflm): the same weights, written with the schema module that
the ``tflite-micro`` package ships, as TensorFlow's converter lays such a network out.

- Layout: TFLite is NHWC. A rank-4 input becomes ``[N, H, W, C]`` (callers transpose their data);
  convolution filters become ``[O, H, W, I]``, depthwise ones ``[1, H, W, C]``. A Flatten of an
  NHWC feature map flattens in that order, so the fully connected layer after it takes its weight
  columns in the same order.
- Fusion, as the converter does it: BatchNormalization folds into the convolution before it, a
  Relu into the operator before it, and an Add of a constant into the MatMul before it (its
  bias). Padding that SAME does not describe becomes a PAD before a VALID convolution.
- QDQ models (onnxruntime's static quantization): a DequantizeLinear of a constant is the int8
  (or int32 bias) constant with its scale and zero point; an operator between DequantizeLinear and
  QuantizeLinear is the int8 operator with those parameters; a QuantizeLinear of a float value is
  QUANTIZE, an int8 graph output whose ONNX output is float a DEQUANTIZE.

Only the operators the footprint models use are translated (Conv, depthwise Conv, Gemm, MatMul,
Add, Relu, BatchNormalization, MaxPool, GlobalAveragePool, Flatten, Identity and the QDQ pair);
anything else raises ``NotImplementedError`` naming the node.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import flatbuffers
import numpy as np
import numpy.typing as npt
import onnx
from onnx import numpy_helper
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb

TENSOR_TYPES = {np.dtype(np.float32): fb.TensorType.FLOAT32, np.dtype(np.int8): fb.TensorType.INT8,
                np.dtype(np.int32): fb.TensorType.INT32}


@dataclass(frozen=True)
class Quant:
    scale: float
    zero_point: int


@dataclass
class Value:
    """An ONNX value as a TFLite tensor: its index, whether it is an NHWC feature map, the ONNX
    element each of its elements is (None: the same order), and its quantization."""
    tensor: int
    nhwc: bool = False
    order: np.ndarray | None = None
    quant: Quant | None = None


@dataclass
class Writer:
    """The flatbuffer under construction: buffers, tensors, operator codes and operators."""
    buffers: list[fb.BufferT] = field(default_factory=lambda: [fb.BufferT()])
    tensors: list[fb.TensorT] = field(default_factory=list)
    codes: dict[int, int] = field(default_factory=dict)
    operators: list[fb.OperatorT] = field(default_factory=list)

    def tensor(self, name: str, shape: list[int], dtype: npt.DTypeLike, quant: Quant | None = None,
               data: np.ndarray | None = None) -> int:
        t = fb.TensorT()
        t.name, t.shape, t.type = name, [int(d) for d in shape], TENSOR_TYPES[np.dtype(dtype)]
        if quant is not None:
            t.quantization = fb.QuantizationParametersT()
            t.quantization.scale, t.quantization.zeroPoint = [float(quant.scale)], [int(quant.zero_point)]
        if data is not None:
            buf = fb.BufferT()
            buf.data = np.ascontiguousarray(data, dtype=dtype).view(np.uint8).ravel()
            t.buffer = len(self.buffers)
            self.buffers.append(buf)
        self.tensors.append(t)
        return len(self.tensors) - 1

    def operator(self, code: int, inputs: list[int], outputs: list[int], options_type: int = 0,
                 options: object = None) -> None:
        if code not in self.codes:
            self.codes[code] = len(self.codes)
        op = fb.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = self.codes[code], inputs, outputs
        op.builtinOptionsType, op.builtinOptions = options_type, options
        self.operators.append(op)

    def finish(self, name: str, inputs: list[int], outputs: list[int]) -> bytes:
        graph = fb.SubGraphT()
        graph.tensors, graph.operators, graph.inputs, graph.outputs, graph.name = \
            self.tensors, self.operators, inputs, outputs, name
        model = fb.ModelT()
        model.version, model.subgraphs, model.buffers = 3, [graph], self.buffers
        model.description = "onnxc.benchmarks.tflite_export"
        model.operatorCodes = []
        for code in self.codes:
            c = fb.OperatorCodeT()
            c.builtinCode, c.deprecatedBuiltinCode, c.version = code, code, 1
            model.operatorCodes.append(c)
        builder = flatbuffers.Builder(1 << 20)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())


def _options(cls: type, **fields: object) -> object:
    options = cls()
    for key, value in fields.items():
        setattr(options, key, value)
    return options


def _same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """The (before, after) padding of TFLite's SAME for one spatial axis."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class Translator:
    def __init__(self, model: onnx.ModelProto) -> None:
        self.graph = model.graph
        self.init = {t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        self.shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
                       for v in [*self.graph.input, *self.graph.output,
                                 *onnx.shape_inference.infer_shapes(model).graph.value_info]}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in self.graph.node:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        self.quantized_constants: dict[str, tuple[np.ndarray, Quant]] = {}
        self.values: dict[str, Value] = {}
        self.done: set[int] = set()
        self.w = Writer()

    # --- reading the ONNX graph ------------------------------------------------------------------

    def only_consumer(self, name: str, op_type: str) -> onnx.NodeProto | None:
        users = self.consumers.get(name, [])
        outputs = {o.name for o in self.graph.output}
        if len(users) == 1 and users[0].op_type == op_type and name not in outputs:
            return users[0]
        return None

    def constant(self, name: str) -> tuple[np.ndarray, Quant | None]:
        if name in self.init:
            return self.init[name], None
        if name in self.quantized_constants:
            return self.quantized_constants[name]
        raise NotImplementedError(f"{name} is not a constant")

    def epilogue(self, name: str) -> tuple[str, int, Quant | None]:
        """Follows ``name`` through a Relu and a QuantizeLinear that only it feeds: the ONNX value
        the fused operator's output stands for, its activation and its quantization."""
        activation = fb.ActivationFunctionType.NONE
        relu = self.only_consumer(name, "Relu")
        if relu is not None:
            self.done.add(id(relu))
            name, activation = relu.output[0], fb.ActivationFunctionType.RELU
        q = self.only_consumer(name, "QuantizeLinear")
        if q is None:
            return name, activation, None
        self.done.add(id(q))
        return q.output[0], activation, self.quant_of(q)

    def quant_of(self, node: onnx.NodeProto) -> Quant:
        scale, zero = self.init[node.input[1]], self.init[node.input[2]]
        if scale.size != 1:
            raise NotImplementedError(f"{node.name}: per-channel quantization")
        return Quant(float(scale.ravel()[0]), int(zero.ravel()[0]))

    # --- writing -------------------------------------------------------------------------------

    def output_tensor(self, name: str, shape: list[int], quant: Quant | None) -> int:
        return self.w.tensor(name, shape, np.int8 if quant else np.float32, quant)

    def weights(self, node: onnx.NodeProto, name: str, data: np.ndarray, quant: Quant | None) -> int:
        return self.w.tensor(f"{node.name}/{name}", list(data.shape), data.dtype, quant, data)

    def bias(self, node: onnx.NodeProto, name: str | None, channels: int, x: Value, w_quant: Quant | None) -> int:
        if name is None:
            data, quant = np.zeros(channels, np.float32), None
        else:
            data, quant = self.constant(name)
        if x.quant is not None and w_quant is not None:
            if name is None:
                data = np.zeros(channels, np.int32)
            quant = Quant(x.quant.scale * w_quant.scale, 0)
        return self.weights(node, "bias", data.ravel(), quant)

    def translate(self) -> bytes:
        inputs = []
        for value in self.graph.input:
            if value.name in self.init:
                continue
            shape = self.shapes[value.name]
            nhwc = len(shape) == 4
            tflite_shape = [shape[0], shape[2], shape[3], shape[1]] if nhwc else shape
            self.values[value.name] = Value(self.w.tensor(value.name, tflite_shape, np.float32), nhwc)
            inputs.append(self.values[value.name].tensor)
        for node in self.graph.node:
            if id(node) in self.done:
                continue
            handler = getattr(self, f"op_{node.op_type}", None)
            if handler is None:
                raise NotImplementedError(f"node {node.name!r}: {node.op_type} has no TFLite translation here")
            handler(node)
        outputs = [self.graph_output(o) for o in self.graph.output]
        return self.w.finish(self.graph.name, inputs, outputs)

    def graph_output(self, output: onnx.ValueInfoProto) -> int:
        value = self.values[output.name]
        if value.order is not None or value.nhwc:
            raise NotImplementedError(f"output {output.name}: a feature map (NHWC) as an output")
        if value.quant is None or output.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            return value.tensor
        out = self.w.tensor(output.name, self.shapes[output.name], np.float32)
        self.w.operator(fb.BuiltinOperator.DEQUANTIZE, [value.tensor], [out])
        return out

    # --- operators -----------------------------------------------------------------------------

    def op_Identity(self, node: onnx.NodeProto) -> None:
        self.values[node.output[0]] = self.values[node.input[0]]

    def op_DequantizeLinear(self, node: onnx.NodeProto) -> None:
        if node.input[0] in self.init:
            self.quantized_constants[node.output[0]] = (self.init[node.input[0]], self.quant_of(node))
        else:   # an int8 activation read as float by the operator after it: that operator reads the int8
            self.values[node.output[0]] = self.values[node.input[0]]

    def op_QuantizeLinear(self, node: onnx.NodeProto) -> None:
        x, quant = self.values[node.input[0]], self.quant_of(node)
        if x.quant is not None:
            raise NotImplementedError(f"node {node.name!r}: requantization of an int8 value")
        out = self.output_tensor(node.output[0], list(self.w.tensors[x.tensor].shape), quant)
        self.w.operator(fb.BuiltinOperator.QUANTIZE, [x.tensor], [out])
        self.values[node.output[0]] = Value(out, x.nhwc, x.order, quant)

    def op_Relu(self, node: onnx.NodeProto) -> None:
        x = self.values[node.input[0]]
        out = self.output_tensor(node.output[0], list(self.w.tensors[x.tensor].shape), x.quant)
        self.w.operator(fb.BuiltinOperator.RELU, [x.tensor], [out])
        self.values[node.output[0]] = Value(out, x.nhwc, x.order, x.quant)

    def op_Conv(self, node: onnx.NodeProto) -> None:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        x = self.values[node.input[0]]
        w, w_quant = self.constant(node.input[1])
        bias_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
        if any(d != 1 for d in attrs.get("dilations", [1, 1])) or not x.nhwc:
            raise NotImplementedError(f"node {node.name!r}: dilated convolution or a non-NCHW input")
        out_name = node.output[0]
        bn = self.only_consumer(out_name, "BatchNormalization")
        if bn is not None and w_quant is not None:
            raise NotImplementedError(f"node {node.name!r}: BatchNormalization after an int8 convolution")
        if bn is not None:   # folded into the filter and the bias, as TensorFlow's converter does
            scale, shift, mean, var = (self.init[n] for n in bn.input[1:5])
            eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
            factor = scale / np.sqrt(var + eps)
            b = self.init[bias_name] if bias_name else np.zeros(w.shape[0], np.float32)
            w = (w * factor[:, None, None, None]).astype(np.float32)
            folded = ((b - mean) * factor + shift).astype(np.float32)
            bias_name = f"{node.name}/folded_bias"
            self.init[bias_name] = folded
            self.done.add(id(bn))
            out_name = bn.output[0]
        out_name, activation, out_quant = self.epilogue(out_name)
        group, (kh, kw) = attrs.get("group", 1), w.shape[2:]
        (sh, sw), pads = attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0])
        n, h, wd, c = self.w.tensors[x.tensor].shape
        padding, x = self.padding(node, x, (h, wd), (kh, kw), (sh, sw), pads)
        oh, ow = self.shapes[out_name][2:]
        out = self.output_tensor(out_name, [n, oh, ow, w.shape[0]], out_quant)
        if group == 1:
            filt = self.weights(node, "filter", w.transpose(0, 2, 3, 1), w_quant)
            code, kind, options = fb.BuiltinOperator.CONV_2D, fb.BuiltinOptions.Conv2DOptions, _options(
                fb.Conv2DOptionsT, padding=padding, strideH=sh, strideW=sw, fusedActivationFunction=activation)
        elif group == c == w.shape[0]:
            filt = self.weights(node, "filter", w.transpose(1, 2, 3, 0), w_quant)
            code, kind = fb.BuiltinOperator.DEPTHWISE_CONV_2D, fb.BuiltinOptions.DepthwiseConv2DOptions
            options = _options(fb.DepthwiseConv2DOptionsT, padding=padding, strideH=sh, strideW=sw, depthMultiplier=1,
                               fusedActivationFunction=activation)
        else:
            raise NotImplementedError(f"node {node.name!r}: grouped convolution (group={group})")
        bias = self.bias(node, bias_name, w.shape[0], x, w_quant)
        self.w.operator(code, [x.tensor, filt, bias], [out], kind, options)
        self.values[out_name] = Value(out, True, None, out_quant)

    def padding(self, node: onnx.NodeProto, x: Value, size: tuple[int, int], kernel: tuple[int, int],
                strides: tuple[int, int], pads: list[int], zeros: bool = True) -> tuple[int, Value]:
        """SAME or VALID for ``pads`` (ONNX's begin..., end... order), with a PAD of zeros before
        the operator where neither describes them (where ``zeros`` allows it)."""
        if not any(pads):
            return fb.Padding.VALID, x
        same = [_same_padding(s, k, st) for s, k, st in zip(size, kernel, strides)]
        if [p for pair in zip(*same) for p in pair] == list(pads):
            return fb.Padding.SAME, x
        if not zeros:
            raise NotImplementedError(f"node {node.name!r}: padding that SAME does not describe")
        amounts = np.array([[0, 0], [pads[0], pads[2]], [pads[1], pads[3]], [0, 0]], np.int32)
        shape = list(self.w.tensors[x.tensor].shape)
        padded = [shape[0], shape[1] + pads[0] + pads[2], shape[2] + pads[1] + pads[3], shape[3]]
        out = self.output_tensor(f"{node.name}/padded", padded, x.quant)
        self.w.operator(fb.BuiltinOperator.PAD, [x.tensor, self.weights(node, "pads", amounts, None)], [out],
                        fb.BuiltinOptions.PadOptions, fb.PadOptionsT())
        return fb.Padding.VALID, Value(out, True, None, x.quant)

    def op_MaxPool(self, node: onnx.NodeProto) -> None:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        x = self.values[node.input[0]]
        (kh, kw), (sh, sw) = attrs["kernel_shape"], attrs.get("strides", [1, 1])
        n, h, w, c = self.w.tensors[x.tensor].shape
        padding, x = self.padding(node, x, (h, w), (kh, kw), (sh, sw), attrs.get("pads", [0, 0, 0, 0]), zeros=False)
        out_name, activation, out_quant = self.epilogue(node.output[0])
        if (out_quant or x.quant) and out_quant != x.quant:
            raise NotImplementedError(f"node {node.name!r}: int8 MaxPool that changes the quantization")
        oh, ow = self.shapes[node.output[0]][2:]
        out = self.output_tensor(out_name, [n, oh, ow, c], out_quant)
        self.w.operator(fb.BuiltinOperator.MAX_POOL_2D, [x.tensor], [out], fb.BuiltinOptions.Pool2DOptions,
                        _options(fb.Pool2DOptionsT, padding=padding, strideH=sh, strideW=sw, filterHeight=kh,
                                 filterWidth=kw, fusedActivationFunction=activation))
        self.values[out_name] = Value(out, True, None, out_quant)

    def op_GlobalAveragePool(self, node: onnx.NodeProto) -> None:
        x = self.values[node.input[0]]
        if x.quant is not None:
            raise NotImplementedError(f"node {node.name!r}: int8 GlobalAveragePool")
        n, _, _, c = self.w.tensors[x.tensor].shape
        out = self.output_tensor(node.output[0], [n, 1, 1, c], None)
        axes = self.weights(node, "axes", np.array([1, 2], np.int32), None)
        self.w.operator(fb.BuiltinOperator.MEAN, [x.tensor, axes], [out], fb.BuiltinOptions.ReducerOptions,
                        _options(fb.ReducerOptionsT, keepDims=True))
        self.values[node.output[0]] = Value(out, True)

    def op_Flatten(self, node: onnx.NodeProto) -> None:
        x = self.values[node.input[0]]
        out_name, _, out_quant = self.epilogue(node.output[0])
        if (out_quant or x.quant) and out_quant != x.quant:
            raise NotImplementedError(f"node {node.name!r}: int8 Flatten that changes the quantization")
        shape = self.shapes[node.output[0]]
        order = None
        if x.nhwc:   # the NHWC elements in their order, as indices of the NCHW elements
            _, c, h, w = self.shapes[node.input[0]]
            order = np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).ravel()
        out = self.output_tensor(out_name, shape, out_quant)
        new_shape = self.weights(node, "shape", np.array(shape, np.int32), None)
        self.w.operator(fb.BuiltinOperator.RESHAPE, [x.tensor, new_shape], [out], fb.BuiltinOptions.ReshapeOptions,
                        _options(fb.ReshapeOptionsT, newShape=list(shape)))
        self.values[out_name] = Value(out, False, order, out_quant)

    def op_Gemm(self, node: onnx.NodeProto) -> None:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
            raise NotImplementedError(f"node {node.name!r}: Gemm with transA, alpha or beta")
        w, w_quant = self.constant(node.input[1])
        w = w if attrs.get("transB", 0) else w.T
        self.fully_connected(node, w, w_quant, node.input[2] if len(node.input) > 2 else None, node.output[0])

    def op_MatMul(self, node: onnx.NodeProto) -> None:
        w, w_quant = self.constant(node.input[1])
        add, bias_name, out_name = self.only_consumer(node.output[0], "Add"), None, node.output[0]
        if add is not None and add.input[1] in self.init:
            self.done.add(id(add))
            bias_name, out_name = add.input[1], add.output[0]
        self.fully_connected(node, w.T, w_quant, bias_name, out_name)

    def fully_connected(self, node: onnx.NodeProto, w: np.ndarray, w_quant: Quant | None, bias_name: str | None,
                        out_name: str) -> None:
        """FULLY_CONNECTED with ``w`` as [outputs, inputs]; weight columns follow the input's order."""
        x = self.values[node.input[0]]
        if x.nhwc:
            raise NotImplementedError(f"node {node.name!r}: a fully connected layer on a feature map")
        if x.order is not None:
            w = w[:, x.order]
        out_name, activation, out_quant = self.epilogue(out_name)
        out = self.output_tensor(out_name, [self.w.tensors[x.tensor].shape[0], w.shape[0]], out_quant)
        filt = self.weights(node, "weights", np.ascontiguousarray(w), w_quant)
        bias = self.bias(node, bias_name, w.shape[0], x, w_quant)
        self.w.operator(fb.BuiltinOperator.FULLY_CONNECTED, [x.tensor, filt, bias], [out],
                        fb.BuiltinOptions.FullyConnectedOptions,
                        _options(fb.FullyConnectedOptionsT, fusedActivationFunction=activation))
        self.values[out_name] = Value(out, False, None, out_quant)


def to_tflite(model: onnx.ModelProto) -> bytes:
    """``model`` as a .tflite flatbuffer (see the module's docstring for what is translated)."""
    return Translator(model).translate()
