"""``import tile.lang.language.expert as TX``: the expert tier.

API policy: the expert tier gives thread-level and machine-level control that the
developer tier (``tile.lang.language``) leaves to the compiler: reading the thread
index (``get_thread_binding``), explicit buffer layouts (``Layout``, ``Fragment``,
``annotate_layout``) and calls into external code (``import_source`` +
``call_extern``). Programs using it give up portability: each name documents the
targets that honour it, and a backend that cannot honour one rejects the kernel
with ``UnsupportedOnTargetError`` (the CPU runs ``import_source``/``call_extern``
and explicit layouts, and rejects thread-id reads). Names here may change between
minor versions; the developer tier is the stable surface.

Every name is also reachable as ``T.<name>`` for TileLang compatibility.
"""

from .._src.builtins import get_thread_binding as get_thread_binding
from .._src.expert import call_extern as call_extern
from .._src.expert import import_source as import_source
from .._src.schedule import annotate_layout as annotate_layout
from .._src.suggestions import missing_name_hook as _missing_name_hook
from ..layout import Fragment as Fragment
from ..layout import Layout as Layout

__all__ = ["Fragment", "Layout", "annotate_layout", "call_extern", "get_thread_binding", "import_source"]

__getattr__ = _missing_name_hook(__name__)
