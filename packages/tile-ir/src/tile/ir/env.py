"""Environment variables read by tile-ir (declared once, read through ``EnvVar``)."""

from __future__ import annotations

from tile.layout.env import EnvVar, parse_bool

DUMP_IR = EnvVar(
    "TILE_DUMP_IR",
    str,
    "",
    "directory to write the IR (TVMScript text) after every pass; empty disables dumping",
)

VERIFY_EACH_PASS = EnvVar(
    "TILE_VERIFY_EACH_PASS",
    parse_bool,
    False,
    "run the IR verifier and the expensive pass-contract checks after every pass, not only at "
    "pipeline entry and exit",
)
