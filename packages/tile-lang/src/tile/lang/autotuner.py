"""Autotuning with TileLang's API: ``autotune``, ``AutoTuner``, ``set_autotune_inputs``.

Example::

    from tile.lang.autotuner import AutoTuner

    result = (AutoTuner.from_kernel(kernel=matmul, configs=configs)
              .set_compile_args(out_idx=[-1], target="cpu")
              .set_profile_args(ref_prog=lambda a, b: a @ b)
              .run(warmup=25, rep=100))
    print(result.config, result.latency)

See ``tile.lang._src.tuner`` for what a run does and ``tile.lang.env`` for
``TILE_AUTOTUNE`` / ``TILE_AUTOTUNE_EXECUTOR`` / ``TILE_AUTOTUNE_WORKERS``.
"""

from ._src.autotune_decorator import AutoTuneImpl as AutoTuneImpl
from ._src.autotune_decorator import autotune as autotune
from ._src.tuner import AutoTuner as AutoTuner
from ._src.tuning_results import AutotuneConfigError as AutotuneConfigError
from ._src.tuning_results import AutotuneError as AutotuneError
from ._src.tuning_results import AutotuneInputError as AutotuneInputError
from ._src.tuning_results import AutotuneResult as AutotuneResult
from ._src.tuning_results import EmulatedTimingError as EmulatedTimingError
from ._src.tuning_results import NoValidConfigError as NoValidConfigError
from ._src.tuning_results import SkippedConfig as SkippedConfig
from ._src.tuning_results import set_autotune_inputs as set_autotune_inputs
