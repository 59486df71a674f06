"""Each SM's launch limits and the occupancy rules, the check of one launch against them, and SM ordering."""

from __future__ import annotations

from dataclasses import dataclass

from kcontract.errors import UsageError

SOURCE = ("CUDA C++ Programming Guide, 'Technical Specifications per Compute Capability' (the same numbers as "
          "CCCL's cuda/__device/arch_traits.h); allocation granularities, register sub-partitions and the "
          "barrier rule from cuda_occupancy.h in the pinned nvidia-cuda-runtime wheel")
KIB = 1024
DEFAULT_SMEM_PER_BLOCK = 48 * KIB  # above this a launch needs cudaFuncAttributeMaxDynamicSharedMemorySize
SMEM_GRANULARITY = 128  # bytes, compute capability 8.x to 12.x
REG_GRANULARITY = 256  # registers per warp allocation
REG_SUBPARTITIONS = 4


@dataclass(frozen=True)
class SmLimits:
    """One compute capability's limits (bytes for memory, 32-bit registers for registers)."""

    sm: str
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    registers_per_block: int
    registers_per_thread: int
    smem_per_sm: int
    smem_per_block_optin: int  # max static + dynamic shared memory per block with the opt-in
    reserved_smem_per_block: int  # what the driver keeps per block (counts against smem_per_sm)
    barriers_per_block_slot: int  # named barriers available per resident-block slot


def _sm(sm: str, threads_sm: int, blocks: int, smem_sm_kib: int, barrier_slots: int) -> SmLimits:
    """A row with the limits shared by sm_80 to sm_121."""
    return SmLimits(sm, 1024, threads_sm, blocks, 64 * KIB, 64 * KIB, 255, smem_sm_kib * KIB,
                    smem_sm_kib * KIB - KIB, KIB, barrier_slots)


LIMITS: dict[str, SmLimits] = {row.sm: row for row in (
    _sm("sm_80", 2048, 32, 164, 2),
    _sm("sm_86", 1536, 16, 100, 1),
    _sm("sm_87", 1536, 16, 164, 1),
    _sm("sm_88", 1536, 16, 100, 1),
    _sm("sm_89", 1536, 24, 100, 1),
    _sm("sm_90", 2048, 32, 228, 2),
    _sm("sm_100", 2048, 32, 228, 2),
    _sm("sm_103", 2048, 32, 228, 1),
    _sm("sm_110", 1536, 24, 228, 1),
    _sm("sm_120", 1536, 24, 100, 1),
    _sm("sm_121", 1536, 24, 100, 1),
)}


def limits_for(sm: str) -> SmLimits:
    """The limits of a target such as `sm_90` or `sm_90a` (arch-specific suffixes share the base row)."""
    base = sm.rstrip("af")
    if base not in LIMITS:
        raise UsageError(f"no launch limits known for {sm}; known: {', '.join(LIMITS)} "
                         f"(add a row to kcontract/sms.py from the CUDA Programming Guide)")
    return LIMITS[base]


@dataclass(frozen=True)
class LaunchCheck:
    """One launch on one SM: whether it needs the opt-in, resident blocks per SM, and what breaks a limit."""

    opt_in: bool
    blocks_per_sm: int
    problems: tuple[str, ...]  # illegal launch, spills, zero occupancy


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def check_launch(limits: SmLimits, *, registers: int, static_smem: int, stack: int, spill_stores: int,
                 spill_loads: int, barriers: int, threads: int, dynamic_smem: int) -> LaunchCheck:
    """Check a launch of `threads` threads with `dynamic_smem` bytes against one SM's limits."""
    sm, problems = limits.sm, []
    total_smem = static_smem + dynamic_smem
    warps = -(-threads // 32)
    regs_per_warp = _round_up(registers * 32, REG_GRANULARITY)
    illegal = []
    if threads < 1 or threads > limits.max_threads_per_block:
        illegal.append(f"{threads} threads per block (1 to {limits.max_threads_per_block} allowed)")
    if max(regs_per_warp * _round_up(warps, REG_SUBPARTITIONS), regs_per_warp * warps) > limits.registers_per_block \
            or registers > limits.registers_per_thread:
        illegal.append(f"{registers} registers x {threads} threads exceed {limits.registers_per_block} "
                       f"registers per block")
    if total_smem > limits.smem_per_block_optin:
        illegal.append(f"shared memory {static_smem} static + {dynamic_smem} dynamic = {total_smem} bytes exceeds "
                       f"{limits.smem_per_block_optin} bytes per block (the opt-in maximum)")
    for reason in illegal:
        problems.append(f"illegal launch on {sm}: {reason}")
    blocks = 0 if illegal else _blocks_per_sm(limits, warps, regs_per_warp, total_smem, barriers)
    if not illegal and blocks == 0:
        problems.append(f"zero occupancy on {sm}: no block of {threads} threads fits on an SM")
    if spill_stores or spill_loads:
        problems.append(f"spills on {sm}: {spill_stores} bytes stored, {spill_loads} bytes loaded "
                        f"(stack frame {stack} bytes)")
    return LaunchCheck(total_smem > DEFAULT_SMEM_PER_BLOCK, blocks, tuple(problems))


def _blocks_per_sm(limits: SmLimits, warps: int, regs_per_warp: int, total_smem: int, barriers: int) -> int:
    """Resident blocks per SM with the largest shared-memory carveout, as cuda_occupancy.h computes it."""
    by_blocks = limits.max_blocks_per_sm
    by_warps = (limits.max_threads_per_sm // 32) // warps
    if regs_per_warp:
        per_partition = (limits.registers_per_sm // REG_SUBPARTITIONS) // regs_per_warp
        by_regs = (per_partition * REG_SUBPARTITIONS) // warps
    else:
        by_regs = by_blocks
    per_block = _round_up(total_smem + limits.reserved_smem_per_block, SMEM_GRANULARITY)
    by_smem = limits.smem_per_sm // per_block
    by_barriers = (limits.max_blocks_per_sm * limits.barriers_per_block_slot) // barriers if barriers else by_blocks
    return max(0, min(by_blocks, by_warps, by_regs, by_smem, by_barriers))



def sm_number(sm: str) -> int:
    """80 for sm_80, 90 for sm_90a: the order SMs print in."""
    return int("".join(ch for ch in sm if ch.isdigit()) or 0)


def first_sm(targets: list[str]) -> str | None:
    """The target where a kernel's code is most its own: an arch-specific one (sm_90a), else the newest."""
    return min(targets, key=lambda sm: (not sm.endswith(("a", "f")), -sm_number(sm)), default=None)
