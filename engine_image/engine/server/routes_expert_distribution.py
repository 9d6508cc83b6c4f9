"""SGLang's expert-distribution routes: count the tokens routed to each MoE expert, dump as CSV.

The counting happens in the scheduler's forward, so each route is a control message to it.
On a model without experts every route answers 400.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi.responses import Response

from engine.ipc.messages import ControlResponse, ExpertDistributionDump, ExpertDistributionRequest
from engine.server.context import ServerContext
from engine.server.http_errors import ApiError, bad_request, json_response

CONTROL_TIMEOUT_S = 5.0


def expert_distribution_router(ctx: ServerContext) -> APIRouter:
    router = APIRouter()

    async def control(action: Literal["start", "stop", "dump"]) -> ControlResponse:
        reply = await ctx.tokenizer_manager.control(
            lambda rid: ExpertDistributionRequest(rid, action), CONTROL_TIMEOUT_S
        )
        if reply is None:
            raise ApiError(503, "the scheduler did not answer in time", type_="service_unavailable")
        if not reply.success:
            raise bad_request(reply.message)
        return reply

    # NOTE: GET too, as SGLang accepts it.
    @router.api_route("/start_expert_distribution_record", methods=["POST", "GET"])
    async def start() -> Response:
        """Clears the counts and starts counting."""
        reply = await control("start")
        return json_response({"success": True, "message": reply.message})

    @router.api_route("/stop_expert_distribution_record", methods=["POST", "GET"])
    async def stop() -> Response:
        """Stops counting; the counts stay until the next start."""
        reply = await control("stop")
        return json_response({"success": True, "message": reply.message})

    @router.api_route("/dump_expert_distribution_record", methods=["POST", "GET"])
    async def dump() -> Response:
        """``layer_id,expert_id,count`` rows, one per MoE layer and expert."""
        reply = await control("dump")
        assert isinstance(reply.payload, ExpertDistributionDump), "a dump answers with its CSV"
        return Response(reply.payload.csv, media_type="text/csv")

    return router
