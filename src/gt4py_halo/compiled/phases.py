"""The phases an exchange node can stand for, and the connectors each phase has.

``exchange`` is the blocking exchange: pack, send, wait, unpack. A split-phase exchange is two
nodes: ``start`` packs and posts, ``finish`` waits and unpacks; a token array written by the
start and read by the finish orders them and tells lowering which start a finish belongs to.
"""

from __future__ import annotations

PHASES = ("exchange", "start", "finish")
#: The connector (and array of the expansion) through which a start hands its token to its
#: finish, and the name of the MPI tasklets' connector to it (not named like the array).
TOKEN = "_token"
TOKEN_CONNECTOR = "token"


def phase_connectors(phase: str, field_count: int, plan: list[str]) -> tuple[list[str], list[str]]:
    """Input and output connectors of an exchange node of ``phase``.

    The start only reads its fields (their owned cells must not change until the finish);
    the finish and the blocking exchange read and write them (the halos).
    """
    if phase not in PHASES:
        raise ValueError(f"exchange phase must be one of {PHASES}, got {phase!r}")
    fields = [f"_f{i}" for i in range(field_count)]
    if phase == "start":
        return fields + plan, [TOKEN]
    if phase == "finish":
        return fields + plan + [TOKEN], fields
    return fields + plan, fields


def packs(phase: str) -> bool:
    """Whether a node of ``phase`` packs and posts messages."""
    return phase in ("exchange", "start")


def unpacks(phase: str) -> bool:
    """Whether a node of ``phase`` waits for messages and unpacks them."""
    return phase in ("exchange", "finish")
