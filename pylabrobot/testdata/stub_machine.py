"""A stub machine for the Go end-to-end test of plrbridge (no PyLabRobot needed)."""

import asyncio

import plrbridge


class StubMachine:
    """Stub temperature-controlled machine."""

    def __init__(self):
        self.setup_finished = False
        self.temperature = 20.0
        self.stops = 0

    async def setup(self) -> None:
        self.setup_finished = True

    async def stop(self) -> None:
        self.stops += 1

    async def add(self, a: int, b: int = 2) -> int:
        """Add two integers."""
        return a + b

    async def hold(self, seconds: float) -> str:
        """Hold for seconds, reporting progress."""
        plrbridge.report_progress(0.5, "holding")
        await asyncio.sleep(seconds)
        return "held"

    async def stubborn(self, seconds: float) -> str:
        """Ignores a cancel and finishes."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)
        return "finished anyway"

    async def explode(self) -> None:
        raise RuntimeError("boom")

    async def set_temperature(self, temperature: float) -> None:
        self.temperature = temperature

    async def get_temperature(self) -> float:
        return self.temperature

    async def get_stops(self) -> int:
        return self.stops


def make():
    return StubMachine()
