"""The scheduler's answer to the start / stop / dump expert-distribution control messages."""

from __future__ import annotations

from engine.ipc.messages import ControlResponse, ExpertDistributionDump, ExpertDistributionRequest
from engine.models.expert_distribution import ExpertDistributionRecorder

NO_EXPERTS = "the served model has no experts (not a mixture-of-experts model): there is no expert distribution to record"


def answer_expert_distribution(
    recorder: ExpertDistributionRecorder | None, message: ExpertDistributionRequest
) -> ControlResponse:
    """Runs ``message`` on ``recorder`` (None: the model has no experts, a refusal)."""
    if recorder is None:
        return ControlResponse(message.request_id, False, NO_EXPERTS, worker=message.worker)
    if message.action == "start":
        recorder.start()
        return ControlResponse(
            message.request_id, True, "Started recording the expert distribution.", worker=message.worker
        )
    if message.action == "stop":
        recorder.stop()
        return ControlResponse(
            message.request_id, True, "Stopped recording the expert distribution.", worker=message.worker
        )
    dump = ExpertDistributionDump(recorder.dump_csv())
    return ControlResponse(message.request_id, True, payload=dump, worker=message.worker)
