"""A ``--target c`` package on an emulated microcontroller: its example program linked into
firmware for one of QEMU's MPS2 or MPS3 boards (start-up code and linker scripts in
``firmware/``, newlib's semihosting library for stdio, files and the exit status), run by
``qemu-system-arm`` with the instructions of the model's run counted.

Boards (``BOARDS``):

- ``cortex-m4f``: code for a Cortex-M4 with its single-precision FPU, on ``mps2-an386``.
- ``cortex-m0plus``: ARMv6-M code for a Cortex-M0+ (soft float), on the Cortex-M3 board
  ``mps2-an385``, which executes it: QEMU models no M0+ board.
- ``cortex-m55``: code for a Cortex-M55 with its FPU and Helium (MVE, integer and float:
  ``__ARM_FEATURE_MVE`` is 3, so CMSIS-NN compiles its MVE code), on ``mps3-an547``; the
  weights in its QSPI flash.

The count: QEMU runs with ``-icount shift=0`` (each instruction advances the virtual clock by
1 ns) and the example program, built with ``-DDEMO_CLOCK``, reads the board's clock around the
run: a 25 MHz timer on the MPS2 boards (one tick is 40 instructions), the SSE-300's 32 MHz
system counter on mps3-an547 (31.25). QEMU counts instructions, not cycles: a Cortex-M0+ takes
more cycles than instructions (loads, multiplies, taken branches), and one Helium instruction
works on 16 bytes.

The tools are Debian's gcc-arm-none-eabi, binutils-arm-none-eabi, libnewlib-arm-none-eabi and
qemu-system-arm (``TOOLS``: what to look for -> the package).
"""
from __future__ import annotations

import glob
import os
import re
import subprocess
from dataclasses import dataclass

FIRMWARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "firmware")
TOOLS = {"arm-none-eabi-gcc": "gcc-arm-none-eabi", "arm-none-eabi-size": "binutils-arm-none-eabi",
         "/usr/lib/arm-none-eabi/newlib": "libnewlib-arm-none-eabi", "qemu-system-arm": "qemu-system-arm"}
WEIGHTS_SECTION = ".model_weights"   # where the linker scripts put a package's weights (flash)
NS_PER_INSTRUCTION = 1               # qemu-system-arm -icount shift=0


@dataclass(frozen=True)
class Board:
    machine: str                  # qemu-system-arm -M
    cflags: tuple[str, ...]       # the core the code is built for, and the board for firmware/startup.c
    linker_script: str            # in firmware/
    clock_hz: int                 # of the timer DEMO_CLOCK reads
    flash: tuple[int, int]        # the addresses the weights section lies in: first, end

    def instructions(self, ticks: int) -> int:
        """Instructions run in ``ticks`` of the board's clock (to a tick)."""
        return ticks * 1_000_000_000 // (self.clock_hz * NS_PER_INSTRUCTION)


BOARDS = {
    "cortex-m4f": Board("mps2-an386", ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
                        "mps2.ld", 25_000_000, (0x00000000, 0x00400000)),
    "cortex-m0plus": Board("mps2-an385", ("-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"),
                           "mps2.ld", 25_000_000, (0x00000000, 0x00400000)),
    "cortex-m55": Board("mps3-an547", ("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard", "-DMPS3_AN547"),
                        "mps3_an547.ld", 32_000_000, (0x28000000, 0x28800000)),
}
FOOTPRINT_BOARDS = ("cortex-m4f", "cortex-m0plus")   # the footprint tables' columns, onnxc's and TFLM's


@dataclass
class FirmwareRun:
    returncode: int
    stdout: str
    stderr: str
    instructions: int | None      # of the model's run (None: the program printed no clock)


