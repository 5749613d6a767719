"""Register fragments of the hardware matrix instructions (NVIDIA mma/ldmatrix/wgmma, AMD MFMA)."""

from .amd import make_mfma_block_fragment as make_mfma_block_fragment
from .amd import mfma_16x16x16_a as mfma_16x16x16_a
from .amd import mfma_16x16x16_b as mfma_16x16x16_b
from .amd import mfma_16x16x16_d as mfma_16x16x16_d
from .amd import mfma_32x32x8_a as mfma_32x32x8_a
from .amd import mfma_32x32x8_b as mfma_32x32x8_b
from .amd import mfma_32x32x8_d as mfma_32x32x8_d
from .amd import mfma_d as mfma_d
from .amd import mfma_operand as mfma_operand
from .nvidia import ldmatrix_fragment as ldmatrix_fragment
from .nvidia import make_mma_block_fragment as make_mma_block_fragment
from .nvidia import mma_fragment as mma_fragment
from .nvidia import mma_m16n8_c as mma_m16n8_c
from .nvidia import mma_m16n8k8_a as mma_m16n8k8_a
from .nvidia import mma_m16n8k8_b as mma_m16n8k8_b
from .nvidia import mma_m16n8k16_a as mma_m16n8k16_a
from .nvidia import mma_m16n8k16_b as mma_m16n8k16_b
from .nvidia import mma_m16n8k32_a as mma_m16n8k32_a
from .nvidia import mma_m16n8k32_b as mma_m16n8k32_b
from .nvidia import wgmma_a as wgmma_a
from .nvidia import wgmma_m64k8_a as wgmma_m64k8_a
from .nvidia import wgmma_m64k16_a as wgmma_m64k16_a
from .nvidia import wgmma_m64nnk16_d as wgmma_m64nnk16_d
