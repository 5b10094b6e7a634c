// TensorFlow Lite Micro's counterpart of a package's example program, as firmware for QEMU's
// MPS2 boards (startup.c, mps2.ld): runs the model linked in as tflm_model (a .tflite flatbuffer)
// on the inputs read from the files named on the command line (raw, in the model's input
// layout), and prints "# clock N" (the board timer's ticks around Invoke), "# arena N"
// (TFLM's arena_used_bytes) and every output element.
#include <cstdint>
#include <cstdio>

#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/schema/schema_generated.h"

extern "C" const unsigned char tflm_model[];
extern "C" unsigned long mcu_timer_ticks(void);

#ifndef TFLM_ARENA_BYTES
#define TFLM_ARENA_BYTES (512 * 1024)
#endif
alignas(16) static uint8_t arena[TFLM_ARENA_BYTES];

int main(int argc, char **argv)
{
    const tflite::Model *model = tflite::GetModel(tflm_model);
    // The model's operators (TFLM_OP_<BUILTIN> for each, under TFLM_OPS), as a firmware registers
    // them; without TFLM_OPS, all that the footprint models use.
    tflite::MicroMutableOpResolver<10> resolver;
#if !defined(TFLM_OPS) || defined(TFLM_OP_CONV_2D)
    resolver.AddConv2D();
#endif
#if !defined(TFLM_OPS) || defined(TFLM_OP_DEPTHWISE_CONV_2D)
    resolver.AddDepthwiseConv2D();
#endif
#if !defined(TFLM_OPS) || defined(TFLM_OP_FULLY_CONNECTED)
    resolver.AddFullyConnected();
#endif
#if !defined(TFLM_OPS) || defined(TFLM_OP_MAX_POOL_2D)
    resolver.AddMaxPool2D();
#endif
#if !defined(TFLM_OPS) || defined(TFLM_OP_MEAN)
    resolver.AddMean();
#endif
#if !defined(TFLM_OPS) || defined(TFLM_OP_PAD)
    resolver.AddPad();
#endif
#if !defined(TFLM_OPS) || defined(TFLM_OP_QUANTIZE)
    resolver.AddQuantize();
#endif
#if !defined(TFLM_OPS) || defined(TFLM_OP_DEQUANTIZE)
    resolver.AddDequantize();
#endif
#if !defined(TFLM_OPS) || defined(TFLM_OP_RELU)
    resolver.AddRelu();
#endif
#if !defined(TFLM_OPS) || defined(TFLM_OP_RESHAPE)
    resolver.AddReshape();
#endif
    tflite::MicroInterpreter interpreter(model, resolver, arena, sizeof arena);
    if (interpreter.AllocateTensors() != kTfLiteOk) {
        std::puts("error: AllocateTensors failed");
        return 2;
    }
    if ((size_t)argc != interpreter.inputs_size() + 1) {
        std::printf("usage: %s INPUT.bin (%u inputs)\n", argv[0], (unsigned)interpreter.inputs_size());
        return 2;
    }
    for (size_t i = 0; i < interpreter.inputs_size(); ++i) {
        TfLiteTensor *input = interpreter.input(i);
        std::FILE *f = std::fopen(argv[i + 1], "rb");
        if (f == nullptr || std::fread(input->data.raw, 1, input->bytes, f) != input->bytes) {
            std::printf("error: cannot read %u bytes from %s\n", (unsigned)input->bytes, argv[i + 1]);
            return 2;
        }
        std::fclose(f);
    }
    unsigned long start = mcu_timer_ticks();
    TfLiteStatus status = interpreter.Invoke();
    unsigned long ticks = mcu_timer_ticks() - start;
    if (status != kTfLiteOk) {
        std::puts("error: Invoke failed");
        return 3;
    }
    std::printf("# clock %lu\n# arena %u\n", ticks, (unsigned)interpreter.arena_used_bytes());
    for (size_t i = 0; i < interpreter.outputs_size(); ++i) {
        const TfLiteTensor *output = interpreter.output(i);
        if (output->type == kTfLiteFloat32) {
            for (size_t k = 0; k < output->bytes / sizeof(float); ++k)
                std::printf("%.9g\n", (double)output->data.f[k]);
        } else if (output->type == kTfLiteInt8) {
            for (size_t k = 0; k < output->bytes; ++k)
                std::printf("%d\n", output->data.int8[k]);
        } else {
            std::puts("error: an output neither float32 nor int8");
            return 3;
        }
    }
    return 0;
}
