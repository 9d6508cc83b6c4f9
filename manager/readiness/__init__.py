"""Readiness: can this machine start an engine for a model, and with which runtime?

Each check probes the real environment and returns typed Blockers (plain explanation,
numbered fix steps, the options they take away); `start.check_for_start` runs them all into
a `report.ReadinessReport` before anything is downloaded, and `runtime.choose_runtime` picks
`--runtime auto`. Blocker, Option, Severity: blocker.py; GpuProbe, NvmlProbe: gpu.py;
estimate_memory: memory.py. NOTE: nothing is re-exported here: importing one light
submodule (blocker.py) would otherwise load NVML, the hub client and the docker SDK.
"""
