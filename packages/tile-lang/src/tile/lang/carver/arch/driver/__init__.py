"""``carver.arch.driver``: CUDA device facts (``get_num_sms``, ...); ``cuda_driver`` holds them."""

from ...._src.cuda_driver import cuda_target_here as cuda_target_here
from ...._src.cuda_driver import get_device_name as get_device_name
from ...._src.cuda_driver import get_max_dynamic_shared_size_bytes as get_max_dynamic_shared_size_bytes
from ...._src.cuda_driver import get_num_sms as get_num_sms
from ...._src.cuda_driver import get_registers_per_block as get_registers_per_block
from ...._src.cuda_driver import get_shared_memory_per_block as get_shared_memory_per_block
from . import cuda_driver as cuda_driver
