"""A stub machine for the Go end-to-end test of plrbridge (no PyLabRobot needed)."""

import asyncio
import typing

import plrbridge


class Resource:
    """PyLabRobot-like resource (found by class name, no import)."""

    def __init__(self, name):
        self.name = name

    def serialize(self):
        return {"name": self.name, "type": type(self).__name__}


class TipSpot(Resource):
    pass


class Trash(Resource):
    pass


class Well(Resource):
    pass


class Deck(Resource):
    def __init__(self):
        super().__init__("deck")
        self.children = {"tip_A1": TipSpot("tip_A1"), "trash": Trash("trash"), "well_A1": Well("well_A1")}

    def get_resource(self, name):
        if name not in self.children:
            raise ValueError(f"Resource '{name}' not found")
        return self.children[name]


class StubMachine:
    """Stub temperature-controlled machine."""

    def __init__(self):
        self.setup_finished = False
        self.temperature = 20.0
        self.stops = 0
        self.deck = Deck()

    async def setup(self) -> None:
        self.setup_finished = True

    async def stop(self) -> None:
        # As PyLabRobot does: stop() tears the backend down.
        self.stops += 1
        self.setup_finished = False

    async def drop_tips(self, tip_spots: typing.Sequence[typing.Union[TipSpot, Trash]]) -> list:
        """PyLabRobot's drop_tips signature: tip spots or the trash."""
        return [type(r).__name__ + ":" + r.name for r in tip_spots]

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
