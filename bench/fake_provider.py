"""A fake model provider for the benchmarks: Anthropic's Messages API over its wire protocol,
streaming each reply for a set time at a real provider's event rate.

    python -m bench.fake_provider --port 8900 [--seconds 20] [--rate 25]

One asyncio process answers any number of concurrent ``POST /v1/messages`` (HTTP/1.1,
keep-alive, ``stream: true``) with Anthropic's server-sent events: ``message_start``, one
text block whose ``content_block_delta`` events come ``--rate`` times a second (a few words
each: ~25 events/s is what a real provider sends for a fast model) for ``--seconds``,
``message_delta`` with ``end_turn`` and its usage, ``message_stop``. It runs in its own
process, so its CPU is not the measured stack's. Prints ``ready <port>`` when listening.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import json

WORDS = "the quick brown fox jumps over the lazy dog while the model keeps streaming its answer".split()


def _frame(event: str, data: dict) -> bytes:
    body = f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(body), body)


class Provider:
    """Streams every reply from one scheduler: each stream's next delta is due at ``start + (i
    + 1) / rate``, and one task writes whatever is due, then sleeps until the next (at least
    ``TICK``). A task and a timer per stream and per event cost this process ~30 µs an event,
    a third of a core at 400 streams; a real provider's CPU is not on the measured machine."""

    TICK = 0.005  # seconds: the scheduler's shortest sleep (events come at most this late)

    def __init__(self, seconds: float, rate: float):
        self.seconds, self.rate = seconds, rate
        self.events = max(1, int(seconds * rate))
        self.ids = itertools.count(1)
        self.order = itertools.count()
        self.active = 0
        self.served = 0
        self.due: list[tuple[float, int, _Reply]] = []  # a heap: (when, order, reply)
        self.wake = asyncio.Event()
        # Each reply's deltas cycle through these (three words each), made once.
        self.deltas = [
            _frame("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                "type": "text_delta", "text": " ".join(WORDS[(i * 3 + k) % len(WORDS)] for k in range(3)) + " "}})
            for i in range(len(WORDS))
        ]  # fmt: skip
        self.tail = b"".join([
            _frame("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _frame("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                     "usage": {"output_tokens": self.events * 3}}),
            _frame("message_stop", {"type": "message_stop"}),
            b"0\r\n\r\n",
        ])  # fmt: skip
        self.scheduler: asyncio.Task | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.scheduler is None:
            self.scheduler = asyncio.create_task(self._schedule())
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                request = json.loads(body or b"{}")
                await self.stream(writer, request.get("model", "fake"))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def stream(self, writer: asyncio.StreamWriter, model: str) -> None:
        self.active += 1
        number = next(self.ids)
        try:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                         b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\nrequest-id: req_fake\r\n\r\n")  # fmt: skip
            usage = {"input_tokens": 50, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
            writer.write(_frame("message_start", {"type": "message_start", "message": {
                "id": f"msg_fake_{number}", "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": usage}}))  # fmt: skip
            writer.write(_frame("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
            await writer.drain()
            loop = asyncio.get_running_loop()
            reply = _Reply(writer, loop.time(), loop.create_future())
            self._queue(reply)
            await reply.done
            writer.write(self.tail)
            await writer.drain()
            self.served += 1
        finally:
            self.active -= 1

    def _queue(self, reply: _Reply) -> None:
        heapq.heappush(self.due, (reply.start + (reply.sent + 1) / self.rate, next(self.order), reply))
        self.wake.set()

    async def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.due:
                self.wake.clear()
                await self.wake.wait()
                continue
            now = loop.time()
            while self.due and self.due[0][0] <= now:
                _, _, reply = heapq.heappop(self.due)
                if reply.writer.is_closing():
                    if not reply.done.done():
                        reply.done.set_exception(ConnectionResetError("the client went away"))
                    continue
                reply.writer.write(self.deltas[reply.sent % len(self.deltas)])
                reply.sent += 1
                if reply.sent < self.events:
                    self._queue(reply)
                elif not reply.done.done():
                    reply.done.set_result(None)
            if self.due:
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), max(self.TICK, self.due[0][0] - loop.time()))
                except asyncio.TimeoutError:
                    pass


class _Reply:
    __slots__ = ("writer", "start", "done", "sent")

    def __init__(self, writer: asyncio.StreamWriter, start: float, done: asyncio.Future):
        self.writer, self.start, self.done, self.sent = writer, start, done, 0


async def serve(port: int, seconds: float, rate: float) -> None:
    provider = Provider(seconds, rate)
    server = await asyncio.start_server(provider.handle, "127.0.0.1", port, backlog=2048)
    print(f"ready {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fake_provider", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each reply streams")
    parser.add_argument("--rate", type=float, default=25.0, help="text deltas a second")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.port, args.seconds, args.rate))


if __name__ == "__main__":
    main()