def build_firmware(folder: str, prefix: str, board: str, elf: str, opt: str = "-Os", align: int = 16,
                   cmsis_nn: str | None = None) -> str:
    """Links the package in ``folder`` (its example program, model and weights) into ``elf`` for
    ``board``; the weights go to flash through ``<PREFIX>_WEIGHTS_SECTION``, aligned to
    ``align`` bytes; a ``--cmsis-nn`` package with CMSIS-NN's folder ``cmsis_nn`` (its
    ``Source/*/*.c``, built for the board). Returns ``elf``; a failed build raises RuntimeError
    with the compiler's message."""
    up = prefix.upper()
    sources = [f"{prefix}_demo.c", f"{prefix}.c"]
    if os.path.exists(os.path.join(folder, f"{prefix}_weights.c")):
        sources.append(f"{prefix}_weights.c")
    paths = [os.path.join(folder, s) for s in sources]
    if cmsis_nn is not None:
        paths += sorted(glob.glob(os.path.join(cmsis_nn, "Source", "*", "*.c")))
    cmd = ["arm-none-eabi-gcc", *BOARDS[board].cflags, opt, "-std=c99", "-ffunction-sections", "-fdata-sections",
           f'-D{up}_WEIGHTS_SECTION="{WEIGHTS_SECTION}"', f"-D{up}_ALIGN={align}", "-DDEMO_CLOCK=mcu_timer_ticks",
           "-I", folder, *(["-I", os.path.join(cmsis_nn, "Include")] if cmsis_nn is not None else []),
           os.path.join(FIRMWARE, "startup.c"), *paths,
           "--specs=rdimon.specs", "-nostartfiles", "-T", os.path.join(FIRMWARE, BOARDS[board].linker_script),
           "-Wl,--gc-sections",
           "-o", elf, "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    return elf


def run_firmware(elf: str, board: str, args: list[str], cwd: str, timeout: float = 300) -> FirmwareRun:
    """Runs ``elf`` on ``board`` with the command line ``args`` (argv[1:]; files relative to
    ``cwd``, which semihosting opens on the host)."""
    for a in args:
        if not re.fullmatch(r"[A-Za-z0-9_./+-]+", a):
            raise ValueError(f"semihosting argument {a!r}: letters, digits and _ . / + - only")
    config = ",".join(["enable=on", "target=native", "arg=demo", *(f"arg={a}" for a in args)])
    cmd = ["qemu-system-arm", "-M", BOARDS[board].machine, "-display", "none", "-serial", "null", "-monitor", "none",
           "-icount", "shift=0", "-semihosting-config", config, "-kernel", elf]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout)
    ticks = re.search(r"^# clock (\d+)$", proc.stdout, re.M)
    return FirmwareRun(proc.returncode, proc.stdout, proc.stderr,
                       BOARDS[board].instructions(int(ticks.group(1))) if ticks else None)


def firmware_size(elf: str) -> tuple[int, int, int]:
    """text, data and bss bytes of ``elf`` (arm-none-eabi-size)."""
    out = subprocess.run(["arm-none-eabi-size", elf], capture_output=True, text=True, check=True).stdout
    text, data, bss = (int(v) for v in out.splitlines()[1].split()[:3])
    return text, data, bss


def symbols(elf: str) -> dict[str, int]:
    """Defined symbol -> address (arm-none-eabi-nm)."""
    out = subprocess.run(["arm-none-eabi-nm", elf], capture_output=True, text=True, check=True).stdout
    return {parts[2]: int(parts[0], 16) for parts in (line.split() for line in out.splitlines()) if len(parts) == 3}


def helium_instructions(elf: str) -> dict[str, int]:
    """Function -> how many of its instructions are Helium (MVE) ones in ``elf``: those that name
    a vector register q0 to q7, which on M-profile cores only MVE has (the FPU's are s and d)."""
    out = subprocess.run(["arm-none-eabi-objdump", "-d", "-m", "armv8.1-m.main", "--no-show-raw-insn", elf],
                         capture_output=True, text=True, check=True).stdout
    counts: dict[str, int] = {}
    function = ""
    for line in out.splitlines():
        head = re.match(r"[0-9a-f]+ <(.+)>:$", line)
        if head:
            function = head.group(1)
        elif re.match(r"\s+[0-9a-f]+:\s+v\S*\s+[^@]*\bq[0-7]\b", line):
            counts[function] = counts.get(function, 0) + 1
    return counts
