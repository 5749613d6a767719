"""tile.ir: tile operators, the backend plug-in interface, and compiler passes.

This top-level module re-exports the light pieces (errors, targets, backends).
The operators live in ``tile.ir.ops`` and the passes in ``tile.ir.transform``.
"""

from .backend import BackendManifest as BackendManifest
from .backend import BuildArtifact as BuildArtifact
from .backend import Capabilities as Capabilities
from .backend import MmaInstruction as MmaInstruction
from .backend import available_backends as available_backends
from .backend import resolve_target as resolve_target
from .errors import BackendError as BackendError
from .errors import BackendUnavailableError as BackendUnavailableError
from .errors import LayoutInferenceError as LayoutInferenceError
from .errors import TargetError as TargetError
from .errors import TileShapeError as TileShapeError
from .errors import TileTypeError as TileTypeError
from .errors import TileVerifyError as TileVerifyError
from .errors import UnsupportedOnTargetError as UnsupportedOnTargetError
from .target import Target as Target
