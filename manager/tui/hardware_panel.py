"""The hardware panel: per GPU its VRAM and utilisation, or a clear "no GPU"; host CPU and RAM."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text
from textual.widgets import Static

from manager.readiness.gpu import GpuInfo
from manager.tui.hardware import HardwareReading, HostReading

GIB = 1024**3
BAR_WIDTH = 14


class HardwarePanel(Static):
    def on_mount(self) -> None:
        self.border_title = "hardware"
        self.update(Text("reading…", style="dim"))

    def show(self, reading: HardwareReading) -> None:
        parts: list[RenderableType] = [_gpu(gpu) for gpu in reading.gpus]
        if not reading.gpus:
            parts.append(_no_gpu(reading.gpu_error))
        parts.append(_host(reading.host))
        self.update(Group(*parts))


def _gpu(gpu: GpuInfo) -> Text:
    used = gpu.total_bytes - gpu.free_bytes
    text = Text.assemble((f"GPU {gpu.index} ", "bold"), gpu.name, "\n")
    text.append_text(_bar_line("VRAM", used / gpu.total_bytes if gpu.total_bytes else 0.0))
    text.append(f" {used / GIB:.1f}/{gpu.total_bytes / GIB:.1f} GiB\n")
    if gpu.utilization_percent is None:
        text.append("util  n/a\n", style="dim")
    else:
        text.append_text(_bar_line("util", gpu.utilization_percent / 100))
        text.append(f" {gpu.utilization_percent}%\n")
    return text


def _no_gpu(error: str | None) -> Text:
    text = Text("no GPU", style="bold yellow")
    text.append("\nengines run on the CPU\n", style="yellow")
    if error:
        text.append(f"NVML: {error}\n", style="dim")
    return text


def _host(host: HostReading) -> Text:
    text = _bar_line("CPU ", host.cpu_percent / 100)
    text.append(f" {host.cpu_percent:.0f}% of {host.cpu_count}\n")
    ram = host.ram_used_bytes / host.ram_total_bytes if host.ram_total_bytes else 0.0
    text.append_text(_bar_line("RAM ", ram))
    text.append(f" {host.ram_used_bytes / GIB:.1f}/{host.ram_total_bytes / GIB:.1f} GiB")
    return text


def _bar_line(label: str, fraction: float) -> Text:
    fraction = min(max(fraction, 0.0), 1.0)
    filled = round(fraction * BAR_WIDTH)
    style = "red" if fraction > 0.9 else "yellow" if fraction > 0.7 else "green"
    return Text.assemble(f"{label} ", ("█" * filled, style), ("░" * (BAR_WIDTH - filled), "dim"))
