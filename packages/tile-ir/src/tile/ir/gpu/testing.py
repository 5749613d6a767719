"""A recording GPU driver: the launch path tested and timed on a machine without a GPU.

:class:`RecordingDriver` stands in for a vendor driver (:class:`~tile.ir.gpu.launcher.GpuDriver`)
behind a :class:`~tile.ir.gpu.launcher.GpuLauncher`: it serves torch *CPU* tensors as the
device's tensors, hands out stream handles from :attr:`RecordingDriver.stream` (what a test
sets, as torch's ``current_stream`` would answer), and records every call it receives
(``calls``), so a test asserts exactly what reached the driver: which stream, which
pointers, how often a module was loaded or a tensor map encoded. It launches nothing.

Example::

    driver = RecordingDriver()
    kernel = CudaKernel(cubin, recipe, params, driver=driver)
    kernel(a, b, c)
    assert driver.launches()[0].stream == driver.stream
"""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Any

from .launcher import DeviceFunction, GpuDriver, torch_current_stream


@dataclasses.dataclass(frozen=True)
class Launch:
    """One recorded launch: its dims, stream and the kernel parameters' values as raw words."""

    device: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    stream: int
    words: tuple[int, ...]
    """The first 8 bytes of each kernel parameter (a pointer, a scalar, a tensor map's start)."""


class _RecordedFunction(DeviceFunction):
    def __init__(self, driver: RecordingDriver, device: int, count: int) -> None:
        self.driver = driver
        self.device = device
        self.count = count

    def set_dynamic_shared(self, nbytes: int) -> None:
        self.driver.calls.append(("set_dynamic_shared", self.device, nbytes))

    def launch(
        self, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int, stream: int, params: int
    ) -> int:
        driver = self.driver
        if not driver.record:
            driver.launch_count += 1
            return driver.launch_status
        if driver.record_words:
            addresses = (ctypes.c_void_p * max(self.count, 1)).from_address(params)
            words = tuple(ctypes.c_uint64.from_address(a).value if a else 0 for a in addresses[: self.count])
        else:
            words = ()
        driver.calls.append(("launch", Launch(self.device, grid, block, shared, stream, words)))
        return driver.launch_status


class RecordingDriver(GpuDriver):
    """A driver that records its calls; ``launch_status`` is what every launch returns."""

    vendor = "recording"

    def __init__(
        self, device_type: str = "cpu", params: int = 0, record_words: bool = True, record: bool = True
    ) -> None:
        self.device_type = device_type
        self.stream: int | None = 0x5EED
        """The handle ``current_stream`` answers; None: torch's answer, as a real driver's."""
        self.launch_status = 0
        self.params = params
        """How many kernel parameters a launch's ``words`` read (0: as many as the kernel has)."""
        self.record_words = record_words
        self.record = record
        """False: count launches (``launch_count``) and streams asked, record nothing (a benchmark's
        driver: the launch path is timed, not the recording)."""
        self.launch_count = 0
        self.calls: list[tuple[Any, ...]] = []

    def load(self, image: bytes, kernel_name: str, device: int, **options: Any) -> DeviceFunction:
        self.calls.append(("load", kernel_name, device))
        return _RecordedFunction(self, device, int(options.get("param_count", self.params)))

    def current_stream(self, device: int) -> int:
        if self.record:
            self.calls.append(("current_stream", device))
        return self.stream if self.stream is not None else torch_current_stream(device)

    def error_text(self, status: int) -> str:
        return f"RECORDED_ERROR_{status}"

    def encode_tensor_map(self, args: Any) -> tuple[Any, int]:
        """CUDA's ``cuTensorMapEncodeTiled``: records the arguments, returns a 64-byte aligned
        128-byte map whose first word is the tensor's address."""
        self.calls.append(("encode_tensor_map", args))
        raw = ctypes.create_string_buffer(128 + 64)
        address = ctypes.addressof(raw) + (-ctypes.addressof(raw)) % 64
        ctypes.c_uint64.from_address(address).value = int(args.global_address)
        return raw, address

    def launches(self) -> list[Launch]:
        return [c[1] for c in self.calls if c[0] == "launch"]

    def names(self) -> list[str]:
        """The recorded calls' names, in order."""
        return [str(c[0]) for c in self.calls]


__all__ = ["Launch", "RecordingDriver"]
