"""Factory for plrbridge: a PyLabRobot liquid handler on the chatterbox
(print-only) backend, so the example runs without hardware.

    python3 pylabrobot/plrbridge/plrbridge.py --factory examples/plr-bridge/machine.py:make --setup

Replace the backend and deck with your own (STAR, OT-2, ...) for a real machine.
"""

from pylabrobot.liquid_handling import LiquidHandler
from pylabrobot.liquid_handling.backends import LiquidHandlerChatterboxBackend
from pylabrobot.resources import STARLetDeck


def make():
    return LiquidHandler(backend=LiquidHandlerChatterboxBackend(num_channels=8), deck=STARLetDeck())
