"""What the package's own test classes share."""

import asyncio


class QuietSlowCallbacks:
    """``IsolatedAsyncioTestCase`` runs its loop in debug mode, which logs every callback over
    0.1 s; a debug build converting a megabyte of hostile input takes longer. Raise the bar so
    the log shows only what matters."""

    async def asyncSetUp(self):
        await super().asyncSetUp()
        asyncio.get_running_loop().slow_callback_duration = 5.0
