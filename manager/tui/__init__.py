"""`gomgr tui`: the dashboard, a face over manager/ (lifecycle, readiness, models, manifests).

app.py            the App: layout, keys, live updates; start/stop/restart in worker threads
on_demand.py      what the keys ask the supervisor: load a store model, start, stop, restart
sources.py        what the app reads, bundled (tests hand in fixed readings)
feed.py           engines: records on disk, the router's view, one metrics sample per engine;
                  the catalog: every store model with its load state
router_view.py    the router's backends, followed over its /admin/events stream
metrics.py        an engine's requests in flight and token counter, from its HTTP API
throughput.py     tokens/s history from successive samples
rows.py           one table row per engine (record, router state, expiry, load), then one
                  per store model no engine serves
hardware.py       GPU readings (readiness' NVML probe) and host CPU/RAM
choices.py        the start picker's models, each with its manifest and readiness
widgets/screens   engines_table, hardware_panel, banner, activity, log_pane, picker,
                  doctor_screen
"""
