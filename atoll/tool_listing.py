"""A tools/list a client already holds, named by digest: the contract between the environment's
``/mcp`` and the agents runner's MCP client.

Every trial opens an MCP session of its own, and every session of an MCP client fetches the
gateway's ``tools/list`` (the agent's toolbelt; the SDK also fetches it to check tool results
against their output schemas): at 76 tools that is a 211 kB reply which the SDK parses,
validates and dumps again, about a tenth of a replay trial's CPU (docs/performance.md, "Paper
scale"), although the listing is the same for every trial of a config.

So the environment names, in the response header :data:`DIGEST_HEADER` of every ``/mcp``
reply it authorises, the digest of the listing that request's session gets; a client that holds
a listing with that digest from an earlier session of its process takes it instead of fetching
it. The digest is computed the same way on both sides from the SDK's own model of the listing
(:func:`listing_digest`), and a client stores a listing only under the digest it computed
itself from what it was served: a server that names a digest it does not serve can only make
the client use a listing that some server really served with that digest, never one of its
own making.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: The response header naming the digest of the session's tools/list (lower case, as ASGI sends it).
DIGEST_HEADER = "atoll-tools-digest"


def listing_digest(result: Any) -> str:
    """The sha256 (hex) of a ``tools/list`` result's tools, ``result`` being the SDK's
    ``mcp_types.ListToolsResult``: each tool dumped as JSON by alias without unset values, the
    list canonically encoded (sorted keys, no spaces)."""
    tools = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in result.tools]
    canonical = json.dumps(tools, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def digest_of_listing_json(listed: bytes) -> str:
    """:func:`listing_digest` of a ``tools/list`` result given as its JSON (the ``result``
    member, as it goes on the wire), read with the same model the client's SDK reads it with."""
    import mcp_types

    return listing_digest(mcp_types.ListToolsResult.model_validate_json(listed, by_name=False))
