"""The computations the carver gives hints for (TileLang's ``carver.template`` names)."""

from .._src.carver_templates import BaseTemplate as BaseTemplate
from .._src.carver_templates import ElementwiseTemplate as ElementwiseTemplate
from .._src.carver_templates import FlashAttentionTemplate as FlashAttentionTemplate
from .._src.carver_templates import GEMVTemplate as GEMVTemplate
from .._src.carver_templates import GeneralReductionTemplate as GeneralReductionTemplate
from .._src.carver_templates import MatmulTemplate as MatmulTemplate
